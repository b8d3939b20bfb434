"""The report's optional History section: series of campaigns (one per pair, testbed and
metric) with their change points marked, read from a history database
(``build_report(history_db=...)``, e.g. ``results/history.duckdb``).

A *history provider* turns the database into series (:class:`HistorySeries`: a name, the
per-campaign table, the change points and a way to draw the series). The default one,
:func:`analysis_series`, reads :mod:`interop_runner.analysis.history` (``load_history``,
``series_table``, ``points``, ``change_points``) and draws with
``interop_runner.analysis.views.history.history_series``; while that figure function does not
exist the series are listed without figures. Any callable of the same shape can be passed
to :func:`~interop_runner.report.build.build_report`. Without a database there is no section.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

from interop_runner.report.html import HISTORY_ANCHOR, esc, figure_html, folded_table
from interop_runner.report.model import RenderedFigure, View, slugify
from interop_runner.report.views import figure_svg, save_figure

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

MAX_HISTORY_FIGURES = 12  # series drawn (those with change points, in the provider's order)


class HistorySeries(Protocol):
    """What the report needs of one series (the provider's own type, read by attribute)."""

    @property
    def name(self) -> str:
        """E.g. ``local quic-go/quiche goodput_mbps``: figure title and file name."""

    @property
    def table(self) -> "pd.DataFrame":
        """One row per campaign, oldest first (what the figure plots)."""

    @property
    def change_points(self) -> Sequence[Any]:
        """The significant change points found in the series."""

    def draw(self) -> "Figure | None":
        """The series with its change points marked (None: cannot be drawn)."""


HistoryProvider = Callable[[Path], Sequence[HistorySeries]]


@dataclasses.dataclass(frozen=True)
class AnalysisSeries:
    """One series and metric of :mod:`interop_runner.analysis.history`."""

    name: str
    table: "pd.DataFrame"
    change_points: Sequence[Any]
    points: Sequence[Any]
    metric: str

    def draw(self) -> "Figure | None":
        """``views.history.history_series`` of the points, None while it does not exist."""
        try:
            from interop_runner.analysis.views import history
        except ImportError:
            return None
        _, fig = history.history_series(self.points, self.change_points, metric=self.metric,
                                        title=self.name)
        figure: Figure = fig
        return figure


def analysis_series(history_db: Path) -> list[HistorySeries]:
    """Every series and metric of the history database, with its change points."""
    from interop_runner.analysis.history.changepoints import change_points
    from interop_runner.analysis.history.db import load_history
    from interop_runner.analysis.history.series import (
        filter_series,
        points,
        points_frame,
        series_table,
    )

    frame = load_history(history_db)
    found: list[HistorySeries] = []
    for row in series_table(frame).itertuples():
        rows = filter_series(frame, series=str(row.series))
        for metric in str(row.metrics).split(","):
            pts = points(rows, metric) if metric else []
            if pts:
                name = f"{row.testbed} {row.server}/{row.client} {row.testcase} {metric}"
                found.append(AnalysisSeries(name, points_frame(pts),
                                            change_points(pts, metric=metric), pts, metric))
    return found


def history_section(history_db: Path | None, figures_dir: Path,
                    provider: HistoryProvider | None = None) -> tuple[str, list[Path]]:
    """The History section's HTML and the figure files it wrote; ``("", [])`` without a
    database. Series with change points are drawn (at most :data:`MAX_HISTORY_FIGURES`),
    every series is listed in a table."""
    if history_db is None:
        return "", []
    series = list((provider or analysis_series)(history_db))
    changed = [s for s in series if len(s.change_points)]
    drawn = [(s, s.draw()) for s in changed[:MAX_HISTORY_FIGURES]]
    figures = [_rendered(s, fig, figures_dir) for s, fig in drawn if fig is not None]
    intro = (f'<p class="muted">{esc(history_db)}: {len(series)} series, {len(changed)} with '
             f"a change point (marked); {len(figures)} drawn"
             + (f", the first {MAX_HISTORY_FIGURES}" if len(changed) > MAX_HISTORY_FIGURES
                else "") + ".</p>")
    grid = ('<div class="grid">' + "".join(figure_html(f) for f in figures) + "</div>"
            if figures else "")
    html = (f'<section id="{HISTORY_ANCHOR}"><h2>History</h2>' + intro + grid
            + folded_table(_listing(series), "series") + "</section>")
    return html, [p for f in figures for p in f.files]


def _rendered(series: HistorySeries, fig: "Figure", figures_dir: Path) -> RenderedFigure:
    """A series' figure written to ``figures/history__<name>.{png,svg}`` and embedded."""
    import matplotlib.pyplot as plt

    stem = f"{HISTORY_ANCHOR}__{slugify(series.name)}"
    view = View(stem, series.name, "", "history",
                f"{len(series.change_points)} change point(s), marked in the figure.")
    svg = figure_svg(fig)
    rendered = RenderedFigure(view, svg, series.table, save_figure(fig, figures_dir, stem, svg),
                              stem)
    plt.close(fig)
    return rendered


def _listing(series: Sequence[HistorySeries]) -> "pd.DataFrame":
    """One row per series: its name, campaigns and change points."""
    import pandas as pd

    return pd.DataFrame([{"series": s.name, "campaigns": len(s.table),
                          "change points": len(s.change_points)} for s in series],
                        columns=["series", "campaigns", "change points"])
