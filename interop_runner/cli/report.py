"""`run.py report`: one self-contained HTML page (and the figures) about stored campaigns."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from interop_runner.exit_codes import ExitCode

DESCRIPTION = ("Write OUT_DIR/report.html, a self-contained page (figures embedded, no external "
               "resources, no JavaScript) about the campaigns below RESULTS_DIR: summary "
               "statistics per pair and variant, every analysis view that has data, failures "
               "with their reasons, implementation versions, host facts, the configuration, "
               "and a notice when TLS key logs are stored. Every figure is also written as PNG "
               "and SVG to OUT_DIR/figures/. A damaged run.json is listed under Failures and "
               "named on stderr, exit 2; a damaged campaign.json is refused (exit 2).")


def register(subparsers: "argparse._SubParsersAction[Any]") -> argparse.ArgumentParser:
    """Add the ``report`` command to the ``run.py`` subparsers."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "report", help="write an HTML report (and figures) about stored campaigns",
        description=DESCRIPTION)
    p.add_argument("results", type=Path, nargs="+", metavar="RESULTS_DIR",
                   help="campaign directories, or results directories holding campaigns")
    p.add_argument("-o", "--output", type=Path, default=Path("report"), metavar="OUT_DIR",
                   help="output directory (default: ./report); report.html and figures/ "
                        "in it are overwritten")
    p.add_argument("--history", type=Path, default=None, metavar="DB",
                   help="also a History section from this history database (run.py history "
                        "ingest): every series, and each one with a change point drawn with "
                        "it marked; default: RESULTS_DIR/history.duckdb, or the one beside a "
                        "campaign directory, when it exists")
    return p


def history_db(args: argparse.Namespace) -> Path | None:
    """The history database the report reads: --history, else the one in a results
    directory given, or beside a campaign directory given (where `run` writes it)."""
    if args.history is not None:
        return Path(args.history)
    places = [r / "history.duckdb" for r in args.results]
    places += [r.parent / "history.duckdb" for r in args.results
               if (r / "campaign.json").is_file()]
    found = [p for p in places if p.is_file()]
    return found[0] if found else None


def cmd_report(args: argparse.Namespace) -> int:
    """Run the command; user errors are one ``error:`` line and exit code 2, and so is each
    damaged run.json after the report was written (it lists them under Failures)."""
    from interop_runner.analysis.frames.results import refuse_damaged
    from interop_runner.errors import ReportError, UserError
    from interop_runner.report.build import build_report

    try:
        try:
            report = build_report(args.results, args.output, history_db=history_db(args))
        except ReportError as exc:
            raise UserError(str(exc)) from None
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    for campaign in report.campaigns:
        skipped = ", ".join(s.view.name for s in campaign.skipped if not s.error) or "none"
        print(f"{campaign.name}: {len(campaign.frame)} attempt(s), "
              f"{len(campaign.figures)} figure(s); views without data: {skipped}")
    for line in report.view_errors:
        print(f"warning: view failed: {line}", file=sys.stderr)
    if report.keylogs:
        print(f"note: {len(report.keylogs)} TLS key log file(s) in these results (see the "
              f"report)", file=sys.stderr)
    print(f"report: {report.html_file}  (figures: {report.html_file.parent / 'figures'})")
    refuse_damaged(*(campaign.frame for campaign in report.campaigns))  # never a pass
    return ExitCode.OK
