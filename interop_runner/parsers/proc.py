"""CPU time of a process group from the ``proc-before.txt`` / ``proc-after.txt`` snapshots."""

from __future__ import annotations

from dataclasses import dataclass

from interop_runner.parsers.common import ParseError


@dataclass(frozen=True)
class ProcTimes:
    """Snapshot: node clock (ns), clock ticks per second, CPU ticks per PID (incl. reaped
    children: utime + stime + cutime + cstime)."""

    time_ns: int
    clk_tck: int
    ticks: dict[int, int]


def parse_proc_times(text: str) -> ProcTimes:
    """Parse a snapshot: first line ``<epoch ns> <CLK_TCK>``, then ``/proc/<pid>/stat`` lines."""
    lines = text.splitlines()
    if not lines:
        raise ParseError("empty proc snapshot")
    head = lines[0].split()
    if len(head) != 2 or not head[0].isdecimal() or not head[1].isdecimal():
        raise ParseError(f"bad proc snapshot header {lines[0][:60]!r}")
    ticks = {}
    for line in lines[1:]:
        pid, _, rest = line.partition(" ")
        fields = rest.rpartition(")")[2].split(None, 15)  # 15 fields are enough
        if not pid.isdecimal() or len(fields) < 15:
            continue
        if not all(f.isdecimal() for f in fields[11:15]):
            raise ParseError(f"malformed stat line of PID {pid} ({line[:60]!r})")
        ticks[int(pid)] = sum(int(f) for f in fields[11:15])
    return ProcTimes(int(head[0]), int(head[1]), ticks)


def cpu_seconds(before: ProcTimes, after: ProcTimes) -> float:
    """CPU seconds (user + system, reaped children included) the group used between two
    snapshots."""
    used = sum(t - before.ticks.get(pid, 0) for pid, t in after.ticks.items())
    return used / after.clk_tck


def cpu_pct(before: ProcTimes, after: ProcTimes) -> float | None:
    """Mean CPU % (100 = one core) of the group between two snapshots; None if not computable."""
    seconds = (after.time_ns - before.time_ns) / 1e9
    if seconds <= 0 or not after.ticks:
        return None
    return 100.0 * cpu_seconds(before, after) / seconds
