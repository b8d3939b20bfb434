"""Competing flows (issue 27, docs/flows.md): each flow's throughput over the time of one
attempt (paper 002, Fig. 5b), Jain's fairness index against a swept parameter with its
confidence interval (002, Figs. 8 and 10), the bandwidth share between two flows per pair of
labels (000, Figs. 12-13) and each QUIC implementation against the kernel TCP baseline per
path condition with Welch's t-test (004).

Each view is a ``*_frame`` function (pure: the data it plots) and a ``*_figure`` function
(a matplotlib ``Figure``, no pyplot state); ``flow_timeline``, ``flow_fairness_sweep``,
``flow_share_matrix`` and ``flow_quic_vs_tcp`` return both (the report's Flows views). A
campaign without flows gives empty frames and the "no data" figure.
"""

from __future__ import annotations

import math
from itertools import permutations
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from interop_runner.analysis.frames.flows import (
    fairness_summary,
    load_flow_results,
    load_flows,
    path_conditions,
    quic_vs_tcp,
)
from interop_runner.analysis.theories.stats import axis_number, axis_order
from interop_runner.analysis.views._common import Source, as_paths, empty, figure, finite, no_data

TIMELINE_COLUMNS = ["campaign", "flow_set", "variant", "repetition", "attempt", "path",
                    "flow", "label", "t_s", "bin_ms", "throughput_mbps",
                    "queue_delay_ms_mean", "queue_delay_ms_p95", "drops", "trimmed"]
SHARE_COLUMNS = ["flow_set", "row", "column", "n", "share_mean", "share_std", "share_basis"]
TIMELINE_TITLE = "Throughput per flow at the bottleneck"
SWEEP_TITLE = "Jain's fairness index"
SHARE_TITLE = "Bandwidth share of the row's flow against the column's"
WELCH_TITLE = "QUIC against TCP per path condition (Welch's t-test)"


def _series(source: Source) -> pd.DataFrame:
    return source if isinstance(source, pd.DataFrame) else load_flows(*as_paths(source))


def _flow_results(source: Source) -> pd.DataFrame:
    return source if isinstance(source, pd.DataFrame) else load_flow_results(*as_paths(source))


# ----------------------------------------------------------------- throughput over time

def flow_timeline_frame(source: Source, path: str | None = None) -> pd.DataFrame:
    """The series of one attempt (the frame of :func:`~.flows.load_flows`, or campaign
    paths): the attempt in ``path`` (its directory), else the first attempt with a series
    (by campaign, flow set, variant, repetition, attempt). Empty without a series."""
    data = _series(source)
    if data.empty or "t_s" not in data.columns or not data["t_s"].notna().any():
        return empty(TIMELINE_COLUMNS)
    data = data[data["t_s"].notna()]
    if path is None:
        keys = ["campaign", "flow_set", "variant", "repetition", "attempt"]
        path = str(data.sort_values(keys, kind="stable")["path"].iloc[0])
    rows = data[data["path"].astype(str) == str(path)]
    return rows.reindex(columns=TIMELINE_COLUMNS).reset_index(drop=True)


def flow_timeline_figure(table: pd.DataFrame) -> Figure:
    """Throughput (top) and mean queueing delay (bottom) per flow and bin over the
    attempt's time; bins outside a flow's trimmed window are drawn thin and dotted."""
    if table.empty:
        return no_data("per-flow series (bottleneck captures of competing flows)",
                       TIMELINE_TITLE)
    fig, (top, bottom) = figure(2, 1, size=(8.0, 5.6), sharex=True)
    for i, (label, rows) in enumerate(table.groupby("label", sort=False)):
        _flow_lines(top, bottom, rows, str(label), f"C{i % 10}")
    first = table.iloc[0]
    top.set_title(f"{TIMELINE_TITLE}: {first['flow_set']} {first['variant'] or ''}, "
                  f"repetition {first['repetition']} ({float(first['bin_ms']):g} ms bins)",
                  fontsize=10)
    top.set_ylabel("throughput [Mbit/s]")
    bottom.set_ylabel("queueing delay [ms]")
    bottom.set_xlabel("time since the first packet [s]")
    top.legend(fontsize=8, loc="upper right")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    return fig


def _flow_lines(top: Axes, bottom: Axes, rows: pd.DataFrame, label: str, colour: str) -> None:
    """One flow: the kept bins solid, the whole series thin and dotted under them."""
    t = rows["t_s"].astype(float) + rows["bin_ms"].astype(float) / 2e3  # bin centres
    kept = ~rows["trimmed"].astype(bool)
    for ax, column in ((top, "throughput_mbps"), (bottom, "queue_delay_ms_mean")):
        values = rows[column].astype(float)
        ax.plot(t, values, color=colour, linewidth=0.8, linestyle=":")
        ax.plot(t.where(kept), values.where(kept), color=colour, linewidth=1.6,
                label=label if ax is top else None)


def flow_timeline(source: Source) -> tuple[pd.DataFrame, Figure]:
    """:func:`flow_timeline_frame` and :func:`flow_timeline_figure` (the report's view)."""
    table = flow_timeline_frame(source)
    return table, flow_timeline_figure(table)


# ------------------------------------------------------------- fairness against a sweep

def _sweep_axis(frame: pd.DataFrame) -> str:
    """The sweep axis column with values among the attempts with flows, else variant."""
    axes = [c for c in frame.columns if c.startswith("axis_") and frame[c].notna().any()]
    return axes[0] if axes else "variant"


def flow_fairness_frame(results: pd.DataFrame, axis: str | None = None) -> pd.DataFrame:
    """Per flow set and value of the swept parameter (``axis``: an ``axis_<name>`` column,
    by default the first with values, else ``variant``) the statistics of Jain's index over
    the repetitions (:func:`~.flows.fairness_summary`: mean with its t interval, median
    with its bootstrap interval) and the mean of the sliding minimum
    (``sliding_min_mean``), ordered by the parameter."""
    if "flow_count" not in results.columns or not results["flow_count"].notna().any():
        return empty(["flow_set", "x"])
    data = results[results["flow_count"].notna()]
    axis = axis or _sweep_axis(data)
    data = data.assign(x=data[axis].astype(object).where(data[axis].notna(), ""))
    table = fairness_summary(data, by=("flow_set", "x"))
    sliding = fairness_summary(data, by=("flow_set", "x"), value="jain_index_sliding_min")
    table["sliding_min_mean"] = sliding["mean"].to_numpy()
    order = {v: i for i, v in enumerate(axis_order(table["x"]))}
    table = table.assign(_o=table["x"].map(order)).sort_values(["flow_set", "_o"],
                                                                kind="stable")
    return table.drop(columns="_o").assign(axis=axis).reset_index(drop=True)


def flow_fairness_figure(table: pd.DataFrame) -> Figure:
    """Jain's index (mean over the repetitions, t interval as error bars) against the
    swept parameter, one line per flow set; dotted: the mean of the sliding minimum."""
    if table.empty or not table["mean"].notna().any():
        return no_data("Jain's index of competing flows", SWEEP_TITLE)
    fig, (ax,) = figure(size=(7.0, 4.2))
    levels = list(dict.fromkeys(table["x"]))
    numeric = all(math.isfinite(axis_number(v)) for v in levels)
    for i, (flow_set, rows) in enumerate(table.groupby("flow_set", sort=True)):
        x = [axis_number(v) if numeric else levels.index(v) for v in rows["x"]]
        mean = rows["mean"].astype(float)
        low = (mean - rows["mean_ci_low"].astype(float)).fillna(0).clip(lower=0)
        high = (rows["mean_ci_high"].astype(float) - mean).fillna(0).clip(lower=0)
        ax.errorbar(x, mean, yerr=[low, high], marker="o", capsize=3, color=f"C{i % 10}",
                    label=str(flow_set))
        ax.plot(x, rows["sliding_min_mean"].astype(float), linestyle=":", marker=".",
                color=f"C{i % 10}", label=f"{flow_set}: sliding minimum")
    if not numeric:
        ax.set_xticks(range(len(levels)), [str(v) for v in levels])
    ax.set_ylim(0, 1.05)
    ax.set_xlabel(str(table["axis"].iloc[0]).removeprefix("axis_"))
    ax.set_ylabel("Jain's index (1: equal shares)")
    ax.set_title(SWEEP_TITLE)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    return fig


def flow_fairness_sweep(results: pd.DataFrame) -> tuple[pd.DataFrame, Figure]:
    """:func:`flow_fairness_frame` and :func:`flow_fairness_figure` of the results frame."""
    table = flow_fairness_frame(results)
    return table, flow_fairness_figure(table)


def flow_fairness_table(results: pd.DataFrame) -> pd.DataFrame:
    """The Jain's index of every attempt with flows (the fairness columns of the results
    frame): the table under the report's fairness view."""
    columns = ["flow_set", "variant", "repetition", "attempt", "status", "flow_count",
               "jain_index", "jain_index_sliding_min", "jain_index_sliding_median",
               "fairness_basis", "fairness_missing"]
    if "flow_count" not in results.columns:
        return empty(columns)
    data = results[results["flow_count"].notna()]
    return data.assign(flow_set=data["cell_client"]).reindex(columns=columns).reset_index(
        drop=True)


# --------------------------------------------------------------------- share matrix

def _pair_shares(flows: pd.DataFrame, group: str) -> pd.DataFrame:
    """Per attempt and ordered pair of its flows: the share of the first in the two's
    throughput (the series' mean; the goodput without captures)."""
    rows = []
    for _, attempt in flows.groupby("path", sort=False):
        basis = attempt["share_basis"].iloc[0]
        column = "mean_throughput_mbps" if basis == "series" else "goodput_mbps"
        values = list(zip(attempt[group], pd.to_numeric(attempt[column]).astype(float)))
        for (a, x), (b, y) in permutations(values, 2):
            if finite(x) and finite(y) and x + y > 0:
                rows.append({"flow_set": attempt["flow_set"].iloc[0], "row": a, "column": b,
                             "share": x / (x + y), "share_basis": basis})
    return pd.DataFrame(rows, columns=["flow_set", "row", "column", "share", "share_basis"])


def flow_share_frame(source: Source, group: str = "label") -> pd.DataFrame:
    """Per flow set and ordered pair of flow groups (``group``: label by default; e.g.
    ``congestion_control``): the bandwidth share of the ``row`` flow against the
    ``column`` flow, x_row / (x_row + x_column) of their mean throughputs in one attempt
    (goodput without captures), its mean and standard deviation over the attempts and
    pairs (``n``). 0.5 is an equal share."""
    flows = _flow_results(source)
    if flows.empty or group not in flows.columns:
        return empty(SHARE_COLUMNS)
    shares = _pair_shares(flows[flows["status"].astype("string") == "ok"], group)
    if shares.empty:
        return empty(SHARE_COLUMNS)
    table = shares.groupby(["flow_set", "row", "column"], sort=True).agg(
        n=("share", "size"), share_mean=("share", "mean"), share_std=("share", "std"),
        share_basis=("share_basis", lambda b: b.iloc[0] if b.nunique() == 1 else "mixed"))
    return table.reset_index().reindex(columns=SHARE_COLUMNS)


def flow_share_figure(table: pd.DataFrame) -> Figure:
    """The share matrix of each flow set: rows and columns the flow groups, the mean share
    of the row's flow written in its cell (0.5: equal; red above, blue below)."""
    if table.empty:
        return no_data("two or more competing flows", SHARE_TITLE)
    sets = list(dict.fromkeys(table["flow_set"]))
    fig, axes = figure(1, len(sets), size=(4.6 * len(sets) + 0.8, 4.2))
    for ax, flow_set in zip(axes, sets):
        rows = table[table["flow_set"] == flow_set]
        matrix = rows.pivot(index="row", columns="column", values="share_mean")
        labels = sorted(set(matrix.index) | set(matrix.columns), key=str)
        matrix = matrix.reindex(index=labels, columns=labels).astype(float)
        image = ax.imshow(matrix.to_numpy(), cmap="RdBu_r", vmin=0, vmax=1)
        for (i, j), value in np.ndenumerate(matrix.to_numpy()):
            if math.isfinite(value):
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=9)
        ax.set_xticks(range(len(labels)), [str(v) for v in labels], rotation=30, ha="right")
        ax.set_yticks(range(len(labels)), [str(v) for v in labels])
        ax.set_title(str(flow_set), fontsize=10)
    fig.colorbar(image, ax=axes, label="share of the row's flow")
    fig.suptitle(SHARE_TITLE)
    return fig


def flow_share_matrix(source: Source) -> tuple[pd.DataFrame, Figure]:
    """:func:`flow_share_frame` and :func:`flow_share_figure` (the report's view)."""
    table = flow_share_frame(source)
    return table, flow_share_figure(table)


# ---------------------------------------------------------------- QUIC against TCP

def flow_quic_vs_tcp_frame(source: Source, metric: str | None = None) -> pd.DataFrame:
    """:func:`~.flows.quic_vs_tcp` of the per-flow frame (or of campaign paths) per path
    condition (:func:`path_conditions`) on ``metric``: by default the bandwidth share when
    flows compete, the goodput when each attempt is one flow (QUIC and TCP measured
    alone, interleaved, as paper 004 does)."""
    flows = _flow_results(source)
    alone = flows.empty or flows.groupby(["path"])["flow"].count().max() == 1
    metric = metric or ("goodput_mbps" if alone else "share")
    # flows that compete are compared with the TCP flows they competed with (their set's);
    # flows measured alone with the TCP flows of the same path condition
    by = [*([] if alone else ["flow_set"]), *path_conditions(flows)] or ["campaign"]
    return quic_vs_tcp(flows, metric, by=by)


def flow_quic_vs_tcp_figure(table: pd.DataFrame) -> Figure:
    """A grid, rows the path conditions (flow set and variant), columns the QUIC groups:
    the difference of the means against TCP in colour (red: QUIC above TCP) and written
    with its significance mark and Hedges' g."""
    if table.empty:
        return no_data("QUIC and TCP flows in one cell", WELCH_TITLE)
    by = [c for c in table.columns[:list(table.columns).index("group")]]
    table = table.assign(condition=[", ".join(f"{c.removeprefix('axis_')}={v}" if
                                              c.startswith("axis_") else str(v or "")
                                              for c, v in zip(by, values)).strip(", ")
                                    for values in table[by].itertuples(index=False)])
    matrix = table.pivot_table(index="condition", columns="group", values="difference",
                               aggfunc="first", sort=True).astype(float)
    fig, (ax,) = figure(size=(1.8 * len(matrix.columns) + 3.0, 0.8 * len(matrix) + 2.0))
    scale = float(np.nanmax(np.abs(matrix.to_numpy()))) if matrix.notna().any().any() else 1
    image = ax.imshow(matrix.to_numpy(), cmap="RdBu_r", vmin=-scale or -1, vmax=scale or 1,
                      aspect="auto")
    for row in table.itertuples(index=False):
        _cell_text(ax, matrix, row, scale)
    ax.set_xticks(range(len(matrix.columns)), [str(c) for c in matrix.columns], rotation=30,
                  ha="right")
    ax.set_yticks(range(len(matrix.index)), [str(i) for i in matrix.index])
    fig.colorbar(image, ax=ax, label=f"QUIC - TCP ({table['metric'].iloc[0]})")
    ax.set_title(WELCH_TITLE, fontsize=10)
    return fig


def _cell_text(ax: Axes, matrix: pd.DataFrame, row: Any, scale: float) -> None:
    """``+0.12 **`` and ``g = 1.3`` in the cell of one group and condition (white on a
    dark cell)."""
    i, j = list(matrix.index).index(row.condition), list(matrix.columns).index(row.group)
    diff = f"{row.difference:+.3g}" if finite(row.difference) else "n/a"
    g = f"g = {row.hedges_g:.2g}" if finite(row.hedges_g) else f"n = {row.n}/{row.n_tcp}"
    dark = finite(row.difference) and abs(row.difference) > 0.6 * (scale or 1)
    ax.text(j, i, f"{diff} {row.significance}\n{g}", ha="center", va="center", fontsize=8,
            color="white" if dark else "black")


def flow_quic_vs_tcp(source: Source) -> tuple[pd.DataFrame, Figure]:
    """:func:`flow_quic_vs_tcp_frame` (share) and :func:`flow_quic_vs_tcp_figure`."""
    table = flow_quic_vs_tcp_frame(source)
    return table, flow_quic_vs_tcp_figure(table)


__all__ = ["flow_fairness_figure", "flow_fairness_frame", "flow_fairness_sweep",
           "flow_fairness_table", "flow_quic_vs_tcp", "flow_quic_vs_tcp_figure",
           "flow_quic_vs_tcp_frame", "flow_share_figure",
           "flow_share_frame", "flow_share_matrix", "flow_timeline", "flow_timeline_figure",
           "flow_timeline_frame", "path_conditions"]
