"""Paper Fig. 3 and 4: goodput, packets the client sent (mostly ACKs) and UDP receive-buffer
drops against the receive buffer size, with the knee of the goodput curve."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from interop_runner.analysis.theories.stats import (
    STAT_COLUMNS,
    axis_number,
    axis_order,
    cell_stats,
    knee,
)
from interop_runner.analysis.views._common import (
    PAIR,
    axis_column,
    cell_medians,
    empty,
    figure,
    finite,
    has_values,
    no_data,
    no_data_axes,
    pair_label,
)

DEFAULT_BUFFER = 212992  # Linux's net.core.rmem_default (208 KiB); knobs use multiples of it
BUFFER_PATHS = ("knobs.rmem", "client_knobs.rmem", "server_knobs.rmem", "params.socket_rcvbuf")
# packets the client sent: interface counter (QUIC and TCP alike), else UDP datagrams, else pcap
PACKET_SOURCES = ("client_tx_packets", "client_udp_out_datagrams", "client_pcap_packets_out")
KNEE_OUT = ("knee_x", "knee_low", "knee_high", "knee_share", "knee_distribution",
            "knee_multiple", "knee_low_multiple", "knee_high_multiple")
COLUMNS = [*PAIR, "pair", "buffer", "multiple", *STAT_COLUMNS,
           "client_packets_sent", "packets_source", "client_rcvbuf_drops", "client_drop_share",
           "client_cpu_pct", "server_cpu_pct", *KNEE_OUT]
TITLE = "Receive buffer size (Fig. 3, 4)"


def multiple(value: Any) -> float:
    """A buffer setting as a multiple of the 208 KiB default: ``"16x"`` -> 16, a size in
    bytes (``"4MiB"``, 4194304) divided by 212992."""
    if isinstance(value, str) and value.strip().lower().endswith("x"):
        return axis_number(value)
    number = axis_number(value)
    return number / DEFAULT_BUFFER if finite(number) else math.nan


def buffer_sweep(frame: pd.DataFrame, axis: str | None = None, *, threshold: float = 0.95,
                 n_boot: int = 2000, seed: int = 0) -> tuple[pd.DataFrame, Figure]:
    """Goodput, client packets sent and client receive-buffer drops per pair and buffer size.

    ``axis``: the sweep axis (column ``axis_rmem``, label ``rmem`` or path ``knobs.rmem``);
    by default the axis of ``knobs.rmem`` (or a per-node rmem, or ``params.socket_rcvbuf``).
    One row per pair and buffer value: ``buffer`` (as configured), ``multiple`` (of 208 KiB),
    the :func:`~interop_runner.analysis.theories.stats.cell_stats` of the goodput, medians of
    ``client_packets_sent`` (``packets_source`` names the counter), ``client_rcvbuf_drops``
    (UdpRcvbufErrors), ``client_drop_share`` (drops / datagrams arriving) and both CPU
    shares, and the pair's knee (:func:`~interop_runner.analysis.theories.stats.knee` at
    ``threshold`` of the best median) with its bootstrap interval.
    """
    column = axis_column(frame, BUFFER_PATHS, ("rmem", "socket_rcvbuf"), explicit=axis)
    if column is None or not has_values(frame, "goodput_mbps"):
        what = "goodput" if column else f"a buffer size axis ({axis or 'knobs.rmem'})"
        return empty(COLUMNS), no_data(what, TITLE)
    data = frame[frame[column].notna()].copy()
    data["buffer"] = data[column].astype(object)
    keys = [*PAIR, "buffer"]
    table = cell_stats(data, keys, n_boot=n_boot, seed=seed)
    source = next((c for c in PACKET_SOURCES if has_values(data, c)), None)
    if has_values(data, "client_udp_rcvbuf_errors") and "client_udp_in_datagrams" in data:
        drops = pd.to_numeric(data["client_udp_rcvbuf_errors"]).astype(float)
        arrived = pd.to_numeric(data["client_udp_in_datagrams"]).astype(float) + drops
        data["_drop_share"] = (drops / arrived).where(arrived > 0)
    medians = cell_medians(data, keys, {
        "client_packets_sent": source or "-", "client_rcvbuf_drops": "client_udp_rcvbuf_errors",
        "client_drop_share": "_drop_share", "client_cpu_pct": "client_cpu_pct",
        "server_cpu_pct": "server_cpu_pct"})
    table = table.merge(medians, on=keys, how="left")
    table["packets_source"] = source
    knees = knee(data, "buffer", threshold=threshold, by=PAIR, n_boot=n_boot, seed=seed)
    for name, out in (("knee_x", "knee_multiple"), ("knee_low", "knee_low_multiple"),
                      ("knee_high", "knee_high_multiple")):
        knees[out] = [multiple(v) for v in knees[name]]
    table = table.merge(knees[[*PAIR, *[k for k in KNEE_OUT if k in knees]]], on=PAIR,
                        how="left")
    table["multiple"] = [multiple(v) for v in table["buffer"]]
    table["pair"] = [pair_label(s, c) for s, c in zip(table["server"], table["client"])]
    order = {v: i for i, v in enumerate(axis_order(table["buffer"]))}
    table["_order"] = table["buffer"].map(order)
    table = table.sort_values([*PAIR, "_order"], ignore_index=True)
    table = table.reindex(columns=COLUMNS)
    return table, _plot(table, order)


def _x(table: pd.DataFrame, order: dict[Any, int]) -> tuple["pd.Series[float]", bool]:
    numeric = table["multiple"].astype(float)
    if bool(np.isfinite(numeric).all()) and bool((numeric > 0).all()):
        return numeric, True
    return table["buffer"].map(order).astype(float), False


def _plot(table: pd.DataFrame, order: dict[Any, int]) -> Figure:
    fig, axes = figure(3, 1, size=(7.0, 9.0), sharex=True)
    x, numeric = _x(table, order)
    table = table.assign(_x=x)
    panels = [("median", "goodput [Mbit/s]", "goodput"),
              ("client_packets_sent", "packets sent by the client", "client packets sent"),
              ("client_rcvbuf_drops", "client receive-buffer drops", "receive-buffer drops")]
    for ax, (col, ylabel, what) in zip(axes, panels):
        if not table[col].notna().any():
            no_data_axes(ax, what)
            continue
        for pair, rows in table.groupby("pair", sort=True):
            _line(ax, rows, col, str(pair))
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    if numeric:
        axes[-1].set_xscale("log", base=2)
        ticks = sorted(set(x))
        axes[-1].set_xticks(ticks, [f"{t:g}" for t in ticks])
        axes[-1].set_xlabel("receive buffer [multiples of 208 KiB]")
    else:
        axes[-1].set_xticks(list(order.values()), [str(v) for v in order])
        axes[-1].set_xlabel("receive buffer")
    axes[0].set_title(TITLE)
    return fig


def _line(ax: Axes, rows: pd.DataFrame, col: str, pair: str) -> None:
    rows = rows[rows[col].notna()]
    (line,) = ax.plot(rows["_x"], rows[col].astype(float), marker="o", label=pair)
    if col != "median":
        return
    color = line.get_color()
    ax.fill_between(rows["_x"], rows["q1"].astype(float), rows["q3"].astype(float),
                    color=color, alpha=0.15)
    low = (rows["median"] - rows["ci_low"]).astype(float).clip(lower=0)
    high = (rows["ci_high"] - rows["median"]).astype(float).clip(lower=0)
    ax.errorbar(rows["_x"], rows["median"].astype(float), yerr=[low, high], fmt="none",
                ecolor=color, capsize=3)
    first = rows.iloc[0]
    if finite(first.get("knee_multiple")) and bool((rows["multiple"] > 0).all()):
        ax.axvline(float(first["knee_multiple"]), color=color, linestyle="--", linewidth=1)
        if finite(first["knee_low_multiple"]) and finite(first["knee_high_multiple"]):
            ax.axvspan(float(first["knee_low_multiple"]), float(first["knee_high_multiple"]),
                       color=color, alpha=0.08)
