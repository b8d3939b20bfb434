"""Units, the one place a written size, rate or time is read: byte sizes (IEC and SI
suffixes), rates in bit/s (``20mbit``), times in ms (``50ms``, ``1s``, ``250us``) and in seconds
(``60s``, ``2min``, ``500ms``); formatting of sizes and goodput in Mbit/s (SI). Whether a bare
number may stand for one is the config's rule (``config/written.py``), and so are the
plausible ranges of each setting."""

from __future__ import annotations

import math
import re
from typing import Any

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$", re.IGNORECASE)
_FACTORS = {
    "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
MAX_RATE_BPS = 1_600 * 10**9  # 1.6 Tbit/s, the fastest Ethernet: more is a typing error
_RATE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(bit|kbit|mbit|gbit|tbit)?\s*$", re.IGNORECASE)
_RATE_FACTORS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}
_TIME_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(us|ms|s)?\s*$", re.IGNORECASE)
_TIME_FACTORS = {"us": 1e-3, "ms": 1.0, "s": 1e3}
_MINUTES_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*min\s*$", re.IGNORECASE)


def parse_size(value: int | str) -> int:
    """Parse a byte size: an int, or a string like ``"50MiB"``, ``"8 GiB"``, ``"10MB"``.

    ``KiB/MiB/GiB`` are powers of two, ``kB/MB/GB`` powers of ten. Raises ValueError.
    """
    if isinstance(value, bool):
        raise ValueError("a size must be a number of bytes or a string like '8GiB'")
    if isinstance(value, int):
        if value < 0:
            raise ValueError("a size cannot be negative")
        return value
    if not isinstance(value, str):
        raise ValueError("a size must be a number of bytes or a string like '8GiB'")
    match = _SIZE_RE.match(value)
    if not match:
        raise ValueError(f"cannot parse size {value!r} (use e.g. 8GiB, 50MiB, 10MB or bytes)")
    number, unit = match.groups()
    result = float(number) * _FACTORS[(unit or "B").lower()]
    if result != int(result):
        raise ValueError(f"size {value!r} is not a whole number of bytes")
    return int(result)


def format_iec(n: int | float | None) -> str:
    """Format a byte count with IEC units (``"8.00 GiB"``); None becomes ``"n/a"``."""
    if n is None:
        return "n/a"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def goodput_mbps(n_bytes: int, seconds: float) -> float:
    """Goodput in Mbit/s (SI): 8 * bytes / seconds / 10^6."""
    if seconds <= 0:
        raise ValueError("duration must be positive")
    return 8.0 * n_bytes / seconds / 1e6


def positive_size(value: int | str) -> int:
    """:func:`parse_size` for settings that must be larger than 0 (raises ValueError)."""
    size = parse_size(value)
    if size <= 0:
        raise ValueError("must be larger than 0")
    return size


def parse_rate(value: Any) -> int:
    """A rate in bit/s from ``20mbit``, ``1.5gbit`` or a number (ValueError otherwise)."""
    if isinstance(value, bool):
        raise ValueError("a rate is a number of bit/s or a string like '20mbit'")
    if isinstance(value, (int, float)):
        number, unit = float(value), "bit"
    else:
        match = _RATE_RE.match(str(value))
        if not match:
            raise ValueError(f"cannot parse rate {value!r} (use e.g. 20mbit, 1gbit)")
        number, unit = float(match.group(1)), (match.group(2) or "bit").lower()
    if not math.isfinite(number):
        raise ValueError(f"rate {value!r} is not a finite number")
    bits = int(round(number * _RATE_FACTORS[unit]))
    if bits < 8000:
        raise ValueError(f"rate {value!r} is below 8 kbit/s")
    if bits > MAX_RATE_BPS:
        raise ValueError(f"rate {value!r} is above 1.6 Tbit/s, more than any NIC carries")
    return bits


def parse_ms(value: Any) -> float:
    """A time in ms from ``50ms``, ``1s``, ``250us`` or a number of ms (ValueError)."""
    if isinstance(value, bool):
        raise ValueError("a time is a number of ms or a string like '50ms'")
    if isinstance(value, (int, float)):
        ms = float(value)
    else:
        match = _TIME_RE.match(str(value))
        if not match:
            raise ValueError(f"cannot parse time {value!r} (use e.g. 50ms, 1s)")
        ms = float(match.group(1)) * _TIME_FACTORS[(match.group(2) or "ms").lower()]
    if not math.isfinite(ms):
        raise ValueError(f"time {value!r} is not a finite number")
    if ms < 0:
        raise ValueError("a time cannot be negative")
    return ms


def parse_seconds(value: Any) -> float:
    """Seconds from ``60s``, ``2min``, ``500ms`` or a number of seconds (ValueError)."""
    if isinstance(value, str):
        minutes = _MINUTES_RE.match(value)
        return float(minutes.group(1)) * 60.0 if minutes else parse_ms(value) / 1e3
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"cannot parse time {value!r} (use e.g. 60s, 2min, 500ms)")
    if not math.isfinite(value):
        raise ValueError(f"{value!r} is not a finite number of seconds")
    if value < 0:
        raise ValueError("a time cannot be negative")
    return float(value)
