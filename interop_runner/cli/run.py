"""``run.py run``: plan (``--dry-run``) or run a campaign, then print its summary table."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interop_runner.cli.testbed import ensure_local_testbed
from interop_runner.config.loader import check_ssh_files, load_campaign_testbeds
from interop_runner.errors import UserError
from interop_runner.exit_codes import ExitCode
from interop_runner.units import format_iec

if TYPE_CHECKING:
    from interop_runner.analysis.running.live_cache import LiveCache
    from interop_runner.analysis.running.progress import ProgressBar
    from interop_runner.config.campaign import CampaignConfig
    from interop_runner.config.testbed import TestbedConfig
    from interop_runner.measure.campaign import Campaign
    from interop_runner.measure.hooks import Undecided
    from interop_runner.measure.outcome import CampaignResult
    from interop_runner.measure.plan import CampaignPlan


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
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                   help="override a key of the campaign file (VALUE in YAML; repeatable), "
                        "e.g. --set duration=120s --set repetitions=10 for the papers' "
                        "durations; stored in campaign.json as run")
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
    cfg, testbeds = load_campaign_testbeds(args.config, args.overrides)
    check_ssh_files(args.config, cfg, testbeds)
    if args.resume is not None and not (args.resume / "campaign.json").is_file():
        raise UserError(f"{args.resume}: not a campaign directory (no campaign.json)")
    if args.dry_run:
        return dry_run(args, cfg, testbeds)
    results_root = _results_root(args, cfg)
    if any(t.local for t in testbeds):
        ensure_local_testbed(cfg)
    _check_creatable(results_root)
    from interop_runner.analysis.running.live_cache import LiveCache

    cache = LiveCache(len(testbeds))
    campaign = _campaign(args, cfg, testbeds, results_root, cache)
    try:
        result = campaign.execute(progress=_progress(args, campaign))
    except KeyboardInterrupt:
        print("\ninterrupted: nodes cleaned up; stored attempts are kept", file=sys.stderr)
        return ExitCode.INTERRUPTED
    warning = cache.finish(result.directory)
    if warning is not None:
        print(warning, file=sys.stderr)
    code = _print_result(result)
    if not args.no_history:  # a failure is a warning line: the campaign itself is stored
        from interop_runner.cli.history import auto_ingest

        line = auto_ingest(result.directory)
        print(line, file=sys.stderr if line.startswith("warning") else sys.stdout)
    return code


def _plan(args: argparse.Namespace, cfg: "CampaignConfig",
          testbeds: "list[TestbedConfig]") -> "CampaignPlan":
    """The campaign's plan (``--resume``: the stored campaign's, its config compared)."""
    from interop_runner.measure.plan import build_plan

    return build_plan(cfg, [t.name for t in testbeds], args.resume)


# -------------------------------------------------------------------------------- dry run ----


def dry_run(args: argparse.Namespace, cfg: "CampaignConfig",
            testbeds: "list[TestbedConfig]") -> int:
    """Print the planned runs, their count and an estimated duration."""
    plan = _plan(args, cfg, testbeds)
    for run in plan.runs:
        note = f"  (unsupported: {run.unsupported})" if run.unsupported else ""
        if run.key in plan.done:
            note += "  (stored: skipped)"
        variant = f" {run.variant.id}" if run.variant.id else ""
        print(f"{run.server:>10} -> {run.client:<10} rep {run.repetition:<4}{variant} "
              f"alpn={run.alpn or '-'}{note}")
    _print_plan_summary(cfg, testbeds, plan, args.results_dir or Path(cfg.results_dir))
    return ExitCode.OK


def _print_plan_summary(cfg: "CampaignConfig", testbeds: "list[TestbedConfig]",
                        plan: "CampaignPlan", results_dir: Path) -> None:
    from interop_runner.analysis.running.estimate import describe_estimate, estimate_plan
    from interop_runner.analysis.running.progress import campaign_history
    from interop_runner.measure.plan import plan_order

    names, todo = [t.name for t in testbeds], plan.todo
    est = estimate_plan(campaign_history(results_dir, names, todo), todo, cfg.file_size,
                        workers=len(testbeds))
    order = plan_order(cfg, len(testbeds))
    seed_note = f", seed {cfg.sweep.seed if cfg.sweep.seed is not None else plan.seed}" \
        if order == "shuffled" else ""
    what = f"{len(cfg.flows)} flow(s) per run" if cfg.flows is not None else \
        f"{len(cfg.pair_list())} pair(s)"
    print(f"{len(plan.runs)} run(s) ({len({r.variant.id for r in plan.runs})} variant(s) x "
          f"{what} x {cfg.repetitions} repetition(s), order "
          f"{order}{seed_note}), {len(todo)} to run; file {format_iec(cfg.file_size)}, "
          f"testbed {', '.join(names)}"
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
              results_root: Path, cache: "LiveCache") -> "Campaign":
    """The campaign with its plan (a resume refused before any connection), its nodes
    probed, and the hooks the command line wires in."""
    from interop_runner.measure.campaign import Campaign
    from interop_runner.measure.hooks import CampaignHooks
    from interop_runner.measure.preflight import probe_nodes

    plan = _plan(args, cfg, testbeds)
    hooks = CampaignHooks(on_setup_error=_setup_failed, on_stored=cache.on_stored,
                          undecided=_undecided(cfg),
                          trusted_before=probe_nodes(testbeds, cfg, cfg.timeouts.command))
    if plan.skipped:
        print(f"resuming {args.resume}: {plan.skipped} run(s) already stored, "
              f"{len(plan.todo)} to go", file=sys.stderr)
    return Campaign(cfg, testbeds, results_root, plan, hooks,
                    keep_files=args.keep_files or None)


def _undecided(cfg: "CampaignConfig") -> "Undecided | None":
    """An adaptive A/B campaign's question for another round (the analysis, and pandas, are
    imported only for such a campaign)."""
    if cfg.sweep.adaptive is None:
        return None
    from interop_runner.analysis.ab.compare import undecided_cells

    return undecided_cells(cfg)


def _setup_failed(message: str, tail: str) -> None:
    print(f"error: {message}; its pairs are recorded as failed. Last lines of its "
          f"output:", file=sys.stderr)
    for line in tail.splitlines():
        print(f"  | {line}", file=sys.stderr)


def _progress(args: argparse.Namespace, campaign: "Campaign") -> "ProgressBar | None":
    """A progress bar over the whole campaign with the estimated time left (none with
    ``--no-progress``)."""
    if args.no_progress:
        return None
    from interop_runner.analysis.running.progress import campaign_history, progress_bar

    names = [t.name for t in campaign.testbeds]
    history = campaign_history(campaign.results_root, names, campaign.runs)
    return progress_bar(campaign.cfg.name, campaign.cfg.file_size, history, len(names),
                        campaign.skipped)


def _print_result(result: "CampaignResult") -> int:
    """The summary table (and the matrix); exit 4 when no attempt was ok."""
    from interop_runner.analysis import load_results  # pandas: only after a run
    from interop_runner.report.results_text import run_summary_text

    frame = load_results(result.directory)
    print(run_summary_text(frame))
    print(f"\nresults: {result.directory}  ({len(frame)} attempt(s), "
          f"{result.wall_s:.1f} s wall time; goodput in Mbit/s; CPU cost in CPU-s/GiB: user + "
          "system seconds of each side's processes per GiB delivered)")
    return ExitCode.OK if (frame["status"] == "ok").any() else ExitCode.NO_OK_ATTEMPT
