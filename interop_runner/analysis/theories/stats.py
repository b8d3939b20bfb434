"""Statistics that hold up: per-cell medians with spread, a bootstrap interval of the median,
Tukey outliers (flagged, never dropped), failures counted beside the numbers, and the knee of a
sweep with its uncertainty.

A *cell* is one combination of the ``by`` columns (e.g. server, client, buffer size). Only ok
attempts with a value enter the statistics; attempts that did not succeed are counted in
``failures`` and shown, never averaged away as zeros. Every random draw comes from a seeded
``numpy.random.Generator``, so the same call gives the same numbers.
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from interop_runner.units import parse_ms, parse_rate, parse_size

TUKEY_K = 1.5
STAT_COLUMNS = ("attempts", "n", "failures", "median", "q1", "q3", "iqr", "mean", "std",
                "ci_low", "ci_high", "outliers")
KNEE_COLUMNS = ("knee_x", "knee_low", "knee_high", "knee_share", "best_x", "best_median",
                "threshold", "knee_distribution")


def _floats(values: Any) -> np.ndarray:
    """Values as float64 with every missing value (None, <NA>, NaN) dropped."""
    array = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(
        dtype=float, na_value=np.nan)
    kept: np.ndarray = array[np.isfinite(array)]
    return kept


def ok_mask(frame: pd.DataFrame, value: str = "goodput_mbps") -> "pd.Series[bool]":
    """Rows that count as measurements: status ``ok`` (all rows when the frame has no
    ``status`` column) and a value present."""
    if value not in frame.columns:
        return pd.Series(False, index=frame.index, dtype=bool)
    present = pd.to_numeric(frame[value], errors="coerce").notna()
    if "status" not in frame.columns:
        return present.astype(bool)
    return ((frame["status"].astype("string") == "ok").fillna(False) & present).astype(bool)


def failed_mask(frame: pd.DataFrame) -> "pd.Series[bool]":
    """Attempts that did not succeed (status other than ``ok``; none without ``status``)."""
    if "status" not in frame.columns:
        return pd.Series(False, index=frame.index, dtype=bool)
    return (frame["status"].astype("string") != "ok").fillna(True).astype(bool)


def bootstrap_median_ci(values: Iterable[Any] | np.ndarray, *, n_boot: int = 2000,
                        seed: int = 0, confidence: float = 0.95) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of the median.

    ``n_boot`` resamples of the values (with replacement, drawn by
    ``numpy.random.default_rng(seed)`` as one ``(n_boot, n)`` index matrix), the median of
    each, and the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` percentiles of those
    medians (linear interpolation). This is what ``scipy.stats.bootstrap(...,
    method="percentile")`` computes with the same generator. No value: ``(nan, nan)``; one
    value: that value twice (nothing to resample).
    """
    data = _floats(values)
    if data.size == 0:
        return math.nan, math.nan
    if data.size == 1:
        return float(data[0]), float(data[0])
    rng = np.random.default_rng(seed)
    index = rng.integers(0, data.size, (n_boot, data.size))
    medians = np.median(data[index], axis=-1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.percentile(medians, [100 * alpha, 100 * (1 - alpha)])
    return float(low), float(high)


def mean_ci(values: Iterable[Any] | np.ndarray, confidence: float = 0.95
            ) -> tuple[float, float]:
    """Student's t interval of the mean (``scipy.stats.t.interval`` with n - 1 degrees of
    freedom and the standard error of the mean): ``(nan, nan)`` below two values, the
    value twice when every value is the same."""
    from scipy import stats as scipy_stats  # on first use: not with every load_results

    data = _floats(values)
    if data.size < 2:
        return math.nan, math.nan
    mean = float(data.mean())
    sem = float(scipy_stats.sem(data))
    if sem == 0:
        return mean, mean
    low, high = scipy_stats.t.interval(confidence, data.size - 1, loc=mean, scale=sem)
    return float(low), float(high)


def _quartiles(data: np.ndarray) -> tuple[float, float]:
    q1, q3 = np.percentile(data, [25, 75])  # linear interpolation, as pandas' quantile
    return float(q1), float(q3)


def _tukey(data: np.ndarray) -> np.ndarray:
    """Boolean mask of the values outside [q1 - 1.5 IQR, q3 + 1.5 IQR]."""
    if data.size < 4:  # quartiles of fewer than four values say nothing about the tails
        return np.zeros(data.size, dtype=bool)
    q1, q3 = _quartiles(data)
    iqr = q3 - q1
    return (data < q1 - TUKEY_K * iqr) | (data > q3 + TUKEY_K * iqr)


def _groups(frame: pd.DataFrame, by: Sequence[str]) -> Iterable[tuple[tuple[Any, ...],
                                                                       pd.DataFrame]]:
    if not by:
        yield (), frame
        return
    for key, group in frame.groupby(list(by), sort=True, dropna=False, observed=True):
        yield (key if isinstance(key, tuple) else (key,)), group


def flag_outliers(frame: pd.DataFrame, by: Sequence[str],
                  value: str = "goodput_mbps") -> "pd.Series[bool]":
    """Tukey outliers per cell: ok values below q1 - 1.5 IQR or above q3 + 1.5 IQR of their
    cell (quartiles with linear interpolation; cells of fewer than four values have none).

    Returns a boolean Series aligned with ``frame``; failed attempts and missing values are
    False. Outliers are flagged for the reader, never dropped.
    """
    flags = pd.Series(False, index=frame.index, dtype=bool)
    if value not in frame.columns or any(col not in frame.columns for col in by):
        return flags
    ok = frame[ok_mask(frame, value)]
    for _, group in _groups(ok, by):
        data = pd.to_numeric(group[value]).to_numpy(dtype=float, na_value=np.nan)
        flags.loc[group.index[_tukey(data)]] = True
    return flags


def describe(values: Iterable[Any] | np.ndarray, *, n_boot: int = 2000, seed: int = 0,
             confidence: float = 0.95) -> dict[str, float | int]:
    """The statistics of :func:`cell_stats` for one set of values (missing ones ignored)."""
    data = _floats(values)
    n = int(data.size)
    if n == 0:
        nan = math.nan
        return {"n": 0, "median": nan, "q1": nan, "q3": nan, "iqr": nan, "mean": nan,
                "std": nan, "ci_low": nan, "ci_high": nan, "outliers": 0}
    q1, q3 = _quartiles(data)
    low, high = bootstrap_median_ci(data, n_boot=n_boot, seed=seed, confidence=confidence)
    return {"n": n, "median": float(np.median(data)), "q1": q1, "q3": q3, "iqr": q3 - q1,
            "mean": float(data.mean()),
            "std": float(data.std(ddof=1)) if n > 1 else math.nan,
            "ci_low": low, "ci_high": high, "outliers": int(_tukey(data).sum())}


def cell_stats(frame: pd.DataFrame, by: Sequence[str], value: str = "goodput_mbps", *,
               n_boot: int = 2000, seed: int = 0, confidence: float = 0.95) -> pd.DataFrame:
    """Per cell of the ``by`` columns: ``attempts`` (rows), ``n`` (ok attempts with a value),
    ``failures`` (attempts not ok: counted, never averaged in), ``median``, ``q1``, ``q3``,
    ``iqr``, ``mean``, ``std`` (ddof=1; NaN below two values), the percentile-bootstrap
    confidence interval of the median (``ci_low``, ``ci_high``; see
    :func:`bootstrap_median_ci`, the same ``seed`` for every cell) and the number of Tukey
    ``outliers`` (see :func:`flag_outliers`).

    A cell whose attempts all failed is kept (n = 0, NaN statistics). Rows are sorted by the
    ``by`` columns. A frame without the value or a ``by`` column gives an empty frame with
    these columns.
    """
    columns = [*by, *STAT_COLUMNS]
    if value not in frame.columns or any(col not in frame.columns for col in by):
        return pd.DataFrame(columns=columns)
    ok, failed = ok_mask(frame, value), failed_mask(frame)
    rows = []
    for key, group in _groups(frame, by):
        stats = describe(group.loc[ok.loc[group.index].to_numpy(), value],
                         n_boot=n_boot, seed=seed, confidence=confidence)
        rows.append({**dict(zip(by, key)), "attempts": len(group),
                     "failures": int(failed.loc[group.index].sum()), **stats})
    out = pd.DataFrame(rows, columns=columns)
    for col in ("attempts", "n", "failures", "outliers"):
        out[col] = out[col].astype("int64")
    return out


_RATIO = re.compile(r"^(\d+(?:\.\d+)?)\s*:\s*(\d+(?:\.\d+)?)$")


def axis_number(value: Any) -> float:
    """A sweep value as a number for ordering and plotting: numbers as they are, multiples
    like ``"16x"`` or ``"0.5bdp"`` as 16 or 0.5, split ratios ``"1:9"`` as the first part's
    share (0.1), sizes like ``"4MiB"`` in bytes, rates like ``"20mbit"`` in bit/s, times
    like ``"50ms"`` in ms, anything else NaN."""
    if value is None or value is pd.NA or isinstance(value, bool):
        return math.nan
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    text = str(value).strip().lower()
    for suffix in ("x", "bdp"):
        if text.endswith(suffix):
            text = text.removesuffix(suffix)
            break
    ratio = _RATIO.match(text)
    if ratio and float(ratio[1]) + float(ratio[2]) > 0:
        return float(ratio[1]) / (float(ratio[1]) + float(ratio[2]))
    for parse in (float, parse_size, parse_rate, parse_ms):
        try:
            return float(parse(text))
        except ValueError:
            pass
    return math.nan


def axis_order(values: Iterable[Any]) -> list[Any]:
    """Distinct values (missing ones left out) in ascending order: numerically when every
    value reads as a number (:func:`axis_number`), else as text."""
    distinct = list(dict.fromkeys(v for v in values if not _missing(v)))
    numbers = [axis_number(v) for v in distinct]
    if all(not math.isnan(n) for n in numbers):
        return [v for _, v in sorted(zip(numbers, distinct), key=lambda item: item[0])]
    return sorted(distinct, key=str)


def _missing(value: Any) -> bool:
    if value is None or value is pd.NA:
        return True
    return isinstance(value, float) and math.isnan(value)


def _knee_index(medians: np.ndarray, threshold: float) -> int:
    """Position of the first median reaching ``threshold`` x the best (NaN medians skipped)."""
    best = np.nanmax(medians)
    reached = np.flatnonzero(medians >= threshold * best)
    return int(reached[0])


def knee(frame: pd.DataFrame, x: str, value: str = "goodput_mbps", threshold: float = 0.95,
         *, by: Sequence[str] = (), n_boot: int = 2000, seed: int = 0,
         confidence: float = 0.95) -> pd.DataFrame:
    """The knee of a sweep: the smallest ``x`` whose median reaches ``threshold`` (95 %) of
    the best median, per cell of ``by`` (one row without ``by``).

    Uncertainty: ``n_boot`` bootstrap replicates resample the ok values of every ``x`` level
    (with replacement, within the level, seeded), recompute the medians and the knee; the
    replicates' knees give ``knee_low``/``knee_high`` (the ``(1 - confidence) / 2`` and
    ``(1 + confidence) / 2`` quantiles over the ordered levels, rounded outwards to levels),
    ``knee_share`` (share of replicates agreeing with ``knee_x``) and
    ``knee_distribution`` ({x level: share of replicates}). ``best_x`` and ``best_median`` are
    the level with the highest median and that median. ``x`` levels are ordered by
    :func:`axis_order`; a level without ok values is left out. No level at all: no row.
    """
    columns = [*by, *KNEE_COLUMNS]
    needed = [x, value, *by]
    if any(col not in frame.columns for col in needed):
        return pd.DataFrame(columns=columns)
    ok = frame[ok_mask(frame, value) & frame[x].notna()]
    rows = []
    alpha = (1.0 - confidence) / 2.0
    for key, group in _groups(ok, by):
        levels = axis_order(group[x])
        samples = [_floats(group.loc[group[x] == level, value]) for level in levels]
        kept = [(lv, s) for lv, s in zip(levels, samples) if s.size]
        if not kept:
            continue
        levels = [lv for lv, _ in kept]
        medians = np.array([np.median(s) for _, s in kept])
        point = _knee_index(medians, threshold)
        rng = np.random.default_rng(seed)
        boot = np.empty((n_boot, len(kept)))
        for j, (_, s) in enumerate(kept):
            boot[:, j] = np.median(s[rng.integers(0, s.size, (n_boot, s.size))], axis=-1)
        best = boot.max(axis=1, keepdims=True)
        knees = np.argmax(boot >= threshold * best, axis=1)  # first level reaching it
        counts = np.bincount(knees, minlength=len(levels)) / n_boot
        rows.append({
            **dict(zip(by, key)),
            "knee_x": levels[point],
            "knee_low": levels[int(np.quantile(knees, alpha, method="lower"))],
            "knee_high": levels[int(np.quantile(knees, 1 - alpha, method="higher"))],
            "knee_share": float(counts[point]),
            "best_x": levels[int(np.argmax(medians))],
            "best_median": float(medians.max()),
            "threshold": threshold,
            "knee_distribution": {lv: float(c) for lv, c in zip(levels, counts) if c > 0},
        })
    return pd.DataFrame(rows, columns=columns)
