"""Fairness of an attempt's competing flows: Jain's index over the trimmed window and over
sliding windows, as columns of the results frame (docs/flows.md).

Jain's fairness index of throughputs x_1..x_n is (Σx)² / (n · Σx²): 1 when every flow got
the same, 1/n when one flow got everything. ``jain_index`` uses each flow's mean throughput
over its trimmed window at the bottleneck (:mod:`~interop_runner.analysis.frames.flow_series`);
without captures it falls back to the flows' goodput from the record (the whole transfer,
start-up included), and ``fairness_basis`` says which. The sliding index is computed in
windows of :data:`DEFAULT_WINDOW_S` sliding by one bin, over the flows whose kept bins cover
the whole window (at least two): its minimum shows the worst stretch (unfairness persisting
for tens of seconds), its median the typical one.

Every column exists in every frame: <NA> for an attempt without flows, and
``fairness_missing`` says why a value is <NA> for one with flows.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from interop_runner.analysis.frames.flow_series import cached_flow_series, flows_of

__all__ = ["DEFAULT_WINDOW_S", "FAIRNESS_COLUMNS", "fairness_values", "jain_index",
           "series_fairness", "sliding_jain"]

DEFAULT_WINDOW_S = 5.0

# column -> (pandas dtype, unit, meaning)
FAIRNESS_COLUMNS: dict[str, tuple[str, str, str]] = {
    "flow_count": ("Int64", "flows", "competing flows of the attempt (run.json flows); <NA>: "
                   "one pair, one flow"),
    "jain_index": ("Float64", "", "Jain's fairness index (Σx)²/(n·Σx²) of the flows' mean "
                   "throughputs over their trimmed windows (fairness_basis)"),
    "jain_index_sliding_min": ("Float64", "", f"lowest Jain index over sliding windows of "
                               f"{DEFAULT_WINDOW_S:g} s shared by at least two flows"),
    "jain_index_sliding_median": ("Float64", "", f"median Jain index over those sliding "
                                  f"windows of {DEFAULT_WINDOW_S:g} s"),
    "fairness_basis": ("string", "", "series (bottleneck captures, trimmed) or goodput (the "
                       "record's per-flow goodput: no captures)"),
    "fairness_missing": ("string", "", "why a fairness value is <NA> for an attempt with "
                         "flows"),
}


def jain_index(values: Iterable[Any]) -> float:
    """Jain's index (Σx)²/(n·Σx²) of the values present (NaN and None left out); NaN when
    none is present or all are 0."""
    data = pd.to_numeric(pd.Series(list(values), dtype=object), errors="coerce"
                         ).to_numpy(dtype=float, na_value=np.nan)
    data = data[np.isfinite(data)]
    squares = float((data ** 2).sum())
    if data.size == 0 or squares == 0:
        return math.nan
    return float(data.sum() ** 2 / (data.size * squares))


def _kept_matrix(series: pd.DataFrame) -> pd.DataFrame:
    """Kept throughput per bin (rows, every bin of the grid) and flow (columns); NaN where
    a flow's bin is trimmed or absent."""
    kept = series[~series["trimmed"].astype(bool)]
    if kept.empty:
        return pd.DataFrame()
    width_s = float(series["bin_ms"].iloc[0]) / 1e3
    steps = (kept["t_s"].astype(float) / width_s).round().astype(int)
    matrix = pd.DataFrame({"bin": steps.to_numpy(), "flow": kept["flow"].astype(int).to_numpy(),
                           "x": kept["throughput_mbps"].astype(float).to_numpy()}
                          ).pivot(index="bin", columns="flow", values="x")
    return matrix.reindex(range(int(matrix.index.min()), int(matrix.index.max()) + 1))


def sliding_jain(series: pd.DataFrame, window_s: float = DEFAULT_WINDOW_S) -> pd.DataFrame:
    """Jain's index in windows of ``window_s`` (whole bins, at least one) sliding by one bin
    over an attempt's series: per window its start ``t_s``, the ``flows`` whose kept bins
    cover all of it and their ``jain_index`` (of their mean throughputs in the window).
    Only windows with at least two such flows."""
    matrix = _kept_matrix(series)
    if matrix.empty:
        return pd.DataFrame(columns=["t_s", "flows", "jain_index"])
    width_s = float(series["bin_ms"].iloc[0]) / 1e3
    bins = max(1, round(window_s / width_s))
    means = matrix.rolling(bins).mean()  # NaN unless all bins of the window are there
    present = means.notna().sum(axis=1).to_numpy()
    rows = [{"t_s": (start - bins + 1) * width_s, "flows": int(count),
             "jain_index": jain_index(values)}
            for start, count, values in zip(means.index.to_numpy(dtype=int), present,
                                            means.to_numpy()) if count >= 2]
    return pd.DataFrame(rows, columns=["t_s", "flows", "jain_index"])


def series_fairness(series: pd.DataFrame, window_s: float = DEFAULT_WINDOW_S
                    ) -> dict[str, Any]:
    """``jain_index`` of the flows' kept mean throughputs and the sliding minimum and
    median of an attempt's series (NaN where there is none), with the reason for a NaN."""
    means = series[~series["trimmed"].astype(bool)].groupby("flow")["throughput_mbps"].mean()
    sliding = sliding_jain(series, window_s)
    values = sliding["jain_index"].astype(float)
    missing = None if len(values) else \
        f"no sliding window of {window_s:g} s with two flows in their trimmed windows"
    if series.empty:
        missing = "no data packet of the flows at the bottleneck (their ports)"
    return {"jain_index": jain_index(means), "jain_index_sliding_min":
            float(values.min()) if len(values) else math.nan,
            "jain_index_sliding_median": float(values.median()) if len(values) else math.nan,
            "fairness_basis": "series", "fairness_missing": missing}


def fairness_values(attempt_dir: Path, record: dict[str, Any]) -> dict[str, Any]:
    """The fairness columns of one record (all <NA> without flows): from the bottleneck
    series when the attempt has captures, else Jain's index of the flows' goodput."""
    row: dict[str, Any] = dict.fromkeys(FAIRNESS_COLUMNS)
    flows = flows_of(record)
    if not flows:
        return row
    row["flow_count"] = len(flows)
    series, reason = cached_flow_series(attempt_dir, record)
    if series is not None:
        row.update(series_fairness(series))
        return row
    goodput = [f.get("goodput_mbps") for f in flows]
    row.update(jain_index=jain_index(goodput), fairness_basis="goodput",
               fairness_missing=f"sliding: {reason}")
    if math.isnan(row["jain_index"]):
        row.update(fairness_basis=None, fairness_missing=f"{reason}; no flow has a goodput")
    return row
