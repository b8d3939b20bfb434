"""Overviews of a campaign: the server x client goodput matrix (paper Fig. 6) and what limited
each cell (the bottleneck labels of :mod:`interop_runner.analysis.theories.diagnosis`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from interop_runner.analysis.theories.diagnosis import LABELS
from interop_runner.analysis.theories.matrix import plot_matrix, status_matrix
from interop_runner.analysis.theories.stats import STAT_COLUMNS, cell_stats, failed_mask, ok_mask
from interop_runner.analysis.views._common import (
    PAIR,
    empty,
    figure,
    finish_share_bars,
    has_values,
    natural_key,
    no_data,
    pair_label,
)

HEATMAP_COLUMNS = [*PAIR, *STAT_COLUMNS, "failed", "timeout", "unsupported", "label"]
BOTTLENECK_COLUMNS = [*PAIR, "variant", "cell", "attempts", "ok", "failures", *LABELS,
                      "most_common", "share"]
COLORS = {"above_ceiling": "black", "path_rate": "tab:olive", "link_rate": "tab:green",
          "delay_line_cpu": "tab:red", "receive_buffer_drops": "tab:orange",
          "server_cpu": "tab:blue", "client_cpu": "tab:purple", "undetermined": "tab:gray",
          "not ok": "white"}


def interop_heatmap(frame: pd.DataFrame, *, n_boot: int = 2000, seed: int = 0
                    ) -> tuple[pd.DataFrame, Figure]:
    """Median goodput of every server x client pair, failures marked in the cells.

    Per pair: :func:`~interop_runner.analysis.theories.stats.cell_stats` of the goodput, the
    attempts per failure status and the cell's text from
    :func:`~interop_runner.analysis.theories.matrix.status_matrix` (``1234.5 (1/3 failed)``,
    ``unsupported``). The figure is :func:`~interop_runner.analysis.theories.matrix.plot_matrix`; a
    frame with several sweep variants is pooled, which the title says.
    """
    title = "Goodput per server x client (Fig. 6)"
    if not all(c in frame.columns for c in (*PAIR, "status")) or frame.empty:
        return empty(HEATMAP_COLUMNS), no_data("server/client attempts", title)
    if "goodput_mbps" not in frame.columns:
        return empty(HEATMAP_COLUMNS), no_data("goodput", title)
    table = cell_stats(frame, PAIR, n_boot=n_boot, seed=seed)
    counts = frame.groupby(PAIR, observed=True)["status"].value_counts().unstack(fill_value=0)
    counts = counts.reindex(columns=["failed", "timeout", "unsupported"], fill_value=0)
    table = table.merge(counts.reset_index(), on=PAIR, how="left")
    labels = status_matrix(frame)
    table["label"] = pd.Series([str(labels.at[s, c]) for s, c in
                                zip(table["server"], table["client"])], index=table.index,
                               dtype=object)
    table = table.reindex(columns=HEATMAP_COLUMNS)
    variants = frame["variant"].dropna().nunique() if "variant" in frame else 0
    if variants > 1:
        title += f", pooled over {variants} variants"
    servers, clients = table["server"].nunique(), table["client"].nunique()
    fig, (ax,) = figure(size=(max(4.5, 0.9 * clients + 2.5), max(3.5, 0.7 * servers + 1.5)))
    plot_matrix(frame, ax=ax, title=title)
    return table, fig


def bottlenecks(frame: pd.DataFrame) -> tuple[pd.DataFrame, Figure]:
    """The bottleneck labels per pair (and sweep variant): how many ok attempts got each
    label, the most common one and its share of the ok attempts; failed attempts are
    counted in ``failures`` (they get no label)."""
    title = "What limited the runs"
    if not has_values(frame, "bottleneck") or not all(c in frame for c in PAIR):
        return empty(BOTTLENECK_COLUMNS), no_data("bottleneck labels", title)
    data = frame.copy()
    data["variant"] = data["variant"].fillna("") if "variant" in data else ""
    data["_ok"], data["_failed"] = ok_mask(data), failed_mask(data)
    rows = []
    for (server, client, variant), group in data.groupby([*PAIR, "variant"], sort=True,
                                                         observed=True):
        labels = group.loc[group["_ok"], "bottleneck"].dropna().astype(str).value_counts()
        ok = int(group["_ok"].sum())
        top = labels.index[0] if len(labels) else None
        cell = pair_label(server, client) + (f" [{variant}]" if variant else "")
        rows.append({"server": server, "client": client, "variant": variant, "cell": cell,
                     "attempts": len(group), "ok": ok, "failures": int(group["_failed"].sum()),
                     **{lab: int(labels.get(lab, 0)) for lab in LABELS},
                     "most_common": top,
                     "share": float(labels.iloc[0]) / ok if top is not None and ok else np.nan})
    table = pd.DataFrame(rows, columns=BOTTLENECK_COLUMNS)
    table = table.sort_values(["server", "client", "variant"], key=lambda s: s.map(natural_key),
                              ignore_index=True)
    fig, (ax,) = figure(size=(8.0, max(3.0, 0.35 * len(table) + 1.5)))
    left = np.zeros(len(table))
    y = np.arange(len(table))
    total = table["attempts"].to_numpy(dtype=float)
    for label in (*LABELS, "not ok"):
        counts = (table["attempts"] - table["ok"] if label == "not ok"
                  else table[label]).to_numpy(dtype=float)
        if counts.any():
            ax.barh(y, counts / total, left=left, color=COLORS[label], label=label,
                    edgecolor="black", linewidth=0.3, hatch="//" if label == "not ok" else None)
            left += counts / total
    finish_share_bars(ax, list(table["cell"]), "share of attempts", title)
    return table, fig
