"""Every monitor, registered once: :data:`MONITORS` (name -> :class:`Monitor`)."""

from __future__ import annotations

from interop_runner.monitors.base import ROLES, Column, Monitor
from interop_runner.monitors.captures import HANDSHAKE, PERF, QLOG, TCPDUMP
from interop_runner.monitors.counters import ETHTOOL, NSTAT, SYSFS, TC
from interop_runner.monitors.samplers import CPU, IFSTAT, MPSTAT, PIDSTAT

MONITORS: dict[str, Monitor] = {m.name: m for m in (
    ETHTOOL, SYSFS, NSTAT, TC, MPSTAT, PIDSTAT, IFSTAT, QLOG, PERF, HANDSHAKE, TCPDUMP)}
"""The monitors a campaign may ask for (``monitors:``), in the order they run."""

ALWAYS: dict[str, Monitor] = {CPU.name: CPU}
"""Measured in every attempt without being asked for."""

# The light set: cheap counters and samplers, suitable for every measurement.
LIGHT_SET = ("ethtool", "sysfs", "nstat", "pidstat", "mpstat")


def extracting(names: list[str] | tuple[str, ...]) -> list[Monitor]:
    """The monitors among ``names`` (plus the always-on ones) that yield columns, in
    registry order."""
    wanted = set(names)
    return [m for m in (*ALWAYS.values(), *MONITORS.values())
            if m.extract is not None and (m.always or m.name in wanted)]


def declared_columns(names: list[str] | tuple[str, ...]) -> list[str]:
    """The fixed columns every load of attempts that ran ``names`` has (NA where empty)."""
    return [col for m in extracting(names) for role in ROLES for col in m.column_names(role)]


def all_columns() -> list[tuple[Monitor, Column]]:
    """Every column any monitor can yield (families once, as their pattern)."""
    return [(m, c) for m in (*ALWAYS.values(), *MONITORS.values()) for c in m.columns]
