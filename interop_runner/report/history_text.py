"""The text ``run.py history`` prints: a line per campaign ingested, the list of series, one
series' points, and the change points ``check`` found (docs/history.md).

Pure functions of what :mod:`interop_runner.analysis.history` returns; the command line
(``interop_runner/cli/history.py``) prints them and sets the exit status.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from interop_runner.analysis.history.changepoints import LINEAR_METRICS
from interop_runner.analysis.history.ingest import Ingested, IngestReport
from interop_runner.analysis.history.series import UNITS


def skipped_line(path: Path) -> str:
    """The line of a path ``ingest`` skipped (a database file among the directories)."""
    return f"{'skipped':>9}  {path}  (a database file, not a campaign)"


def ingested_line(done: Ingested) -> str:
    """One campaign's line of ``ingest``."""
    if done.outcome == "unchanged":
        return f"{done.outcome:>9}  {done.campaign}"
    if done.outcome == "duplicate":
        return (f"{done.outcome:>9}  {done.campaign}  ({done.directory}: the same campaign as "
                f"{done.duplicate_of}, skipped)")
    return f"{done.outcome:>9}  {done.campaign}  ({done.attempts} attempt(s))"


def ingest_summary(db: Path, report: IngestReport) -> str:
    """The last line of ``ingest``: campaigns written, unchanged, duplicate and refused."""
    written = sum(d.outcome in ("added", "replaced") for d in report.done)
    duplicates = sum(d.outcome == "duplicate" for d in report.done)
    return (f"{db}: {written} campaign(s) written, "
            f"{sum(d.outcome == 'unchanged' for d in report.done)} unchanged, "
            + (f"{duplicates} duplicate(s) skipped, " if duplicates else "")
            + f"{len(report.refused)} refused")


def series_listing(table: pd.DataFrame) -> str:
    """``show`` with several series: one line each, the count, and each series' signature."""
    lines = [table.drop(columns="signature").to_string(
                 index=False, float_format=lambda v: f"{v:.1f}"),
             f"\n{len(table)} series; pick one with --series ID (or --server/--client/"
             f"--testbed) to see its points"]
    lines += [f"  {row.series}: {row.signature}" for row in table.itertuples()]
    return "\n".join(lines)


def series_heading(row: "pd.Series[Any]", metric: str) -> str:
    """The first line of ``show`` for one series: its key and the metric's unit."""
    return (f"series {row['series']}: {row['testbed']} {row['server']} -> {row['client']} "
            f"{row['testcase']} {row['signature']}; {metric} in {UNITS[metric]}")


def points_text(table: pd.DataFrame) -> str:
    """One series' points (per campaign or per version) as a table."""
    return table.to_string(index=False, float_format=lambda v: f"{v:.2f}")


def describe_changes(changes: pd.DataFrame) -> list[str]:
    """One line per change point."""
    lines = []
    for c in changes.itertuples():
        kind = "REGRESSION" if c.regression else "improvement"
        open_ = " (open: the newest campaign lies after it)" if c.newest and c.regression \
            else ""
        lines.append(
            f"{c.series} {c.testbed} {c.server}->{c.client} {c.testcase} {c.metric}: {kind}"
            f"{open_} at {c.campaign} ({str(c.time)[:10]}), {c.versions_before} -> "
            f"{c.versions_after}: {c.median_before:.4g} -> {c.median_after:.4g} "
            f"{UNITS[str(c.metric)]} ({c.n_before}/{c.n_after} campaigns), "
            f"{_change(c)}, p={c.p_value:.4f}")
    return lines


def _change(c: Any) -> str:
    """The change and its CI: relative in %, or for a linear metric (a conformance) a
    difference in its unit."""
    if str(c.metric) in LINEAR_METRICS:
        return f"{c.rel_change:+.3g} [{c.ci_low:+.3g}, {c.ci_high:+.3g}] {UNITS[str(c.metric)]}"
    return f"{c.rel_change:+.1%} [{c.ci_low:+.1%}, {c.ci_high:+.1%}]"


def check_summary(n_series: int, n_changes: int, n_open: int) -> str:
    """The last line of ``check``."""
    return (f"{n_series} series, {n_changes} change point(s), {n_open} open "
            f"regression(s)")
