"""The figure of one history series: campaign medians over time with their attempts, the
change points marked and the level of each segment (docs/history.md)."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from interop_runner.analysis.history.changepoints import ChangePoint, Point
from interop_runner.analysis.history.series import UNITS, points_frame
from interop_runner.analysis.views._common import figure, no_data

REGRESSION_COLOUR = "#c0392b"
IMPROVEMENT_COLOUR = "#27ae60"


def history_series(points: Sequence[Point], changes: Sequence[ChangePoint] = (), *,
                   metric: str = "goodput_mbps", title: str = "history"
                   ) -> tuple[pd.DataFrame, Figure]:
    """One series (:func:`~interop_runner.analysis.history.series.points`) and its change
    points (:func:`~interop_runner.analysis.history.changepoints.change_points`): the points
    table it plots (with the ``segment`` each point belongs to) and the figure. Attempts are
    grey dots, campaign medians a line, each segment's median of campaign medians a
    horizontal bar, change points a vertical line (red: regression, green: improvement)
    labelled with the relative change and its CI."""
    table = points_frame(points)
    if table.empty:
        return table, no_data(f"{metric} in this series", title)
    starts = sorted(c.index for c in changes)
    table["segment"] = np.searchsorted(starts, np.arange(len(table)), side="right")
    fig, (ax,) = figure(size=(max(6.0, 0.35 * len(table) + 3), 4.0))
    x = np.arange(len(table))
    for i, point in enumerate(points):
        ax.scatter(np.full(point.n, i), point.values, s=8, color="#999999", zorder=1)
    ax.plot(x, table["median"], marker="o", color="#2c3e50", zorder=2, label="campaign median")
    for _, seg in table.groupby("segment"):
        level = float(np.median(seg["median"]))
        ax.hlines(level, seg.index.min() - 0.4, seg.index.max() + 0.4, color="#2980b9",
                  linewidth=2, zorder=3)
    for change in changes:
        _mark(ax, change)
    ax.set_xticks(x, [p.campaign for p in points], rotation=60, ha="right", fontsize=7)
    ax.set_ylabel(f"{metric} ({UNITS.get(metric, '')})")
    ax.set_title(title)
    return table, fig


def _mark(ax: Axes, change: ChangePoint) -> None:
    colour = REGRESSION_COLOUR if change.regression else IMPROVEMENT_COLOUR
    ax.axvline(change.index - 0.5, color=colour, linestyle="--", zorder=4)
    ax.annotate(f"{change.rel_change:+.1%}\n[{change.ci_low:+.1%}, {change.ci_high:+.1%}]",
                (change.index - 0.5, 1.0), xycoords=("data", "axes fraction"),
                textcoords="offset points", xytext=(3, -24), fontsize=7, color=colour)
