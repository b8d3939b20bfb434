"""The ACK-ratio sweep (paper 003, section V, Fig. 7): per pair and base RTT, goodput and the
client's packets against the ACK ratio asked for.

Left: the mean goodput of the ok attempts with their min-max as error bars, a line per pair,
solid / dashed / dotted per base RTT. Right: the client's datagrams sent per datagram received
(``client_ack_ratio_measured``, :mod:`interop_runner.analysis.frames.ack_ratio`) with the ideal 1/n
dotted: a stack that ACKs per receive batch, or whose ACK timer fires first, lies below it.
The x axis is the ratio 1:n on a log scale.

Input is the frame of :func:`~interop_runner.analysis.load_results`; a frame without any
``ack_ratio`` asked for gives an empty frame and the "no data" figure.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from interop_runner.analysis.frames.ack_ratio import ack_ratio_summary
from interop_runner.analysis.views._common import empty, figure, has_values, no_data, pair_label

COLUMNS = ["pair", "server", "client", "path_rtt_ms", "ack_ratio", "n", "goodput_mean",
           "goodput_std", "goodput_min", "goodput_max", "sent", "received", "ratio",
           "ratio_min", "ratio_max"]
TITLE = "Goodput and client packets against the ACK ratio (paper 003, Fig. 7)"
LINESTYLES = ("-", "--", ":", "-.")


def ack_ratio_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """:func:`~interop_runner.analysis.frames.ack_ratio.ack_ratio_summary` of the attempts that
    asked for an ACK ratio, with a ``pair`` label: one row per pair, base RTT (ms; NA without
    a path) and ratio n (1:n), goodput in Mbit/s, the client's datagram counts and measured
    ratio (NA without the nstat monitor). Empty without any ``ack_ratio``."""
    if not has_values(frame, "ack_ratio"):
        return empty(COLUMNS)
    summary = ack_ratio_summary(frame[frame["ack_ratio"].notna()])
    if summary.empty:
        return empty(COLUMNS)
    summary.insert(0, "pair", [pair_label(s, c)
                               for s, c in zip(summary["server"], summary["client"])])
    return summary.reindex(columns=COLUMNS).sort_values(
        ["pair", "path_rtt_ms", "ack_ratio"], ignore_index=True)


def _lines(ax: Axes, table: pd.DataFrame, y: str, low: str, high: str) -> None:
    """Per pair (colour) and RTT (line style) ``y`` against the ratio, ``low``-``high`` as
    error bars."""
    colours = {p: f"C{i % 10}" for i, p in enumerate(sorted(table["pair"].unique()))}
    rtts = sorted(table["path_rtt_ms"].dropna().unique())
    for (pair, rtt), rows in table.groupby(["pair", "path_rtt_ms"], dropna=False, sort=True):
        rows = rows[rows[y].notna()]
        if rows.empty:
            continue
        x, mid = rows["ack_ratio"].astype(float), rows[y].astype(float)
        spread = [mid - rows[low].astype(float), rows[high].astype(float) - mid]
        index = rtts.index(rtt) if rtt in rtts else None  # NaN (no path) is not in rtts
        style = "-" if index is None else LINESTYLES[index % len(LINESTYLES)]
        rtt_text = "" if index is None else f", {rtts[index]:g} ms"
        ax.errorbar(x, mid, yerr=spread, color=colours[str(pair)], linestyle=style,
                    marker="o", capsize=3, label=f"{pair}{rtt_text}")
    ax.set_xscale("log")
    ticks = sorted(table["ack_ratio"].astype(int).unique())
    ax.set_xticks(ticks, [f"1:{n}" for n in ticks])
    ax.set_xlabel("ACK ratio asked for (ACK every n-th packet)")
    ax.grid(alpha=0.3)


def ack_ratio_figure(table: pd.DataFrame) -> Figure:
    """The frame of :func:`ack_ratio_frame` in two panels: goodput and the client's
    measured ratio (sent / received datagrams, the ideal 1/n dotted) against the ratio."""
    if table.empty:
        return no_data("ACK ratios asked for (params.ack_ratio)", TITLE)
    fig, (left, right) = figure(1, 2, size=(11.0, 4.4))
    _lines(left, table, "goodput_mean", "goodput_min", "goodput_max")
    left.set_ylabel("goodput [Mbit/s] (mean, min-max)")
    left.set_ylim(bottom=0)
    left.legend(fontsize=8, loc="lower left")
    if table["ratio"].notna().any():
        _lines(right, table, "ratio", "ratio_min", "ratio_max")
        n = np.geomspace(float(table["ack_ratio"].min()), float(table["ack_ratio"].max()), 20)
        right.plot(n, 1.0 / n, color="grey", linestyle=":", label="ideal 1/n")
        right.set_yscale("log")
        right.set_ylabel("client datagrams sent / received")
    else:
        right.text(0.5, 0.5, "no client datagram counters (nstat monitor)", ha="center",
                   va="center", transform=right.transAxes, color="#555555")
    fig.suptitle(TITLE)
    return fig


def ack_ratio_sweep(frame: pd.DataFrame) -> tuple[pd.DataFrame, Figure]:
    """:func:`ack_ratio_frame` and :func:`ack_ratio_figure` of the results frame."""
    table = ack_ratio_frame(frame)
    return table, ack_ratio_figure(table)
