"""Helpers shared by the parsers: the error type, counter deltas and sysstat-style clocks."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, datetime, timedelta, tzinfo
from typing import TypeVar

__all__ = [
    "ParseError",
    "counter_delta",
    "excerpt",
    "parse_tool_date",
    "clock_24h",
    "ClockToEpoch",
    "Memo",
    "FLOATS",
    "INTS",
]


class ParseError(ValueError):
    """Tool output the parser does not understand; ``reason`` is short and fit for a record."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def counter_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """Return ``after - before`` for the keys present in both snapshots.

    A key missing from either side is missing from the result (never 0). A negative
    difference means the counter was reset or wrapped between the snapshots (driver
    reload, interface re-creation, 32-bit wrap); that key is dropped too, because no
    honest value can be given for it.
    """
    get = before.get
    return {
        key: new - old
        for key, new in after.items()
        if (old := get(key)) is not None and new >= old
    }


def excerpt(text: str, limit: int = 60) -> str:
    """First non-blank line of ``text`` (shortened), for ParseError reasons."""
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[: limit - 3] + "..."
    return ""


_DATE_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_DATE_SLASH = re.compile(r"\b(\d{1,2})/(\d{1,2})/(\d{2}|\d{4})\b")


def parse_tool_date(text: str) -> date | None:
    """Find a calendar date as sysstat prints it and return it, or None.

    ``S_TIME_FORMAT=ISO`` gives ``2026-11-21``; otherwise sysstat uses the locale's ``%x``:
    ``11/21/26`` (C) or ``01/22/2023`` (en_US), both month first. A first field above 12
    can only be a day (``22/01/2023``, en_GB); an ambiguous day-first date (both fields
    at most 12) is read month first, so run the tools with ``S_TIME_FORMAT=ISO``.
    """
    m = _DATE_ISO.search(text)
    try:
        if m:
            return date(int(m[1]), int(m[2]), int(m[3]))
        m = _DATE_SLASH.search(text)
        if not m:
            return None
        a, b, year = int(m[1]), int(m[2]), int(m[3])
        if year < 100:
            year += 2000
        month, day = (b, a) if a > 12 else (a, b)
        return date(year, month, day)
    except ValueError:
        return None


def clock_24h(hms: str, ampm: str | None = None) -> str | None:
    """Normalise ``HH:MM:SS`` plus an optional ``AM``/``PM`` token to 24-hour ``HH:MM:SS``.

    Returns None if ``hms`` is not a clock.
    """
    if len(hms) != 8 or hms[2] != ":" or hms[5] != ":":
        return None
    hh, mm, ss = hms[0:2], hms[3:5], hms[6:8]
    if not (hh.isdecimal() and mm.isdecimal() and ss.isdecimal()):
        return None
    if ampm is None:
        return hms
    h = int(hh) % 12
    if ampm.upper() == "PM":
        h += 12
    return f"{h:02d}:{mm}:{ss}"


class ClockToEpoch:
    """Turns successive 24-hour clock strings of one capture into epoch seconds.

    The capture's start date comes from the tool's header; when a clock is more than
    12 h earlier than the previous one the capture crossed midnight and the date
    advances by one day.
    """

    __slots__ = ("_day", "_tz", "_last", "_midnight")

    def __init__(self, day: date, tz: tzinfo) -> None:
        self._day = day
        self._tz = tz
        self._last = -1
        self._midnight = self._epoch_of_midnight()

    def _epoch_of_midnight(self) -> float:
        day = self._day
        return datetime(day.year, day.month, day.day, tzinfo=self._tz).timestamp()

    def __call__(self, clock: str) -> float:
        """Epoch seconds of ``clock`` (``HH:MM:SS``, 24 h) on the tracked date."""
        secs = int(clock[0:2]) * 3600 + int(clock[3:5]) * 60 + int(clock[6:8])
        if self._last >= 0 and secs < self._last - 43200:
            self._day += timedelta(days=1)
            self._midnight = self._epoch_of_midnight()
        self._last = secs
        return self._midnight + secs


_N = TypeVar("_N", int, float, str)


class Memo(dict[str, _N]):
    """Token -> number (or normalised token), converting on first use.

    sysstat repeats the same tokens ("0.00", CPU numbers, RSS, clocks) all the time, and
    a dict hit costs a fraction of ``float(token)``. Invalid tokens raise (ValueError,
    ParseError) and are not stored; the memo empties itself when it reaches ``limit``
    entries.
    """

    __slots__ = ("_conv", "_limit")
    _conv: Callable[[str], _N]
    _limit: int

    def __init__(self, conv: Callable[[str], _N], limit: int = 200_000) -> None:
        super().__init__()
        self._conv = conv
        self._limit = limit

    def __missing__(self, key: str) -> _N:
        if len(self) >= self._limit:
            self.clear()
        value: _N = self._conv(key)
        self[key] = value
        return value


FLOATS: Memo[float] = Memo(float)
INTS: Memo[int] = Memo(int)
