"""``run.py run``: plan (``--dry-run``) or run a campaign, then print its summary table."""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from interop_runner.cli.results import print_matrix
from interop_runner.cli.testbed import ensure_local_testbed
from interop_runner.config.campaign import check_ssh_files, load_campaign_testbeds
from interop_runner.errors import SchemaError, UserError
from interop_runner.exit_codes import ExitCode
from interop_runner.units import format_iec

if TYPE_CHECKING:
    from interop_runner.analysis.campaign_cache import CampaignCache
    from interop_runner.config.campaign import CampaignConfig, NodeConfig, TestbedConfig
    from interop_runner.measure.campaign import Campaign, CampaignResult
    from interop_runner.analysis.estimate import History, RemainingTime
    from interop_runner.measure.plan import PlannedRun

Progress = Callable[[Iterator[Any], int], Iterator[Any]]


class TestbedUnreachable(Exception):
    """A node of the testbed file cannot be reached or authenticated before anything ran."""


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Add ``run``."""
    p = sub.add_parser("run", help="run a campaign and print a summary table",
                       description="Run every pair x repetition of a campaign file. Results go "
                                   "to <results_dir>/<name>_<UTC time>/ (never overwritten). "
                                   "A local testbed is brought up if it is down.")
    p.add_argument("config", type=Path, help="campaign YAML file, e.g. configs/local.yml")
    p.add_argument("--dry-run", action="store_true",
                   help="print the planned runs, their count and an estimated duration; run "
                        "nothing")
    p.add_argument("--results-dir", type=Path, default=None,
                   help="where campaign directories go (default: results_dir of the config)")
    p.add_argument("--keep-files", action="store_true",
                   help="keep the generated file and certificates on the nodes")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--resume", type=Path, default=None, metavar="CAMPAIGN_DIR",
                   help="continue an interrupted campaign in CAMPAIGN_DIR (same config): runs "
                        "with an ok (or unsupported) record are skipped, failed, timed-out and "
                        "interrupted ones run again as a new attempt; nothing stored is "
                        "rewritten")
    p.add_argument("--no-history", action="store_true",
                   help="do not add the finished campaign to <results_dir>/history.duckdb "
                        "(run.py history)")


def cmd_run(args: argparse.Namespace) -> int:
    """Run (or with ``--dry-run`` plan) a campaign; exit 4 when no attempt was ok, 130 on
    Ctrl-C."""
    cfg, testbeds = load_campaign_testbeds(args.config)
    check_ssh_files(args.config, cfg, testbeds)
    if args.resume is not None and not (args.resume / "campaign.json").is_file():
        raise UserError(f"{args.resume}: not a campaign directory (no campaign.json)")
    if args.dry_run:
        return dry_run(args, cfg, testbeds)
    results_root = _results_root(args, cfg)
    if any(t.local for t in testbeds):
        ensure_local_testbed()
    _check_creatable(results_root)
    campaign = _campaign(args, cfg, testbeds, results_root)
    cache = LiveCache(campaign)
    try:
        result = campaign.execute(progress=_progress(args, cfg, campaign))
    except KeyboardInterrupt:
        print("\ninterrupted: nodes cleaned up; stored attempts are kept", file=sys.stderr)
        return ExitCode.INTERRUPTED
    cache.finish(result.directory)
    code = _print_result(result)
    if not args.no_history:  # a failure is a warning line: the campaign itself is stored
        from interop_runner.cli.history import auto_ingest

        line = auto_ingest(result.directory)
        print(line, file=sys.stderr if line.startswith("warning") else sys.stdout)
    return code


# -------------------------------------------------------------------------------- dry run ----


def dry_run(args: argparse.Namespace, cfg: "CampaignConfig",
            testbeds: "list[TestbedConfig]") -> int:
    """Print the planned runs, their count and an estimated duration."""
    from interop_runner.measure.plan import completed_keys, plan_runs

    seed = _seed(args.resume)
    runs = plan_runs(cfg, seed, [t.name for t in testbeds])
    done = completed_keys(args.resume, cfg, runs) if args.resume is not None else set()
    for run in runs:
        note = "" if run.alpn else "  (unsupported: no common protocol)"
        if run.key in done:
            note += "  (stored: skipped)"
        variant = f" {run.variant.id}" if run.variant.id else ""
        print(f"{run.server:>10} -> {run.client:<10} rep {run.repetition:<4}{variant} "
              f"alpn={run.alpn or '-'}{note}")
    _print_plan_summary(cfg, testbeds, seed, runs, [r for r in runs if r.key not in done],
                        args.results_dir or Path(cfg.results_dir))
    return ExitCode.OK


def _seed(resume: Path | None) -> int:
    """A fresh plan seed, or the one of the campaign being resumed."""
    from interop_runner.measure.plan import draw_seed

    seed = draw_seed()
    if resume is None:
        return seed
    from interop_runner.storage.campaign_record import read_campaign

    try:
        stored: int = read_campaign(resume / "campaign.json").get("plan", {}).get("seed", seed)
    except SchemaError as exc:
        raise UserError(f"cannot resume: {exc}") from None
    except (OSError, ValueError, AttributeError) as exc:
        raise UserError(f"{resume / 'campaign.json'}: cannot resume: {exc}") from None
    return stored


def _print_plan_summary(cfg: "CampaignConfig", testbeds: "list[TestbedConfig]", seed: int,
                        runs: "list[PlannedRun]", todo: "list[PlannedRun]",
                        results_dir: Path) -> None:
    from interop_runner.analysis.estimate import describe_estimate, estimate_plan
    from interop_runner.measure.plan import plan_order

    est = estimate_plan(_history(results_dir, testbeds, todo), todo, cfg.file_size,
                        workers=len(testbeds))
    order = plan_order(cfg, len(testbeds))
    seed_note = f", seed {cfg.sweep.seed if cfg.sweep.seed is not None else seed}" \
        if order == "shuffled" else ""
    print(f"{len(runs)} run(s) ({len({r.variant.id for r in runs})} variant(s) x "
          f"{len(cfg.pair_list())} pair(s) x {cfg.repetitions} repetition(s), order "
          f"{order}{seed_note}), {len(todo)} to run; file {format_iec(cfg.file_size)}, "
          f"testbed {', '.join(t.name for t in testbeds)}"
          f"{' (' + cfg.distribute + ')' if len(testbeds) > 1 else ''}")
    print(describe_estimate(est))
    if cfg.sweep.adaptive is not None:
        extra = cfg.sweep.adaptive.max_repetitions - cfg.repetitions
        print(f"adaptive: up to {max(extra, 0)} more paired round(s) (to "
              f"{cfg.sweep.adaptive.max_repetitions} repetitions) for cells whose verdict "
              f"stays inconclusive at a {cfg.sweep.adaptive.min_effect:.0%} minimum effect")


# ------------------------------------------------------------------------------------ run ----


def _results_root(args: argparse.Namespace, cfg: "CampaignConfig") -> Path:
    """Where the campaign directory goes (relative config paths: below the current one)."""
    results_root: Path = args.results_dir or Path(cfg.results_dir)
    if not results_root.is_absolute() and args.results_dir is None:
        results_root = Path.cwd() / results_root
    if results_root.exists() and not results_root.is_dir():
        raise UserError(f"{results_root}: the results directory is not a directory")
    return results_root


def _check_creatable(results_root: Path) -> None:
    """The nearest existing ancestor must be a directory (checked before any connection)."""
    ancestor = next(p for p in (results_root, *results_root.parents) if p.exists())
    if not ancestor.is_dir():
        raise UserError(f"{results_root}: cannot create the results directory below the "
                        f"file {ancestor}")


def _campaign(args: argparse.Namespace, cfg: "CampaignConfig", testbeds: "list[TestbedConfig]",
              results_root: Path) -> "Campaign":
    """The campaign, its nodes probed, with the callbacks the command line wants."""
    from interop_runner.measure.campaign import Campaign

    campaign = Campaign(cfg, testbeds, results_root, keep_files=args.keep_files or None,
                        resume=args.resume)
    campaign.trusted_before = probe_nodes(testbeds, cfg, cfg.timeouts.command)
    if campaign.skipped:
        print(f"resuming {args.resume}: {campaign.skipped} run(s) already stored, "
              f"{len(campaign.runs)} to go", file=sys.stderr)
    campaign.on_setup_error = _setup_failed
    if cfg.sweep.adaptive is not None:
        campaign.undecided = undecided_cells(cfg)
    return campaign


def _setup_failed(message: str, tail: str) -> None:
    print(f"error: {message}; its pairs are recorded as failed. Last lines of its "
          f"output:", file=sys.stderr)
    for line in tail.splitlines():
        print(f"  | {line}", file=sys.stderr)


def _progress(args: argparse.Namespace, cfg: "CampaignConfig", campaign: "Campaign") -> Progress:
    """A tqdm progress bar over the whole campaign with the estimated time left (none with
    ``--no-progress``)."""
    if args.no_progress:
        return lambda it, total: it
    history = _history(campaign.results_root, campaign.testbeds, campaign.runs)

    def progress(it: Iterator[Any], total: int) -> Iterator[Any]:
        from tqdm import tqdm

        left = _remaining(history, cfg, campaign)
        # over the whole campaign: runs stored before a resume count as done
        bar = tqdm(total=total + campaign.skipped, initial=campaign.skipped, unit="run",
                   desc=cfg.name, file=sys.stderr, postfix=left.label(),
                   bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]")
        return _ticking(it, bar, left)

    return progress


def _history(results_dir: Path, testbeds: "list[TestbedConfig]",
             runs: "list[PlannedRun]") -> "History":
    """What the campaign's testbeds measured before, for the pairs of ``runs``."""
    from interop_runner.analysis.estimate import learn_history

    return learn_history(results_dir, [t.name for t in testbeds],
                         {(r.server, r.client) for r in runs})


def _remaining(history: "History", cfg: "CampaignConfig", campaign: "Campaign"
               ) -> "RemainingTime":
    """The time left of the runs the campaign is about to go through (``campaign.runs``: an
    adaptive round replaces them). With several testbeds the bar starts before their setup."""
    from interop_runner.analysis.estimate import RemainingTime, estimate_plan, estimate_run

    runs, workers = campaign.runs, len(campaign.testbeds)
    estimates = {r.key: estimate_run(history, r, cfg.file_size).seconds for r in runs}
    return RemainingTime(estimates, setup_s=history.setup.value if workers > 1 else 0.0,
                         workers=workers,
                         guess=estimate_plan(history, runs, cfg.file_size, workers).guess)


def _ticking(it: Iterator[Any], bar: Any, left: "RemainingTime",
             clock: Callable[[], float] | None = None) -> Iterator[Any]:
    """Pass the items on; when the consumer comes back for the next one, the previous run
    is done: move the bar and estimate the time left again (``clock``: time.monotonic)."""
    import time

    now = clock or time.monotonic
    start = now()
    try:
        for item in it:
            yield item
            left.finished(now() - start, getattr(item, "key", None))
            bar.set_postfix_str(left.label(), refresh=False)
            bar.update(1)
    finally:
        bar.close()


class LiveCache:
    """Parses each record the campaign stores into the campaign's Parquet cache (on the
    campaign's deferred-work thread, while the next attempt gets ready), so the cache is
    complete when the campaign ends and the first load reads it."""

    def __init__(self, campaign: "Campaign") -> None:
        self.campaign = campaign
        self._cache: "CampaignCache | None" = None
        self._failed: str | None = None
        # pandas and the parsers load during the campaign's set-up, not before a transfer
        self._import = threading.Thread(target=_import_cache_module, daemon=True)
        if len(campaign.testbeds) > 1:
            # several testbeds run in forked workers: no thread may hold the import lock
            # when they fork, and their records are parsed at the end (finish)
            return
        self._import.start()
        campaign.on_stored = self.add

    def add(self, run_json: Path) -> None:
        """Parse one stored record (a failure only costs the cache: the records stay)."""
        if self._import.is_alive():
            self._import.join()
        if self._failed is not None or self.campaign.directory is None:
            return
        try:
            from interop_runner.analysis.campaign_cache import CampaignCache

            if self._cache is None:
                self._cache = CampaignCache(self.campaign.directory)
            self._cache.add(run_json)
        except Exception as exc:  # noqa: BLE001 - load_results parses cold instead
            self._failed = f"{run_json}: {exc!r}"

    def finish(self, directory: Path) -> None:
        """Write the cache (every record parsed now that was not added: several testbeds)."""
        if self._import.is_alive():
            self._import.join()
        if self._failed is not None:
            print(f"warning: no results cache written ({self._failed})", file=sys.stderr)
            return
        from interop_runner.analysis.campaign_cache import CampaignCache

        (self._cache or CampaignCache(directory)).finish()


def _import_cache_module() -> None:
    try:
        import interop_runner.analysis.campaign_cache  # noqa: F401
    except Exception:  # noqa: BLE001 - LiveCache.add meets the same error and reports it
        pass


def _print_result(result: "CampaignResult") -> int:
    """The summary table (and the matrix); exit 4 when no attempt was ok."""
    from interop_runner.analysis import load_results, summarize  # pandas: only after a run

    frame = load_results(result.directory)
    table = summarize(frame)
    print(table.to_string(index=False, na_rep="n/a", float_format=lambda v: f"{v:.1f}"))
    swept = "variant" in frame.columns and frame["variant"].notna().any()
    if not swept and (frame["server"].nunique() > 1 or frame["client"].nunique() > 1):
        print_matrix(frame)  # (with a sweep the table above is already per variant)
    print(f"\nresults: {result.directory}  ({len(frame)} attempt(s), "
          f"{result.wall_s:.1f} s wall time; goodput in Mbit/s; CPU cost in CPU-s/GiB: user + "
          "system seconds of each side's processes per GiB delivered)")
    return ExitCode.OK if (frame["status"] == "ok").any() else ExitCode.NO_OK_ATTEMPT


def undecided_cells(cfg: "CampaignConfig") -> "Callable[[Path], set[tuple[str, str]]]":
    """For adaptive A/B campaigns: the cells whose verdict is still ``inconclusive``."""
    from interop_runner.analysis import load_results
    from interop_runner.analysis.ab.compare import compare_variants
    from interop_runner.config.sweep import variants

    assert cfg.sweep.adaptive is not None
    arm_a, arm_b = (v.id for v in variants(cfg.sweep))
    min_effect = cfg.sweep.adaptive.min_effect

    def undecided(directory: Path) -> set[tuple[str, str]]:
        frame = load_results(directory, cache=False)
        result = compare_variants(frame, "variant", arm_a, arm_b, min_effect=min_effect)
        open_ = result[result["verdict"] == "inconclusive"]
        return {(str(s), str(c)) for s, c in zip(open_["server"], open_["client"])}

    return undecided


def probe_nodes(testbeds: "list[TestbedConfig]", cfg: "CampaignConfig", timeout: float
                ) -> dict[str, list[dict[str, str]]]:
    """Connect to every node before a campaign directory exists, so an unreachable host, a
    wrong host key, a node another runner is using (its lease) or a knob the node cannot have
    (CPUs it lacks, from its host facts) is a one-line error that leaves nothing behind.
    Returns the host keys accepted on first use, per testbed, for campaign.json."""
    from interop_runner.measure.preflight import check_knobs_on_nodes

    trusted: dict[str, list[dict[str, str]]] = {}
    facts: list[tuple[str, str, dict[str, Any]]] = []
    for testbed in testbeds:
        for name, node_cfg in testbed.nodes.items():
            keys, node_facts = _probe_node(testbed, name, node_cfg, timeout)
            trusted.setdefault(testbed.name, []).extend(keys)
            facts.append((name, node_cfg.role, node_facts))
    check_knobs_on_nodes(cfg, facts)
    return trusted


def _probe_node(testbed: "TestbedConfig", name: str, node_cfg: "NodeConfig", timeout: float
                ) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """(host keys trusted on first use, host facts) of one node; NodeBusy when another
    runner holds its lease."""
    from interop_runner.errors import ConnectError, NodeBusy
    from interop_runner.testbed.node import Node

    try:
        node = Node.connect(name, node_cfg, "probe", timeout)
    except ConnectError as exc:
        raise TestbedUnreachable(f"testbed {testbed.name}: {exc}") from None
    try:
        busy = node.lease_holder()
        if busy:
            raise NodeBusy(f"testbed {testbed.name}: {name}: {node_cfg.workdir} is in use by "
                           f"{busy}; wait for it to finish or stop it first")
        return list(node.trusted_host_keys), node.collect_facts()
    finally:
        node.close()
