"""Cycles per byte: an attempt's CPU cost per byte (``<role>_cpu_s_per_gib``, from the cpu
monitor) joined with the CPU frequency in the host facts of the node that ran the side.

No host this project measures on exposes a cycle counter to every tool (VMs have none), so
cycles are *estimated* from the frequency: CPU seconds x Hz. ``cycles_basis`` says so on every
row that has a value, and why a side has none where its CPU cost exists.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from interop_runner.analysis.frames.frame import Segment
from interop_runner.monitors import ROLES

GIB = 1 << 30
NAMES = tuple(f"{role}_{name}" for role in ROLES for name in ("cpu_mhz", "cycles_per_byte"))
ESTIMATED = "estimated from the CPU frequency (CPU seconds x MHz)"


class CyclesPerByte(NamedTuple):
    """The cycles columns of one attempt and ``cycles_basis``: how they were obtained, and
    why a side has none although its CPU cost was measured."""

    segment: Segment
    basis: str | None


def frequency_mhz(facts: dict[str, Any]) -> float | None:
    """The node's CPU frequency: lscpu's maximum, else the highest in /proc/cpuinfo (what a
    VM reports: its host's nominal frequency)."""
    for key in ("cpu_max_mhz", "cpu_mhz"):
        value = facts.get(key)
        if isinstance(value, (int, float)) and value > 0:
            return float(value)
    return None


def _basis(role: str, facts: dict[str, Any]) -> str:
    if facts.get("cycle_counter") is False:
        return f"{role}: {ESTIMATED}; the node has no hardware cycle counter"
    return f"{role}: {ESTIMATED}"


def cycles_per_byte(joined: dict[str, Any], hosts: dict[str, Any]) -> CyclesPerByte:
    """Cycles per byte of each side of one attempt: ``joined`` holds its
    ``<role>_cpu_s_per_gib`` and ``<role>_node`` (the node's name in ``hosts``)."""
    values: list[float | None] = []
    notes: list[str] = []
    for role in ROLES:
        cost = joined.get(f"{role}_cpu_s_per_gib")
        node = joined.get(f"{role}_node") or role
        facts = hosts.get(node)
        facts = facts if isinstance(facts, dict) else {}
        mhz = frequency_mhz(facts)
        values.append(mhz)
        if cost is None:
            values.append(None)
        elif mhz is None:
            values.append(None)
            notes.append(f"{role}: NA, no CPU frequency in the host facts of node {node!r}")
        else:
            values.append(cost * mhz * 1e6 / GIB)
            notes.append(_basis(role, facts))
    return CyclesPerByte(Segment(NAMES, values, True), "; ".join(notes) or None)
