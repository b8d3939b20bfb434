"""``run.py history``: the results database over campaigns and its change points (issue 19).

::

    run.py history ingest DIR... [--db PATH] [--rebuild]
    run.py history show [--db PATH] [--server S --client C --testbed T --series ID]
                        [--metric M] [--by time|version] [--plot OUT.png]
    run.py history check [--db PATH] [--metric goodput|cpu|conformance|all] [--alpha A]
                         [--min-effect F] [--conformance-min-effect D]

The work is in :mod:`interop_runner.analysis.history` and the text in
:mod:`interop_runner.report.history_text`; this module parses options, prints and sets the exit
status (5: a series' newest campaign lies in a significant regression).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interop_runner.errors import UserError
from interop_runner.exit_codes import ExitCode

if TYPE_CHECKING:
    import pandas as pd


DEFAULT_RESULTS = Path("results")
METRICS = ("goodput_mbps", "server_cpu_s_per_gib", "client_cpu_s_per_gib",
           "server_cycles_per_byte", "client_cycles_per_byte")
# the figures of the conformance series (analysis.history.series.CONFORMANCE_METRICS)
CONFORMANCE_METRICS = ("conformance", "conformance_t", "delta_throughput", "delta_delay",
                       "conformance_same_run", "conformance_t_same_run",
                       "delta_throughput_same_run", "delta_delay_same_run")

DESCRIPTION = (
    "Goodput and CPU cost over campaigns. `ingest` puts finished campaign directories into an "
    "embedded DuckDB file (default <results-dir>/history.duckdb; the directories stay the "
    "source of truth), `show` lists the series (testbed, server, client, testcase and the "
    "variant/parameter signature) or prints one over time or versions, `check` finds the "
    "significant change points of every series. Units: goodput Mbit/s (SI), CPU cost CPU-s/GiB "
    "and cycles/byte. Details: docs/history.md.")
INGEST_DESCRIPTION = (
    "Add campaign directories (or results directories holding campaigns) to "
    "the database. A campaign already stored with the same contents is "
    "'unchanged'; one whose contents changed is replaced; another directory "
    "of a campaign already named (a copy) is a 'duplicate', skipped. DuckDB "
    "files among the DIRs (results/* matches results/history.duckdb) are "
    "skipped. A corrupt campaign (unreadable campaign.json or run.json) or a "
    "partial one (status not finished, fewer runs stored than planned) is "
    "refused with one line; the others are still ingested, and the exit "
    "status is then 1.")
SHOW_DESCRIPTION = (
    "Without filters that leave one series: the series, one line each (id, "
    "key, campaigns, first/last campaign, newest median goodput, metrics "
    "with values). With one series: its points (one per campaign: median of "
    "the ok attempts, n, versions) over time, or grouped by versions with "
    "--by version; --plot also draws it with its change points.")
CHECK_DESCRIPTION = (
    "Print every significant change point of every series: where (campaign, date, versions "
    "on both sides), the median of campaign medians before and after, the relative change with "
    "its hierarchical bootstrap CI, the permutation p-value and whether it is a regression "
    "(goodput down, CPU cost up, conformance down, an offset from the kernel farther from 0). "
    "Candidates come from PELT on the log campaign medians (conformance series: on the "
    "values); a change counts when the CI excludes 0, |change| >= --min-effect (conformance: "
    "a difference >= --conformance-min-effect) and p < --alpha, tested "
    "at the campaign level. Exit 5 when, for some series and metric, the newest significant "
    "change point is a regression (the newest campaign of the series lies in the regressed "
    "segment: it opened it or came after it, and no later significant change brought it back); "
    "with --recent N only when that change point is one of the newest N campaigns. Exit 0 "
    "otherwise.")


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Add ``history`` with its actions ``ingest``, ``show`` and ``check``."""
    p = sub.add_parser("history", help="goodput/CPU-cost history over campaigns, change points",
                       description=DESCRIPTION)
    actions = p.add_subparsers(dest="history_action", required=True, metavar="ACTION")
    _register_ingest(actions)
    _register_show(actions)
    _register_check(actions)


def _action(actions: "argparse._SubParsersAction[Any]", name: str, summary: str,
            description: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = actions.add_parser(name, help=summary,
                                                         description=description)
    return parser


def _db_option(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument("--db", type=Path, default=None, metavar="PATH",
                   help=f"the database file (default: {default})")


def _register_ingest(actions: "argparse._SubParsersAction[Any]") -> None:
    p = _action(actions, "ingest", "add finished campaigns to the database",
                INGEST_DESCRIPTION)
    p.add_argument("dirs", type=Path, nargs="*", metavar="DIR",
                   help="campaign or results directories")
    _db_option(p, "history.duckdb in the first DIR when it is a results directory, else "
                  "next to the first campaign directory")
    p.add_argument("--rebuild", action="store_true",
                   help="empty the database and read every campaign it held again from its "
                        "directory (plus the DIRs given)")


def _selection(p: argparse.ArgumentParser) -> None:
    """--db, the series filters and --no-synthetic (show and check)."""
    _db_option(p, "results/history.duckdb")
    p.add_argument("--no-synthetic", action="store_true",
                   help="leave out synthetic campaigns (bench/history_scale.py)")
    for name in ("testbed", "server", "client", "testcase"):
        p.add_argument(f"--{name}", default=None, help=f"only series of this {name}")
    p.add_argument("--series", default=None, metavar="ID",
                   help="one series by its id (the first column of `history show`)")


def _register_show(actions: "argparse._SubParsersAction[Any]") -> None:
    p = _action(actions, "show", "list the series, or print one over time or versions",
                SHOW_DESCRIPTION)
    _selection(p)
    p.add_argument("--metric", choices=METRICS + CONFORMANCE_METRICS, default="goodput_mbps",
                   help="the value of the points (default goodput_mbps; conformance, "
                        "conformance_t, delta_throughput, delta_delay: the conformance "
                        "series)")
    p.add_argument("--by", choices=("time", "version"), default="time",
                   help="one point per campaign in time order, or per version (default time)")
    p.add_argument("--plot", type=Path, default=None, metavar="OUT.png",
                   help="write the figure of the series with its change points")


def _register_check(actions: "argparse._SubParsersAction[Any]") -> None:
    p = _action(actions, "check", "change points of every series; exit 5 on an open regression",
                CHECK_DESCRIPTION)
    _selection(p)
    p.add_argument("--metric", choices=("goodput", "cpu", "conformance", "all"),
                   default="goodput",
                   help="goodput (Mbit/s), cpu (CPU-s/GiB and cycles/byte of both sides), "
                        "conformance (conformance, Conformance-T, delta throughput and delay "
                        "of each stack's flows against the kernel's) or all (default goodput)")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="significance level of the permutation rank test (default 0.05)")
    p.add_argument("--min-effect", type=float, default=0.02, metavar="FRACTION",
                   help="smallest relative change that counts (default 0.02 = 2 %%)")
    p.add_argument("--conformance-min-effect", type=float, default=0.1, metavar="SHARE",
                   help="smallest change of conformance and Conformance-T that counts, in "
                        "share points (default 0.1)")
    p.add_argument("--min-size", type=int, default=2, metavar="N",
                   help="fewest campaigns on each side of a change point (default 2)")
    p.add_argument("--recent", type=int, default=None, metavar="N",
                   help="exit 5 only for a regression that opened within the newest N "
                        "campaigns of its series (default: any still open)")


def cmd_history(args: argparse.Namespace) -> int:
    """Dispatch to the action."""
    action = {"ingest": cmd_ingest, "show": cmd_show, "check": cmd_check}
    return action[args.history_action](args)


# ---------------------------------------------------------------------------------- ingest ----


def ingest_db(dirs: list[Path]) -> Path:
    """The default database of ``ingest``: in the first DIR when it is a results directory,
    else in the directory holding the first campaign (DIRs that are not directories, such as
    ``results/history.duckdb`` matched by ``results/*``, do not count)."""
    from interop_runner.analysis.history import DB_NAME

    first = next((d for d in dirs if d.is_dir()), None)
    if first is None:
        raise UserError("history ingest: none of the DIRs is a directory; name a campaign or "
                        "results directory, or the database with --db")
    return (first.parent if (first / "campaign.json").is_file() else first) / DB_NAME


def cmd_ingest(args: argparse.Namespace) -> int:
    """Ingest; one line per campaign; exit 1 when any was refused."""
    from interop_runner.analysis.history import ingest
    from interop_runner.report.history_text import ingest_summary, ingested_line, skipped_line

    if not args.dirs and not args.rebuild:
        raise UserError("history ingest: name at least one campaign or results directory")
    if args.db is None and not args.dirs:
        raise UserError("history ingest --rebuild: name the database with --db")
    missing = [d for d in args.dirs if not d.exists()]
    if missing:
        raise UserError(f"history ingest: {missing[0]}: no such directory"
                        + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    db = args.db or ingest_db(args.dirs)
    report = ingest(db, args.dirs, rebuild=args.rebuild)
    for path in report.skipped:
        print(skipped_line(path))
    for done in report.done:
        print(ingested_line(done))
    for line in report.refused:
        print(f"error: {line}", file=sys.stderr)
    print(ingest_summary(db, report))
    return ExitCode.RUNTIME_ERROR if report.refused else ExitCode.OK


def auto_ingest(directory: Path) -> str:
    """For ``run.py run``: ingest the campaign just finished into
    ``<results-dir>/history.duckdb``; the line to print (a warning when it failed)."""
    from interop_runner.analysis.history import default_db, ingest

    db = default_db(directory.parent)
    try:
        report = ingest(db, [directory])
    except Exception as exc:  # noqa: BLE001 - the history never fails a campaign
        return f"warning: history not updated ({db}: {str(exc).splitlines()[0][:200]})"
    if report.refused:
        return f"warning: history not updated ({report.refused[0]})"
    return f"history: {db}"


# ------------------------------------------------------------------------------------ show ----


def _frame(args: argparse.Namespace) -> "pd.DataFrame":
    from interop_runner.analysis.history import load_history
    from interop_runner.analysis.history.series import filter_series

    db = args.db or DEFAULT_RESULTS / "history.duckdb"
    frame = load_history(db, include_synthetic=not args.no_synthetic)
    return filter_series(frame, testbed=args.testbed, server=args.server, client=args.client,
                         testcase=args.testcase, series=args.series)


def cmd_show(args: argparse.Namespace) -> int:
    """The series list, or one series over time or versions."""
    from interop_runner.analysis.history import series_table
    from interop_runner.report.history_text import series_listing

    frame = _conformance_frame(args) if args.metric in CONFORMANCE_METRICS else _frame(args)
    table = series_table(frame)
    if table.empty:
        raise UserError("history show: no series matches (see `history show` without filters)")
    if len(table) > 1:
        if args.plot is not None:
            print(f"warning: --plot draws one series and {len(table)} match: no figure "
                  f"written; pick one with --series ID", file=sys.stderr)
        print(series_listing(table))
        return ExitCode.OK
    return _show_one(args, frame, table.iloc[0])


def _show_one(args: argparse.Namespace, frame: "pd.DataFrame", row: "pd.Series[Any]") -> int:
    from interop_runner.analysis.history import points
    from interop_runner.analysis.history.series import by_version, points_frame
    from interop_runner.report.history_text import points_text, series_heading

    pts = points(frame, args.metric)
    print(series_heading(row, args.metric))
    if not pts:
        print(f"not measured (NA) for this series: {args.metric}")
        if args.plot is not None:
            print(f"warning: --plot: no figure written, no {args.metric} to draw",
                  file=sys.stderr)
        return ExitCode.OK
    table = by_version(pts) if args.by == "version" else points_frame(pts)
    print(points_text(table))
    if args.plot is not None:
        from interop_runner.analysis.history.changepoints import change_points
        from interop_runner.analysis.views.history import history_series

        _, fig = history_series(pts, change_points(pts, metric=args.metric),
                                metric=args.metric, title=f"series {row['series']}")
        fig.savefig(args.plot)
        print(f"figure: {args.plot}")
    return ExitCode.OK


# ----------------------------------------------------------------------------------- check ----


def cmd_check(args: argparse.Namespace) -> int:
    """Print the change points; exit 5 when a series' newest point is in a regression."""
    import pandas as pd

    from interop_runner.analysis.history import ChangePointSettings, check, open_regressions
    from interop_runner.analysis.history.series import (
        ATTEMPT_METRICS,
        METRIC_GROUPS,
        series_count,
    )
    from interop_runner.report.history_text import check_summary, describe_changes

    if not 0 < args.alpha < 1 or args.min_effect < 0 or args.min_size < 1 \
            or args.conformance_min_effect < 0:
        raise UserError("history check: --alpha must be in (0, 1), --min-effect >= 0, "
                        "--conformance-min-effect >= 0, --min-size >= 1")
    settings = ChangePointSettings(alpha=args.alpha, min_effect=args.min_effect,
                                   min_size=args.min_size,
                                   conformance_min_effect=args.conformance_min_effect)
    metrics = METRIC_GROUPS[args.metric]
    frames = [(_frame(args), [m for m in metrics if m in ATTEMPT_METRICS])]
    if any(m not in ATTEMPT_METRICS for m in metrics):
        frames.append((_conformance_frame(args), [m for m in metrics
                                                  if m not in ATTEMPT_METRICS]))
    parts = [check(frame, wanted, settings) for frame, wanted in frames if wanted]
    changes = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    for line in describe_changes(changes):
        print(line)
    hits = open_regressions(changes, args.recent)
    n_series = sum(series_count(frame) for frame, wanted in frames if wanted)
    print(check_summary(n_series, len(changes), len(hits)))
    return ExitCode.SLOWER_OR_REGRESSION if len(hits) else ExitCode.OK


def _conformance_frame(args: argparse.Namespace) -> "pd.DataFrame":
    """The conformance series' rows, filtered as the attempts are (``--server``: the stack,
    ``--client``: the kernel reference flow, e.g. tcp/cubic)."""
    from interop_runner.analysis.history.db import load_conformance
    from interop_runner.analysis.history.series import conformance_series_rows, filter_series

    db = args.db or DEFAULT_RESULTS / "history.duckdb"
    frame = conformance_series_rows(load_conformance(db, include_synthetic=not args.no_synthetic))
    return filter_series(frame, testbed=args.testbed, server=args.server, client=args.client,
                         testcase=args.testcase, series=args.series)
