"""CPU: the processes' own CPU time (always), and the 1 s samplers pidstat, mpstat, ifstat."""

from __future__ import annotations

from interop_runner.monitors.base import (
    SYSSTAT_ENV,
    Column,
    Monitor,
    NoValue,
    SeriesCommand,
    SideInput,
)
from interop_runner.monitors.counters import snapshot_pair
from interop_runner.parsers import ParseError, cpu_seconds, parse_proc_times
from interop_runner.parsers.sysstat import mpstat_busy, pidstat_cpu_summary

NO_SAMPLE = ("no sample inside the transfer window (the transfer was shorter than the "
             "sampler's 1 s interval)")


def pidstat_argv(pids: str) -> tuple[str, ...]:
    """pidstat over the given comma-separated PIDs and their threads, one line per sample."""
    return ("pidstat", "-h", "-H", "-u", "-r", "-w", "-t", "-p", pids, "1")


GIB = 1 << 30


def _cpu_seconds(inp: SideInput) -> tuple[float, float] | None:
    """CPU seconds (user + system) of the side's processes and the seconds they cover; None
    for a client that never ran."""
    run = inp.run
    if inp.role == "client":
        c = run.get("client") or {}
        if c.get("cpu_user_s") is None or not run.get("duration_s"):
            if run.get("start_ns") is None:
                return None
            raise NoValue("no CPU times of the client in run.json")
        return c["cpu_user_s"] + c["cpu_system_s"], run["duration_s"]
    first, second = snapshot_pair(inp, "proc")
    before, after = parse_proc_times(first), parse_proc_times(second)
    seconds = (after.time_ns - before.time_ns) / 1e9
    if seconds <= 0 or not after.ticks:
        raise NoValue("proc snapshots hold no process of the server")
    return cpu_seconds(before, after), seconds


def _cpu(inp: SideInput) -> dict[str, float]:
    """Client: bash ``times`` around the client process; server: /proc at the window's edges.
    The cost per GiB divides by the bytes the client received (ok attempts only)."""
    measured = _cpu_seconds(inp)
    if measured is None:
        return {}
    used, seconds = measured
    out = {"cpu_pct": 100.0 * used / seconds, "cpu_s": used}
    received = inp.run.get("bytes_received")
    if inp.run.get("status") == "ok" and received:
        out["cpu_s_per_gib"] = used / (received / GIB)
    return out


def _pidstat(inp: SideInput) -> dict[str, float]:
    text = inp.files.text("pidstat.txt")
    if text is None:
        raise ParseError("pidstat.txt missing")
    lo, hi = inp.window if inp.window else (None, None)
    mean, top = pidstat_cpu_summary(text, lo, hi)
    if mean is None and top is None:
        raise NoValue(NO_SAMPLE)
    out: dict[str, float] = {}
    if mean is not None:
        out["pidstat_cpu_pct"] = mean
    if top is not None:
        out["max_thread_cpu_pct"] = top
    return out


def median(values: list[float]) -> float:
    """``statistics.median`` (the same arithmetic) without its overhead."""
    data = sorted(values)
    half = len(data) // 2
    return data[half] if len(data) % 2 else (data[half - 1] + data[half]) / 2


def in_window(samples: list[tuple[float, float]],
              window: tuple[float, float] | None) -> list[float]:
    """Values of 1 s samples (stamped at the interval's end) inside the transfer window:
    the intervals lying wholly inside it, or, for transfers shorter than that, those
    overlapping it."""
    if window is None:
        return [v for _, v in samples]
    lo, hi = window
    inside = [v for t, v in samples if t - 1 >= lo and t <= hi]
    return inside or [v for t, v in samples if t >= lo and t - 1 <= hi]


def _mpstat(inp: SideInput) -> dict[str, float]:
    text = inp.files.text("mpstat.txt")
    if text is None:
        raise ParseError("mpstat.txt missing")
    per_cpu: dict[int | str, list[tuple[float, float]]] = {}
    for cpu, timestamp, busy_pct in mpstat_busy(text):
        if (samples := per_cpu.get(cpu)) is None:
            per_cpu[cpu] = [(timestamp, busy_pct)]
        else:
            samples.append((timestamp, busy_pct))
    out: dict[str, float] = {}
    busy = in_window(per_cpu.pop("all", []), inp.window)
    if busy:
        out["cores_busy_pct"] = median(busy)
    cores = [median(v) for v in
             (in_window(samples, inp.window) for samples in per_cpu.values()) if v]
    if cores:
        out["max_core_busy_pct"] = max(cores)
    if not out:
        raise NoValue(NO_SAMPLE)
    return out


CPU = Monitor(
    "cpu", (),
    "CPU time of the server's process group (/proc at the transfer window's edges) and of "
    "the client process (bash times)",
    files=("proc-before.txt", "proc-after.txt"),
    columns=(Column("cpu_pct", "% of one core", "server: /proc/<pid>/stat; client: bash times",
                    "CPU time over the transfer's duration (100 = one core busy)"),
             Column("cpu_s", "s", "server: /proc/<pid>/stat; client: bash times",
                    "CPU time (user + system) of the implementation's processes: the client "
                    "process and its children; the server's process group between the "
                    "snapshots around the transfer"),
             Column("cpu_s_per_gib", "CPU-s/GiB", "cpu_s / bytes_received",
                    "CPU cost per byte delivered: cpu_s per GiB (2^30 bytes) the client "
                    "received; ok attempts only")),
    extract=_cpu, always=True)

PIDSTAT = Monitor(
    "pidstat", ("pidstat", "pgrep"),
    "CPU/memory/context switches of the server and client processes and their threads, 1 s "
    "interval",
    files=("pidstat.txt", "pidstat.err"),
    columns=(Column("pidstat_cpu_pct", "% of one core", "pidstat -u -t",
                    "mean %CPU of the process per 1 s interval inside the transfer window"),
             Column("max_thread_cpu_pct", "% of one core", "pidstat -u -t",
                    "mean %CPU of its busiest thread inside the transfer window")),
    series=lambda ctx: [] if ctx.pids is None else [SeriesCommand(
        "pidstat", pidstat_argv(ctx.pids), SYSSTAT_ENV)],
    extract=_pidstat)

MPSTAT = Monitor(
    "mpstat", ("mpstat",),
    "per-core CPU utilisation, 1 s interval",
    files=("mpstat.txt", "mpstat.err"),
    columns=(Column("cores_busy_pct", "% of all cores", "mpstat -P ALL",
                    "median over the transfer of the node's overall busy share"),
             Column("max_core_busy_pct", "% of one core", "mpstat -P ALL",
                    "the busiest core's median busy share over the transfer")),
    series=lambda ctx: [SeriesCommand(
        "mpstat", ("mpstat", "-P", "ALL", "-o", "JSON", "1"), SYSSTAT_ENV)],
    extract=_mpstat)

IFSTAT = Monitor(
    "ifstat", ("ifstat",),
    "per-second receive/transmit rate of the data interface (ifstat's Kbps = 1024 bit/s); "
    "a time series only (load_interface_rates)",
    files=("ifstat.txt", "ifstat.err"),
    series=lambda ctx: [SeriesCommand(
        "ifstat", ("ifstat", "-i", ctx.iface, "-n", "-t", "-b", "1"),
        {"LC_ALL": "C", "TZ": "UTC"}, "TERM")])

