"""One measurement (attempt): start server, wait until ready, time the client, verify, clean up.

The client runs in the wrapper of :mod:`~interop_runner.measure.client_run`, which takes its
start and end on the client node and stops it at the workload's duration.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from interop_runner.config.implementations import EXIT_UNSUPPORTED, ImplementationMeta
from interop_runner.config.params import (
    Resolved,
    StandardParams,
    check_negotiated,
    parse_negotiated,
)
from interop_runner.config.workload import Direction, Workload
from interop_runner.errors import ConnectError, ExecutorError, KnobError
from interop_runner.measure.client_run import parse_client_run, wrapped
from interop_runner.measure.container import ContainerSide, qir_testcase
from interop_runner.measure.monitor_session import NodeMonitors
from interop_runner.measure.postprocess import process_handshake, process_pcaps, process_perf
from interop_runner.measure.side import Role, SidePlan
from interop_runner.measure.transfers import (
    Files,
    check,
    check_prefixes,
    failure,
    hash_landed,
    iperf_received,
    make_links,
    receiver,
    sender,
    settle,
)
from interop_runner.remote.executor import Background, CommandTimeout
from interop_runner.storage.layout import utc_now
from interop_runner.storage.run_record import HOST_KEYS, RunRecord, Side, Status, Verified
from interop_runner.testbed.knobs import KnobState, NodeKnobs
from interop_runner.testbed.node import Node
from interop_runner.units import goodput_mbps

# Wait until the server listens on the port or its process has exited.
_READY = (
    'exitf=$0; flag=$1; port=$2; '
    'while :; do '
    '  if [ -e "$exitf" ]; then echo "exited $(cat "$exitf")"; exit 0; fi; '
    '  if [ -n "$(ss -H "$flag" "sport = :$port")" ]; then echo ready; exit 0; fi; '
    '  sleep 0.005; '
    'done'
)
# $0 the file, $1 the hash command (b3sum, sha256sum): its size and digest, or "missing"
# how long a one-test server (iperf3 -1) may take to write its report once its client ended
_SERVER_REPORT_S = 15.0
_VERIFY = 'if [ -f "$0" ]; then stat -c %s -- "$0"; "$1" -- "$0"; else echo missing; fi'


@dataclass
class AttemptPlan:
    """Everything one attempt needs, prepared by the campaign: one flow (a server side and a
    client side) and how it is measured."""

    campaign_id: str
    testbed: str
    testcase: str
    repetition: int
    attempt: int
    server: SidePlan
    client: SidePlan
    alpn: str | None
    port: int
    file_name: str
    file_size: int
    file_digest: str
    client_timeout: float
    server_ready_timeout: float
    keylog: bool = False
    qlog: bool = False
    monitors: dict[str, dict[str, str]] = field(default_factory=dict)
    std_params: StandardParams = field(default_factory=StandardParams)
    variant: str = ""
    axes: dict[str, Any] = field(default_factory=dict)
    # the pair as written in the campaign (differs from the implementations under `impl`)
    cell: tuple[str, str] | None = None
    hash_algorithm: str = "blake3"  # of file_digest: "blake3" or "sha256"
    # one flow of an attempt of several (measure.flows): its directory below the attempt's,
    # also for the client's downloads ("" for an attempt of one pair)
    flow: str = ""
    workload: Workload = field(default_factory=Workload)
    duration_s: float | None = None  # the workload's: the client is stopped then
    # the client's file to upload and its digest ("" when the workload has no upload)
    upload_name: str = ""
    upload_digest: str = ""

    def workload_record(self) -> dict[str, Any]:
        """What the attempt moves, as run.json keeps it (``workload``)."""
        w = self.workload
        return {"kind": w.kind, "size_bytes": self.file_size, "duration_s": self.duration_s,
                "streams": w.streams, "connections": w.connections}

    def digest(self, direction: Direction) -> str:
        """The source digest of ``direction``'s transfers."""
        return self.file_digest if direction == "download" else self.upload_digest

    @property
    def pair(self) -> str:
        return f"{self.server.meta.name}_{self.client.meta.name}"

    @property
    def sides(self) -> tuple[SidePlan, SidePlan]:
        """The server side and the client side."""
        return self.server, self.client

    def peer(self, side: SidePlan) -> SidePlan:
        """The other side of the pair."""
        return self.client if side is self.server else self.server

    def resolved(self, side: SidePlan) -> Resolved:
        """The standard parameters as ``side``'s implementation runs them."""
        return side.resolve(self.std_params, keylog=self.keylog, qlog=self.qlog,
                            peer=self.peer(side).meta.supports)

    def side_record(self, side: SidePlan, node: Node) -> Side:
        """The record of one side before it runs: versions, parameters, unhonoured requests."""
        return side.record(node, self.std_params, keylog=self.keylog, qlog=self.qlog,
                           peer=self.peer(side).meta.supports)


_SIGNALS = {int(s): s.name for s in signal.Signals}


def _tail(text: str, n: int = 300) -> str:
    """The last line of a side's stderr that may explain a failure (not its handshake report)."""
    lines = [ln for ln in text.strip().splitlines()
             if ln.strip() and not ln.startswith("QIR_NEGOTIATED")]
    return lines[-1][:n] if lines else ""


def exit_outcome(what: str, code: int, stderr: str) -> tuple[Status, str]:
    """(status, reason) of a side that exited ``code``: 127 is unsupported, a shell's 128 +
    signal number names the signal; the last line of ``stderr`` that explains it follows."""
    if code == EXIT_UNSUPPORTED:
        status: Status = "unsupported"
        reason = f"{what} exited 127 (unsupported)"
    else:
        status, reason = "failed", f"{what} exited {code}"
        if code > 128 and code - 128 in _SIGNALS:  # the shell's 128 + signal number
            reason += f" (killed by {_SIGNALS[code - 128]})"
    return status, reason + (f": {_tail(stderr)}" if _tail(stderr) else "")


def new_record(plan: AttemptPlan, server: Node, client: Node) -> RunRecord:
    """The run.json of an attempt as far as it is known before it runs (the one place a
    :class:`RunRecord` is built): what was planned, both sides, the nodes' main host facts."""
    return RunRecord(
        campaign=plan.campaign_id, testcase=plan.testcase, repetition=plan.repetition,
        attempt=plan.attempt, testbed=plan.testbed, alpn=plan.alpn,
        server=plan.side_record(plan.server, server), client=plan.side_record(plan.client, client),
        params=plan.std_params.model_dump(), variant=plan.variant, axes=dict(plan.axes),
        hosts={n.cfg.role: {k: n.facts.get(k) for k in HOST_KEYS} for n in (server, client)},
        cell={"server": plan.cell[0], "client": plan.cell[1]} if plan.cell else None,
        file_size=plan.file_size, hash_algorithm=plan.hash_algorithm,
        digest_expected=plan.file_digest if plan.workload.downloads else plan.upload_digest,
        monitors=dict(plan.monitors), workload=plan.workload_record(),
    )


def not_run_record(plan: AttemptPlan, server: Node, client: Node, status: Status,
                   reason: str) -> RunRecord:
    """A record for a pair that cannot run at all (no common protocol, failed setup)."""
    record = new_record(plan, server, client)
    record.status, record.reason = status, reason
    record.started_at = record.finished_at = utc_now()
    return record


def record_failure(rec: RunRecord, exc: BaseException) -> BaseException | None:
    """Record what ended an attempt (or an attempt of flows) early in ``rec``; the exception
    that must stop the campaign after the record is stored (a lost node, Ctrl-C, a runner
    bug), None when the campaign goes on."""
    if isinstance(exc, KnobError):
        rec.status, rec.reason = "failed", f"knob: {exc}"
    elif isinstance(exc, CommandTimeout):
        rec.status, rec.reason = "timeout", str(exc)
    elif isinstance(exc, ExecutorError):  # a ConnectError (a node gone for good) stops it
        rec.status, rec.reason = "failed", f"runner: {exc}"
        return exc if isinstance(exc, ConnectError) else None
    elif isinstance(exc, KeyboardInterrupt):
        rec.status, rec.reason = "failed", "interrupted (Ctrl-C or SIGTERM)"
        rec.interrupted = True
    else:  # a runner bug: record it, then let the campaign stop
        rec.status, rec.reason = "failed", f"runner error: {exc!r}"
    return None if isinstance(exc, (KnobError, CommandTimeout)) else exc


def record_cleanup_failure(rec: RunRecord, exc: BaseException,
                           abort: BaseException | None) -> BaseException | None:
    """Record a failure of an attempt's cleanup (the record is kept whatever cleanup could
    not do); the exception that must stop the campaign (``abort`` if there already is one)."""
    if isinstance(exc, ExecutorError):
        rec.warnings.append(f"cleanup incomplete: {exc}")
        return abort or (exc if isinstance(exc, ConnectError) else None)
    # Ctrl-C during post/cleanup: keep the record
    if not rec.interrupted:
        rec.status = "failed"
        rec.reason = ("interrupted (Ctrl-C or SIGTERM) after the transfer, during cleanup; "
                      f"the transfer itself: {rec.reason or 'ok'}")
        rec.interrupted = True
    return abort or exc


class Attempt:
    """Runs one attempt and always leaves both nodes clean (also on Ctrl-C)."""

    def __init__(self, plan: AttemptPlan, server: Node, client: Node, out_dir: Path,
                 server_monitors: NodeMonitors | None = None,
                 client_monitors: NodeMonitors | None = None,
                 server_knobs: NodeKnobs | None = None,
                 client_knobs: NodeKnobs | None = None,
                 before_transfer: Callable[[], None] | None = None) -> None:
        self.plan, self.server, self.client, self.out_dir = plan, server, client, out_dir
        # called before the first snapshot: the campaign finishes earlier attempts' work there
        self.before_transfer = before_transfer
        self.smon = server_monitors or NodeMonitors(server.executor, server.name,
                                                    server.cfg.interface, [])
        self.cmon = client_monitors or NodeMonitors(client.executor, client.name,
                                                    client.cfg.interface, [])
        self.record = new_record(plan, server, client)
        rel = "/".join(p for p in (plan.pair, plan.testcase, plan.variant, str(plan.repetition),
                                   f"attempt-{plan.attempt}", plan.flow) if p)
        # several clients of one node each download into their own directory
        self.downloads = f"{client.downloads}/{plan.flow}" if plan.flow else client.downloads
        # the server keeps what the client uploads in a directory of its own
        self.uploads = f"{server.scratch}/uploads" + (f"/{plan.flow}" if plan.flow else "")
        self.files = Files(plan.workload, plan.file_name, plan.upload_name, plan.file_size,
                           server.www, client.www, self.downloads, self.uploads)
        self.server_logs = f"{server.runs_dir}/{rel}/server"
        self.client_logs = f"{client.runs_dir}/{rel}/client"
        self._server_proc: Background | None = None
        self.abort: BaseException | None = None
        self._knobs = {"server": (server_knobs, plan.server.knobs),
                       "client": (client_knobs, plan.client.knobs)}
        self._knob_states: dict[str, KnobState] = {}
        self._cpus: dict[str, str] = {}
        token = f"{plan.campaign_id}-{plan.pair}-{plan.repetition}-{plan.attempt}"
        token = "-".join(t for t in (token, plan.variant, plan.flow) if t)
        token = re.sub(r"[^A-Za-z0-9_.-]", "_", token)
        self._containers = {
            side.role: ContainerSide(node, side.meta, side.image, logs, token,
                                     self.downloads if side.role == "client" else None)
            for side, node, logs in ((plan.server, server, self.server_logs),
                                     (plan.client, client, self.client_logs))
            if side.image is not None}

    def container(self, role: Role) -> ContainerSide | None:
        """The side ``role`` (server, client) when it runs as a container image."""
        return self._containers.get(role)

    # -- environment ---------------------------------------------------------------------------
    def side_env(self, node: Node, logs: str, side: SidePlan) -> dict[str, str]:
        p = self.plan
        if node.cfg.role in self._containers:
            return self._container_env(node, side)
        server_ip = self.server.cfg.ip
        host = f"[{server_ip}]" if ":" in server_ip else server_ip
        base = {
            "TESTCASE": p.testcase, "IP": server_ip, "PORT": str(p.port), "ALPN": p.alpn or "",
            "CERTS": node.certs, "LOGS": logs,
            "SSLKEYLOGFILE": f"{logs}/keys.log" if p.keylog else "",
            "QLOGDIR": f"{logs}/qlog" if p.qlog else "",
        }
        base.update(p.resolved(side).env)
        base.update(p.workload.env())
        base.update(self.amount_env())
        if node.cfg.role == "server":
            base["WWW"] = node.www
            base["UPLOADS"] = self.uploads if p.workload.uploads else ""
        else:
            base["DOWNLOADS"] = self.downloads
            base["REQUESTS"] = self.urls(host, "download")
            base["UPLOAD_REQUESTS"] = self.urls(host, "upload")
            base["UPLOADS"] = node.www if p.workload.uploads else ""
        return node.script_env(side.meta, base, side.params)

    def amount_env(self) -> dict[str, str]:
        """``SIZE``: the bytes of each transfer; ``DURATION``: the seconds after which the
        client is stopped ("" without one). A harness that moves no files (kernel TCP's
        iperf3) sizes its test by them; the others serve and fetch files of SIZE bytes."""
        p = self.plan
        return {"SIZE": str(p.file_size),
                "DURATION": "" if p.duration_s is None else f"{p.duration_s:g}"}

    def urls(self, host: str, direction: Direction) -> str:
        """``REQUESTS`` (download) or ``UPLOAD_REQUESTS`` (upload): one URL per transfer."""
        return " ".join(f"https://{host}:{self.plan.port}/{t.name}"
                        for t in self.files.of(direction))

    def _container_env(self, node: Node, side: SidePlan) -> dict[str, str]:
        """QIR's endpoint environment (paths inside the container) plus the standard
        parameters, which the project's own images honour and QIR images ignore."""
        p = self.plan
        env = {"ROLE": node.cfg.role, "TESTCASE": qir_testcase(p.testcase, p.alpn),
               "ALPN": p.alpn or "", "PORT": str(p.port),
               "SSLKEYLOGFILE": "/logs/keys.log" if p.keylog else "",
               "QLOGDIR": "/logs/qlog" if p.qlog else ""}
        env.update(p.resolved(side).env)
        env.update(p.workload.env())
        if node.cfg.role == "client":
            host = "server6" if ":" in self.server.cfg.ip else "server4"
            env["REQUESTS"] = self.urls(host, "download")
        return {**env, **side.meta.param_env(dict(side.params))}

    # -- phases --------------------------------------------------------------------------------
    def run(self, postprocess: bool = True) -> RunRecord:
        """Run the attempt; return its record (status ok/failed/unsupported/timeout).

        An interrupt or an unexpected error is recorded as a failed attempt and kept in
        ``self.abort``; the caller stores the record and then re-raises it. Without
        ``postprocess`` the caller calls :meth:`postprocess` (management-side work on the
        fetched files) before it stores the record.
        """
        rec, p = self.record, self.plan
        rec.started_at = utc_now()
        senv = self.side_env(self.server, self.server_logs, p.server)
        cenv = self.side_env(self.client, self.client_logs, p.client)
        try:
            self.prepare_files()
            self._apply_knobs()
            if self.run_script(self.server, p.server.meta, "pre", senv) and \
                    self.run_script(self.client, p.client.meta, "pre", cenv) and \
                    self.start_server(senv):
                self._measure(cenv)
        except (Exception, KeyboardInterrupt) as exc:
            self.abort = record_failure(rec, exc)
        finally:
            try:
                self.finish(senv, cenv)
            except (ExecutorError, KeyboardInterrupt) as exc:
                self.abort = record_cleanup_failure(rec, exc, self.abort)
        rec.finished_at = utc_now()
        if postprocess:
            self.postprocess()
        return rec

    def prepare_files(self) -> None:
        """The attempt's directories on both nodes, and a hard link per stream to the
        source of each direction (several streams or connections)."""
        w = self.plan.workload
        self.server.run(["mkdir", "-p", self.server_logs, *([self.uploads] if w.uploads
                                                              else [])])
        self.client.run(["mkdir", "-p", self.client_logs, self.downloads])
        for direction in w.directions:
            make_links(self.server if direction == "download" else self.client, self.files,
                       direction)

    def _apply_knobs(self) -> None:
        """Apply each node's host knobs (undo journaled first) and resolve core pinning."""
        for role, (nk, knobs) in self._knobs.items():
            if nk is None or not knobs.active():
                continue
            if knobs.pin:
                self._cpus[role] = nk.cpus(knobs.pin)
            self._knob_states[role] = nk.apply(knobs)

    def _restore_knobs(self) -> None:
        for role, (nk, knobs) in self._knobs.items():
            if nk is None or not knobs.active():
                continue
            state = self._knob_states.get(role)
            names = [n for n in knobs.active() if n != "pin"]
            failed = nk.restore(state, names)
            entry: dict[str, Any] = {"asked": knobs.active()}
            if state is not None:
                entry.update(before=state.before, applied=state.applied, after=state.after,
                             notes=state.notes)
                if state.before != state.after and not failed:
                    self.record.warnings.append(f"{role}: knobs not back to their state "
                                                f"before the run: {state.after}")
            if role in self._cpus:
                entry["cpus"] = self._cpus[role]
            if failed:
                entry["restore_failed"] = failed
                self.record.warnings.append(f"{role}: could not undo: {'; '.join(failed)}")
            self.record.knobs[role] = entry

    def _pinned(self, role: str, argv: list[str]) -> list[str]:
        cpus = self._cpus.get(role)
        return ["taskset", "-c", cpus, *argv] if cpus else argv

    def run_script(self, node: Node, meta: ImplementationMeta, script: str,
                env: dict[str, str]) -> bool:
        if not meta.has_script(script):
            return True
        d = node.impl_dir(meta.name)
        logs = env["LOGS"]
        res = node.run(["sh", "-c", 'exec "$@" >"$0" 2>&1', f"{logs}/{script}.log",
                        f"{d}/{script}"], env=env, cwd=d, check=False)
        if res.exit_code == 0:
            return True
        if script == "post":
            self.record.warnings.append(f"{node.name}: post exited {res.exit_code}")
            return True
        self._fail_exit(f"{node.cfg.role} {script}", res.exit_code, "")
        return False

    def _fail_exit(self, what: str, code: int, stderr: str) -> None:
        self.record.status, self.record.reason = exit_outcome(what, code, stderr)

    def start_server(self, env: dict[str, str]) -> bool:
        p, node = self.plan, self.server
        flag = "-lun" if p.server.meta.ready == "udp" else "-ltn"
        # A leftover listener would make the readiness check lie and serve the client instead.
        busy = node.run(["ss", "-H", flag, f"sport = :{p.port}"]).stdout.strip()
        if busy:
            self.record.status = "failed"
            self.record.reason = f"port {p.port} is already in use on {node.name}: {busy[:200]}"
            return False
        if "server" in self._containers:
            return self._start_server_container(env, flag)
        d = node.impl_dir(p.server.meta.name)
        self._server_proc = node.executor.start(
            self._pinned("server", [f"{d}/run-server"]),
            stdout=f"{self.server_logs}/server.stdout.log",
            stderr=f"{self.server_logs}/server.stderr.log", env=env, cwd=d)
        try:
            res = node.run(["sh", "-c", _READY, self._server_proc.exit_file, flag, str(p.port)],
                           timeout=p.server_ready_timeout)
        except CommandTimeout:
            self.record.status = "failed"
            self.record.reason = f"server not listening on port {p.port} after " \
                                 f"{p.server_ready_timeout:g} s"
            return False
        state = res.stdout.strip()
        if state.startswith("exited"):
            code = int(state.split()[1])
            err = node.run(["cat", f"{self.server_logs}/server.stderr.log"], check=False).stdout
            self.record.server.exit_code = code
            self._fail_exit("server", code, err)
            return False
        return True

    def _start_server_container(self, env: dict[str, str], flag: str) -> bool:
        """Start the server's container; wait until it listens on the port (``ss`` ``flag``),
        or record how it ended."""
        p, side = self.plan, self._containers["server"]
        side.start(env, self.server.cfg.ip, self.client.cfg.ip)
        self.record.server.container = side.record()
        self.record.server.pid = side.pid
        try:
            state = side.wait_ready(flag, p.port, p.server_ready_timeout)
        except CommandTimeout:
            self.record.status = "failed"
            self.record.reason = f"server container not listening on port {p.port} after " \
                                 f"{p.server_ready_timeout:g} s"
            return False
        if state != "ready":
            code = self.server.engine().wait(side.cid, 30) if side.cid else None
            self.record.server.exit_code = code
            side.save_logs()
            err = self.server.run(["cat", f"{self.server_logs}/server.stderr.log"],
                                  check=False).stdout
            self._fail_exit("server", -1 if code is None else code, err)
            return False
        return True

    def _measure(self, cenv: dict[str, str]) -> None:
        """Snapshots and samplers around the client run."""
        if self.before_transfer is not None:
            self.before_transfer()
        p, ct = self.plan, self._containers.get("server")
        pgid = self._server_proc.pgid if self._server_proc is not None else None
        procs = ct.procs_file if ct is not None else None
        self.smon.snapshot("before", self.server_logs, pgid, procs_file=procs)
        self.cmon.snapshot("before", self.client_logs)
        series = self.smon.start_series(self.server_logs, pgid, procs_file=procs, port=p.port)
        cseries = []
        try:
            cseries = self.cmon.start_series(self.client_logs, port=p.port)
            self._run_client(cenv)
        finally:
            self.smon.stop_series(series)
            self.cmon.stop_series(cseries)
            self.smon.snapshot("after", self.server_logs, pgid, procs_file=procs)
            self.cmon.snapshot("after", self.client_logs)
            self.smon.finish(self.server_logs)
            self.cmon.finish(self.client_logs)

    def _run_client(self, env: dict[str, str]) -> None:
        p, node, rec = self.plan, self.client, self.record
        if "client" in self._containers:
            self._run_client_container(env)
            return
        d = node.impl_dir(p.client.meta.name)
        pidstat_out = f"{self.client_logs}/pidstat.txt" if self.cmon.active("pidstat") else ""
        try:
            # tracked: a runner killed now leaves the group in the node's process journal
            res = node.executor.run_tracked(
                wrapped(f"{self.client_logs}/client.stdout.log",
                        f"{self.client_logs}/client.stderr.log",
                        self._pinned("client", [f"{d}/run-client"]), pidstat=pidstat_out,
                        duration_s=p.duration_s),
                timeout=p.client_timeout, env=env, cwd=d)
        except CommandTimeout:
            rec.status = "timeout"
            rec.reason = f"client did not finish within {p.client_timeout:g} s"
            return
        run = parse_client_run(res.stdout)
        if run is None:
            rec.status, rec.reason = "failed", "the client's wrapper printed no outcome"
            return
        rec.start_ns, rec.end_ns, rec.duration_s = run.start_ns, run.end_ns, run.duration_s
        rec.client.exit_code, rec.client.pid = run.exit_code, run.pid
        rec.client.cpu_user_s, rec.client.cpu_system_s = run.cpu_user_s, run.cpu_system_s
        rec.stopped_at_duration = run.stopped(p.duration_s)
        if rec.client.exit_code != 0 and not rec.stopped_at_duration:
            err = node.run(["cat", f"{self.client_logs}/client.stderr.log"], check=False).stdout
            self._fail_exit("client", rec.client.exit_code, err)
            return
        self.verify()

    def _run_client_container(self, env: dict[str, str]) -> None:
        """The client's container: its start and end are the engine's, on the client node,
        its CPU time that of every process it ran (its cgroup)."""
        p, rec, side = self.plan, self.record, self._containers["client"]
        side.start(env, self.server.cfg.ip, self.client.cfg.ip,
                   watch_pids=self.cmon.active("perf"))
        rec.client.container = side.record()
        out = side.run_client(p.client_timeout)
        rec.client.pid = out.pid
        if out.exit_code is None:
            rec.status = "timeout"
            rec.reason = f"client did not finish within {p.client_timeout:g} s"
            return
        rec.client.exit_code = out.exit_code
        rec.client.cpu_user_s, rec.client.cpu_system_s = out.cpu_user_s, out.cpu_system_s
        if out.start_ns is None or out.end_ns is None:
            rec.status, rec.reason = "failed", "the engine reported no start/end time"
            return
        rec.start_ns, rec.end_ns = out.start_ns, out.end_ns
        rec.duration_s = (rec.end_ns - rec.start_ns) / 1e9
        if out.exit_code != 0:
            side.save_logs()
            err = self.client.run(["cat", f"{self.client_logs}/client.stderr.log"],
                                  check=False).stdout
            self._fail_exit("client", out.exit_code, err)
            return
        self.verify()

    def verified_as(self) -> Verified | None:
        """How what the attempt moved was verified: ``hash`` or ``prefix`` (every transfer
        alike), ``iperf3`` (its report), None (not verified, or transfers told apart)."""
        if self.plan.client.meta.verified_by == "iperf3":
            return "iperf3" if self.record.status == "ok" else None
        verified = {t.verified for t in self.record.transfers or []}
        return verified.pop() if len(verified) == 1 else None

    def verify(self) -> None:
        """Size and digest of every transfer's file, hashed after the transfer on the node
        where it landed (the client's downloads, the server's uploads); the goodput of each
        direction and of the attempt when every one is verified. A client verified by its
        iperf3 report is read instead (:meth:`_read_iperf`)."""
        p, rec = self.plan, self.record
        if p.client.meta.verified_by == "iperf3":
            self._read_iperf()
            return
        checked = []
        for direction in p.workload.directions:
            node = self.client if receiver(direction) == "client" else self.server
            batch = self.files.of(direction)
            timeout = max(60.0, len(batch) * p.file_size / 100e6)
            paths = [self.files.landed(t) for t in batch]
            if rec.stopped_at_duration:
                settle(node, paths)
            landed = hash_landed(node, paths, p.hash_algorithm, timeout)
            if rec.stopped_at_duration:  # what landed by then, against the source's start
                source = self.client if sender(direction) == "client" else self.server
                checked += check_prefixes(source, self.files.source(direction), batch, landed,
                                          p.file_size, p.hash_algorithm, timeout)
            else:
                checked += [check(t, got, p.file_size, p.digest(direction), p.hash_algorithm)
                            for t, got in zip(batch, landed)]
        rec.transfers = checked
        sizes = [t.bytes for t in checked if t.bytes is not None]
        rec.bytes_received = sum(sizes) if sizes else None
        if len(checked) == 1:
            rec.digest_received = checked[0].digest
        rec.hash_ok = all(t.verified is not None for t in checked) if sizes else None
        reason = failure(checked)
        if reason is not None:
            rec.status, rec.reason = "failed", reason
            return
        assert rec.duration_s is not None
        rec.status, rec.reason = "ok", None
        moved = {d: sum(t.bytes or 0 for t in checked if t.direction == d)
                 for d in p.workload.directions}
        rec.goodput_mbps = goodput_mbps(sum(moved.values()), rec.duration_s)
        if "download" in moved:
            rec.goodput_down_mbps = goodput_mbps(moved["download"], rec.duration_s)
        if "upload" in moved:
            rec.goodput_up_mbps = goodput_mbps(moved["upload"], rec.duration_s)

    def _read_iperf(self) -> None:
        """iperf3's own account (kernel TCP has no payload of its own to hash): the bytes its
        receiver got, by the receiver's report (the client's for a download, the server's for
        an upload), and the congestion control its sender used, which must be the one asked
        for."""
        rec = self.record
        client = self._log_text(self.client, f"{self.client_logs}/client.stdout.log")
        server = ""
        if self.plan.workload.uploads:
            if not self._server_ended():
                rec.status, rec.reason = "failed", "iperf3's server did not end after its test"
                return
            server = self._log_text(self.server, f"{self.server_logs}/server.stdout.log")
        receiver, sender = (server, client) if self.plan.workload.uploads else (client, server)
        received, reason = iperf_received(receiver, sender, self.plan.std_params.congestion_control,
                                          bool(rec.stopped_at_duration))
        if received is None:
            rec.status, rec.reason = "failed", reason
            return
        rec.bytes_received, rec.status, rec.reason = received, "ok", None
        if rec.duration_s:
            rec.goodput_mbps = goodput_mbps(rec.bytes_received, rec.duration_s)
            if self.plan.workload.uploads:
                rec.goodput_up_mbps = rec.goodput_mbps
            else:
                rec.goodput_down_mbps = rec.goodput_mbps

    @staticmethod
    def _log_text(node: Node, path: str) -> str:
        return node.run(["cat", path], check=False).stdout

    def _server_ended(self) -> bool:
        """Wait for a one-test server (iperf3 -1) to write its report and exit."""
        if self._server_proc is None:
            return False
        try:
            self.server.executor.wait(self._server_proc, _SERVER_REPORT_S)
        except CommandTimeout:
            return False
        return True

    def _negotiated(self) -> None:
        """Read what each library reported after its handshake; flag any mismatch."""
        for role, side in (("server", self.record.server), ("client", self.record.client)):
            log = self.out_dir / role / f"{role}.stderr.log"
            try:
                text = log.read_text(errors="replace")
            except OSError:
                continue
            side.negotiated = parse_negotiated(text)
            if side.negotiated:
                for problem in check_negotiated(side.effective, side.negotiated, self.plan.alpn):
                    self.record.warnings.append(f"{role} ({side.implementation}) reports "
                                                f"{problem}")

    def postprocess(self) -> None:
        """Management-side work on the fetched files (no node involved): what each library
        reported after its handshake, and the handshake, perf and tcpdump monitors' output
        turned into the record's fields. A failure is a warning of the record."""
        try:
            self._negotiated()
            if self.cmon.active("handshake"):
                process_handshake(self.out_dir, self.record)
            if self.smon.active("perf") or self.cmon.active("perf"):
                process_perf(self.out_dir, self.record)
            if self.smon.active("tcpdump") or self.cmon.active("tcpdump"):
                mtu = int(self.server.facts.get("mtu") or 1500)
                process_pcaps(self.out_dir, self.record, {"server": self.server.cfg.ip,
                                                          "client": self.client.cfg.ip}, mtu)
        except Exception as exc:  # the record is kept whatever the post-processing found
            self.record.warnings.append(f"post-processing failed: {exc!r}")

    def _end_containers(self) -> None:
        """Stop the server's container, keep both containers' output, remove them."""
        try:
            for role, side in self._containers.items():
                if side.cid is None:
                    continue
                if role == "server":
                    code = side.stop(grace=5)
                    if self.record.server.exit_code is None:
                        self.record.server.exit_code = code
                side.save_logs()
        finally:
            for side in self._containers.values():
                self.record.warnings.extend(side.remove())

    def finish(self, senv: dict[str, str], cenv: dict[str, str]) -> None:
        """Stop the server, run post scripts, fetch logs, remove per-attempt files."""
        p = self.plan
        try:
            if p.qlog:
                for node, logs in ((self.server, self.server_logs),
                                   (self.client, self.client_logs)):
                    node.run(["sh", "-c", 'if [ -d "$0/qlog" ]; then tar -C "$0" -czf '
                              '"$0/qlog.tar.gz" qlog && rm -rf "$0/qlog"; fi', logs],
                             check=False)
            if self._server_proc is not None:
                code = self.server.executor.stop(self._server_proc, grace=5)
                if self.record.server.exit_code is None:
                    self.record.server.exit_code = code
            self.run_script(self.server, p.server.meta, "post", senv)
            self.run_script(self.client, p.client.meta, "post", cenv)
        finally:
            try:
                self._end_containers()
            except ExecutorError as exc:
                self.record.warnings.append(f"containers: {exc}")
            try:
                self._restore_knobs()
            except (KnobError, ExecutorError) as exc:
                self.record.warnings.append(f"knob restore incomplete: {exc} (the journal "
                                            "stays on the node: run.py testbed restore)")
            for node, logs, sub in ((self.server, self.server_logs, "server"),
                                    (self.client, self.client_logs, "client")):
                held_back: list[str] = []  # private keys; key logs unless keylog: true
                try:
                    node.fetch_dir(logs, self.out_dir / sub, keylogs=p.keylog, skipped=held_back)
                except (ExecutorError, OSError) as exc:
                    self.record.warnings.append(f"{node.name}: could not fetch logs: {exc}")
                if held_back:
                    self.record.warnings.append(
                        f"{node.name}: not copied to the results (key material; removed on the "
                        f"node): {', '.join(held_back)}")
            self._remove_files()

    def _remove_files(self) -> None:
        """Remove from both nodes what the attempt left: landed files, the streams' links to
        the sources (the sources stay for the next attempt), its logs."""
        p, files = self.plan, self.files
        landed: dict[str, list[str]] = {"client": [], "server": []}
        for t in files.transfers:
            landed[receiver(t.direction)].append(files.landed(t))
        links = {sender(d): [f"{files.source(d).rsplit('/', 1)[0]}/{n}" for n in files.links(d)]
                 for d in p.workload.directions}
        self.client.run(["rm", "-rf", "--", *landed["client"], *links.get("client", []),
                         self.client_logs, *([self.downloads] if p.flow else [])], check=False)
        self.server.run(["rm", "-rf", "--", *landed["server"], *links.get("server", []),
                         self.server_logs, *([self.uploads] if p.workload.uploads else [])],
                        check=False)
