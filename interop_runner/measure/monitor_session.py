"""Run monitors on one node for one attempt: availability, snapshots, background series."""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field

from interop_runner.config.campaign import MonitorOptions
from interop_runner.monitors import MONITORS, SeriesCommand, StartContext
from interop_runner.remote.executor import Background, Executor

# CPU time of a process group from /proc, at the edges of the transfer window: the first line
# is "<epoch ns> <clock ticks per second>", then one /proc/<pid>/stat line per group member.
_PROC_TIMES = (
    'pg=$1; echo "$(date +%s%N) $(getconf CLK_TCK)"; '
    'for p in $(pgrep -g "$pg"); do cat "/proc/$p/stat" 2>/dev/null; done'
)
# The same for the processes of a container: $1 is its cgroup.procs file.
_CG_PROC_TIMES = (
    'echo "$(date +%s%N) $(getconf CLK_TCK)"; '
    'for p in $(cat "$1" 2>/dev/null); do cat "/proc/$p/stat" 2>/dev/null; done'
)


MIN_SERIES_S = 1.2  # the samplers' interval is 1 s


@dataclass
class NodeMonitors:
    """The monitors of one node during a campaign."""

    executor: Executor
    node: str
    iface: str
    requested: list[str]
    role: str = "server"
    port: int = 4433
    options: MonitorOptions = field(default_factory=MonitorOptions)
    status: dict[str, str] = field(default_factory=dict)
    perf_event: str | None = None
    _stop_signal: dict[int, str] = field(default_factory=dict)
    _started: float = 0.0

    def check(self, timeout: float = 30.0) -> dict[str, str]:
        """Find which requested monitors can run here; returns name -> "ok" or a reason."""
        tools = sorted({t for n in self.requested if n in MONITORS for t in MONITORS[n].tools})
        missing = set(self.executor.missing_tools(tools, timeout))
        for name in self.requested:
            if name not in MONITORS:
                self.status[name] = "missing: not available in this runner version"
                continue
            lacking = [t for t in MONITORS[name].tools if t in missing]
            self.status[name] = (f"missing: {', '.join(lacking)} not installed on {self.node}"
                                 if lacking else "ok")
            if name in ("perf", "tcpdump") and self.status[name] == "ok" and \
                    self.role not in getattr(self.options, name).roles:
                self.status[name] = f"off: not enabled for the {self.role} (monitor_options)"
        if self.status.get("handshake") == "ok" and self.role == "server":
            self.status["handshake"] = "off: captured on the client"
        if self.active("perf"):
            self.perf_event = self.options.perf.event or self._default_perf_event()
        return self.status

    def _default_perf_event(self) -> str:
        """cycles where the CPU counts them (bare metal), else the cpu-clock software event."""
        res = self.executor.run(["perf", "stat", "-x,", "-e", "cycles", "--", "true"],
                                timeout=30, check=False)
        text = res.stdout + res.stderr
        return "cycles" if res.ok and "not supported" not in text and \
            "not counted" not in text else "cpu-clock"

    def active(self, name: str) -> bool:
        """True when the monitor was requested and can run on this node."""
        return self.status.get(name) == "ok"

    def snapshot_lines(self, phase: str, logs: str, pgid: int | None,
                       procs_file: str | None = None) -> list[str]:
        """Shell lines taking every snapshot of ``phase`` into ``logs`` (quoted with shlex)."""
        lines = []
        for name in self.requested:
            if not self.active(name):
                continue
            for snap in MONITORS[name].snapshots(self.iface):
                out = shlex.quote(f"{logs}/{snap.file}-{phase}.txt")
                err = shlex.quote(f"{logs}/monitor-errors.txt")
                lines.append(f"{shlex.join(snap.argv)} >{out} 2>>{err} || "
                             f"echo {shlex.quote(name)} {phase} exit $? >>{err}")
        out = shlex.quote(f"{logs}/proc-{phase}.txt")
        if procs_file is not None:
            lines.append(f"sh -c {shlex.quote(_CG_PROC_TIMES)} sh {shlex.quote(procs_file)} "
                         f">{out} 2>&1")
        elif pgid is not None:
            lines.append(f"sh -c {shlex.quote(_PROC_TIMES)} sh {int(pgid)} >{out} 2>&1")
        return lines

    def snapshot(self, phase: str, logs: str, pgid: int | None = None,
                 timeout: float = 60.0, procs_file: str | None = None) -> None:
        """Take the ``before``/``after`` snapshots (and the CPU times of group ``pgid``, or of
        the container whose ``cgroup.procs`` is ``procs_file``)."""
        lines = self.snapshot_lines(phase, logs, pgid, procs_file)
        if lines:
            self.executor.run(["sh", "-c", "\n".join(lines)], timeout=timeout)

    def start_context(self, pids: str | None = None, port: int | None = None) -> StartContext:
        """What the monitors' commands depend on for this node (``port``: the attempt's
        server port, where it is not the campaign's)."""
        return StartContext(
            iface=self.iface, port=self.port if port is None else port,
            perf_event=self.perf_event,
            perf_frequency=self.options.perf.frequency,
            perf_call_graph=self.options.perf.call_graph,
            tcpdump_snaplen=self.options.tcpdump.snaplen,
            tcpdump_filter=self.options.tcpdump.filter, pids=pids)

    def start_series(self, logs: str, server_pgid: int | None = None,
                     procs_file: str | None = None, port: int | None = None
                     ) -> list[Background]:
        """Start the background commands of the active monitors (samplers, perf, captures);
        pidstat follows the server's process group (or its container's processes), the
        captures the server's ``port`` (default: the campaign's)."""
        self._started = time.monotonic()
        pids = None
        if procs_file is not None and self.active("pidstat"):
            pids = self.executor.run(["sh", "-c", 'paste -sd, "$0"', procs_file],
                                     timeout=10, check=False).stdout.strip() or None
        elif server_pgid is not None and self.active("pidstat"):
            pids = self.executor.run(["pgrep", "-d", ",", "-g", str(server_pgid)],
                                     timeout=10, check=False).stdout.strip() or None
        ctx = self.start_context(pids, port)
        return [self._start(logs, command) for name in self.requested if self.active(name)
                for command in MONITORS[name].series(ctx)]

    def _start(self, logs: str, command: SeriesCommand) -> Background:
        """Start one background command; wait until it is ready when it has a marker."""
        argv = [arg.replace("{logs}", logs) for arg in command.argv]
        err = f"{logs}/{command.stderr_name}"
        proc = self.executor.start(argv, stdout=f"{logs}/{command.stdout_name}", stderr=err,
                                   env=command.env)
        self._stop_signal[proc.pgid] = command.stop_signal
        if command.ready_marker:
            # the transfer must not start before the capture does
            self.executor.run(["sh", "-c", 'until grep -qF "$1" "$0" 2>/dev/null; do '
                               'sleep 0.01; done', err, command.ready_marker], timeout=10)
        return proc

    def stop_series(self, procs: list[Background]) -> None:
        """Stop the samplers with their signal (SIGINT lets sysstat and perf flush; KILL after
        10 s).

        Samplers run at least ``MIN_SERIES_S`` so even a short transfer gets one interval.
        """
        if procs:
            time.sleep(max(0.0, MIN_SERIES_S - (time.monotonic() - self._started)))
        by_signal: dict[str, list[Background]] = {}
        for proc in procs:
            by_signal.setdefault(self._stop_signal.pop(proc.pgid, "INT"), []).append(proc)
        for sig, group in by_signal.items():
            self.executor.stop_many(group, grace=10, sig=sig)

    def finish(self, logs: str, timeout: float = 600.0) -> None:
        """Post-process on the node after the samplers stopped: perf.data -> perf script
        text, compressed (the binary perf.data needs the node's symbols to be read)."""
        if self.active("perf"):
            self.executor.run(
                ["sh", "-c", 'if [ -s "$0/perf.data" ]; then perf script -i "$0/perf.data" '
                 '-F +pid --no-inline 2>"$0/perf-script.err" | zstd -q -T0 -o '
                 '"$0/perf.script.zst"; fi; rm -f "$0/perf.data" "$0/perf.data.old"', logs],
                timeout=timeout, check=False)
