"""A campaign's ``path:`` block: the emulated network path between server and client.

What is configured here is the path as a researcher describes it (bottleneck rate, base
round-trip time, droptail buffer, random loss, delay jitter, a reverse rate, or two links the
data is split over, or a rate that follows a trace); :meth:`PathConfig.resolved` turns it into
the numbers a backend needs (bits per second, milliseconds, bytes). How the path is built on
a router or the server's egress: :mod:`interop_runner.testbed.path`; docs/paths.md.

Units: rates in bit/s (``20mbit``, ``1gbit``), times in ms (``50ms``, ``1s``), buffers in bytes
(``64KiB``), packets (``100p``, 1514 bytes each: the MTU plus
the Ethernet header, which tbf counts) or a multiple of the bandwidth-delay product
(``1bdp``: rate x base RTT). A user must write the unit (:mod:`.written`); a bare number is
the model's unit only in a stored document.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from interop_runner.config.written import (
    RATE_UNITS,
    SIZE_UNITS,
    TIME_UNITS,
    refuse_bare,
    written,
)
from interop_runner.units import parse_ms, parse_rate, parse_size

# plausible ranges (docs/paths.md): a delay or RTT of at most 10 s, a rate of at most 1.6
# Tbit/s (the fastest Ethernet: units.MAX_RATE_BPS), a buffer of at most 4 GiB (tbf's limit
# is a 32-bit byte count)
MAX_PATH_MS = 10_000.0
MAX_BUFFER_BYTES = 2**32 - 1
WIRE_PACKET = 1514  # bytes a full 1500-byte IP packet occupies in tbf (+ Ethernet header)
TRACE_OPPORTUNITY = 1500  # bytes one line of a mahimahi trace delivers
BUFFER_UNITS = f"bdp, p (packets) or {SIZE_UNITS}"
_BUFFER_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(bdp|p|pkt|packets)\s*$", re.IGNORECASE)


def path_ms(value: Any) -> float:
    """:func:`parse_ms` for a path's delays and timeouts: at most :data:`MAX_PATH_MS`."""
    ms = parse_ms(value)
    if ms > MAX_PATH_MS:
        raise ValueError(f"{value!r} is more than {MAX_PATH_MS / 1000:.0f} s (a path's RTT "
                         "is at most a few seconds, even over a geostationary satellite)")
    return ms


@dataclass(frozen=True)
class Buffer:
    """A buffer as written: ``value`` bytes, packets or BDP multiples."""

    value: float
    unit: Literal["bytes", "packets", "bdp"]

    def bytes(self, rate_bps: int | None, rtt_ms: float | None) -> int:
        """The buffer in bytes (a BDP multiple needs the rate and the base RTT)."""
        if self.unit == "bytes":
            size = int(self.value)
        elif self.unit == "packets":
            size = int(round(self.value * WIRE_PACKET))
        elif rate_bps is None or rtt_ms is None:
            raise ValueError("a buffer in bdp needs `rate` and `rtt`")
        else:
            size = int(round(self.value * rate_bps * rtt_ms / 8000.0))
        if size > MAX_BUFFER_BYTES:
            raise ValueError(f"a buffer of {size} bytes is more than 4 GiB, the most a tbf "
                             "queue holds")
        return size


def parse_buffer(value: Any) -> Buffer:
    """``1bdp``, ``0.5bdp``, ``100p``, ``64KiB`` or a number of bytes (ValueError)."""
    if isinstance(value, str):
        match = _BUFFER_RE.match(value)
        if match:
            unit = match.group(2).lower()
            buffer = Buffer(float(match.group(1)), "bdp" if unit == "bdp" else "packets")
            if buffer.unit == "packets":
                buffer.bytes(None, None)  # refuses more than a queue holds
            return buffer
    buffer = Buffer(float(parse_size(value)), "bytes")
    buffer.bytes(None, None)
    return buffer


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class LinkConfig(_Strict):
    """One of two links the data direction is split over (dual connectivity, paper 002)."""

    rate: int
    delay: float  # one-way, ms
    jitter: float = Field(0.0, ge=0, le=1)  # coefficient of variation of the delay
    loss: float = Field(0.0, ge=0, lt=1)
    buffer: str | int = "1bdp"  # of this link: its rate x (its delay + the reverse delay)

    @field_validator("rate", mode="before")
    @classmethod
    def _rate(cls, value: Any, info: ValidationInfo) -> int:
        refuse_bare(value, info, RATE_UNITS)
        return parse_rate(value)

    @field_validator("delay", mode="before")
    @classmethod
    def _delay(cls, value: Any, info: ValidationInfo) -> float:
        refuse_bare(value, info, TIME_UNITS)
        return path_ms(value)

    @field_validator("buffer", mode="before")
    @classmethod
    def _buffer(cls, value: Any, info: ValidationInfo) -> Any:
        refuse_bare(value, info, BUFFER_UNITS)
        parse_buffer(value)
        return value


class SplitConfig(_Strict):
    """How the data direction's packets are split over two links: batches of ``batch``
    packets, ``ratio`` batches on the first link for every ``ratio`` on the second."""

    batch: int = Field(100, ge=1, le=1_000_000)
    ratio: str = "1:1"

    @field_validator("ratio")
    @classmethod
    def _ratio(cls, value: str) -> str:
        if not re.fullmatch(r"[1-9]\d*:[1-9]\d*", str(value)):
            raise ValueError(f"ratio {value!r} must look like '1:1' or '2:1'")
        return str(value)


class PathTolerance(_Strict):
    """How far calibration may find the path from its configuration (docs/paths.md)."""

    rtt_ms: float = Field(0.5, ge=0)  # base RTT: within max(rtt_ms, rtt_rel x RTT)
    rtt_rel: float = Field(0.02, ge=0)
    rate_rel: float = Field(0.03, ge=0)  # bottleneck rate at the wire
    # full-buffer queueing delay: within max(queue_ms, two packets at the rate, queue_rel x it)
    queue_ms: float = Field(1.0, ge=0)
    queue_rel: float = Field(0.10, ge=0)
    loss_confidence: float = Field(0.99, gt=0, lt=1)  # binomial interval of the loss rate


class PathConfig(_Strict):
    """The ``path:`` block of a campaign (every key sweepable as ``path.<key>``)."""

    rate: int | None = None  # bottleneck in the data direction (server -> client)
    rtt: float | None = None  # base round-trip time, ms
    buffer: str | int | None = None  # droptail buffer at the bottleneck (default 1bdp)
    loss: float = Field(0.0, ge=0, lt=1)  # random loss in the data direction
    jitter: float = Field(0.0, ge=0, le=1)  # CV of the data direction's one-way delay
    reverse_rate: int | None = None  # bottleneck of the reverse direction (ACKs)
    reverse_delay: float | None = None  # two links: the reverse direction's delay, ms
    links: list[LinkConfig] | None = None
    split: SplitConfig = Field(default_factory=SplitConfig)
    reorder_timeout: float | None = None  # two links: reorder into sequence (PDCP), ms
    trace: str | None = None  # mahimahi trace file: the data direction's rate follows it
    backend: Literal["auto", "netem", "nfqueue"] = "auto"
    calibrate: Literal["strict", "warn", "off"] = "strict"
    tolerance: PathTolerance = Field(default_factory=PathTolerance)
    record_packets: bool = False  # the delay line's per-packet log of the data direction

    @field_validator("rate", "reverse_rate", mode="before")
    @classmethod
    def _rates(cls, value: Any, info: ValidationInfo) -> int | None:
        refuse_bare(value, info, RATE_UNITS)
        return None if value is None else parse_rate(value)

    @field_validator("rtt", "reverse_delay", "reorder_timeout", mode="before")
    @classmethod
    def _times(cls, value: Any, info: ValidationInfo) -> float | None:
        refuse_bare(value, info, TIME_UNITS)
        return None if value is None else path_ms(value)

    @field_validator("calibrate", mode="before")
    @classmethod
    def _calibrate(cls, value: Any) -> Any:
        # YAML 1.1 reads a bare `off` as false (and `on` as true)
        return {False: "off", True: "strict"}.get(value, value) if isinstance(value, bool) \
            else value

    @field_validator("buffer", mode="before")
    @classmethod
    def _buffer(cls, value: Any, info: ValidationInfo) -> Any:
        refuse_bare(value, info, BUFFER_UNITS)
        if value is not None:
            parse_buffer(value)
        return value

    @model_validator(mode="after")
    def _takes_effect(self, info: ValidationInfo) -> "PathConfig":
        """Keys a user wrote that this path would ignore are refused (a stored path has
        every key, so only what a user wrote is checked)."""
        if not written(info):
            return self
        given = self.model_fields_set
        if self.links is None and "split" in given:
            raise ValueError("`split` splits packets over two links: give `links`")
        if self.calibrate == "off" and "tolerance" in given:
            raise ValueError("`tolerance` is what calibration allows: with `calibrate: off` "
                             "it is never checked")
        return self

    @model_validator(mode="after")
    def _consistent(self) -> "PathConfig":
        if self.links is None and self.reverse_delay is not None:
            raise ValueError("`reverse_delay` is the reverse direction's delay of a path split "
                             "over two links: give `links` (else `rtt` sets it)")
        if self.links is not None:
            self._check_links()
        elif self.trace is None and (self.rate is None or self.rtt is None):
            raise ValueError("a path needs `rate` and `rtt` (or `links`, or `trace` and `rtt`)")
        elif self.trace is not None and self.rtt is None:
            raise ValueError("a path with a `trace` needs `rtt`")
        elif self.trace is not None and self.rate is not None:
            raise ValueError("give `trace` or `rate`, not both (the trace sets the rate)")
        if self.backend == "netem" and (self.links is not None or self.trace is not None):
            raise ValueError("backend netem cannot split packets over `links` or follow a "
                             "`trace`: use backend nfqueue or auto")
        if self.reorder_timeout is not None and self.links is None:
            raise ValueError("`reorder_timeout` reorders packets split over two links: give "
                             "`links`")
        if self.links is None and self.trace is None:  # (a trace's rate: in resolved())
            self._buffer_bytes(self.rate)
        return self

    def _buffer_bytes(self, rate_bps: int | None) -> int:
        """The bottleneck buffer in bytes at ``rate_bps``; ValueError below one packet."""
        size = parse_buffer(self.buffer if self.buffer is not None else "1bdp").bytes(
            rate_bps, self.rtt)
        if size < WIRE_PACKET:
            shown = repr(self.buffer) if self.buffer is not None else "1bdp (the default)"
            raise ValueError(f"buffer {shown} is smaller than one packet ({WIRE_PACKET} bytes "
                             "at the bottleneck)")
        return size

    def _check_links(self) -> None:
        assert self.links is not None
        if len(self.links) != 2:
            raise ValueError(f"`links` splits the path over two links, got {len(self.links)}")
        if self.rate is not None or self.trace is not None:
            raise ValueError("give `links` or `rate`/`trace`, not both")
        if self.jitter or self.loss:
            raise ValueError("with `links`, give jitter and loss per link")
        if self.rtt is not None or self.buffer is not None:
            raise ValueError("with `links`, give each link its `delay` and `buffer` (and the "
                             "reverse direction's `reverse_delay`), not `rtt` or `buffer`")

    def resolved(self, base: Path | None = None) -> "ResolvedPath":
        """The numbers a backend needs; ``base``: the directory a relative trace is in."""
        reverse = self._reverse_delay()
        if self.links is not None:
            links = tuple(_resolve_link(link, reverse) for link in self.links)
            return ResolvedPath(rate_bps=sum(x.rate_bps for x in links),
                                rtt_ms=min(x.delay_ms for x in links) + reverse,
                                data_delay_ms=0.0, reverse_delay_ms=reverse, buffer_bytes=None,
                                loss=0.0, jitter=0.0, reverse_rate_bps=self.reverse_rate,
                                links=links, split=self.split,
                                reorder_timeout_ms=self.reorder_timeout, trace=None)
        assert self.rtt is not None
        data_delay = self.rtt / 2 if self.jitter else 0.0
        trace = _trace_path(self.trace, base) if self.trace is not None else None
        rate = trace_rate_bps(trace) if trace is not None else self.rate
        assert rate is not None  # the validator asks for `rate` without `trace`
        return ResolvedPath(rate_bps=rate, rtt_ms=self.rtt, data_delay_ms=data_delay,
                            reverse_delay_ms=self.rtt - data_delay,
                            buffer_bytes=self._buffer_bytes(rate), loss=self.loss,
                            jitter=self.jitter, reverse_rate_bps=self.reverse_rate, links=None,
                            split=None, reorder_timeout_ms=None, trace=trace)

    def _reverse_delay(self) -> float:
        if self.reverse_delay is not None:
            return self.reverse_delay
        if self.links is not None:
            return min(link.delay for link in self.links)
        return 0.0


def _trace_path(trace: str, base: Path | None) -> Path:
    path = Path(trace)
    return path if path.is_absolute() or base is None else base / path


@dataclass(frozen=True)
class ResolvedLink:
    """One of two links in numbers."""

    rate_bps: int
    delay_ms: float
    jitter: float
    loss: float
    buffer_bytes: int


def _resolve_link(link: LinkConfig, reverse_ms: float) -> ResolvedLink:
    buffer = parse_buffer(link.buffer).bytes(link.rate, link.delay + reverse_ms)
    if buffer < WIRE_PACKET:
        raise ValueError(f"link buffer {link.buffer!r} is smaller than one packet")
    return ResolvedLink(link.rate, link.delay, link.jitter, link.loss, buffer)


@dataclass(frozen=True)
class ResolvedPath:
    """A path in the units the backends use.

    Where the base delay goes: without jitter all of it on the reverse direction (ACKs: far
    fewer packets for the delay line to hold), with jitter half on the data direction (so
    that the data is reordered as by netem) and half on the reverse direction.
    """

    rate_bps: int
    rtt_ms: float  # base RTT (two links: over the faster-delay link)
    data_delay_ms: float
    reverse_delay_ms: float
    buffer_bytes: int | None  # the data direction's bottleneck (None: per link)
    loss: float
    jitter: float
    reverse_rate_bps: int | None
    links: tuple[ResolvedLink, ...] | None
    split: SplitConfig | None
    reorder_timeout_ms: float | None
    trace: Path | None

    @property
    def full_queue_ms(self) -> float | None:
        """Queueing delay of a full bottleneck buffer: buffer / rate (None: two links, and a
        trace, whose buffer drains as fast as the trace's rate at that moment)."""
        if self.buffer_bytes is None or self.trace is not None:
            return None
        return self.buffer_bytes * 8000.0 / self.rate_bps

    @property
    def data_delay_line(self) -> bool:
        """Whether the data direction needs the delay line (jitter, two links, trace)."""
        return bool(self.jitter) or self.links is not None or self.trace is not None


def read_trace(path: Path) -> list[int]:
    """A mahimahi trace: one delivery opportunity (1500 bytes) per line, at that ms.

    ValueError naming the file and line when it does not parse."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ValueError(f"trace {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"trace {path}: not a text file (a mahimahi trace is one time in ms "
                         "per line)") from None
    stamps: list[int] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            stamp = int(line.strip())
        except ValueError:
            raise ValueError(f"trace {path}: line {number}: {line.strip()!r} is not a "
                             "time in ms") from None
        if stamp < 0 or (stamps and stamp < stamps[-1]):
            raise ValueError(f"trace {path}: line {number}: times must not decrease")
        stamps.append(stamp)
    if not stamps or stamps[-1] <= 0:
        raise ValueError(f"trace {path}: no delivery opportunity after 0 ms")
    return stamps


def trace_window_bps(stamps: list[int], start_s: float, end_s: float) -> float:
    """The trace's rate between two moments (s since it started, repeating with its period):
    the opportunities in that window x 1500 bytes over its length."""
    period = stamps[-1]
    count, t0, t1 = 0, start_s * 1000.0, end_s * 1000.0
    base = int(t0 // period) * period
    while base < t1:
        count += sum(1 for t in stamps if t0 <= base + t < t1)
        base += period
    return count * TRACE_OPPORTUNITY * 8.0 / (end_s - start_s)


def trace_peak_bps(stamps: list[int], window_ms: int = 100) -> float:
    """The trace's highest rate over ``window_ms`` (what a flow must exceed to keep its
    queue from running dry)."""
    counts: dict[int, int] = {}
    for t in stamps:
        counts[t // window_ms] = counts.get(t // window_ms, 0) + 1
    return max(counts.values()) * TRACE_OPPORTUNITY * 8000.0 / window_ms


def trace_rate_bps(path: Path) -> int:
    """The mean rate of a trace: its opportunities x 1500 bytes over its period."""
    stamps = read_trace(path)
    return int(round(len(stamps) * TRACE_OPPORTUNITY * 8000 / stamps[-1]))
