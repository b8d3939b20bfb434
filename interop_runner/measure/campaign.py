"""A campaign: prepare the nodes once, run every pair x repetition, store every attempt."""

from __future__ import annotations

import json
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
from typing import Any, Callable, Iterator

from interop_runner import __version__
from interop_runner.config.campaign import CampaignConfig, TestbedConfig, variant_configs
from interop_runner.errors import ExecutorError
from interop_runner.remote.executor import LocalExecutor
from interop_runner.config.implementations import ImplementationMeta, load_registry, resolve
from interop_runner.testbed.knobs import NodeKnobs
from interop_runner.measure.monitor_session import NodeMonitors
from interop_runner.errors import PreflightError, SetupError
from interop_runner.testbed.node import Node
from interop_runner.measure.attempt import Attempt, AttemptPlan, not_run_record
from interop_runner.testbed.leftovers import node_knobs
from interop_runner.measure.plan import PlannedRun, check_resume, completed_keys, draw_seed, plan_order, plan_runs
from interop_runner.errors import StoreError
from interop_runner.storage.store import RunRecord, attempt_dir, iter_run_files, new_campaign_dir, next_attempt, private_umask, read_run, utc_now, write_json_atomic, write_run
from interop_runner.measure.variants import SourceArchive, VariantError, pack_source

from interop_runner.paths import PROJECT_ROOT as REPO_ROOT


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


class Campaign:
    """Runs a validated campaign on a testbed."""

    def __init__(self, cfg: CampaignConfig, testbed: TestbedConfig | list[TestbedConfig],
                 results_root: Path, keep_files: bool | None = None,
                 resume: Path | None = None) -> None:
        self.testbeds = list(testbed) if isinstance(testbed, list) else [testbed]
        self.cfg, self.testbed = cfg, self.testbeds[0]
        self.results_root = results_root
        self.keep_files = cfg.keep_files if keep_files is None else keep_files
        self.registry = load_registry()
        self.resume = resume
        self._previous: dict[str, Any] | None = None
        seed = cfg.sweep.seed if cfg.sweep.seed is not None else draw_seed()
        if resume is not None:
            self._previous = check_resume(resume, cfg)
            seed = self._previous.get("plan", {}).get("seed", seed)
        self.seed = seed
        self.runs = plan_runs(cfg, seed, [t.name for t in self.testbeds])
        done = completed_keys(resume, cfg, self.runs) if resume is not None else set()
        self.skipped = len(done)
        self.runs = [r for r in self.runs if r.key not in done]
        # called with (message, log tail) when an implementation's setup fails
        self.on_setup_error: Callable[[str, str], None] | None = None
        # adaptive A/B: the cells (server, client as written) whose verdict is still open,
        # from the records stored in a campaign directory (the CLI wires in the analysis)
        self.undecided: Callable[[Path], set[tuple[str, str]]] | None = None
        # host keys accepted on first use by a connection made before the campaign (per testbed)
        self.trusted_before: dict[str, list[dict[str, str]]] = {}

    def _metas(self, role: str) -> list[ImplementationMeta]:
        """Every implementation (variants included) that runs in ``role`` in any variant."""
        names = {getattr(p, role) for _, vcfg in variant_configs(self.cfg)
                 for p in vcfg.pair_list()}
        return [self.meta(n) for n in sorted(names)]

    def meta(self, name: str) -> ImplementationMeta:
        """The registry entry or variant called ``name`` in this campaign."""
        return resolve(name, self.registry, self.cfg.implementations)

    def execute(self, progress: Callable[[Iterator[PlannedRun], int], Iterator[PlannedRun]]
                | None = None, on_record: Callable[[RunRecord], None] | None = None,
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

    def _execute_one(self, progress: Callable[[Iterator[PlannedRun], int],
                                               Iterator[PlannedRun]] | None = None,
                     on_record: Callable[[RunRecord], None] | None = None,
                     directory: Path | None = None, meta_file: str = "campaign.json",
                     runs: Iterator[PlannedRun] | None = None) -> CampaignResult:
        """One testbed: the whole campaign, or (in a worker) its share of the runs."""
        directory = directory or self.resume or new_campaign_dir(self.results_root,
                                                                 self.cfg.name)
        self._source = runs
        result = CampaignResult(directory)
        campaign_id = directory.name
        t0 = time.monotonic()
        meta: dict[str, Any] = {
            "schema_version": 1, "campaign": campaign_id, "config": self.cfg.model_dump(),
            "testbed": self.testbed.model_dump(), "runner": runner_version(),
            "started_at": utc_now(), "finished_at": None, "status": "running",
            "planned_runs": len(self.runs) + self.skipped, "hosts": {}, "implementations": {},
            "monitors": {},
            "plan": {"order": plan_order(self.cfg, len(self.testbeds)),
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
        write_json_atomic(directory / meta_file, meta,
                          overwrite=self.resume is not None or meta_file != "campaign.json")
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
                for node in nodes:  # one runner per node directory (lease.py)
                    node.take_lease()
                _record_trusted_keys(meta, nodes, self.trusted_before.get(self.testbed.name))
                meta["hosts"] = {n.name: n.collect_facts(directory / "hosts" / n.name)
                                 for n in nodes}
                meta["hosts"]["management"] = _management_facts()
                # a killed earlier runner's processes first (they may hold the port), then knobs
                killed = {n.name: k for n in nodes if (k := n.reap_leftovers())}
                if killed:
                    meta["killed_leftovers"] = killed
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
                write_json_atomic(directory / meta_file, meta, overwrite=True)
                self._loop(server, client, prepared, result, progress, on_record)
                if self.cfg.sweep.adaptive is not None and self.undecided is not None \
                        and self._source is None:
                    self._adapt(server, client, prepared, result, progress, on_record, meta,
                                meta_file)
                meta["status"] = "finished"
            except KeyboardInterrupt:
                meta["status"] = "interrupted"
                result.interrupted = True
                raise
            except CampaignStopped as exc:
                meta["status"] = f"stopped: {exc}"
                raise
            except Exception as exc:
                meta["status"] = f"aborted: {exc}"
                raise
            finally:
                _record_trusted_keys(meta, nodes, self.trusted_before.get(self.testbed.name))
                for node in nodes:
                    node.cleanup(self.keep_files)
                    node.close()
                meta["finished_at"] = utc_now()
                result.wall_s = time.monotonic() - t0
                meta["wall_s"] = result.wall_s
                write_json_atomic(directory / meta_file, meta, overwrite=True)
        return result

    def _adapt(self, server: Node, client: Node, prepared: Prepared, result: CampaignResult,
               progress: Callable[[Iterator[PlannedRun], int], Iterator[PlannedRun]] | None,
               on_record: Callable[[RunRecord], None] | None, meta: dict[str, Any],
               meta_file: str) -> None:
        """Adaptive A/B: another paired round for each cell without a verdict, up to the cap."""
        assert self.cfg.sweep.adaptive is not None and self.undecided is not None
        rounds: list[dict[str, Any]] = meta.setdefault("adaptive_rounds", [])
        rep = self.cfg.repetitions
        while rep < self.cfg.sweep.adaptive.max_repetitions:
            cells = self.undecided(result.directory)
            if not cells:
                break
            rep += 1
            extended = self.cfg.model_copy(update={"repetitions": rep})
            extra = [r for r in plan_runs(extended, self.seed)
                     if r.repetition == rep and r.cell in cells]
            done = completed_keys(result.directory, self.cfg, extra)
            self.runs = [r for r in extra if r.key not in done]
            rounds.append({"repetition": rep, "cells": sorted("_".join(c) for c in cells)})
            write_json_atomic(result.directory / meta_file, meta, overwrite=True)
            self._loop(server, client, prepared, result, progress, on_record)

    def _execute_parallel(self, progress: Callable[[Iterator[PlannedRun], int],
                                                    Iterator[PlannedRun]] | None
                          ) -> CampaignResult:
        """Several testbeds: one worker process per testbed, one run at a time on each.

        ``spread``: the workers take the next run from one shared queue; ``each``: every
        worker runs the runs planned for its testbed. Each worker writes its records and its
        own ``testbed-<name>.json`` (hosts, implementations, monitors); campaign.json names
        them. Ctrl-C reaches every worker (same process group); a SIGTERM to this process
        is passed on to them.
        """
        ctx = multiprocessing.get_context("fork")
        directory = self.resume or new_campaign_dir(self.results_root, self.cfg.name)
        result = CampaignResult(directory)
        t0 = time.monotonic()
        names = [t.name for t in self.testbeds]
        meta: dict[str, Any] = {
            "schema_version": 1, "campaign": directory.name, "config": self.cfg.model_dump(),
            "testbeds": {t.name: t.model_dump() for t in self.testbeds},
            "distribute": self.cfg.distribute, "runner": runner_version(),
            "started_at": utc_now(), "finished_at": None, "status": "running",
            "planned_runs": len(self.runs) + self.skipped,
            "plan": {"order": plan_order(self.cfg, len(self.testbeds)),
                     "seed": self.seed, "variants": sorted({r.variant.id for r in self.runs})},
            "testbed_files": {n: f"testbed-{n}.json" for n in names},
        }
        if self._previous is not None:
            meta["started_at"] = self._previous.get("started_at", meta["started_at"])
            meta["sessions"] = self._previous.get("sessions", []) + [
                {"status": self._previous.get("status"),
                 "finished_at": self._previous.get("finished_at")}]
            meta["resumed_at"], meta["skipped_runs"] = utc_now(), self.skipped
        write_json_atomic(directory / "campaign.json", meta, overwrite=self.resume is not None)
        shared: Any = ctx.Queue()
        own: dict[str, Any] = {n: ctx.Queue() for n in names}
        for run in self.runs:
            tb = run.variant.as_dict().get("testbed") if self.cfg.distribute == "each" else None
            (own[tb] if tb else shared).put(run.key)
        done: Any = ctx.Queue()
        workers = [ctx.Process(target=self._worker, name=f"testbed-{t.name}",
                               args=(t, directory, own[t.name], shared, done))
                   for t in self.testbeds]
        exits = {"n": 0}

        def events() -> Iterator[None]:
            """One item per stored record, until every worker has exited."""
            while exits["n"] < len(workers):
                try:
                    msg = done.get(timeout=0.5)
                except queue.Empty:
                    if not any(w.is_alive() for w in workers):
                        return
                    continue
                if msg == "exit":
                    exits["n"] += 1
                else:
                    yield None

        try:
            with _Interrupt():
                for w in workers:
                    w.start()
                ticks: Iterator[Any] = events()
                if progress is not None:
                    ticks = progress(ticks, len(self.runs))
                for _ in ticks:
                    pass
        except KeyboardInterrupt:
            result.interrupted = True
            for w in workers:  # a Ctrl-C from a terminal reached them already
                if w.is_alive() and w.pid is not None:
                    os.kill(w.pid, signal.SIGTERM)
            for w in workers:
                w.join(timeout=120)
            raise
        finally:
            for w in workers:
                w.join(timeout=600)
            codes = {t.name: w.exitcode for t, w in zip(self.testbeds, workers)}
            meta["worker_exit_codes"] = codes
            statuses = []
            for name in names:
                try:
                    statuses.append(json.loads(
                        (directory / f"testbed-{name}.json").read_text()).get("status"))
                except (OSError, ValueError):
                    statuses.append("not started")
            meta["status"] = ("interrupted" if result.interrupted or "interrupted" in statuses
                              else "finished" if all(s == "finished" for s in statuses)
                              else "; ".join(f"{n}: {s}" for n, s in zip(names, statuses)))
            meta["finished_at"] = utc_now()
            result.wall_s = meta["wall_s"] = time.monotonic() - t0
            write_json_atomic(directory / "campaign.json", meta, overwrite=True)
            result.records = [RunRecord.from_dict(read_run(p)) for p in iter_run_files(directory)
                              if read_run(p).get("campaign") == directory.name]
        if any(code not in (0, None) for code in codes.values()) and not result.interrupted:
            raise StoreError(f"{directory}: a testbed worker failed: "
                             + ", ".join(f"{n} exit {c}" for n, c in codes.items() if c))
        return result

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
        archives: dict[str, SourceArchive] = {}
        packdir = Path(tempfile.mkdtemp(prefix="qir-variants-"))
        try:
            for node, role in ((server, "server"), (client, "client")):
                for impl in self._metas(role):
                    self._install(node, role, impl, meta, versions, errors, archives, packdir)
        finally:
            shutil.rmtree(packdir, ignore_errors=True)
        gen_timeout = max(120.0, cfg.file_size / 50e6)
        file_name = f"goodput-{cfg.file_size}.bin"
        sha256 = server.generate_file(file_name, cfg.file_size, gen_timeout)
        meta["file"] = {"name": file_name, "size": cfg.file_size, "sha256": sha256}
        client.install_ca(server.make_certificate(server.cfg.ip))
        monitors = []
        for node in (server, client):
            mon = NodeMonitors(node.executor, node.name, node.cfg.interface, list(cfg.monitors),
                               node.cfg.role, self.port, cfg.monitor_options)
            meta["monitors"][node.cfg.role] = mon.check()
            if mon.perf_event:
                meta["monitors"][node.cfg.role]["perf.event"] = mon.perf_event
            monitors.append(mon)
        return Prepared(versions, errors, file_name, sha256, monitors[0], monitors[1])

    def _install(self, node: Node, role: str, impl: ImplementationMeta, meta: dict[str, Any],
                 versions: dict[str, str | None], errors: dict[str, str],
                 archives: dict[str, SourceArchive], packdir: Path) -> None:
        """Install one implementation (or variant) on one node; a failure fails its pairs."""
        key = f"{role}:{impl.name}"
        entry: dict[str, Any] = {"declared_version": impl.version,
                                 "source_hash": impl.source_hash(), "node": node.name}
        if impl.variant is not None:
            entry["variant"] = impl.variant.model_dump(exclude_defaults=True)
        try:
            archive = None
            if impl.variant is not None and impl.variant.source:
                if impl.name not in archives:
                    archives[impl.name] = pack_source(impl, packdir)
                archive = archives[impl.name]
                entry["variant_source"] = archive.identity
            entry["version"] = versions[key] = node.install(
                impl, self.cfg.timeouts.setup, archive.path if archive else None,
                archive.label if archive else None)
        except (SetupError, VariantError) as exc:
            tail = exc.tail if isinstance(exc, SetupError) else ""
            # Only the pairs with this implementation fail; the others still run.
            errors[key] = str(exc)
            entry.update(version=None, setup_error=str(exc), setup_log_tail=tail)
            if self.on_setup_error is not None:
                self.on_setup_error(str(exc), tail)
        meta["implementations"][key] = entry

    def _loop(self, server: Node, client: Node, prepared: Prepared, result: CampaignResult,
              progress: Callable[[Iterator[PlannedRun], int], Iterator[PlannedRun]] | None,
              on_record: Callable[[RunRecord], None] | None) -> None:
        cfg = self.cfg
        monitors = {"server": dict(prepared.server_monitors.status),
                    "client": dict(prepared.client_monitors.status)}
        runs: Iterator[PlannedRun] = self._source if self._source is not None else iter(self.runs)
        if progress is not None:
            runs = progress(runs, len(self.runs))
        for run in runs:
            smeta, cmeta = self.meta(run.server), self.meta(run.client)
            vcfg = run.cfg or cfg
            attempt = next_attempt(result.directory, run.server, run.client, cfg.testcase,
                                   run.repetition, run.variant.id)
            plan = AttemptPlan(
                campaign_id=result.directory.name, testbed=self.testbed.name,
                testcase=cfg.testcase, repetition=run.repetition, attempt=attempt,
                server_meta=smeta, client_meta=cmeta,
                server_version=prepared.versions.get(f"server:{run.server}"),
                client_version=prepared.versions.get(f"client:{run.client}"),
                server_params=side_params(vcfg.server_params, run.server, run.cell, 0),
                client_params=side_params(vcfg.client_params, run.client, run.cell, 1),
                alpn=run.alpn, port=self.port, file_name=prepared.file_name,
                file_size=cfg.file_size, file_sha256=prepared.file_sha256,
                client_timeout=cfg.client_timeout(),
                server_ready_timeout=cfg.timeouts.server_ready,
                keylog=vcfg.keylog,  # key logs only when asked: nothing else reads them
                qlog=vcfg.qlog or "qlog" in cfg.monitors, monitors=monitors,
                std_params=vcfg.params, variant=run.variant.id, axes=run.variant.as_dict(),
                server_knobs=vcfg.side_knobs("server"), client_knobs=vcfg.side_knobs("client"),
            )
            out = attempt_dir(result.directory, run.server, run.client, cfg.testcase,
                              run.repetition, attempt, run.variant.id)
            for orphan in _unrecorded_attempts(out.parent):  # the runner died in them
                lost = not_run_record(replace(plan, attempt=orphan), server, client, "failed",
                                      "no record: the runner was killed during this attempt "
                                      "(found on resume)")
                lost.interrupted = True
                write_run(out.parent / f"attempt-{orphan}", lost)
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
            record.hosts = {n.cfg.role: {k: n.facts.get(k) for k in HOST_KEYS}
                            for n in (server, client)}
            if run.cell is not None:
                record.cell = {"server": run.cell[0], "client": run.cell[1]}
            write_run(out, record)
            result.records.append(record)
            if abort is not None:
                raise abort
            if on_record is not None:
                on_record(record)
            if cfg.on_error == "stop" and record.status in ("failed", "timeout"):
                raise CampaignStopped(f"{run.key} attempt {attempt} {record.status}: "
                                      f"{record.reason} (on_error: stop; --resume runs it again)")


def _unrecorded_attempts(rep_dir: Path) -> list[int]:
    """Attempt numbers below ``rep_dir`` with a directory but no run.json."""
    return sorted(int(d.name.split("-", 1)[1]) for d in rep_dir.glob("attempt-*")
                  if d.name.split("-", 1)[1].isdigit() and not (d / "run.json").exists()) \
        if rep_dir.is_dir() else []


def side_params(by_impl: dict[str, dict[str, Any]], name: str,
                cell: tuple[str, str] | None, index: int) -> dict[str, Any]:
    """Parameters of one side: those of the name as written in `pairs`, then the variant's."""
    written = cell[index] if cell is not None else name
    return {**by_impl.get(written, {}), **by_impl.get(name, {})} if written != name \
        else dict(by_impl.get(name, {}))


HOST_KEYS = ("hostname", "cpu_model", "cores", "sockets", "numa_nodes", "kernel", "nic_driver",
             "nic_speed_mbps", "mtu")


def _record_trusted_keys(meta: dict[str, Any], nodes: list[Node],
                         earlier: list[dict[str, str]] | None = None) -> None:
    """Note in campaign.json the SSH host keys accepted on first use (ssh.trust_on_first_use),
    also those accepted by the CLI's reachability probe just before (``earlier``)."""
    trusted = list(earlier or []) + [k for n in nodes for k in n.trusted_host_keys]
    if trusted:
        meta["ssh_host_keys_trusted_on_first_use"] = trusted


def _management_facts() -> dict[str, str]:
    local = LocalExecutor("management")
    try:
        res = local.run(["uname", "-rn"], timeout=10)
        hostname, kernel = res.stdout.split()[:2]
        return {"hostname": hostname, "kernel": kernel}
    except (ExecutorError, ValueError):
        return {}
