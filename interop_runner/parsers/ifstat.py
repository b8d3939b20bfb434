"""ifstat 1.1 (``ifstat -i <if> -n -t -b 1``): per-interval interface rates."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from datetime import timezone, tzinfo

from interop_runner.parsers.common import ClockToEpoch, ParseError, clock_24h, excerpt

__all__ = ["IfstatSample", "parse_ifstat"]

# ifstat's "K" is 1024: "Kbps" (-b) is 1024 bit/s, "KB/s" is 1024 byte/s = 8 Kibit/s.
_UNIT_TO_KIBIT = {"Kbps": 1.0, "KB/s": 8.0}


@dataclass(slots=True)
class IfstatSample:
    """Rates of one interface over one ifstat interval.

    ``rx_kibit_s``/``tx_kibit_s`` are in Kibit/s (1024 bit/s, what ifstat -b calls
    "Kbps"; output without -b is converted); None where ifstat printed ``n/a``.
    ``time_of_day`` is the printed clock (``-t``; local time of the node) and
    ``timestamp`` its epoch seconds, known only when the caller passed the date.
    The Total column of ``-T`` appears with ``iface`` ``"Total"``.
    """

    time_of_day: str | None
    timestamp: float | None
    iface: str
    rx_kibit_s: float | None
    tx_kibit_s: float | None

    @property
    def rx_bit_s(self) -> float | None:
        """Receive rate in bit/s."""
        return None if self.rx_kibit_s is None else self.rx_kibit_s * 1024.0

    @property
    def tx_bit_s(self) -> float | None:
        """Transmit rate in bit/s."""
        return None if self.tx_kibit_s is None else self.tx_kibit_s * 1024.0


def _rate(token: str, factor: float) -> float | None:
    if token == "n/a":
        return None
    return float(token) * factor


def parse_ifstat(
    text: str, *, date: _dt.date | None = None, tz: tzinfo = timezone.utc
) -> list[IfstatSample]:
    """Parse ifstat 1.1 output (with or without ``-t``, ``-b``, ``-n``, ``-T``).

    Each two-line header (interface names, then ``[HH:MM:SS] Kbps in  Kbps out`` per
    interface) sets the columns of the rows below it, so repeated headers (no ``-n``) are
    fine. ``date`` (the capture's start day, in ``tz``) turns the ``-t`` clock into epoch
    seconds, stepping a day at midnight. A truncated last row is dropped. Raises
    ParseError for empty output, output without a header, unknown units or a malformed row.
    """
    lines = text.splitlines()
    last = len(lines) - 1
    while last >= 0 and not lines[last].strip():
        last -= 1
    ifaces: list[str] = []
    factors: list[float] = []
    timed = False
    to_epoch = ClockToEpoch(date, tz) if date is not None else None
    out: list[IfstatSample] = []
    prev: list[str] = []
    for n, line in enumerate(lines):
        tokens = line.split()
        if not tokens:
            continue
        if tokens[0] == "ifstat:":
            continue
        if "in" in tokens and "out" in tokens:
            timed = tokens[0] == "HH:MM:SS"
            units = [t for t in tokens[1 if timed else 0:] if t not in ("in", "out")]
            names = prev[1:] if prev[:1] == ["Time"] else prev
            if len(units) != 2 * len(names) or not names:
                raise ParseError(f"unreadable ifstat header ({excerpt(line)!r})")
            try:
                factors = [_UNIT_TO_KIBIT[u] for u in units[0::2]]
            except KeyError as exc:
                raise ParseError(f"unknown ifstat unit {exc.args[0]!r}") from None
            ifaces = names
            prev = tokens
            continue
        prev = tokens
        if not ifaces:
            continue
        try:
            clock: str | None = None
            values = tokens
            if timed:
                clock = clock_24h(tokens[0])
                if clock is None:
                    if len(ifaces) == len(tokens) - (1 if tokens[0] == "Time" else 0):
                        continue
                    raise ValueError(tokens[0])
                values = tokens[1:]
            if len(values) != 2 * len(ifaces):
                if not timed and len(values) == len(ifaces):
                    continue
                raise ValueError("column count")
            epoch = to_epoch(clock) if to_epoch is not None and clock is not None else None
            row = [
                IfstatSample(clock, epoch, iface, _rate(values[2 * i], f),
                             _rate(values[2 * i + 1], f))
                for i, (iface, f) in enumerate(zip(ifaces, factors))
            ]
        except ValueError as exc:
            if n == last:
                break
            raise ParseError(f"malformed ifstat row ({excerpt(line)!r})") from exc
        out.extend(row)
    if not ifaces:
        if not text.strip():
            raise ParseError("empty ifstat output")
        raise ParseError(f"no ifstat header ({excerpt(text)!r})")
    return out
