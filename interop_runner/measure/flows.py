"""One attempt of several flows that share the path's bottleneck (a ``flows:`` campaign).

Each flow has its own port, server process and client process: an implementation pair run
by an :class:`~interop_runner.measure.attempt.Attempt` of its own, in ``flow-<i>/`` of the
attempt directory; a kernel TCP reference flow is the pair ``tcp``-``tcp``
(implementations/tcp: iperf3, its server on the server node sending, ``-R``, so its data goes
the way the QUIC data goes, counted by iperf3's report). Every server is started first;
then every client is launched in the background, and each waits on the client node until its
start time (a common origin on that node's clock plus its offset), so the schedule does not
depend on SSH round trips. A flow with a duration is stopped then (``timeout -s INT``): what
it received by then counts and is verified as a prefix of the served file. The node monitors
run around all of them. A failed flow fails the attempt with its reason; every process ends
with the attempt (also on Ctrl-C: the clients are in the node's process journal).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from interop_runner.config.flows import FlowConfig
from interop_runner.errors import ExecutorError
from interop_runner.measure.attempt import (
    Attempt,
    AttemptPlan,
    exit_outcome,
    new_record,
    record_cleanup_failure,
    record_failure,
)
from interop_runner.measure.client_run import KILL_AFTER_S, parse_client_run, wrapped
from interop_runner.measure.container import ContainerSide
from interop_runner.measure.monitor_session import NodeMonitors
from interop_runner.remote.executor import Background, CommandTimeout
from interop_runner.storage.layout import utc_now
from interop_runner.storage.run_record import FlowRecord, RunRecord
from interop_runner.testbed.node import Node
from interop_runner.units import goodput_mbps

NOT_RUN = "not run: "  # the reason of a flow that did not run because another could not
_LEAD_S = 1.0  # the common start lies this far ahead of "now": every launch fits before it


@dataclass
class FlowPlan:
    """One flow of the attempt: its configuration, label, port, congestion control, how long
    it runs, and the plan its own Attempt runs (a kernel TCP flow's: the pair tcp-tcp)."""

    index: int
    label: str
    flow: FlowConfig
    port: int
    cc: str
    duration_s: float | None
    size: int | None
    pair: AttemptPlan
    unsupported: str | None = None  # why the flow cannot run (then nothing runs)

    @property
    def directory(self) -> str:
        """Its directory below the attempt's."""
        return f"flow-{self.index}"

    def record(self) -> FlowRecord:
        """Its record before it runs."""
        f = self.flow
        return FlowRecord(index=self.index, label=self.label, kind=f.kind, server=f.server,
                          client=f.client, congestion_control=self.cc, link=f.link,
                          port=self.port, start_offset_s=f.start, duration_s=self.duration_s,
                          size_bytes=self.size, server_version=self.pair.server.version,
                          client_version=self.pair.client.version,
                          workload=self.pair.workload_record())


@dataclass
class _Running:
    """A flow while it runs: its record, its Attempt (once its server starts), its client."""

    plan: FlowPlan
    record: FlowRecord
    attempt: Attempt | None = None
    env: tuple[dict[str, str], dict[str, str]] | None = None  # the pair's server, client
    client: Background | None = None


@dataclass
class FlowsAttempt:
    """Runs the flows of one attempt; always leaves both nodes clean."""

    plan: AttemptPlan  # the attempt as a whole (its first flow's sides, the set's cell)
    flows: list[FlowPlan]
    server: Node
    client: Node
    out_dir: Path
    server_monitors: NodeMonitors | None = None
    client_monitors: NodeMonitors | None = None
    before_transfer: Callable[[], None] | None = None
    abort: BaseException | None = None
    record: RunRecord = field(init=False)
    _running: list[_Running] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.record = new_record(self.plan, self.server, self.client)
        self.record.flows = [f.record() for f in self.flows]
        rel = "/".join(p for p in (self.plan.pair, self.plan.testcase, self.plan.variant,
                                   str(self.plan.repetition), f"attempt-{self.plan.attempt}")
                       if p)
        self.logs = {"server": f"{self.server.runs_dir}/{rel}/server",
                     "client": f"{self.client.runs_dir}/{rel}/client"}
        self._running = [_Running(f, rec) for f, rec in zip(self.flows, self.record.flows)]

    # -- the attempt ---------------------------------------------------------------------------
    def run(self, postprocess: bool = True) -> RunRecord:
        """Run every flow; the record (ok only when every flow is ok)."""
        rec = self.record
        rec.started_at = utc_now()
        unsupported = [f for f in self.flows if f.unsupported]
        try:
            if unsupported:
                first = unsupported[0].label
                for run in self._running:
                    run.record.status = "unsupported" if run.plan.unsupported else "failed"
                    run.record.reason = run.plan.unsupported or f"{NOT_RUN}flow {first} " \
                                                                "cannot run"
            else:
                self.server.run(["mkdir", "-p", self.logs["server"]])
                self.client.run(["mkdir", "-p", self.logs["client"]])
                if self._start_servers():
                    self._measure()
        except (Exception, KeyboardInterrupt) as exc:
            self.abort = record_failure(rec, exc)
        finally:
            try:
                self._finish()
            except (ExecutorError, KeyboardInterrupt) as exc:
                self.abort = record_cleanup_failure(rec, exc, self.abort)
        self._conclude()
        rec.finished_at = utc_now()
        if postprocess:
            self.postprocess()
        return rec

    def postprocess(self) -> None:
        """Each pair's management-side work (what its libraries reported)."""
        for run in self._running:
            if run.attempt is not None:
                run.attempt.postprocess()
                self.record.warnings.extend(f"{run.plan.label}: {w}"
                                            for w in run.attempt.record.warnings)

    def _conclude(self) -> None:
        """The attempt's status from its flows' (an attempt-level failure wins), and the
        attempt's span and bytes over all flows."""
        rec, flows = self.record, [r.record for r in self._running]
        if rec.reason is None:
            # the flow that caused it, not one that was "not run" because of it
            bad = next((f for f in flows if f.status != "ok" and not (f.reason or "")
                        .startswith(NOT_RUN)), None) or next(
                (f for f in flows if f.status != "ok"), None)
            if bad is None:
                rec.status = "ok"
            else:
                rec.status, rec.reason = bad.status, f"flow {bad.label}: {bad.reason}"
        starts = [f.start_ns for f in flows if f.start_ns is not None]
        ends = [f.end_ns for f in flows if f.end_ns is not None]
        if starts and ends:
            rec.start_ns, rec.end_ns = min(starts), max(ends)
            rec.duration_s = (rec.end_ns - rec.start_ns) / 1e9
        received = [f.bytes_received for f in flows if f.bytes_received is not None]
        rec.bytes_received = sum(received) if received else None
        if rec.status == "ok" and rec.duration_s and rec.bytes_received is not None:
            rec.goodput_mbps = goodput_mbps(rec.bytes_received, rec.duration_s)

    # -- servers -------------------------------------------------------------------------------
    def _start_servers(self) -> bool:
        """Start every flow's server; False (the failing flow's record says why) when one
        does not come up."""
        for run in self._running:
            if not self._start_pair(run):
                for other in self._running:
                    if other is not run:
                        other.record.reason = f"{NOT_RUN}flow {run.plan.label} did not start"
                return False
        return True

    def _start_pair(self, run: _Running) -> bool:
        """Start the flow's server by its own Attempt (after both sides' pre scripts)."""
        attempt = Attempt(run.plan.pair, self.server, self.client,
                          self.out_dir / run.plan.directory)
        run.attempt = attempt
        senv = attempt.side_env(self.server, attempt.server_logs, run.plan.pair.server)
        cenv = attempt.side_env(self.client, attempt.client_logs, run.plan.pair.client)
        run.env = (senv, cenv)
        attempt.prepare_files()  # its directories, and its streams' links to the sources
        meta = run.plan.pair.server.meta
        ok = attempt.run_script(self.server, meta, "pre", senv) and \
            attempt.run_script(self.client, run.plan.pair.client.meta, "pre", cenv) and \
            attempt.start_server(senv)
        if not ok:
            run.record.status = attempt.record.status
            run.record.reason = attempt.record.reason
        return ok

    # -- clients -------------------------------------------------------------------------------
    def _measure(self) -> None:
        """The node monitors around every client; each client's outcome into its record."""
        if self.before_transfer is not None:
            self.before_transfer()
        smon = self.server_monitors or NodeMonitors(self.server.executor, self.server.name,
                                                    self.server.cfg.interface, [])
        cmon = self.client_monitors or NodeMonitors(self.client.executor, self.client.name,
                                                    self.client.cfg.interface, [])
        smon.snapshot("before", self.logs["server"])
        cmon.snapshot("before", self.logs["client"])
        series = smon.start_series(self.logs["server"], port=self.plan.port)
        cseries: list[Background] = []
        try:
            cseries = cmon.start_series(self.logs["client"], port=self.plan.port)
            self._launch_clients()
            self._wait_clients()
        finally:
            smon.stop_series(series)
            cmon.stop_series(cseries)
            smon.snapshot("after", self.logs["server"])
            cmon.snapshot("after", self.logs["client"])
            smon.finish(self.logs["server"])
            cmon.finish(self.logs["client"])

    def _launch_clients(self) -> None:
        """Launch every client in the background, each waiting for its start time."""
        now = self.client.run(["sh", "-c", 'echo "${EPOCHREALTIME:-$(date +%s.%N)}"'],
                              ).stdout.strip()
        origin_us = int(float(now) * 1e6) + int((_LEAD_S + 0.05 * len(self.flows)) * 1e6)
        for run in self._running:
            at = origin_us + int(run.plan.flow.start * 1e6)
            argv, logs, cwd, env = self._client_command(run)
            kill = KILL_AFTER_S["container" if self._client_container(run) else "process"]
            run.client = self.client.executor.start(
                wrapped(f"{logs}/client.stdout.log", f"{logs}/client.stderr.log", argv,
                        start_us=at, duration_s=run.plan.duration_s, kill_after_s=kill),
                stdout=f"{logs}/scheduled.log", stderr=f"{logs}/scheduled.err", env=env,
                cwd=cwd)

    @staticmethod
    def _client_container(run: _Running) -> ContainerSide | None:
        """The flow's client container (a pair whose client runs as an image)."""
        return run.attempt.container("client") if run.attempt is not None else None

    def _client_command(self, run: _Running
                        ) -> tuple[list[str], str, str | None, dict[str, str] | None]:
        """(argv, logs directory, cwd, environment) of the flow's client."""
        assert run.attempt is not None and run.env is not None
        container = self._client_container(run)
        if container is not None:  # created now, started by the wrapper at its time
            container.create(run.env[1], self.server.cfg.ip, self.client.cfg.ip)
            run.attempt.record.client.container = container.record()
            return container.attach_argv(), run.attempt.client_logs, None, None
        d = self.client.impl_dir(run.attempt.plan.client.meta.name)
        return [f"{d}/run-client"], run.attempt.client_logs, d, run.env[1]

    def _client_timeout(self) -> float:
        """How long the last client may take: its start, its duration (or the campaign's
        client timeout) and a margin."""
        ends = [r.plan.flow.start + (r.plan.duration_s + 30 if r.plan.duration_s
                                     else self.plan.client_timeout) for r in self._running]
        return _LEAD_S + 0.05 * len(self.flows) + max(ends)

    def _wait_clients(self) -> None:
        """Wait for every client; read each one's outcome."""
        timeout = self._client_timeout()
        for run in self._running:
            assert run.client is not None
            try:
                self.client.executor.wait(run.client, timeout)
            except CommandTimeout:
                run.record.status = "timeout"
                run.record.reason = f"client did not finish within {timeout:g} s"
                continue
            self._client_outcome(run)

    def _client_outcome(self, run: _Running) -> None:
        assert run.client is not None
        rec = run.record
        outcome = parse_client_run(self.client.run(["cat", run.client.stdout],
                                                   check=False).stdout)
        if outcome is None:
            rec.status, rec.reason = "failed", "the client's wrapper printed no outcome"
            return
        rec.start_ns, rec.end_ns, code = outcome.start_ns, outcome.end_ns, outcome.exit_code
        rec.stopped_at_duration = outcome.stopped(run.plan.duration_s)
        cpu: tuple[float | None, float | None] = outcome.cpu_user_s, outcome.cpu_system_s
        container = self._client_container(run)
        if container is not None:
            cpu = self._container_ended(run, container)
        rec.client_cpu_s = None if cpu[0] is None or cpu[1] is None else cpu[0] + cpu[1]
        assert run.attempt is not None
        side = run.attempt.record.client
        side.cpu_user_s, side.cpu_system_s = cpu
        side.exit_code = code
        if code != 0 and not rec.stopped_at_duration:
            self._client_failed(run, code)
            return
        self._verify_pair(run)
        if rec.status == "ok" and rec.bytes_received is not None:
            rec.goodput_mbps = goodput_mbps(rec.bytes_received, (rec.end_ns - rec.start_ns) / 1e9)

    def _container_ended(self, run: _Running, container: ContainerSide
                         ) -> tuple[float | None, float | None]:
        """A client container after its wrapper: stopped if it outlived it (its attached
        command was killed), its times the engine's on the client node; its CPU (cgroup)."""
        assert container.cid is not None
        engine, rec = self.client.engine(), run.record
        state = engine.state(container.cid)
        if state.running:
            engine.stop(container.cid, grace=1)
            state = engine.state(container.cid)
        rec.start_ns = state.started_ns or rec.start_ns
        rec.end_ns = state.finished_ns or rec.end_ns
        return container.cpu()

    def _client_failed(self, run: _Running, code: int) -> None:
        assert run.attempt is not None
        logs = run.attempt.client_logs
        err = self.client.run(["sh", "-c", 'tail -c 2000 "$0"; tail -c 2000 "$1"',
                               f"{logs}/client.stderr.log", f"{logs}/client.stdout.log"],
                              check=False).stdout
        run.record.status, run.record.reason = exit_outcome("client", code, err)

    def _verify_pair(self, run: _Running) -> None:
        """The pair's own Attempt verifies its download: complete by its digest, one stopped
        at its duration as a prefix of the served file (measure/transfers.py)."""
        assert run.attempt is not None
        rec, attempt = run.record, run.attempt
        attempt.record.start_ns, attempt.record.end_ns = rec.start_ns, rec.end_ns
        attempt.record.duration_s = (rec.end_ns or 0) / 1e9 - (rec.start_ns or 0) / 1e9
        attempt.record.stopped_at_duration = rec.stopped_at_duration
        attempt.verify()
        rec.bytes_received = attempt.record.bytes_received
        rec.status, rec.reason = attempt.record.status, attempt.record.reason
        rec.verified = attempt.verified_as()
        rec.transfers = attempt.record.transfers

    # -- the end -------------------------------------------------------------------------------
    def _finish(self) -> None:
        """Stop what still runs, run each pair's end (server, post scripts, logs), fetch the
        attempt's own logs and remove them from the nodes."""
        clients = [r.client for r in self._running if r.client is not None
                   and r.client.exit_code is None]
        try:
            if clients:
                self.client.executor.stop_many(clients, grace=5)
            for run in self._running:
                if run.attempt is not None and run.env is not None:
                    try:
                        run.attempt.finish(*run.env)
                    except ExecutorError as exc:
                        self.record.warnings.append(f"{run.plan.label}: cleanup: {exc}")
                    self._pair_sides(run)
        finally:
            for node, role in ((self.server, "server"), (self.client, "client")):
                try:
                    node.fetch_dir(self.logs[role], self.out_dir / role)
                except (ExecutorError, OSError) as exc:
                    self.record.warnings.append(f"{node.name}: could not fetch logs: {exc}")
                node.run(["rm", "-rf", "--", self.logs[role]], check=False)

    def _pair_sides(self, run: _Running) -> None:
        """The attempt's sides are its first flow's when that is a QUIC pair (a kernel TCP
        flow's stay the plan's: the first pair's, or kernel TCP's with the campaign's
        parameters)."""
        assert run.attempt is not None
        if run.plan.index == 0 and run.plan.flow.kind == "quic":
            self.record.server = run.attempt.record.server
            self.record.client = run.attempt.record.client
