"""A campaign: prepare the nodes once, run every pair x repetition, store every attempt.

The campaign keeps its record (:class:`~interop_runner.storage.campaign_record.CampaignRecord`,
begun in :meth:`Campaign._start_record`) up to date in ``campaign.json`` (several testbeds:
each worker in its ``testbed-<name>.json``) and stores one ``run.json`` per attempt. Its plan
comes from :mod:`.plan`, the nodes are prepared by :mod:`.prepare`, several testbeds run in
the worker processes of :mod:`.workers`; what the caller wires in is in :mod:`.hooks`.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

from interop_runner import __version__
from interop_runner.config.campaign import CampaignConfig, variant_configs
from interop_runner.config.implementations import ImplementationMeta, load_registry, resolve
from interop_runner.config.testbed import TestbedConfig
from interop_runner.config.workload import Direction
from interop_runner.errors import ExecutorError
from interop_runner.measure.attempt import Attempt, AttemptPlan, not_run_record
from interop_runner.measure.deferred import DeferredWork
from interop_runner.measure.flow_plan import first_pair, flow_pins, plan_flows
from interop_runner.measure.flows import FlowsAttempt
from interop_runner.measure.hooks import CampaignHooks, OnRecord, Progress
from interop_runner.measure.outcome import (
    CampaignResult,
    CampaignStopped,
    TermAsInterrupt,
    ended_status,
)
from interop_runner.measure.path_session import (
    PathRun,
    PathSession,
    path_journal_leftovers,
    placement_of,
    routed,
)
from interop_runner.measure.plan import (
    CampaignPlan,
    PlannedRun,
    build_plan,
    completed_keys,
    plan_order,
    plan_runs,
)
from interop_runner.measure.preflight import check_knobs_on_nodes, check_knobs_on_testbed
from interop_runner.measure.prepare import Preparation, Prepared
from interop_runner.measure.side import ROLES, ImplKey, Role, SidePlan
from interop_runner.measure.workers import Workers, execute_parallel
from interop_runner.paths import PROJECT_ROOT as REPO_ROOT
from interop_runner.remote.executor import Executor, LocalExecutor
from interop_runner.storage.campaign_record import (
    AdaptiveRound,
    CampaignRecord,
    PlanInfo,
    new_campaign_record,
    write_campaign,
)
from interop_runner.storage.layout import (
    attempt_dir,
    new_campaign_dir,
    next_attempt,
    private_umask,
    unrecorded_attempts,
    utc_now,
)
from interop_runner.storage.run_record import RunRecord, write_run
from interop_runner.testbed.containers import reap_containers
from interop_runner.testbed.hostload import HostLoad
from interop_runner.testbed.knobs import NodeKnobs
from interop_runner.testbed.leftovers import node_knobs
from interop_runner.testbed.node import Node


def runner_version() -> dict[str, Any]:
    """Runner version: package version, git commit and whether the work tree is dirty."""
    local = LocalExecutor("management")
    info: dict[str, Any] = {"package": __version__, "commit": None, "dirty": None}
    try:
        head = local.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], timeout=10,
                         check=False)
        if head.ok:
            info["commit"] = head.stdout.strip()
            status = local.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain",
                                "--untracked-files=no"], timeout=10, check=False)
            info["dirty"] = bool(status.stdout.strip()) if status.ok else None
    except (ExecutorError, OSError):
        pass
    return info


class Campaign:
    """Runs a validated campaign on a testbed."""

    def __init__(self, cfg: CampaignConfig, testbed: TestbedConfig | list[TestbedConfig],
                 results_root: Path, plan: CampaignPlan | None = None,
                 hooks: CampaignHooks = CampaignHooks(), keep_files: bool | None = None) -> None:
        """A campaign of ``cfg`` on ``testbed`` (or several), its directory below
        ``results_root``; ``plan``: :func:`~interop_runner.measure.plan.build_plan`'s (a
        resumed campaign's), else a fresh one."""
        self.testbeds = list(testbed) if isinstance(testbed, list) else [testbed]
        self.cfg, self.testbed = cfg, self.testbeds[0]
        self.results_root = results_root
        self.keep_files = cfg.keep_files if keep_files is None else keep_files
        self.registry = load_registry()
        self.plan = plan if plan is not None else build_plan(cfg, [t.name for t in self.testbeds])
        self.hooks = hooks
        self.runs = self.plan.todo  # what is left to run (an adaptive round: its runs)
        self._source: Iterator[PlannedRun] | None = None
        self.directory: Path | None = None  # the campaign's results directory, once known
        # a finished attempt's management work (a new one per session: _execute_one)
        self._deferred = DeferredWork(exclusive=self.testbed.local)
        self._paths: PathSession | None = None  # the session's emulated paths, if any
        # whether any variant runs over an emulated path (then the endpoints use their
        # addresses through the router, and the router is connected)
        self.has_path = any(v.path is not None for _, v in variant_configs(cfg))

    @property
    def resume(self) -> Path | None:
        """The directory of the campaign this one resumes."""
        return self.plan.resume

    @property
    def seed(self) -> int:
        """The plan's seed (recorded in campaign.json)."""
        return self.plan.seed

    @property
    def skipped(self) -> int:
        """Planned runs stored before this session (resume)."""
        return self.plan.skipped

    def _metas(self, role: Role) -> list[ImplementationMeta]:
        """Every implementation (variants included) that runs in ``role`` in any variant."""
        names = {getattr(p, role) for _, vcfg in variant_configs(self.cfg)
                 for p in vcfg.pair_list()}
        return [self.meta(n) for n in sorted(names)]

    def meta(self, name: str) -> ImplementationMeta:
        """The registry entry or variant called ``name`` in this campaign."""
        return resolve(name, self.registry, self.cfg.implementations)

    def execute(self, progress: Progress | None = None, on_record: OnRecord | None = None,
                ) -> CampaignResult:
        """Prepare nodes, run all planned attempts, clean up; return the records.

        From here on this process creates files private to the user (umask 077): the
        results, and what is written after the campaign (e.g. the Parquet cache).
        """
        private_umask()
        if len(self.testbeds) > 1:
            return self._execute_parallel(progress)
        return self._execute_one(progress, on_record)

    @property
    def port(self) -> int:
        """The measurement port on this campaign's testbed."""
        return self.testbed.port or self.cfg.port

    def _start_record(self, directory: Path, several: bool) -> CampaignRecord:
        """The campaign's record at the start of this session: campaign.json, or (one testbed
        of several) testbed-<name>.json; ``several``: campaign.json over all testbeds."""
        plan = PlanInfo(order=plan_order(self.cfg, len(self.testbeds)), seed=self.seed,
                        variants=sorted({r.variant.id for r in self.runs}))
        return new_campaign_record(
            directory.name, self.cfg.model_dump(), runner_version(),
            len(self.runs) + self.skipped, plan,
            testbed=None if several else self.testbed.model_dump(),
            testbeds={t.name: t.model_dump() for t in self.testbeds} if several else None,
            distribute=self.cfg.distribute if several else None,
            previous=self.plan.previous, skipped_runs=self.skipped)

    # -- one testbed ---------------------------------------------------------------------------
    def _execute_one(self, progress: Progress | None = None, on_record: OnRecord | None = None,
                     directory: Path | None = None, meta_file: str = "campaign.json",
                     runs: Iterator[PlannedRun] | None = None) -> CampaignResult:
        """One testbed: the whole campaign, or (in a worker) its share of the runs."""
        directory = directory or self.resume or new_campaign_dir(self.results_root,
                                                                 self.cfg.name)
        self._source = runs
        self.directory = directory
        result = CampaignResult(directory)
        t0 = time.monotonic()
        doc = self._start_record(directory, several=False)
        path = directory / meta_file
        write_campaign(path, doc,
                       overwrite=self.resume is not None or meta_file != "campaign.json")
        nodes: list[Node] = []
        self._deferred = DeferredWork(exclusive=self.testbed.local)
        with TermAsInterrupt():
            try:
                self._session(nodes, doc, path, result, progress, on_record)
                doc.status = "finished"
            except BaseException as exc:
                doc.status = ended_status(exc, doc.status)
                result.interrupted = isinstance(exc, KeyboardInterrupt)
                raise
            finally:
                self._deferred.close()  # every record stored before the nodes are let go
                self._release(nodes, doc)
                doc.finished_at = utc_now()
                result.wall_s = doc.wall_s = time.monotonic() - t0
                write_campaign(path, doc)
        return result

    def _session(self, nodes: list[Node], doc: CampaignRecord, path: Path,
                 result: CampaignResult, progress: Progress | None,
                 on_record: OnRecord | None) -> None:
        """Connect, survey and prepare the nodes, then run the attempts (``nodes`` collects
        the connected nodes for the caller's cleanup)."""
        server, client = self._connect(nodes, doc)
        self._collect_facts(nodes, doc, result.directory)
        # knobs the nodes cannot have (CPUs of a pin), before anything changes or runs
        check_knobs_on_nodes(self.cfg, [(n.name, n.cfg.role, n.facts) for n in nodes
                                         if n.cfg.role != "router"])
        knobs = self._clear_leftovers(nodes, doc)
        check_knobs_on_testbed(self.cfg, self.testbed.local, knobs)
        prepared = Preparation(self.cfg, self.port, self.hooks.on_setup_error).prepare(
            server, client, doc, {role: self._metas(role) for role in ROLES})
        prepared.server_knobs, prepared.client_knobs = knobs["server"], knobs["client"]
        write_campaign(path, doc)
        if self.has_path:
            self._paths = self._path_session(nodes, server, client, doc, path)
        self._loop(server, client, prepared, result, progress, on_record)
        if self.cfg.sweep.adaptive is not None and self.hooks.undecided is not None \
                and self._source is None:
            self._adapt(server, client, prepared, result, progress, on_record, doc, path)

    def _connect(self, nodes: list[Node], doc: CampaignRecord) -> tuple[Node, Node]:
        """Connect server and client (and a router, for a campaign with a path) and take
        their leases (one runner per node directory)."""
        timeout = self.cfg.timeouts.command
        for role in ROLES:
            name, cfg = self.testbed.node(role)
            cfg = routed(cfg) if self.has_path else cfg
            nodes.append(self.hooks.connect(name, cfg, doc.campaign, timeout))
        router = self.testbed.router() if self.has_path else None
        if router is not None:
            nodes.append(self.hooks.connect(router[0], router[1], doc.campaign, timeout))
        for node in nodes:
            node.take_lease()
            node.claim_scratch()
        _record_trusted_keys(doc, nodes, self.hooks.trusted_before.get(self.testbed.name))
        return nodes[0], nodes[1]

    def _collect_facts(self, nodes: list[Node], doc: CampaignRecord, directory: Path) -> None:
        """Each node's host facts (raw sections below ``hosts/<node>/``), and the management
        node's."""
        doc.hosts = {n.name: n.collect_facts(directory / "hosts" / n.name) for n in nodes}
        doc.hosts["management"] = _management_facts()

    def _clear_leftovers(self, nodes: list[Node], doc: CampaignRecord) -> dict[str, NodeKnobs]:
        """Kill what a killed earlier runner left running (it may hold the port), then undo
        the path and knob changes it left behind; return each endpoint role's knob handler."""
        killed = {n.name: k for n in nodes
                  if (k := n.reap_leftovers()
                      + (reap_containers(n) if n.cfg.role != "router" else []))}
        if killed:
            doc.killed_leftovers = killed
        leftovers = path_journal_leftovers(nodes)
        endpoints = [n for n in nodes if n.cfg.role != "router"]
        knobs: dict[str, NodeKnobs] = {n.cfg.role: node_knobs(n, self.testbed)
                                       for n in endpoints}
        leftovers.update({n.name: leftovers.get(n.name, []) + knobs[n.cfg.role].restore(None, [])
                          for n in endpoints if knobs[n.cfg.role].journal.pending()
                          or knobs[n.cfg.role].sysctl.pending()})
        if leftovers:
            doc.restored_leftovers = leftovers
        return knobs

    def _path_session(self, nodes: list[Node], server: Node, client: Node,
                      doc: CampaignRecord, path: Path) -> PathSession:
        """The session's paths, built on the router (the third node) or the server."""
        host = nodes[2] if len(nodes) > 2 else server
        return PathSession(host, placement_of(self.testbed), server, client, self.port, doc,
                           lambda: write_campaign(path, doc))

    def _release(self, nodes: list[Node], doc: CampaignRecord) -> None:
        """Remove the active path; note the host keys trusted on first use; clean up and
        disconnect every node."""
        if self._paths is not None:
            failed = self._paths.close()
            self._paths = None
            if failed:
                doc.restored_leftovers = {**(doc.restored_leftovers or {}), "path": failed}
        _record_trusted_keys(doc, nodes, self.hooks.trusted_before.get(self.testbed.name))
        for node in nodes:
            node.cleanup(self.keep_files)
            node.close()

    def _adapt(self, server: Node, client: Node, prepared: Prepared, result: CampaignResult,
               progress: Progress | None, on_record: OnRecord | None, doc: CampaignRecord,
               path: Path) -> None:
        """Adaptive A/B: another paired round for each cell without a verdict, up to the cap."""
        undecided = self.hooks.undecided
        assert self.cfg.sweep.adaptive is not None and undecided is not None
        rounds = doc.adaptive_rounds = doc.adaptive_rounds or []
        rep = self.cfg.repetitions
        while rep < self.cfg.sweep.adaptive.max_repetitions:
            cells = undecided(result.directory)
            if not cells:
                break
            rep += 1
            extended = self.cfg.model_copy(update={"repetitions": rep})
            extra = [r for r in plan_runs(extended, self.seed)
                     if r.repetition == rep and r.cell in cells]
            done = completed_keys(result.directory, self.cfg, extra)
            self.runs = [r for r in extra if r.key not in done]
            rounds.append(AdaptiveRound(repetition=rep,
                                        cells=sorted("_".join(c) for c in cells)))
            write_campaign(path, doc)
            self._loop(server, client, prepared, result, progress, on_record)

    # -- several testbeds ----------------------------------------------------------------------
    def _execute_parallel(self, progress: Progress | None) -> CampaignResult:
        """Several testbeds: one worker process per testbed (:mod:`.workers`), each running
        its share of the runs as a one-testbed session (:meth:`_run_share`)."""
        directory = self.resume or new_campaign_dir(self.results_root, self.cfg.name)
        result = CampaignResult(directory)
        t0 = time.monotonic()
        doc = self._start_record(directory, several=True)
        write_campaign(directory / "campaign.json", doc, overwrite=self.resume is not None)
        pool = Workers(self.testbeds, self.runs, self.cfg.distribute, directory, self._run_share)
        return execute_parallel(pool, doc, result, self.runs, progress, t0)

    def _run_share(self, testbed: TestbedConfig, directory: Path, runs: Iterator[PlannedRun],
                   on_record: OnRecord) -> None:
        """In a worker process: ``testbed``'s share of the runs, its record in its own
        ``testbed-<name>.json``."""
        self.testbeds, self.testbed = [testbed], testbed
        self._execute_one(None, on_record, directory, f"testbed-{testbed.name}.json", runs)

    # -- the runs ------------------------------------------------------------------------------
    def _loop(self, server: Node, client: Node, prepared: Prepared, result: CampaignResult,
              progress: Progress | None, on_record: OnRecord | None) -> None:
        """Run the planned runs (or the worker's share) in order, storing every attempt."""
        runs: Iterator[PlannedRun] = self._source if self._source is not None else iter(self.runs)
        if progress is not None:
            runs = progress(runs, self.runs)
        for run in runs:
            record, abort = self._run_one(run, server, client, prepared, result.directory)
            result.records.append(record)
            if abort is not None:
                raise abort
            if on_record is not None:
                on_record(record)
            if self.cfg.on_error == "stop" and record.status in ("failed", "timeout"):
                raise CampaignStopped(f"{run.key} attempt {record.attempt} {record.status}: "
                                      f"{record.reason} (on_error: stop; --resume runs it again)")
        self._deferred.wait()  # every record stored: the caller may read them now

    def _run_one(self, run: PlannedRun, server: Node, client: Node, prepared: Prepared,
                 directory: Path) -> tuple[RunRecord, BaseException | None]:
        """One run as the next attempt of its repetition; its record is stored. Returns the
        record and what must stop the campaign after storing it (Ctrl-C, a lost node)."""
        cfg = self.cfg
        attempt = next_attempt(directory, run.server, run.client, cfg.testcase,
                               run.repetition, run.variant.id)
        plan = self._attempt_plan(run, attempt, prepared, directory.name)
        out = attempt_dir(directory, run.server, run.client, cfg.testcase, run.repetition,
                          attempt, run.variant.id)
        for orphan in unrecorded_attempts(out.parent):  # the runner died in them
            lost = not_run_record(replace(plan, attempt=orphan), server, client, "failed",
                                  "no record: the runner was killed during this attempt "
                                  "(found on resume)")
            lost.interrupted = True
            write_run(out.parent / f"attempt-{orphan}", lost)
        # the path first: a calibration that stops the campaign leaves no empty attempt
        vcfg = run.cfg or cfg
        pins = flow_pins(vcfg, self.port) if run.flow_set else None  # pairs: none
        # the bottleneck sits on the data's way (one way over a path: the config checked it)
        direction: Direction = "upload" if vcfg.data_directions() == {"upload"} \
            else "download"
        path_run = self._paths.activate(vcfg.path, pins=pins, direction=direction) \
            if self._paths else None
        out.mkdir(parents=True)
        load = HostLoad(self._load_hosts(server, client))
        record, attempt_run = self._attempt(run, plan, server, client, prepared, out)
        abort = attempt_run.abort if attempt_run is not None else None
        try:
            record.host_load, record.host_busy = load.finish()
        except KeyboardInterrupt as exc:  # the record is kept; the campaign stops after it
            record.warnings.append("host load: not read after the attempt (interrupted)")
            abort = abort or exc
        if self._paths is not None and path_run is not None:
            self._path_record(record, path_run, out)
        self._deferred.submit(lambda: self._store(attempt_run, record, directory, out))
        return record, abort

    def _load_hosts(self, server: Node, client: Node) -> list[tuple[str, Executor]]:
        """The nodes whose load an attempt records: server, client and the path's node
        (the router), by node name."""
        if self._paths is not None:
            return self._paths.load_hosts()
        return [(n.name, n.executor) for n in (server, client)]

    def _path_record(self, record: RunRecord, path_run: PathRun, out: Path) -> None:
        """The path's part of an attempt's record; a delay line that died during the attempt
        fails it (its packets were dropped: the result measured a broken path)."""
        assert self._paths is not None
        dead = self._paths.dead_lines()
        record.path = self._paths.finish(path_run, out)
        if dead and record.status == "ok":
            record.status = "failed"
        if dead:
            record.reason = (f"path: the {' and '.join(dead)} delay line died during the "
                             f"attempt" + (f"; {record.reason}" if record.reason else ""))

    def _store(self, attempt_run: Attempt | FlowsAttempt | None, record: RunRecord,
               directory: Path, out: Path) -> None:
        """Post-process an attempt that ran, store its record, hand it on (``on_stored``)."""
        if attempt_run is not None:
            attempt_run.postprocess()
        write_run(out, record)
        if self.hooks.on_stored is not None:
            self.hooks.on_stored(directory, out / "run.json")

    def _attempt(self, run: PlannedRun, plan: AttemptPlan, server: Node, client: Node,
                 prepared: Prepared, out: Path) -> tuple[RunRecord, Attempt | FlowsAttempt | None]:
        """Run one attempt (not post-processed: :meth:`_store`); a pair whose setup failed or
        that cannot run (no common protocol, a parameter its client cannot honour) gets its
        record without running."""
        if run.flow_set:
            return self._flows_attempt(run, plan, server, client, prepared, out)
        broken = [error for error in (prepared.of(side.key).setup_error for side in plan.sides)
                  if error is not None]
        if broken:
            return not_run_record(plan, server, client, "failed", "; ".join(broken)), None
        if run.unsupported is not None:
            return not_run_record(plan, server, client, "unsupported", run.unsupported), None
        attempt_run = Attempt(plan, server, client, out, prepared.server_monitors,
                              prepared.client_monitors, prepared.server_knobs,
                              prepared.client_knobs,
                              self._deferred.before_transfer)
        return attempt_run.run(postprocess=False), attempt_run

    def _flows_attempt(self, run: PlannedRun, plan: AttemptPlan, server: Node, client: Node,
                       prepared: Prepared, out: Path) -> tuple[RunRecord, FlowsAttempt | None]:
        """An attempt of several flows (:mod:`.flows`); one whose implementations failed to
        set up gets its record without running."""
        flows = plan_flows(run.cfg or self.cfg, plan, self.port,
                           lambda key, vcfg: self._side_plan(key, {}, run, vcfg, prepared))
        broken = sorted({error for f in flows if f.pair is not None for error in
                         (prepared.of(side.key).setup_error for side in f.pair.sides)
                         if error is not None})
        if broken:
            return not_run_record(plan, server, client, "failed", "; ".join(broken)), None
        attempt_run = FlowsAttempt(plan, flows, server, client, out, prepared.server_monitors,
                                   prepared.client_monitors, self._deferred.before_transfer)
        return attempt_run.run(postprocess=False), attempt_run

    def _server_port(self, server: str) -> int:
        """The port the server listens on: the campaign's, or an image's own (QIR: 443)."""
        image = self.meta(server).image
        return image.port if image is not None else self.port

    def _attempt_plan(self, run: PlannedRun, attempt: int, prepared: Prepared,
                      campaign_id: str) -> AttemptPlan:
        """Everything the attempt needs, from the run, the campaign and the preparation."""
        cfg, vcfg = self.cfg, run.cfg or self.cfg
        if run.flow_set:  # the attempt's sides are its first pair's (or kernel TCP)
            pair = first_pair(vcfg)
            run = replace(run, server=pair[0], client=pair[1])
        return AttemptPlan(
            campaign_id=campaign_id, testbed=self.testbed.name,
            testcase=cfg.testcase, repetition=run.repetition, attempt=attempt,
            server=self._side_plan(ImplKey("server", run.server), vcfg.server_params, run,
                                   vcfg, prepared),
            client=self._side_plan(ImplKey("client", run.client), vcfg.client_params, run,
                                   vcfg, prepared),
            alpn=run.alpn, port=self._server_port(run.server), file_name=prepared.file_name,
            file_size=cfg.file_size, file_digest=prepared.file_digest,
            hash_algorithm=cfg.verify_hash,
            client_timeout=vcfg.client_timeout(),
            server_ready_timeout=cfg.timeouts.server_ready,
            keylog=vcfg.keylog,  # key logs only when asked: nothing else reads them
            qlog=vcfg.qlog or "qlog" in cfg.monitors,
            monitors={"server": dict(prepared.server_monitors.status),
                      "client": dict(prepared.client_monitors.status)},
            std_params=vcfg.params, variant=run.variant.id, axes=run.variant.as_dict(),
            cell=run.cell, workload=vcfg.workload, duration_s=vcfg.workload.duration,
            upload_name=prepared.upload_name,
            upload_digest=prepared.upload_digest,
        )

    def _side_plan(self, key: ImplKey, params: dict[str, dict[str, Any]], run: PlannedRun,
                   vcfg: CampaignConfig, prepared: Prepared) -> SidePlan:
        """One side of the run's flow: the implementation as installed in its role, with the
        parameters (``params``: the role's, per implementation) and knobs of the variant."""
        installed = prepared.of(key)
        return SidePlan(key.role, self.meta(key.name), installed.version, installed.source_hash,
                        side_params(params, key.name, run.cell, ROLES.index(key.role)),
                        installed.image, vcfg.side_knobs(key.role))


def side_params(by_impl: dict[str, dict[str, Any]], name: str,
                cell: tuple[str, str] | None, index: int) -> dict[str, Any]:
    """Parameters of one side: those of the name as written in `pairs`, then the variant's."""
    written = cell[index] if cell is not None else name
    return {**by_impl.get(written, {}), **by_impl.get(name, {})} if written != name \
        else dict(by_impl.get(name, {}))


def _record_trusted_keys(doc: CampaignRecord, nodes: list[Node],
                         earlier: list[dict[str, str]] | None = None) -> None:
    """Note in campaign.json the SSH host keys accepted on first use (ssh.trust_on_first_use),
    also those accepted by the CLI's reachability probe just before (``earlier``)."""
    trusted = list(earlier or []) + [k for n in nodes for k in n.trusted_host_keys]
    if trusted:
        doc.ssh_host_keys_trusted_on_first_use = trusted


def _management_facts() -> dict[str, str]:
    local = LocalExecutor("management")
    try:
        res = local.run(["uname", "-rn"], timeout=10)
        hostname, kernel = res.stdout.split()[:2]
        return {"hostname": hostname, "kernel": kernel}
    except (ExecutorError, ValueError):
        return {}
