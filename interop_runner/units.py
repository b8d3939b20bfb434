"""Units: byte sizes (IEC and SI suffixes) and rates (Mbit/s, SI)."""

from __future__ import annotations

import re

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$", re.IGNORECASE)
_FACTORS = {
    "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}


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
