"""How busy a host was over an interval: two samples of ``/proc/loadavg``, ``/proc/stat``
and ``/proc/pressure/cpu``, taken by :data:`HOST_LOAD_SCRIPT` on the node, and what lies
between them.

A sample is lines of ``<key> <values>``: ``time`` (the node's ``$EPOCHREALTIME``, s),
``loadavg`` (the 1, 5 and 15 minute load averages), ``cpu`` (the ``cpu`` line of
``/proc/stat``: user nice system idle iowait irq softirq steal ..., in clock ticks),
``cores`` (the ``cpuN`` lines: online CPUs), ``running`` (``procs_running``, once per read,
several reads a few ms apart; the reading shell counts itself), ``psi`` (the ``some`` line
of ``/proc/pressure/cpu``, absent on a kernel without PSI) and ``boot`` (the kernel's boot
id: hosts that print the same one share a kernel, as the namespace testbed's nodes do).
:func:`host_load` turns two samples into the shares of the interval and the verdict
:func:`busy_reasons`; a value that could not be read is None with a note naming why,
never 0.

Why these and not the load average alone (docs/paths.md, "A busy host"): the load average
is a one-minute moving average of everything runnable, the attempt's own processes and the
attempts before it included, so it neither tells other work from the measurement nor sees
work that started seconds ago. The number of runnable tasks just before and just after the
attempt (when its own processes do not run) does, and steal is the time the hypervisor gave
to someone else.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from interop_runner.parsers.common import ParseError

# bash on the node: one sample, no fork but the shell (``read -t`` on an idle pipe as the
# 2 ms sleep between the reads of procs_running)
HOST_LOAD_SCRIPT = (
    'exec 3<> <(:); echo "time $EPOCHREALTIME"; '
    'read -r b </proc/sys/kernel/random/boot_id && echo "boot $b"; '
    'read -r a b c _ </proc/loadavg && echo "loadavg $a $b $c"; n=0; '
    'for i in 1 2 3 4 5; do while read -r k v; do case $k in '
    'cpu) [ "$i" = 1 ] && echo "cpu $v";; cpu[0-9]*) [ "$i" = 1 ] && n=$((n+1));; '
    'procs_running) echo "running $v";; esac; done </proc/stat; '
    '[ "$i" = 5 ] || read -r -t 0.002 -u 3 || :; done; echo "cores $n"; '
    'if [ -r /proc/pressure/cpu ]; then read -r s </proc/pressure/cpu && echo "psi $s"; fi')
# a host is busy when another task is runnable for every core, before or after the attempt
BUSY_RUNNABLE_PER_CORE = 1.0
BUSY_STEAL_SHARE = 0.05  # or when the hypervisor took 5 % of the CPU time (steal)
THRESHOLDS = {"runnable_other_per_core": BUSY_RUNNABLE_PER_CORE,
              "steal_share": BUSY_STEAL_SHARE}
_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


@dataclass(frozen=True)
class LoadSample:
    """One sample of a host's load (None: not in the sample)."""

    time_s: float
    loadavg: tuple[float, float, float] | None
    cpu_ticks: dict[str, int]  # the ``cpu`` line of /proc/stat by field name
    cores: int | None
    running: list[int]  # procs_running, each read (the reader included)
    psi_some_us: int | None  # /proc/pressure/cpu ``some total=`` (µs)
    notes: list[str] = field(default_factory=list)
    boot_id: str | None = None  # /proc/sys/kernel/random/boot_id

    @property
    def runnable_other(self) -> float | None:
        """Runnable tasks other than the reader: the median of the reads, minus one."""
        if not self.running:
            return None
        return max(0.0, statistics.median(self.running) - 1)


def parse_load_sample(text: str) -> LoadSample:
    """A sample as :data:`HOST_LOAD_SCRIPT` prints it; ParseError without its ``time``."""
    time_s: float | None = None
    loadavg, cores, psi, boot = None, None, None, None
    cpu: dict[str, int] = {}
    running: list[int] = []
    notes: list[str] = []
    for line in text.splitlines():
        key, _, rest = line.partition(" ")
        values = rest.split()
        try:
            if key == "time" and values:
                time_s = float(values[0].replace(",", "."))
            elif key == "loadavg" and len(values) >= 3:
                loadavg = (float(values[0]), float(values[1]), float(values[2]))
            elif key == "cpu":
                cpu = {name: int(v) for name, v in zip(_CPU_FIELDS, values)}
            elif key == "cores" and values:
                cores = int(values[0]) or None
            elif key == "running" and values:
                running.append(int(values[0]))
            elif key == "boot" and values:
                boot = values[0]
            elif key == "psi":
                psi = int(dict(v.split("=", 1) for v in values if "=" in v)["total"])
        except (ValueError, KeyError):
            raise ParseError(f"host load: bad line {line[:80]!r}") from None
    if time_s is None:
        raise ParseError(f"host load: no time in {text[:80]!r}")
    if loadavg is None:
        notes.append("/proc/loadavg: not read")
    if psi is None:
        notes.append("/proc/pressure/cpu: not readable (a kernel without PSI)")
    if "steal" not in cpu:
        notes.append("/proc/stat: no steal field in the cpu line")
    return LoadSample(time_s, loadavg, cpu, cores, running, psi, notes, boot)


def _share(before: LoadSample, after: LoadSample, name: str, total: int) -> float | None:
    if name not in before.cpu_ticks or name not in after.cpu_ticks or total <= 0:
        return None
    return round((after.cpu_ticks[name] - before.cpu_ticks[name]) / total, 4)


def busy_reasons(load: dict[str, Any]) -> list[str]:
    """Why a host was busy over the interval (empty: it was not, as far as was read):
    runnable tasks of other work for every core before or after the attempt
    (:data:`BUSY_RUNNABLE_PER_CORE`), or a steal share of :data:`BUSY_STEAL_SHARE` or more."""
    reasons = []
    cores = load.get("cores")
    for when in ("before", "after"):
        other = load.get(f"runnable_other_{when}")
        if cores and other is not None and other >= BUSY_RUNNABLE_PER_CORE * cores:
            reasons.append(f"{other:g} other tasks runnable {when} the attempt on {cores} "
                           f"cores")
    steal = load.get("steal_share")
    if steal is not None and steal >= BUSY_STEAL_SHARE:
        reasons.append(f"steal {steal:.1%} of the CPU time (>= {BUSY_STEAL_SHARE:.0%})")
    return reasons


def host_load(before: LoadSample, after: LoadSample) -> dict[str, Any]:
    """What the host did between two samples: the interval (s), its online cores, the load
    averages before and after, the runnable tasks of other work before and after, the
    shares of the CPU time busy (not idle or iowait), stolen and in iowait, the share of
    the time some task waited for a CPU (PSI), and the verdict ``busy`` with its reasons
    (None: nothing to decide on). Values that could not be read are None, named in
    ``notes``."""
    ticks = {k: after.cpu_ticks[k] - before.cpu_ticks[k]
             for k in after.cpu_ticks if k in before.cpu_ticks}
    total = sum(ticks.values())
    interval = round(after.time_s - before.time_s, 3)
    idle = ticks.get("idle", 0) + ticks.get("iowait", 0)
    out: dict[str, Any] = {
        "interval_s": interval, "cores": after.cores or before.cores,
        "load1_before": before.loadavg[0] if before.loadavg else None,
        "load1_after": after.loadavg[0] if after.loadavg else None,
        "load5_after": after.loadavg[1] if after.loadavg else None,
        "load15_after": after.loadavg[2] if after.loadavg else None,
        "runnable_other_before": before.runnable_other,
        "runnable_other_after": after.runnable_other,
        "cpu_busy_share": round((total - idle) / total, 4) if total > 0 and ticks else None,
        "steal_share": _share(before, after, "steal", total),
        "iowait_share": _share(before, after, "iowait", total),
        "cpu_pressure_share": None,
    }
    notes = sorted(set(before.notes) | set(after.notes))
    if before.psi_some_us is not None and after.psi_some_us is not None and interval > 0:
        out["cpu_pressure_share"] = round(min(1.0, (after.psi_some_us - before.psi_some_us)
                                              / (interval * 1e6)), 4)
    if total <= 0:
        notes.append("/proc/stat: no CPU time passed between the samples")
    reasons = busy_reasons(out)
    readable = out["cores"] and (out["runnable_other_before"] is not None
                                 or out["runnable_other_after"] is not None
                                 or out["steal_share"] is not None)
    out["busy"] = True if reasons else (False if readable else None)
    out["busy_reasons"] = reasons
    out["notes"] = notes
    return out
