"""Where a container's processes are accounted, and their CPU time, from cgroup files.

Docker puts each container in its own cgroup below the parent the runner names; the parent's
CPU accounting keeps counting a container's CPU time after the container has exited and its
own cgroup is gone (cgroup v1 ``cpuacct`` charges every ancestor; v2 flushes a removed child's
``cpu.stat`` into its parent), which is how the CPU time of a finished client is read.
"""

from __future__ import annotations

from interop_runner.parsers.common import ParseError

CGROUP_ROOT = "/sys/fs/cgroup"


def accounting_dir(proc_cgroup: str, root: str = CGROUP_ROOT) -> str:
    """The cgroup directory that accounts a process's CPU, from its ``/proc/<pid>/cgroup``.

    cgroup v1 (a ``cpuacct`` hierarchy): ``<root>/cpuacct/<path>``; v2 (only the
    ``0::<path>`` line): ``<root>/<path>``; ``root`` is where the node mounts its cgroups.
    """
    unified = None
    for line in proc_cgroup.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        hid, controllers, path = parts
        if "cpuacct" in controllers.split(","):
            return f"{root}/cpuacct{path.rstrip('/')}"
        if hid == "0" and controllers == "":
            unified = path
    if unified is None:
        raise ParseError("no cpuacct or unified cgroup line in /proc/<pid>/cgroup")
    return f"{root}{unified.rstrip('/')}"


def cgroup_cpu_seconds(stat: str, clk_tck: int) -> tuple[float, float]:
    """(user, system) CPU seconds from ``cpuacct.stat`` (v1, clock ticks) or ``cpu.stat``
    (v2, microseconds)."""
    values: dict[str, int] = {}
    for line in stat.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdecimal():
            values[key] = int(value)
    if "user_usec" in values and "system_usec" in values:
        return values["user_usec"] / 1e6, values["system_usec"] / 1e6
    if "user" in values and "system" in values:
        if clk_tck <= 0:
            raise ParseError(f"bad clock tick rate {clk_tck}")
        return values["user"] / clk_tck, values["system"] / clk_tck
    raise ParseError("neither cpuacct.stat (user/system) nor cpu.stat (user_usec/system_usec)")
