"""Emulated paths (issue 26): goodput as a fraction of the configured bottleneck rate against
the bottleneck buffer in bandwidth-delay products (one panel per path, one line per
implementation pair, the repetitions' min-max range as error bars), the paths' calibration
(configured against measured) and the bottleneck's counters per attempt.

Input is the frame of :func:`~interop_runner.analysis.load_results`, whose path columns
(:data:`~interop_runner.analysis.frames.path_columns.PATH_COLUMNS`) are <NA> for attempts over the
direct link: a campaign without a path gives empty frames and the "no data" figure.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from interop_runner.analysis.frames.results import load_results
from interop_runner.analysis.theories.stats import failed_mask, ok_mask
from interop_runner.analysis.views._common import (
    PAIR,
    Source,
    as_paths,
    empty,
    figure,
    finite,
    has_values,
    no_data,
    pair_label,
)

# what tells two paths apart in the buffer view: path column -> its name there (with units)
PATH_KEYS = {"path_rate_mbps": "rate_mbps", "path_rtt_ms": "rtt_ms",
             "path_loss": "loss_fraction", "path_jitter": "jitter_cv", "path_links": "links"}
BUFFER_COLUMNS = [*PATH_KEYS.values(), "buffer_bdp", "buffer_bytes", *PAIR, "pair",
                  "attempts", "failures", "n", "goodput_fraction_median",
                  "goodput_fraction_min", "goodput_fraction_max", "goodput_median_mbps",
                  "bottleneck_drops_median_packets", "calibration_ok"]
CALIBRATION_COLUMNS = ["path_key", "backend", "placement", "links", "buffer_bdp",
                       "buffer_bytes", "rtt_configured_ms", "rtt_calibrated_ms",
                       "rate_configured_mbps", "rate_calibrated_mbps", "queue_configured_ms",
                       "queue_calibrated_ms", "loss_configured", "loss_calibrated",
                       "calibration_ok", "attempts"]
# calibration table column -> its source (queue_configured_ms: buffer / rate, computed)
CALIBRATION = {"backend": "path_backend", "placement": "path_placement", "links": "path_links",
               "buffer_bdp": "path_buffer_bdp", "buffer_bytes": "path_buffer_bytes",
               "rtt_configured_ms": "path_rtt_ms", "rtt_calibrated_ms": "path_cal_rtt_ms",
               "rate_configured_mbps": "path_rate_mbps",
               "rate_calibrated_mbps": "path_cal_rate_mbps",
               "queue_calibrated_ms": "path_cal_queue_ms", "loss_configured": "path_loss",
               "loss_calibrated": "path_cal_loss"}
COUNTERS = ["bottleneck_sent_bytes", "bottleneck_sent_packets", "bottleneck_drops",
            "bottleneck_overlimits", "path_loss_drops", "delayline_received",
            "delayline_delivered", "delayline_dropped", "delayline_reordered",
            "delayline_cpu_s"]
COUNTER_COLUMNS = ["campaign", *PAIR, "path_key", "path_rate_mbps", "path_rtt_ms",
                   "path_buffer_bdp", "repetition", "attempt", "status", "goodput_mbps",
                   "goodput_fraction", *COUNTERS]
TITLE = "Goodput against the bottleneck buffer"
BDP_DIGITS = 3  # buffer_bdp is rounded to group by: bytes / (rate x RTT) is rarely exact
PANEL_COLUMNS = 3


def _numbers(frame: pd.DataFrame, column: str) -> "pd.Series[float]":
    """A column as floats (NaN where missing or absent)."""
    if column not in frame.columns:
        return pd.Series(math.nan, index=frame.index, dtype=float)
    return pd.to_numeric(frame[column], errors="coerce").astype(float)


def _written(frame: pd.DataFrame, role: str) -> "pd.Series[Any]":
    """The implementation of a role as the campaign wrote it (``cell_<role>``), else the one
    that ran (``<role>``)."""
    ran = frame[role].astype(object) if role in frame.columns \
        else pd.Series(None, index=frame.index, dtype=object)
    if f"cell_{role}" not in frame.columns:
        return ran
    written = frame[f"cell_{role}"].astype(object)
    return written.where(written.notna(), ran)


def _first(values: "pd.Series[Any]") -> Any:
    """The first value present, None when there is none."""
    present = values.dropna()
    return present.iloc[0] if len(present) else None


def _first_of(frame: pd.DataFrame, column: str) -> Any:
    """The first value present in a column, None when there is none or no such column."""
    return _first(frame[column]) if column in frame.columns else None


def _verdict(values: "pd.Series[Any]") -> Any:
    """Calibration verdict of attempts: True when every known one passed, False when any
    failed, <NA> when none is known (a path that was not calibrated)."""
    known = values.dropna()
    return bool(known.astype(bool).all()) if len(known) else pd.NA


def _path_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The attempts over a path with a buffer: path keys (renamed, floats), buffer, the
    written pair and what the buffer view aggregates."""
    if not has_values(frame, "path_key") or not has_values(frame, "path_buffer_bdp"):
        return pd.DataFrame()
    data = frame[frame["path_key"].notna() & frame["path_buffer_bdp"].notna()]
    out = pd.DataFrame({name: _numbers(data, column) for column, name in PATH_KEYS.items()},
                       index=data.index)
    out["buffer_bdp"] = _numbers(data, "path_buffer_bdp").round(BDP_DIGITS)
    out["buffer_bytes"] = _numbers(data, "path_buffer_bytes")
    for role in PAIR:
        out[role] = _written(data, role)
    for column in ("goodput_fraction", "goodput_mbps", "bottleneck_drops"):
        out[column] = _numbers(data, column)
    out["status"] = data["status"] if "status" in data.columns else "ok"
    out["calibration_ok"] = data["path_calibration_ok"].astype(object) \
        if "path_calibration_ok" in data.columns else None
    return out


def path_buffer_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Per path, buffer and implementation pair: goodput as a fraction of the configured
    bottleneck rate over the ok attempts.

    A path is its rate (``rate_mbps``), base RTT (``rtt_ms``), random loss
    (``loss_fraction``), delay jitter (``jitter_cv``) and number of links (``links``); the
    buffer is ``buffer_bdp`` (bottleneck buffer / (rate x base RTT), rounded to 3 decimals)
    with its ``buffer_bytes``; the pair is the one the campaign wrote (``cell_server``/
    ``cell_client``, else ``server``/``client``). Per cell: ``attempts``, ``failures``
    (not ok: counted, left out of every statistic), ``n`` (ok attempts with a goodput
    fraction), the median, min and max of ``goodput_fraction``, the median goodput in
    Mbit/s and of the packets the bottleneck dropped, and ``calibration_ok`` (every known
    calibration of the cell's attempts passed; <NA>: not calibrated). Sorted by path,
    pair and buffer; empty without any attempt over a path.
    """
    data = _path_rows(frame)
    if data.empty:
        return empty(BUFFER_COLUMNS)
    keys = [*PATH_KEYS.values(), "buffer_bdp", *PAIR]
    ok, failed = ok_mask(data, "goodput_fraction"), failed_mask(data)
    rows = []
    for key, group in data.groupby(keys, sort=False, dropna=False):
        good = group[ok.loc[group.index]]
        fraction = good["goodput_fraction"]
        rows.append({**dict(zip(keys, key)), "buffer_bytes": _first(group["buffer_bytes"]),
                     "attempts": len(group), "failures": int(failed.loc[group.index].sum()),
                     "n": len(good), "goodput_fraction_median": fraction.median(),
                     "goodput_fraction_min": fraction.min(),
                     "goodput_fraction_max": fraction.max(),
                     "goodput_median_mbps": good["goodput_mbps"].median(),
                     "bottleneck_drops_median_packets": good["bottleneck_drops"].median(),
                     "calibration_ok": _verdict(group["calibration_ok"])})
    table = pd.DataFrame(rows)
    table["pair"] = [pair_label(s, c) for s, c in zip(table["server"], table["client"])]
    for column in ("links", "buffer_bytes"):
        table[column] = table[column].astype(float).round().astype("Int64")
    table["calibration_ok"] = table["calibration_ok"].astype("boolean")
    order = [*PATH_KEYS.values(), "server", "client", "buffer_bdp"]
    table = table.sort_values(order, na_position="last", kind="stable", ignore_index=True)
    return table.reindex(columns=BUFFER_COLUMNS)


def _path_label(row: Any) -> str:
    """``20 Mbit/s, 50 ms RTT`` (with loss, jitter and links where they are set)."""
    parts = [f"{row.rate_mbps:g} Mbit/s" if finite(row.rate_mbps) else "rate ?",
             f"{row.rtt_ms:g} ms RTT" if finite(row.rtt_ms) else "RTT ?"]
    if finite(row.loss_fraction) and row.loss_fraction > 0:
        parts.append(f"loss {100 * row.loss_fraction:g} %")
    if finite(row.jitter_cv) and row.jitter_cv > 0:
        parts.append(f"jitter CV {row.jitter_cv:g}")
    if finite(row.links) and row.links > 1:
        parts.append(f"{int(row.links)} links")
    return ", ".join(parts)


def path_buffer_figure(table: pd.DataFrame) -> Figure:
    """The frame of :func:`path_buffer_frame` drawn: goodput fraction (0 to 1.05; 1 is the
    configured bottleneck rate, dashed) against the buffer in BDP (log scale, a tick per
    buffer), one panel per path, one line per pair with the min-max range as error bars; a
    cell without an ok attempt is a cross at 0; a panel whose calibration missed says so.
    """
    if table.empty:
        return no_data("an emulated path (path_* columns)", TITLE)
    table = table.assign(_panel=[_path_label(r) for r in table.itertuples(index=False)])
    panels = list(dict.fromkeys(table["_panel"]))
    ncols = min(len(panels), PANEL_COLUMNS)
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = figure(nrows, ncols, size=(4.8 * ncols + 0.6, 3.8 * nrows + 0.4),
                       sharey=True)
    for ax in axes[len(panels):]:
        ax.remove()
    colours = {p: f"C{i % 10}" for i, p in enumerate(sorted(set(table["pair"].astype(str))))}
    top = max(1.05, 1.05 * float(table["goodput_fraction_max"].astype(float).max()
                                 if table["goodput_fraction_max"].notna().any() else 0.0))
    for i, (ax, panel) in enumerate(zip(axes, panels)):
        rows = table[table["_panel"] == panel]
        _panel(ax, rows, colours)
        missed = bool((~rows["calibration_ok"].astype("boolean")).fillna(False).any())
        ax.set_title(panel + (" (calibration missed)" if missed else ""), fontsize=10,
                     color="firebrick" if missed else "black")
        ax.set_ylim(0, top)
        if i % ncols == 0:
            ax.set_ylabel("goodput / bottleneck rate")
    axes[0].legend(fontsize=8, loc="lower right")
    fig.suptitle(TITLE)
    return fig


def _panel(ax: Axes, rows: pd.DataFrame, colours: dict[str, str]) -> None:
    """One path: a line per pair, the bottleneck rate, log x with the buffers as ticks."""
    for pair, cells in rows.groupby("pair", sort=True):
        colour = colours[str(pair)]
        good = cells[cells["goodput_fraction_median"].notna()]
        x = good["buffer_bdp"].astype(float)
        median = good["goodput_fraction_median"].astype(float)
        ax.plot(x, median, marker="o", color=colour, label=str(pair))
        low = (median - good["goodput_fraction_min"].astype(float)).clip(lower=0)
        high = (good["goodput_fraction_max"].astype(float) - median).clip(lower=0)
        ax.errorbar(x, median, yerr=[low, high], fmt="none", ecolor=colour, capsize=3)
        lost = cells[cells["n"] == 0]
        if len(lost):
            ax.plot(lost["buffer_bdp"].astype(float), [0.0] * len(lost), marker="x",
                    linestyle="none", color=colour, clip_on=False,
                    label=f"_{pair}: no ok attempt")
    ax.axhline(1.0, color="#777777", linestyle="--", linewidth=1)
    ticks = sorted({float(b) for b in rows["buffer_bdp"] if finite(b)})
    ax.set_xscale("log")
    if ticks:
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.set_xlim(ticks[0] / 1.5, ticks[-1] * 1.5)
    ax.minorticks_off()
    ax.set_xlabel("bottleneck buffer [BDP]")
    ax.grid(alpha=0.3)


def path_buffer_sweep(frame: pd.DataFrame) -> tuple[pd.DataFrame, Figure]:
    """:func:`path_buffer_frame` and :func:`path_buffer_figure` of the results frame (the
    report's Paths view)."""
    table = path_buffer_frame(frame)
    return table, path_buffer_figure(table)


def path_calibration_frame(source: Source) -> pd.DataFrame:
    """One row per path (``path_key``) of the results frame (or of the campaign directories
    given): its backend and placement, buffer, and configured against calibrated base RTT,
    bottleneck rate, queueing delay of a full buffer (configured: buffer / rate) and loss,
    with the calibration's verdict and the number of attempts that ran over it. Sorted by
    rate, RTT and buffer; empty without a path. (A path whose strict calibration failed ran
    no attempt: campaign.json ``paths`` has it, the results frame does not.)
    """
    frame = source if isinstance(source, pd.DataFrame) else load_results(*as_paths(source))
    if not has_values(frame, "path_key"):
        return empty(CALIBRATION_COLUMNS)
    data = frame[frame["path_key"].notna()]
    rows = [{"path_key": key, **{out: _first_of(group, src) for out, src in CALIBRATION.items()},
             "calibration_ok": _verdict(group["path_calibration_ok"])
             if "path_calibration_ok" in group.columns else pd.NA, "attempts": len(group)}
            for key, group in data.groupby("path_key", sort=False)]
    table = pd.DataFrame(rows).reindex(columns=CALIBRATION_COLUMNS)
    numbers = [c for c in CALIBRATION_COLUMNS if c.endswith(("_ms", "_mbps", "_bdp"))
               or c.startswith("loss_")]
    for column in numbers:
        table[column] = pd.to_numeric(table[column], errors="coerce").astype("Float64")
    for column in ("links", "buffer_bytes"):
        table[column] = pd.to_numeric(table[column], errors="coerce").round().astype("Int64")
    rate = table["rate_configured_mbps"]
    table["queue_configured_ms"] = (8e-3 * table["buffer_bytes"] / rate).where(
        rate.gt(0).fillna(False))
    table["calibration_ok"] = table["calibration_ok"].astype("boolean")
    return table.sort_values(["rate_configured_mbps", "rtt_configured_ms", "buffer_bdp",
                              "path_key"], na_position="last", kind="stable",
                             ignore_index=True)


def path_counters_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per attempt over a path, failed ones included (``status``): the pair as
    written, the path, goodput and its fraction of the bottleneck rate, and the counters of
    the bottleneck qdisc, the random-loss rule and the delay lines
    (docs/columns.md; <NA> where the backend has no such counter). Sorted by path, pair,
    repetition and attempt; empty without a path."""
    if not has_values(frame, "path_key"):
        return empty(COUNTER_COLUMNS)
    data = frame[frame["path_key"].notna()]
    out = data.reindex(columns=COUNTER_COLUMNS)
    for role in PAIR:
        out[role] = _written(data, role)
    order = ["path_rate_mbps", "path_rtt_ms", "path_buffer_bdp", *PAIR, "repetition",
             "attempt"]
    return out.sort_values(order, na_position="last", kind="stable", ignore_index=True)
