"""Paper Fig. 11: core pinning. Client core x server core, mean goodput per cell and its
difference to the mean over all cells, per implementation pair."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from interop_runner.analysis.theories.matrix import colour_limits
from interop_runner.analysis.theories.stats import axis_order, failed_mask, ok_mask
from interop_runner.analysis.views._common import (
    PAIR,
    axis_column,
    empty,
    figure,
    has_values,
    no_data,
    pair_label,
)

SERVER_PATHS = ("server_knobs.pin",)
CLIENT_PATHS = ("client_knobs.pin",)
BOTH_PATHS = ("knobs.pin",)
NONE = "none"  # a cell without pinning (the axis value null)
COLUMNS = [*PAIR, "pair", "server_core", "client_core", "attempts", "n", "failures", "mean",
           "std", "median", "pair_mean", "deviation"]


def _cores(frame: pd.DataFrame, server_axis: str | None,
           client_axis: str | None) -> tuple[str | None, str | None]:
    server = axis_column(frame, SERVER_PATHS, ("server_cpu", "server_pin", "server_core"),
                         explicit=server_axis)
    client = axis_column(frame, CLIENT_PATHS, ("client_cpu", "client_pin", "client_core"),
                         explicit=client_axis)
    both = axis_column(frame, BOTH_PATHS, ("pin",))
    return server or both, client or both


def pinning(frame: pd.DataFrame, *, server_axis: str | None = None,
            client_axis: str | None = None) -> tuple[pd.DataFrame, Figure]:
    """Mean goodput per pair, server core and client core, and its deviation from the pair's
    overall mean (the mean of the cell means, so every pinning weighs the same).

    The cores come from the ``server_knobs.pin`` and ``client_knobs.pin`` axes (found by
    path in campaign.json, or by the labels ``server_cpu``/``client_cpu``; ``server_axis``/
    ``client_axis`` name them explicitly); a ``knobs.pin`` axis pins both sides alike, and a
    side without an axis is ``none``. Per cell: ``attempts``, ``n`` (ok), ``failures``,
    ``mean``, ``std`` (ddof=1), ``median``, ``pair_mean`` and ``deviation`` = mean -
    pair_mean (Mbit/s).
    """
    title = "Core pinning (Fig. 11)"
    server_col, client_col = _cores(frame, server_axis, client_axis)
    if server_col is None and client_col is None:
        return empty(COLUMNS), no_data("a pinning axis (server_knobs.pin / client_knobs.pin)",
                                       title)
    if not has_values(frame, "goodput_mbps"):
        return empty(COLUMNS), no_data("goodput", title)
    data = frame.copy()
    for side, col in (("server_core", server_col), ("client_core", client_col)):
        data[side] = data[col].astype(object).where(data[col].notna(), NONE) if col else NONE
        data[side] = data[side].map(str)
    data["_ok"] = ok_mask(data)
    data["_failed"] = failed_mask(data)
    data["_value"] = pd.to_numeric(data["goodput_mbps"]).astype(float).where(data["_ok"])
    keys = [*PAIR, "server_core", "client_core"]
    grouped = data.groupby(keys, sort=True, observed=True)
    table = pd.DataFrame({
        "attempts": grouped.size(), "n": grouped["_ok"].sum(),
        "failures": grouped["_failed"].sum(), "mean": grouped["_value"].mean(),
        "std": grouped["_value"].std(ddof=1), "median": grouped["_value"].median(),
    }).reset_index()
    table["pair_mean"] = table.groupby(PAIR, observed=True)["mean"].transform("mean")
    table["deviation"] = table["mean"] - table["pair_mean"]
    table["pair"] = [pair_label(s, c) for s, c in zip(table["server"], table["client"])]
    table = table.reindex(columns=COLUMNS)
    return table, _plot(table, title)


def _plot(table: pd.DataFrame, title: str) -> Figure:
    pairs = list(dict.fromkeys(table["pair"]))
    fig, axes = figure(2, len(pairs), size=(3.6 * len(pairs) + 1.0, 6.5))
    for j, pair in enumerate(pairs):
        rows = table[table["pair"] == pair]
        servers = axis_order(rows["server_core"])
        clients = axis_order(rows["client_core"])
        for i, (col, cmap) in enumerate((("mean", "viridis"), ("deviation", "RdBu"))):
            grid = rows.pivot_table(index="server_core", columns="client_core", values=col,
                                    aggfunc="first", dropna=False)
            grid = grid.reindex(index=servers, columns=clients)
            _heatmap(axes[i * len(pairs) + j], grid, cmap, col == "deviation")
        axes[j].set_title(f"{pair}: mean goodput")
        axes[len(pairs) + j].set_title(f"{pair}: difference to mean")
    fig.suptitle(title)
    return fig


def _heatmap(ax: Axes, grid: pd.DataFrame, cmap: str, centred: bool) -> None:
    values = grid.to_numpy(dtype=float, na_value=np.nan)
    finite = values[np.isfinite(values)]
    limit = float(np.abs(finite).max()) if finite.size else 1.0
    limit = limit or 1.0
    # the mean goodput's scale anchored as the goodput matrix's (a narrow spread stays narrow)
    vmin, vmax = (-limit, limit) if centred else colour_limits(values) or (None, None)
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, aspect="auto", vmin=vmin,
                      vmax=vmax)
    ax.set_facecolor("#dddddd")
    ax.set_xticks(range(len(grid.columns)), [str(c) for c in grid.columns])
    ax.set_yticks(range(len(grid.index)), [str(c) for c in grid.index])
    ax.set_xlabel("client core")
    ax.set_ylabel("server core")
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            digits = 1 if limit < 10 else 0
            text = f"{values[i, j]:{'+' if centred else ''}.{digits}f}"
            ax.text(j, i, text if np.isfinite(values[i, j]) else "-", ha="center",
                    va="center", fontsize=8)
    ax.figure.colorbar(image, ax=ax, label="Mbit/s")
