"""Measured goodput against the closed-form ceilings of paper 003, section IV (its Fig. 3-5):
the attempts' goodput as points against the path's loss and against its base RTT, each pair's
closed-form curve drawn over them: min(link, Mathis, window / RTT) as its attempts' ceilings
give it, moved along RTT and loss by the formulas (:mod:`interop_runner.analysis.theories.ceilings`,
docs/closed-form.md).

Input is the frame of :func:`~interop_runner.analysis.load_results`; attempts without a ceiling
(the direct link, a path whose calibration is off or failed) are left out, and a frame with
none gives an empty frame and the "no data" figure.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from interop_runner.analysis.theories.ceilings import flow_control_ceiling_mbps
from interop_runner.analysis.theories.stats import ok_mask
from interop_runner.analysis.views._common import (
    PAIR,
    empty,
    figure,
    finite,
    has_values,
    no_data,
    pair_label,
)

# frame column -> closed-form table column
SOURCES = {"campaign": "campaign", "repetition": "repetition", "attempt": "attempt",
           "status": "status", "rate_mbps": "path_rate_mbps", "rtt_ms": "path_rtt_ms",
           "loss": "path_loss", "packet_bytes": "ceiling_packet_bytes",
           "payload_bytes": "ceiling_payload_bytes", "window_bytes": "ceiling_window_bytes",
           "goodput_mbps": "goodput_mbps", "link_mbps": "ceiling_link_mbps",
           "loss_mbps": "ceiling_loss_mbps", "flow_control_mbps": "ceiling_flow_control_mbps",
           "ceiling_mbps": "ceiling_mbps", "basis": "ceiling_basis", "ratio": "ceiling_ratio",
           "exceeded": "ceiling_exceeded"}
COLUMNS = [*PAIR, "pair", *SOURCES]
TITLE = "Goodput against the closed-form ceilings (paper 003, Fig. 3-5)"
GRID_POINTS = 80
HEADROOM = 1.15  # the y axis: above the highest point or binding ceiling


def closed_form_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per attempt with a ceiling and a goodput (ok attempts, and any attempt flagged
    above a ceiling): the pair as it ran and its label, the path (``rate_mbps``, ``rtt_ms``,
    ``loss``), the packet and payload bytes and receive window the ceilings assumed, the
    goodput, each ceiling (``link_mbps``, ``loss_mbps``, ``flow_control_mbps``; <NA> where
    it does not apply), the lowest (``ceiling_mbps``, ``basis``), ``ratio`` (goodput / lowest)
    and ``exceeded`` (above a ceiling beyond its tolerance). Sorted by pair, path and
    repetition; empty without any ceiling."""
    if not has_values(frame, "ceiling_mbps"):
        return empty(COLUMNS)
    flagged = frame.get("ceiling_exceeded", pd.Series(pd.NA, index=frame.index)
                        ).astype("boolean").fillna(False).astype(bool)
    keep = frame["ceiling_mbps"].notna() & (ok_mask(frame) | flagged)
    data = frame[keep]
    if data.empty:
        return empty(COLUMNS)
    out = data.reindex(columns=[*PAIR, *SOURCES.values()]).rename(
        columns={src: name for name, src in SOURCES.items()})
    out.insert(2, "pair", [pair_label(s, c) for s, c in zip(out["server"], out["client"])])
    order = ["pair", "rate_mbps", "rtt_ms", "loss", "repetition", "attempt"]
    return out.sort_values(order, kind="stable", ignore_index=True).reindex(columns=COLUMNS)


def curve_mbps(row: Any, rtt_ms: Any, loss: Any) -> np.ndarray:
    """The closed-form goodput of a pair's path at other base RTTs and losses (arrays or
    numbers, broadcast): the lowest of the ceilings that applied to its attempts, each moved
    by its formula. ``row`` has ``link_mbps`` (independent of RTT and loss), ``mathis_k``
    (``loss_mbps`` x RTT x sqrt(loss): Mathis's value is mathis_k / (RTT x sqrt(loss)); NaN
    when the sender did not run Reno) and ``window_bytes``; NaN leaves a ceiling out."""
    rtts, losses = np.broadcast_arrays(np.asarray(rtt_ms, float), np.asarray(loss, float))
    return np.array([_lowest(row, float(r), float(p))
                     for r, p in zip(rtts.ravel(), losses.ravel())]).reshape(rtts.shape)


def _lowest(row: Any, rtt_ms: float, loss: float) -> float:
    """The lowest ceiling of :func:`curve_mbps` at one base RTT and loss (inf: none)."""
    ceilings = [float(row.link_mbps) if finite(row.link_mbps) else math.inf]
    if finite(row.mathis_k) and loss > 0:
        ceilings.append(float(row.mathis_k) / (rtt_ms * math.sqrt(loss)))
    if finite(row.window_bytes):
        ceilings.append(flow_control_ceiling_mbps(float(row.window_bytes), rtt_ms))
    return min(ceilings)


def _grid(values: "pd.Series[Any]", log: bool) -> np.ndarray:
    """Points spanning the values with a margin (a log grid for the loss)."""
    low, high = float(values.min()), float(values.max())
    if log:
        return np.geomspace(low / 3.0, high * 3.0, GRID_POINTS)
    return np.linspace(max(low / 2.0, 0.1), high * 1.5, GRID_POINTS)


def _typical(rows: pd.DataFrame) -> "pd.Series[float]":
    """What :func:`curve_mbps` needs, the median over the attempts a curve is drawn for, with
    the path's RTT and loss."""
    number = {c: pd.to_numeric(rows[c], errors="coerce").astype(float)
              for c in ("rtt_ms", "loss", "link_mbps", "loss_mbps", "window_bytes")}
    mathis_k: "pd.Series[float]" = number["loss_mbps"] * number["rtt_ms"] * number["loss"] ** 0.5
    return pd.Series({"rtt_ms": number["rtt_ms"].median(), "loss": number["loss"].median(),
                      "link_mbps": number["link_mbps"].median(), "mathis_k": mathis_k.median(),
                      "window_bytes": number["window_bytes"].median()}, dtype=float)


def _curves(ax: Axes, data: pd.DataFrame, x: str, key: str, colours: dict[str, str]
            ) -> dict[float, str]:
    """Per pair, path rate, receive window (flow_control_window sweeps it) and value of
    ``key`` its closed-form curve over ``x``, a linestyle per value of ``key``; returns the
    linestyles."""
    log = x == "loss"
    styles = {k: ("-", "--", ":", "-.")[i % 4]
              for i, k in enumerate(sorted(data[key].astype(float).unique()))}
    grid = _grid(data[x].astype(float), log)
    for (pair, *_), rows in data.groupby(["pair", key, "rate_mbps", "window_bytes"], sort=True,
                                         dropna=False):
        row, value = _typical(rows), float(rows[key].iloc[0])
        rtt, loss = (row.rtt_ms, grid) if log else (grid, row.loss)
        ax.plot(grid, curve_mbps(row, rtt, loss), color=colours[str(pair)],
                linestyle=styles[value], linewidth=1, label=f"_{pair} {key} {value:g}")
    return styles


def _panel(ax: Axes, table: pd.DataFrame, x: str, key: str, colours: dict[str, str]) -> None:
    """Points of goodput against ``x`` in the pair's colour (a red cross on those above a
    ceiling) under the curves of :func:`_curves`; loss on a log scale (lossy paths only)."""
    log = x == "loss"
    data = table[table["loss"].astype(float) > 0] if log else table
    styles = _curves(ax, data, x, key, colours)
    for pair, rows in data.groupby("pair", sort=True):
        ax.plot(rows[x].astype(float), rows["goodput_mbps"].astype(float), marker="o",
                linestyle="none", color=colours[str(pair)], label=str(pair))
    above = data[data["exceeded"].astype("boolean").fillna(False).astype(bool)]
    if len(above):
        ax.plot(above[x].astype(float), above["goodput_mbps"].astype(float), marker="x",
                markersize=10, linestyle="none", color="firebrick", label="above a ceiling")
    if log:
        ax.set_xscale("log")
    ax.set_xlabel("random loss" if log else "base RTT [ms]")
    ax.set_title(f"against {'loss' if log else 'RTT'}, a curve per "
                 f"{'RTT' if log else 'loss'}: {_style_key(styles, key)}", fontsize=9)
    ax.grid(alpha=0.3)


def _style_key(styles: dict[float, str], key: str) -> str:
    """``solid 10 ms, dashed 50 ms`` (RTT) or ``solid 0 %, dashed 0.1 %`` (loss): the
    curves' linestyles."""
    names = {"-": "solid", "--": "dashed", ":": "dotted", "-.": "dash-dot"}
    if key == "rtt_ms":
        return ", ".join(f"{names[s]} {v:g} ms" for v, s in styles.items())
    return ", ".join(f"{names[s]} {100 * v:g} %" for v, s in styles.items())


def closed_form_figure(table: pd.DataFrame) -> Figure:
    """The frame of :func:`closed_form_frame` drawn in two panels: goodput against loss
    (log scale, lossy paths only; a curve per pair and RTT) and against base RTT (a curve per
    pair and loss); points in the pair's colour, a red cross on an attempt above a ceiling.
    Curves are :func:`curve_mbps`: min(link, Mathis where the sender ran Reno, window / RTT
    where the window is known) of that pair's attempts, one per receive window."""
    if table.empty:
        return no_data("a calibrated path with a ceiling (ceiling_* columns)", TITLE)
    colours = {p: f"C{i % 10}" for i, p in enumerate(sorted(set(table["pair"].astype(str))))}
    lossy = bool((table["loss"].astype(float) > 0).any())
    fig, axes = figure(1, 2 if lossy else 1, size=(11.0 if lossy else 6.0, 4.4), sharey=True)
    if lossy:
        _panel(axes[0], table, "loss", "rtt_ms", colours)
    _panel(axes[-1], table, "rtt_ms", "loss", colours)
    top = max(float(table["goodput_mbps"].astype(float).max()),
              float(table["ceiling_mbps"].astype(float).max()))
    axes[0].set_ylim(0, HEADROOM * top)
    axes[0].set_ylabel("goodput [Mbit/s]")
    axes[0].legend(fontsize=8, loc="lower left")
    fig.suptitle(TITLE)
    return fig


def closed_form(frame: pd.DataFrame) -> tuple[pd.DataFrame, Figure]:
    """:func:`closed_form_frame` and :func:`closed_form_figure` of the results frame."""
    table = closed_form_frame(frame)
    return table, closed_form_figure(table)
