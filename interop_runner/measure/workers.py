"""A campaign over several testbeds: one forked worker process per testbed, one measurement
at a time on each.

``spread``: the workers take the next run from one shared queue; ``each``: every worker runs
the runs planned for its testbed. Each worker runs its share as a one-testbed session (the
campaign's, handed in as a :data:`RunShare`) that writes its records and its own
``testbed-<name>.json``; campaign.json, written here, names them. Ctrl-C reaches every worker
(same process group); a SIGTERM to the main process is passed on to them.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from interop_runner.config.testbed import TestbedConfig
from interop_runner.errors import StoreError
from interop_runner.measure.hooks import OnRecord, Progress
from interop_runner.measure.outcome import CampaignResult, TermAsInterrupt, combined_status
from interop_runner.measure.plan import PlannedRun
from interop_runner.storage.campaign_record import CampaignRecord, read_campaign, write_campaign
from interop_runner.storage.layout import iter_run_files, utc_now
from interop_runner.storage.run_record import load_run

# in a worker process: (its testbed, the campaign directory, its share of the runs, called
# after each stored record) -> runs the share as a one-testbed session
RunShare = Callable[[TestbedConfig, Path, Iterator[PlannedRun], OnRecord], None]


class Workers:
    """The worker processes of a campaign over several testbeds and their queues."""

    def __init__(self, testbeds: list[TestbedConfig], runs: list[PlannedRun], distribute: str,
                 directory: Path, run_share: RunShare) -> None:
        ctx = multiprocessing.get_context("fork")
        shared: Any = ctx.Queue()
        own: dict[str, Any] = {t.name: ctx.Queue() for t in testbeds}
        for run in runs:
            tb = run.variant.as_dict().get("testbed") if distribute == "each" else None
            (own[tb] if tb else shared).put(run.key)
        self.done: Any = ctx.Queue()
        self.names = [t.name for t in testbeds]
        by_key = {r.key: r for r in runs}
        self.processes = [ctx.Process(target=_worker, name=f"testbed-{t.name}",
                                      args=(run_share, t, directory, by_key, own[t.name],
                                            shared, self.done))
                          for t in testbeds]

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


def execute_parallel(pool: Workers, doc: CampaignRecord, result: CampaignResult,
                     runs: list[PlannedRun], progress: Progress | None, t0: float
                     ) -> CampaignResult:
    """Run the workers of ``pool`` until each has exited, ticking ``progress`` per stored
    record; then campaign.json (``doc``, begun at ``t0``) gets their exit codes and the
    combined status, and ``result`` the records they stored. A failed worker is an error."""
    directory = result.directory
    try:
        with TermAsInterrupt():
            pool.start()
            ticks: Iterator[Any] = pool.records()
            if progress is not None:
                ticks = progress(ticks, runs)
            for _ in ticks:
                pass
    except KeyboardInterrupt:
        result.interrupted = True
        pool.stop()
        raise
    finally:
        codes = pool.join()
        _finish(doc, codes, pool.names, result, t0)
    if any(code not in (0, None) for code in codes.values()) and not result.interrupted:
        raise StoreError(f"{directory}: a testbed worker failed: "
                         + ", ".join(f"{n} exit {c}" for n, c in codes.items() if c))
    return result


def _finish(doc: CampaignRecord, codes: dict[str, int | None], names: list[str],
            result: CampaignResult, t0: float) -> None:
    """campaign.json after the workers: their exit codes and the combined status; the
    records they stored."""
    directory = result.directory
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


def _worker(run_share: RunShare, testbed: TestbedConfig, directory: Path,
            by_key: dict[str, PlannedRun], own: Any, shared: Any, done: Any) -> None:
    """Body of a worker process: this testbed's share of the runs."""
    signal.signal(signal.SIGINT, signal.default_int_handler)

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
        run_share(testbed, directory, source(), lambda rec: done.put("record"))
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
