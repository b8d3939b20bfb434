"""A campaign: prepare the nodes once, run every pair x repetition, store every attempt."""

from __future__ import annotations

import json
import random
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Callable, Iterator

from . import __version__
from .config import CampaignConfig, TestbedConfig, variant_configs
from .executor import ExecutorError, LocalExecutor
from .implementations import ImplementationMeta, common_alpn, load_registry
from .knobs import Journal, NodeKnobs
from .monitors.session import NodeMonitors
from .nodes import Node, PreflightError, SetupError
from .orchestrator import Attempt, AttemptPlan, not_run_record
from .store import (RunRecord, StoreError, attempt_dir, new_campaign_dir, next_attempt,
                    repetition_dir, stored_attempts, utc_now, write_json_atomic, write_run)
from .sweep import Variant, order_runs

REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass
class PlannedRun:
    """One entry of the campaign plan."""

    server: str
    client: str
    repetition: int
    alpn: str | None
    variant: Variant = Variant("", ())
    cfg: CampaignConfig | None = None  # the variant's config (None: the campaign's)

    @property
    def key(self) -> str:
        """Identifies the run within its campaign (pair, variant, repetition)."""
        return f"{self.server}_{self.client}/{self.variant.id}/{self.repetition}"


@dataclass
class Prepared:
    """What preparing the nodes produced: versions, the file to download and its hash."""

    versions: dict[str, str | None]
    setup_errors: dict[str, str]  # "<role>:<implementation>" -> why its setup failed
    file_name: str
    file_sha256: str
    server_monitors: NodeMonitors
    client_monitors: NodeMonitors
    server_knobs: NodeKnobs | None = None
    client_knobs: NodeKnobs | None = None


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


def draw_seed() -> int:
    """A fresh seed for the run order (recorded in campaign.json)."""
    return random.SystemRandom().randrange(2**31)


def plan_runs(cfg: CampaignConfig, seed: int | None = None) -> list[PlannedRun]:
    """The ordered runs: variants x pairs x repetitions.

    Without axes and with order ``sequential`` this is pair by pair, repetitions 1..N. With
    order ``shuffled`` (the default) every repetition round visits all (variant, pair)
    combinations in an order drawn from ``seed`` (``cfg.sweep.seed``, else the given one).
    """
    registry = load_registry()
    order = cfg.sweep.order if cfg.sweep.axes else "sequential"
    seed = cfg.sweep.seed if cfg.sweep.seed is not None else (seed or 0)
    configs = variant_configs(cfg)
    units = [(variant, vcfg, pair) for pair in cfg.pair_list() for variant, vcfg in configs]
    runs = []
    for rep, (variant, vcfg, pair) in order_runs(units, cfg.repetitions, order, seed):
        alpn = common_alpn(registry[pair.server], registry[pair.client])
        runs.append(PlannedRun(pair.server, pair.client, rep, alpn, variant, vcfg))
    return runs


def completed_keys(directory: Path, cfg: CampaignConfig, runs: list[PlannedRun]) -> set[str]:
    """The planned runs that already have a stored record (an interrupted one does not count)."""
    done = set()
    for run in runs:
        rep = repetition_dir(directory, run.server, run.client, cfg.testcase, run.repetition,
                             run.variant.id)
        if any(not data.get("interrupted") and data.get("reason") !=
               "interrupted (Ctrl-C or SIGTERM)" for _, data in stored_attempts(rep)):
            done.add(run.key)
    return done


def estimate_seconds(cfg: CampaignConfig, runs: list[PlannedRun],
                     assumed_mbps: float = 1000.0) -> float:
    """Rough duration estimate: transfer at ``assumed_mbps`` plus 1 s overhead per run."""
    runnable = sum(1 for r in runs if r.alpn is not None)
    return runnable * (cfg.file_size * 8 / (assumed_mbps * 1e6) + 1.0)


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


class Campaign:
    """Runs a validated campaign on a testbed."""

    def __init__(self, cfg: CampaignConfig, testbed: TestbedConfig, results_root: Path,
                 keep_files: bool | None = None, resume: Path | None = None) -> None:
        self.cfg, self.testbed = cfg, testbed
        self.results_root = results_root
        self.keep_files = cfg.keep_files if keep_files is None else keep_files
        self.registry = load_registry()
        self.resume = resume
        self._previous: dict[str, Any] | None = None
        seed = cfg.sweep.seed if cfg.sweep.seed is not None else draw_seed()
        if resume is not None:
            self._previous = _check_resume(resume, cfg)
            seed = self._previous.get("plan", {}).get("seed", seed)
        self.seed = seed
        self.runs = plan_runs(cfg, seed)
        done = completed_keys(resume, cfg, self.runs) if resume is not None else set()
        self.skipped = len(done)
        self.runs = [r for r in self.runs if r.key not in done]
        # called with (message, log tail) when an implementation's setup fails
        self.on_setup_error: Callable[[str, str], None] | None = None

    def _metas(self, role: str) -> list[ImplementationMeta]:
        names = {getattr(p, role) for p in self.cfg.pair_list()}
        return [self.registry[n] for n in sorted(names)]

    def execute(self, progress: Callable[[Iterator[PlannedRun], int], Iterator[PlannedRun]]
                | None = None, on_record: Callable[[RunRecord], None] | None = None,
                ) -> CampaignResult:
        """Prepare nodes, run all planned attempts, clean up; return the records."""
        directory = self.resume or new_campaign_dir(self.results_root, self.cfg.name)
        result = CampaignResult(directory)
        campaign_id = directory.name
        t0 = time.monotonic()
        meta: dict[str, Any] = {
            "schema_version": 1, "campaign": campaign_id, "config": self.cfg.model_dump(),
            "testbed": self.testbed.model_dump(), "runner": runner_version(),
            "started_at": utc_now(), "finished_at": None, "status": "running",
            "planned_runs": len(self.runs) + self.skipped, "hosts": {}, "implementations": {},
            "monitors": {},
            "plan": {"order": self.cfg.sweep.order if self.cfg.sweep.axes else "sequential",
                     "seed": self.seed, "variants": sorted({r.variant.id for r in self.runs})},
        }
        if self._previous is not None:
            # keep what the earlier sessions recorded; note this one
            meta["started_at"] = self._previous.get("started_at", meta["started_at"])
            meta["sessions"] = self._previous.get("sessions", []) + [
                {"status": self._previous.get("status"),
                 "finished_at": self._previous.get("finished_at")}]
            meta["resumed_at"] = utc_now()
            meta["skipped_runs"] = self.skipped
        write_json_atomic(directory / "campaign.json", meta, overwrite=self.resume is not None)
        nodes: list[Node] = []
        with _Interrupt():
            try:
                sname, scfg = self.testbed.node("server")
                cname, ccfg = self.testbed.node("client")
                timeout = self.cfg.timeouts.command
                server = Node.connect(sname, scfg, campaign_id, timeout)
                nodes.append(server)
                client = Node.connect(cname, ccfg, campaign_id, timeout)
                nodes.append(client)
                meta["hosts"] = {n.name: n.collect_facts(directory / "hosts" / n.name)
                                 for n in nodes}
                meta["hosts"]["management"] = _management_facts()
                knobs: dict[str, NodeKnobs] = {n.cfg.role: node_knobs(n, self.testbed)
                                               for n in nodes}
                leftovers = {n.name: knobs[n.cfg.role].restore(None, []) for n in nodes
                             if knobs[n.cfg.role].journal.pending()
                             or knobs[n.cfg.role].sysctl.pending()}
                if leftovers:  # a killed earlier run left changes behind: undone now
                    meta["restored_leftovers"] = leftovers
                self._check_knobs(knobs)
                prepared = self._prepare(server, client, meta)
                prepared.server_knobs, prepared.client_knobs = knobs["server"], knobs["client"]
                write_json_atomic(directory / "campaign.json", meta, overwrite=True)
                self._loop(server, client, prepared, result, progress, on_record)
                meta["status"] = "finished"
            except KeyboardInterrupt:
                meta["status"] = "interrupted"
                result.interrupted = True
                raise
            except Exception as exc:
                meta["status"] = f"aborted: {exc}"
                raise
            finally:
                for node in nodes:
                    node.cleanup(self.keep_files)
                    node.close()
                meta["finished_at"] = utc_now()
                result.wall_s = time.monotonic() - t0
                meta["wall_s"] = result.wall_s
                write_json_atomic(directory / "campaign.json", meta, overwrite=True)
        return result

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

    def _prepare(self, server: Node, client: Node, meta: dict[str, Any]) -> Prepared:
        cfg = self.cfg
        server.preflight(cfg.file_size + 16 * 2**20, server.cfg.tmpdir)
        client.preflight(cfg.file_size + 16 * 2**20, client.cfg.tmpdir)
        versions: dict[str, str | None] = {}
        errors: dict[str, str] = {}
        for node, role in ((server, "server"), (client, "client")):
            for impl in self._metas(role):
                key = f"{role}:{impl.name}"
                entry: dict[str, Any] = {"declared_version": impl.version,
                                         "source_hash": impl.source_hash(), "node": node.name}
                try:
                    entry["version"] = versions[key] = node.install(impl, cfg.timeouts.setup)
                except SetupError as exc:
                    # Only the pairs with this implementation fail; the others still run.
                    errors[key] = str(exc)
                    entry.update(version=None, setup_error=str(exc), setup_log_tail=exc.tail)
                    if self.on_setup_error is not None:
                        self.on_setup_error(str(exc), exc.tail)
                meta["implementations"][key] = entry
        gen_timeout = max(120.0, cfg.file_size / 50e6)
        file_name = f"goodput-{cfg.file_size}.bin"
        sha256 = server.generate_file(file_name, cfg.file_size, gen_timeout)
        meta["file"] = {"name": file_name, "size": cfg.file_size, "sha256": sha256}
        client.install_ca(server.make_certificate(server.cfg.ip))
        monitors = []
        for node in (server, client):
            mon = NodeMonitors(node.executor, node.name, node.cfg.interface, list(cfg.monitors),
                               node.cfg.role, cfg.port, cfg.monitor_options)
            meta["monitors"][node.cfg.role] = mon.check()
            if mon.perf_event:
                meta["monitors"][node.cfg.role]["perf.event"] = mon.perf_event
            monitors.append(mon)
        return Prepared(versions, errors, file_name, sha256, monitors[0], monitors[1])

    def _loop(self, server: Node, client: Node, prepared: Prepared, result: CampaignResult,
              progress: Callable[[Iterator[PlannedRun], int], Iterator[PlannedRun]] | None,
              on_record: Callable[[RunRecord], None] | None) -> None:
        cfg = self.cfg
        monitors = {"server": dict(prepared.server_monitors.status),
                    "client": dict(prepared.client_monitors.status)}
        runs: Iterator[PlannedRun] = iter(self.runs)
        if progress is not None:
            runs = progress(runs, len(self.runs))
        for run in runs:
            smeta, cmeta = self.registry[run.server], self.registry[run.client]
            vcfg = run.cfg or cfg
            attempt = next_attempt(result.directory, run.server, run.client, cfg.testcase,
                                   run.repetition, run.variant.id)
            plan = AttemptPlan(
                campaign_id=result.directory.name, testbed=self.testbed.name,
                testcase=cfg.testcase, repetition=run.repetition, attempt=attempt,
                server_meta=smeta, client_meta=cmeta,
                server_version=prepared.versions.get(f"server:{run.server}"),
                client_version=prepared.versions.get(f"client:{run.client}"),
                server_params=dict(vcfg.server_params.get(run.server, {})),
                client_params=dict(vcfg.client_params.get(run.client, {})),
                alpn=run.alpn, port=cfg.port, file_name=prepared.file_name,
                file_size=cfg.file_size, file_sha256=prepared.file_sha256,
                client_timeout=cfg.client_timeout(),
                server_ready_timeout=cfg.timeouts.server_ready,
                keylog=vcfg.keylog or "tcpdump" in cfg.monitors,
                qlog=vcfg.qlog or "qlog" in cfg.monitors, monitors=monitors,
                std_params=vcfg.params, variant=run.variant.id, axes=run.variant.as_dict(),
                server_knobs=vcfg.side_knobs("server"), client_knobs=vcfg.side_knobs("client"),
            )
            out = attempt_dir(result.directory, run.server, run.client, cfg.testcase,
                              run.repetition, attempt, run.variant.id)
            out.mkdir(parents=True)
            broken = [prepared.setup_errors[k] for k in (f"server:{run.server}",
                                                         f"client:{run.client}")
                      if k in prepared.setup_errors]
            if broken:
                record = not_run_record(plan, server, client, "failed", "; ".join(broken))
                abort = None
            elif run.alpn is None:
                record = not_run_record(
                    plan, server, client, "unsupported",
                    f"no common protocol: server speaks {', '.join(smeta.alpns)}, "
                    f"client speaks {', '.join(cmeta.alpns)}")
                abort = None
            else:
                attempt_run = Attempt(plan, server, client, out, prepared.server_monitors,
                                      prepared.client_monitors, prepared.server_knobs,
                                      prepared.client_knobs)
                record = attempt_run.run()
                abort = attempt_run.abort
            write_run(out, record)
            result.records.append(record)
            if abort is not None:
                raise abort
            if on_record is not None:
                on_record(record)


HOST_JOURNAL = "/var/tmp/qir/host-restore.sh"


def node_knobs(node: Node, testbed: TestbedConfig) -> NodeKnobs:
    """The knob handler of a node; on the local testbed sysctls go to the management host."""
    journal = Journal(node.executor, f"{node.cfg.workdir}/restore.sh")
    sysctl = Journal(LocalExecutor("management"), HOST_JOURNAL) if testbed.local else None
    return NodeKnobs(node.name, node.executor, node.cfg.interface, journal, sysctl,
                     shared_sysctls=testbed.local and node.cfg.role == "client")


def restore_testbed(testbed: TestbedConfig, timeout: float = 60.0) -> dict[str, list[str]]:
    """Undo what killed runs left on the nodes (their journals); node -> commands that failed.

    Returns only the nodes that had something to undo.
    """
    out: dict[str, list[str]] = {}
    for role in ("server", "client"):
        name, cfg = testbed.node(role)
        node = Node.connect(name, cfg, "restore", timeout)
        try:
            nk = node_knobs(node, testbed)
            if nk.journal.pending() or nk.sysctl.pending():
                out[name] = nk.restore(None, [])
        finally:
            node.close()
    return out


def _check_resume(directory: Path, cfg: CampaignConfig) -> dict[str, Any]:
    """campaign.json of the campaign to resume; the config must be the same as then."""
    path = directory / "campaign.json"
    try:
        previous: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise StoreError(f"{path}: cannot resume: {exc}") from None
    before = json.loads(json.dumps(previous.get("config", {}), default=str))
    now = json.loads(json.dumps(cfg.model_dump(), default=str))
    changed = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
    if changed:
        raise StoreError(f"{directory}: cannot resume: the config differs from the stored one "
                         f"in {', '.join(changed)}")
    return previous


def _management_facts() -> dict[str, str]:
    local = LocalExecutor("management")
    try:
        res = local.run(["uname", "-rn"], timeout=10)
        hostname, kernel = res.stdout.split()[:2]
        return {"hostname": hostname, "kernel": kernel}
    except (ExecutorError, ValueError):
        return {}
