"""``run.py summary``: the cell table of stored campaigns, as the end of their run printed it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from interop_runner.exit_codes import ExitCode

DESCRIPTION = ("Print the cell table of each campaign below RESULTS, the one the end of its run "
               "printed: per pair (or set of flows) and sweep variant the attempts per status, "
               "median/min/max goodput of the successful ones (Mbit/s), the median CPU cost "
               "per side (CPU-s/GiB) and the most common bottleneck label; and the goodput "
               "matrix of a campaign of several servers or clients without a sweep. Reads "
               "campaign directories, results directories holding campaigns, and predecessor "
               "(QIR 10G) result trees.")


def register(subparsers: "argparse._SubParsersAction[Any]") -> argparse.ArgumentParser:
    """Add the ``summary`` command to the ``run.py`` subparsers."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "summary", help="print the cell table of stored campaigns (as at the end of a run)",
        description=DESCRIPTION)
    p.add_argument("results", type=Path, nargs="+", metavar="DIR",
                   help="campaign directories, or results directories holding campaigns")
    return p


def cmd_summary(args: argparse.Namespace) -> int:
    """Print each campaign's table; a directory that is missing, unreadable or holds no
    campaign is one ``error:`` line and exit code 2, before anything is printed."""
    from interop_runner.errors import ReportError
    from interop_runner.report.model import find_campaigns, load_campaign
    from interop_runner.report.results_text import campaign_summary_text

    try:
        campaigns = [load_campaign(d) for d in find_campaigns(args.results)]
    except ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    print("\n\n".join(campaign_summary_text(c.name, c.directory, c.frame) for c in campaigns))
    return ExitCode.OK
