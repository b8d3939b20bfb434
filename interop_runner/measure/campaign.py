"""A campaign: prepare the nodes once, run every pair x repetition, store every attempt.

The campaign keeps its record (:class:`~interop_runner.storage.campaign_record.CampaignRecord`,
begun in :meth:`Campaign._start_record`) up to date in ``campaign.json`` (several testbeds:
each worker in its ``testbed-<name>.json``) and stores one ``run.json`` per attempt.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import Any, Iterator

from interop_runner import __version__
from interop_runner.config.campaign import CampaignConfig, TestbedConfig, variant_configs
from interop_runner.config.implementations import ImplementationMeta, load_registry, resolve
from interop_runner.errors import EngineError, ExecutorError, PreflightError, SetupError, \
    StoreError
from interop_runner.measure.attempt import Attempt, AttemptPlan, not_run_record
from interop_runner.measure.deferred import DeferredWork
from interop_runner.measure.monitor_session import NodeMonitors
from interop_runner.measure.hooks import CampaignHooks, Connect, OnRecord, Progress
from interop_runner.measure.plan import CampaignPlan, PlannedRun, build_plan, completed_keys, \
    plan_order, plan_runs
from interop_runner.measure.preflight import check_knobs_on_nodes
from interop_runner.measure.side import ROLES, ImplKey, SidePlan
from interop_runner.measure.variants import SourceArchive, VariantError, variant_source
from interop_runner.paths import PROJECT_ROOT as REPO_ROOT
from interop_runner.remote.executor import LocalExecutor
from interop_runner.storage.campaign_record import AdaptiveRound, CampaignRecord, FileInfo, \
    ImplementationEntry, PlanInfo, new_campaign_record, plain, read_campaign, write_campaign
from interop_runner.storage.layout import attempt_dir, iter_run_files, new_campaign_dir, \
    next_attempt, private_umask, unrecorded_attempts, utc_now
from interop_runner.storage.run_record import RunRecord, load_run, write_run
from interop_runner.testbed.knobs import NodeKnobs
from interop_runner.testbed.leftovers import node_knobs
from interop_runner.testbed.containers import reap_containers
from interop_runner.testbed.sources import SourceError, put_sources
from interop_runner.testbed.images import ensure_image
from interop_runner.testbed.files import CACHE_CHECK, HASH_COMMANDS, SPACE_MARGIN, ServedFile, \
    prepare_file, space_needed
from interop_runner.testbed.node import Node

@dataclass(frozen=True)
class Installed:
    """What installing one implementation in one role on its node gave."""

    source_hash: str | None = None  # of the tree that was installed
    version: str | None = None  # None: not installed
    image: str | None = None  # the image it runs from on the node (image implementations)
    setup_error: str | None = None  # why its setup failed


@dataclass
class Prepared:
    """What preparing the nodes produced: each implementation as installed, the file to
    download and its hash, the nodes' monitors and knob handlers."""

    installed: dict[ImplKey, Installed]
    file_name: str
    file_digest: str  # of cfg.verify_hash
    server_monitors: NodeMonitors
    client_monitors: NodeMonitors
    server_knobs: NodeKnobs | None = None
    client_knobs: NodeKnobs | None = None

    def of(self, key: ImplKey) -> Installed:
        """How the implementation ``key`` was installed (nothing known: not installed)."""
        return self.installed.get(key, Installed())


@dataclass
class CampaignResult:
    """What a finished (or interrupted) campaign produced."""

    directory: Path
    records: list[RunRecord] = field(default_factory=list)
    wall_s: float = 0.0
    interrupted: bool = False


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


class CampaignStopped(ExecutorError):
    """``on_error: stop``: an attempt failed or timed out, so the campaign stopped after
    recording it (``run.py run --resume`` runs it again and continues)."""


class _Interrupt:
    """Turn SIGTERM into KeyboardInterrupt so cleanup runs the same way as for Ctrl-C."""

    def __enter__(self) -> "_Interrupt":
        self._old = signal.getsignal(signal.SIGTERM)

        def handler(signum: int, frame: FrameType | None) -> None:
            raise KeyboardInterrupt(f"signal {signum}")

        signal.signal(signal.SIGTERM, handler)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGTERM, self._old)


def ended_status(exc: BaseException, current: str) -> str:
    """The campaign status after ``exc`` ended a session (``current`` when it says nothing)."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, CampaignStopped):
        return f"stopped: {exc}"
    if isinstance(exc, Exception):
        return f"aborted: {exc}"
    return current


def combined_status(statuses: list[str | None], names: list[str], interrupted: bool) -> str:
    """The status of a campaign over several testbeds from each testbed's own status."""
    if interrupted or "interrupted" in statuses:
        return "interrupted"
    if all(s == "finished" for s in statuses):
        return "finished"
    return "; ".join(f"{n}: {s}" for n, s in zip(names, statuses))


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
        self.plan = plan or build_plan(cfg, [t.name for t in self.testbeds])
        self.hooks = hooks
        self.runs = self.plan.todo  # what is left to run (an adaptive round: its runs)
        self._source: Iterator[PlannedRun] | None = None
        self.directory: Path | None = None  # the campaign's results directory, once known
        # a finished attempt's management work (a new one per session: _execute_one)
        self._deferred = DeferredWork(exclusive=self.testbed.local)

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

    def _metas(self, role: str) -> list[ImplementationMeta]:
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
        with _Interrupt():
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
        check_knobs_on_nodes(self.cfg, [(n.name, n.cfg.role, n.facts) for n in nodes])
        knobs = self._clear_leftovers(nodes, doc)
        self._check_knobs(knobs)
        prepared = self._prepare(server, client, doc)
        prepared.server_knobs, prepared.client_knobs = knobs["server"], knobs["client"]
        write_campaign(path, doc)
        self._loop(server, client, prepared, result, progress, on_record)
        if self.cfg.sweep.adaptive is not None and self.hooks.undecided is not None \
                and self._source is None:
            self._adapt(server, client, prepared, result, progress, on_record, doc, path)

    def _connect(self, nodes: list[Node], doc: CampaignRecord) -> tuple[Node, Node]:
        """Connect server and client and take their leases (one runner per node directory)."""
        timeout = self.cfg.timeouts.command
        for role in ("server", "client"):
            name, cfg = self.testbed.node(role)
            nodes.append(self.hooks.connect(name, cfg, doc.campaign, timeout))
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
        the knob changes it left behind; return each role's knob handler."""
        killed = {n.name: k for n in nodes if (k := n.reap_leftovers() + reap_containers(n))}
        if killed:
            doc.killed_leftovers = killed
        knobs: dict[str, NodeKnobs] = {n.cfg.role: node_knobs(n, self.testbed) for n in nodes}
        leftovers = {n.name: knobs[n.cfg.role].restore(None, []) for n in nodes
                     if knobs[n.cfg.role].journal.pending()
                     or knobs[n.cfg.role].sysctl.pending()}
        if leftovers:
            doc.restored_leftovers = leftovers
        return knobs

    def _release(self, nodes: list[Node], doc: CampaignRecord) -> None:
        """Note the host keys trusted on first use; clean up and disconnect every node."""
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
        """Several testbeds: one worker process per testbed, one run at a time on each.

        ``spread``: the workers take the next run from one shared queue; ``each``: every
        worker runs the runs planned for its testbed. Each worker writes its records and its
        own ``testbed-<name>.json`` (hosts, implementations, monitors); campaign.json names
        them. Ctrl-C reaches every worker (same process group); a SIGTERM to this process
        is passed on to them.
        """
        directory = self.resume or new_campaign_dir(self.results_root, self.cfg.name)
        result = CampaignResult(directory)
        t0 = time.monotonic()
        doc = self._start_record(directory, several=True)
        write_campaign(directory / "campaign.json", doc, overwrite=self.resume is not None)
        pool = _Workers(self, directory)
        try:
            with _Interrupt():
                pool.start()
                ticks: Iterator[Any] = pool.records()
                if progress is not None:
                    ticks = progress(ticks, self.runs)
                for _ in ticks:
                    pass
        except KeyboardInterrupt:
            result.interrupted = True
            pool.stop()
            raise
        finally:
            codes = pool.join()
            self._finish_parallel(doc, codes, result, t0)
        if any(code not in (0, None) for code in codes.values()) and not result.interrupted:
            raise StoreError(f"{directory}: a testbed worker failed: "
                             + ", ".join(f"{n} exit {c}" for n, c in codes.items() if c))
        return result

    def _finish_parallel(self, doc: CampaignRecord, codes: dict[str, int | None],
                         result: CampaignResult, t0: float) -> None:
        """campaign.json after the workers: their exit codes and the combined status; the
        records they stored."""
        directory = result.directory
        names = [t.name for t in self.testbeds]
        doc.worker_exit_codes = codes
        statuses: list[str | None] = []
        for name in names:
            try:
                statuses.append(read_campaign(directory / f"testbed-{name}.json").get("status"))
            except (OSError, ValueError, StoreError):
                statuses.append("not started")
        doc.status = combined_status(statuses, names, result.interrupted)
        doc.finished_at = utc_now()
        result.wall_s = doc.wall_s = time.monotonic() - t0
        write_campaign(directory / "campaign.json", doc)
        records = [load_run(p) for p in iter_run_files(directory)]
        result.records = [r for r in records if r.campaign == directory.name]

    def _worker(self, testbed: TestbedConfig, directory: Path, own: Any, shared: Any,
                done: Any) -> None:
        """Body of a worker process: this testbed's share of the runs."""
        signal.signal(signal.SIGINT, signal.default_int_handler)
        self.testbeds, self.testbed = [testbed], testbed
        by_key = {r.key: r for r in self.runs}

        def source() -> Iterator[PlannedRun]:
            for q in (own, shared):
                while True:
                    try:
                        key = q.get(timeout=0.2)
                    except queue.Empty:
                        break
                    yield by_key[key]

        code = 0
        try:
            self._execute_one(None, lambda rec: done.put("record"), directory,
                              f"testbed-{testbed.name}.json", source())
        except KeyboardInterrupt:
            code = 130
        except Exception as exc:  # reported in testbed-<name>.json; the exit code tells main
            print(f"error: testbed {testbed.name}: {exc}", file=sys.stderr)
            code = 1
        finally:
            done.put("exit")
            done.close()
            done.join_thread()  # flush before the hard exit below
        os._exit(code)

    # -- preparation ---------------------------------------------------------------------------
    def _check_knobs(self, knobs: dict[str, NodeKnobs]) -> None:
        """Refuse knob settings the testbed cannot have, before any run."""
        configs = [vcfg for _, vcfg in variant_configs(self.cfg)]
        if self.testbed.local:
            for vcfg in configs:
                s, c = vcfg.side_knobs("server"), vcfg.side_knobs("client")
                for name in ("rmem", "wmem"):
                    if getattr(s, name) != getattr(c, name) and None not in \
                            (getattr(s, name), getattr(c, name)):
                        raise PreflightError(
                            f"{name}: the local testbed's namespaces share the host's "
                            f"net.core sysctls, so server and client cannot differ "
                            f"({getattr(s, name)} vs {getattr(c, name)})")
        for role, nk in knobs.items():
            if any(vcfg.side_knobs(role).delay or vcfg.side_knobs(role).reorder
                   for vcfg in configs):
                nk.check_netem()

    def _prepare(self, server: Node, client: Node, doc: CampaignRecord) -> Prepared:
        """Preflight both nodes, install every implementation, generate the file, exchange
        the certificate, check the monitors."""
        cfg = self.cfg
        tools = (HASH_COMMANDS[cfg.verify_hash], HASH_COMMANDS[CACHE_CHECK])
        server.preflight(space_needed(server, cfg.file_size, cfg.file_cache), server.cfg.tmpdir,
                         tools)
        client.preflight(cfg.file_size + SPACE_MARGIN, client.cfg.tmpdir, tools)
        installed: dict[ImplKey, Installed] = {}
        archives: dict[str, SourceArchive | None] = {}
        entries = doc.implementations = doc.implementations or {}
        packdir = Path(tempfile.mkdtemp(prefix="qir-variants-"))
        try:
            for node, role in zip((server, client), ROLES):
                for impl in self._metas(role):
                    key = ImplKey(role, impl.name)
                    entries[key.label], installed[key] = self._install(node, impl, key,
                                                                       archives, packdir)
        finally:
            shutil.rmtree(packdir, ignore_errors=True)
        served = self._serve_file(server, doc)
        client.install_ca(server.make_certificate(server.cfg.ip))
        statuses = doc.monitors = doc.monitors or {}
        monitors = []
        for node in (server, client):
            mon = NodeMonitors(node.executor, node.name, node.cfg.interface, list(cfg.monitors),
                               node.cfg.role, self.port, cfg.monitor_options)
            statuses[node.cfg.role] = mon.check()
            if mon.perf_event:
                statuses[node.cfg.role]["perf.event"] = mon.perf_event
            monitors.append(mon)
        return Prepared(installed, served.name, served.digest, monitors[0], monitors[1])

    def _serve_file(self, server: Node, doc: CampaignRecord) -> ServedFile:
        """The file to download, from the server node's cache when its content still matches
        (a note in the record when a cached file had to be generated anew)."""
        cfg = self.cfg
        served = prepare_file(server, f"goodput-{cfg.file_size}.bin", cfg.file_size,
                              cfg.verify_hash, keep=cfg.file_cache,
                              timeout=max(120.0, cfg.file_size / 50e6))
        doc.file = FileInfo(name=served.name, size=served.size,
                            hash_algorithm=served.algorithm, digest=served.digest,
                            reused=served.reused, note=served.note)
        if served.note:
            print(f"warning: {server.name}: {served.note}", file=sys.stderr)
        return served

    def _install(self, node: Node, impl: ImplementationMeta, key: ImplKey,
                 archives: dict[str, SourceArchive | None], packdir: Path
                 ) -> tuple[ImplementationEntry, Installed]:
        """Install one implementation (or variant) on one node: its campaign.json entry and
        what the attempts use. The source tree is hashed here, once: the hash of what was
        built. A failure fails only the pairs with this implementation."""
        entry = ImplementationEntry(declared_version=impl.version,
                                    source_hash=impl.source_hash(), node=node.name)
        if impl.variant is not None:
            entry.variant = plain(impl.variant.model_dump(exclude_defaults=True))
        image: str | None = None
        try:
            if impl.name not in archives:  # once per campaign, for both nodes
                archives[impl.name] = variant_source(impl, packdir)
            archive = archives[impl.name]
            if archive is not None:
                entry.variant_source = plain(archive.identity)
            if impl.is_image:
                image, entry.version = self._install_image(node, impl)
            else:
                entry.version = node.install(
                    impl, self.cfg.timeouts.setup, archive.path if archive else None,
                    archive.label if archive else None, extra_env=put_sources(node, impl),
                    strip_top=bool(archive and archive.is_release))
        except (SetupError, VariantError, EngineError, SourceError) as exc:
            tail = exc.tail if isinstance(exc, SetupError) else ""
            entry.version, entry.setup_error, entry.setup_log_tail = None, str(exc), tail
            if self.hooks.on_setup_error is not None:
                self.hooks.on_setup_error(str(exc), tail)
        return entry, Installed(entry.source_hash, entry.version, image, entry.setup_error)

    def _install_image(self, node: Node, impl: ImplementationMeta) -> tuple[str, str]:
        """Build, load or pull an image implementation on the node (after the native builds
        it takes files from); return the image it runs from and its recorded version."""
        assert impl.image is not None
        for name in impl.image.native:
            native = load_registry()[name]
            node.install(native, self.cfg.timeouts.setup, extra_env=put_sources(node, native))
        image = ensure_image(node, node.engine(), impl)
        return image.ref, image.version

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
        out.mkdir(parents=True)
        record, attempt_run = self._attempt(run, plan, server, client, prepared, out)
        self._deferred.submit(lambda: self._store(attempt_run, record, directory, out))
        return record, attempt_run.abort if attempt_run is not None else None

    def _store(self, attempt_run: Attempt | None, record: RunRecord, directory: Path,
               out: Path) -> None:
        """Post-process an attempt that ran, store its record, hand it on (``on_stored``)."""
        if attempt_run is not None:
            attempt_run.postprocess()
        write_run(out, record)
        if self.hooks.on_stored is not None:
            self.hooks.on_stored(directory, out / "run.json")

    def _attempt(self, run: PlannedRun, plan: AttemptPlan, server: Node, client: Node,
                 prepared: Prepared, out: Path) -> tuple[RunRecord, Attempt | None]:
        """Run one attempt (not post-processed: :meth:`_store`); a pair whose setup failed or
        without a common protocol gets its record without running."""
        broken = [error for error in (prepared.of(side.key).setup_error for side in plan.sides)
                  if error is not None]
        if broken:
            return not_run_record(plan, server, client, "failed", "; ".join(broken)), None
        if run.alpn is None:
            return not_run_record(
                plan, server, client, "unsupported",
                f"no common protocol: server speaks {', '.join(plan.server.meta.alpns)}, "
                f"client speaks {', '.join(plan.client.meta.alpns)}"), None
        attempt_run = Attempt(plan, server, client, out, prepared.server_monitors,
                              prepared.client_monitors, prepared.server_knobs,
                              prepared.client_knobs,
                              self._deferred.before_transfer)
        return attempt_run.run(postprocess=False), attempt_run

    def _server_port(self, server: str) -> int:
        """The port the server listens on: the campaign's, or an image's own (QIR: 443)."""
        image = self.meta(server).image
        return image.port if image is not None else self.port

    def _attempt_plan(self, run: PlannedRun, attempt: int, prepared: Prepared,
                      campaign_id: str) -> AttemptPlan:
        """Everything the attempt needs, from the run, the campaign and the preparation."""
        cfg, vcfg = self.cfg, run.cfg or self.cfg
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
            client_timeout=cfg.client_timeout(),
            server_ready_timeout=cfg.timeouts.server_ready,
            keylog=vcfg.keylog,  # key logs only when asked: nothing else reads them
            qlog=vcfg.qlog or "qlog" in cfg.monitors,
            monitors={"server": dict(prepared.server_monitors.status),
                      "client": dict(prepared.client_monitors.status)},
            std_params=vcfg.params, variant=run.variant.id, axes=run.variant.as_dict(),
            cell=run.cell,
        )

    def _side_plan(self, key: ImplKey, params: dict[str, dict[str, Any]], run: PlannedRun,
                   vcfg: CampaignConfig, prepared: Prepared) -> SidePlan:
        """One side of the run's flow: the implementation as installed in its role, with the
        parameters (``params``: the role's, per implementation) and knobs of the variant."""
        installed = prepared.of(key)
        return SidePlan(key.role, self.meta(key.name), installed.version, installed.source_hash,
                        side_params(params, key.name, run.cell, ROLES.index(key.role)),
                        installed.image, vcfg.side_knobs(key.role))


class _Workers:
    """The worker processes of a campaign over several testbeds and their queues."""

    def __init__(self, campaign: Campaign, directory: Path) -> None:
        ctx = multiprocessing.get_context("fork")
        names = [t.name for t in campaign.testbeds]
        shared: Any = ctx.Queue()
        own: dict[str, Any] = {n: ctx.Queue() for n in names}
        for run in campaign.runs:
            tb = run.variant.as_dict().get("testbed") \
                if campaign.cfg.distribute == "each" else None
            (own[tb] if tb else shared).put(run.key)
        self.done: Any = ctx.Queue()
        self.names = names
        self.processes = [ctx.Process(target=campaign._worker, name=f"testbed-{t.name}",
                                      args=(t, directory, own[t.name], shared, self.done))
                          for t in campaign.testbeds]

    def start(self) -> None:
        for w in self.processes:
            w.start()

    def records(self) -> Iterator[None]:
        """One item per stored record, until every worker has exited."""
        exits = 0
        while exits < len(self.processes):
            try:
                msg = self.done.get(timeout=0.5)
            except queue.Empty:
                if not any(w.is_alive() for w in self.processes):
                    return
                continue
            if msg == "exit":
                exits += 1
            else:
                yield None

    def stop(self) -> None:
        """Pass an interrupt on (a Ctrl-C from a terminal reached them already)."""
        for w in self.processes:
            if w.is_alive() and w.pid is not None:
                os.kill(w.pid, signal.SIGTERM)
        for w in self.processes:
            w.join(timeout=120)

    def join(self) -> dict[str, int | None]:
        """Wait for every worker; its exit code per testbed (None: still running)."""
        for w in self.processes:
            w.join(timeout=600)
        return {n: w.exitcode for n, w in zip(self.names, self.processes)}


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
