"""``grep -r . /sys/class/net/<iface>/statistics/``: the kernel's interface counters."""

from __future__ import annotations

from dataclasses import dataclass

from interop_runner.parsers.common import ParseError, counter_delta, excerpt
from interop_runner.parsers.snapshots import Deltas, LayoutCache, changed_units

__all__ = ["parse_sysfs_stats", "sysfs_deltas"]


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


def _counter_name(token: str) -> str | None:
    """The counter a ``path:value`` token holds, ``None`` for any other token."""
    path, sep, value = token.rpartition(":")
    if sep and value.isdecimal():
        return path.rpartition("/")[2] or None
    return None


@dataclass(frozen=True, slots=True)
class _SysfsPlan:
    """The counters of one layout, in order, and each one's index."""

    names: tuple[str, ...]
    index: dict[str, int]
    usable: bool
    """False without counters or with a name twice (then both snapshots are parsed)."""


def _sysfs_plan(keys: list[str | None]) -> _SysfsPlan:
    names = tuple(k for k in keys if k is not None)
    index = {name: i for i, name in enumerate(names)}
    return _SysfsPlan(names, index, 0 < len(names) == len(index))


_LAYOUTS: LayoutCache[str] = LayoutCache(_counter_name)
def sysfs_deltas(before: str, after: str) -> Deltas:
    """``counter_delta(parse_sysfs_stats(before), parse_sysfs_stats(after))`` as
    :class:`Deltas` (a counter that went backwards is ``None``), converting only the
    tokens that differ when the snapshots have a layout seen before. (Two dozen lines:
    comparing bytes with numpy would cost more than it saves.)"""
    b_tokens, a_tokens = before.split(), after.split()
    if len(b_tokens) == len(a_tokens):
        layout = _LAYOUTS.find_planned(a_tokens, _sysfs_plan)
        plan: _SysfsPlan = layout.plan
        changed = _changed_values(layout.keys, b_tokens, a_tokens, plan) if plan.usable \
            else None
        if changed is not None:
            return changed
    return Deltas.of(counter_delta(parse_sysfs_stats(before), parse_sysfs_stats(after)))


def _changed_values(keys: list[str | None], b_tokens: list[str], a_tokens: list[str],
                    plan: _SysfsPlan) -> Deltas | None:
    """The deltas from the tokens that changed (0 where a token did not change, ``None``
    where a counter went backwards); ``None`` when a changed token of ``before`` holds
    another counter or a value ``int`` refuses (the full parse then says why)."""
    values: list[int | None] = [0] * len(plan.names)
    moved: list[int] = []
    for i in changed_units(b_tokens, a_tokens):
        name = keys[i]
        if _counter_name(b_tokens[i]) != name:
            return None
        if name is not None:
            try:
                diff = int(a_tokens[i].rpartition(":")[2]) - \
                    int(b_tokens[i].rpartition(":")[2])
            except ValueError:
                return None
            values[plan.index[name]] = diff if diff >= 0 else None
            moved.append(plan.index[name])
    return Deltas(plan.names, values, None not in values, moved)
