"""``grep -r . /sys/class/net/<iface>/statistics/``: the kernel's interface counters."""

from __future__ import annotations

from interop_runner.parsers.common import ParseError, excerpt

__all__ = ["parse_sysfs_stats"]


def parse_sysfs_stats(text: str) -> dict[str, int]:
    """Parse ``path:value`` lines into ``{file name: value}``, e.g. ``{"rx_bytes": 123}``.

    The name is the last path component, so any directory works. Lines whose value is
    not an unsigned integer are skipped; raises ParseError when no counter is found.
    """
    out: dict[str, int] = {}
    for line in text.split():
        path, sep, value = line.rpartition(":")
        if sep and value.isdecimal():
            name = path.rpartition("/")[2]
            if name:
                out[name] = int(value)
    if not out:
        if not text.strip():
            raise ParseError("empty sysfs statistics output")
        raise ParseError(f"no sysfs counters ({excerpt(text)!r})")
    return out
