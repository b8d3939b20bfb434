"""Competing flows (docs/flows.md): the per-flow series of every attempt as one long frame
(:func:`load_flows`), one row per attempt and flow (:func:`load_flow_results`), summaries per
cell with confidence intervals over the repetitions (:func:`flow_share_summary`,
:func:`fairness_summary`) and each QUIC implementation's flows against the kernel TCP
baseline with Welch's t-test (:func:`quic_vs_tcp`).

An attempt with flows but without bottleneck captures (``path.record_packets`` off) keeps
its rows: the series' values are <NA> and ``series_missing`` says why, never 0.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import pandas as pd

from interop_runner.analysis.frames.flow_series import (
    FLOW_SERIES_COLUMNS,
    cached_flow_series,
    flows_of,
)
from interop_runner.analysis.frames.results import load_results, workload_values
from interop_runner.analysis.theories.stats import cell_stats, mean_ci, ok_mask
from interop_runner.errors import StoreError
from interop_runner.storage.run_record import read_run

__all__ = ["FLOW_RESULT_COLUMNS", "SERIES_KEYS", "WELCH_COLUMNS", "fairness_summary",
           "flow_share_summary", "load_flow_results", "load_flows", "path_conditions",
           "quic_vs_tcp", "significance"]

# an attempt's identity in the flow frames (axis_<name> columns follow variant)
ID_COLUMNS = ["campaign", "flow_set", "variant", "repetition", "attempt", "path"]
FLOW_KEYS = ["flow", "label", "kind"]
ORDER = ["campaign", "flow_set", "variant", "repetition", "attempt"]  # rows sorted by these
#: The series columns of :func:`load_flows` after the attempt's identity and FLOW_KEYS.
SERIES_KEYS = ["bin_ms", "t_s", "throughput_mbps", "queue_delay_ms_mean",
               "queue_delay_ms_p95", "drops", "trimmed", "series_missing"]
#: The columns of :func:`load_flow_results` after the attempt's identity.
FLOW_RESULT_COLUMNS: dict[str, str] = {
    "flow": "Int64", "label": "string", "kind": "string", "server": "string",
    "client": "string", "congestion_control": "string", "link": "string", "port": "Int64",
    "workload": "string", "direction": "string", "streams": "Int64", "connections": "Int64",
    "status": "string", "reason": "string", "bytes_received": "Int64",
    "goodput_mbps": "Float64", "mean_throughput_mbps": "Float64",
    "queue_delay_p95_ms": "Float64", "share": "Float64", "share_basis": "string",
    "series_missing": "string"}
#: The columns of :func:`quic_vs_tcp` after its ``by`` columns.
WELCH_COLUMNS = ["group", "metric", "n", "n_tcp", "mean", "mean_tcp", "difference",
                 "t_statistic", "p_value", "hedges_g", "significance"]
SIGNIFICANCE = ((0.001, "***"), (0.01, "**"), (0.05, "*"))


def _attempts(paths: Sequence[Path | str]) -> Iterator[tuple[dict[str, Any],
                                                             list[dict[str, Any]],
                                                             pd.DataFrame | None, str | None]]:
    """Per attempt with flows: its identity, its flows, its series (or None and why)."""
    results = load_results(*paths)
    if "flow_count" not in results.columns:
        return
    axes = [c for c in results.columns if c.startswith("axis_")]
    rows = results[results["flow_count"].notna()]
    for row in rows.to_dict("records"):
        ids = {"campaign": row["campaign"], "flow_set": row["cell_client"],
               "variant": row["variant"], **{a: row[a] for a in axes},
               "repetition": row["repetition"], "attempt": row["attempt"],
               "path": row["path"]}
        directory = Path(str(row["path"]))
        try:
            record = read_run(directory / "run.json")
        except (OSError, ValueError, StoreError):
            continue
        series, reason = cached_flow_series(directory, record)
        yield ids, flows_of(record), series, reason


def _id_columns(frame: pd.DataFrame) -> list[str]:
    """The identity columns of a flow frame, sweep axes after the variant."""
    axes = [c for c in frame.columns if c.startswith("axis_")]
    return [*ID_COLUMNS[:3], *axes, *ID_COLUMNS[3:]]


def _flow_keys(flow: dict[str, Any], i: int) -> dict[str, Any]:
    return {"flow": flow.get("index", i), "label": flow.get("label"), "kind": flow.get("kind")}


def load_flows(*paths: Path | str) -> pd.DataFrame:
    """Every flow's series of every attempt with flows below the campaign or results
    directories given, as one long frame: the attempt's identity (``campaign``,
    ``flow_set``, ``variant``, ``axis_<name>``, ``repetition``, ``attempt``, ``path``),
    ``flow``, ``label``, ``kind`` and the series (:data:`SERIES_KEYS`: ``bin_ms``, ``t_s``
    (s since the attempt's first data packet entered the bottleneck), ``throughput_mbps``,
    ``queue_delay_ms_mean``, ``queue_delay_ms_p95``, ``drops``, ``trimmed``). An attempt
    without captures has one row per flow with <NA> values and ``series_missing``."""
    parts = []
    for ids, flows, series, reason in _attempts(paths):
        if series is None:
            rows = pd.DataFrame([{**_flow_keys(f, i), "series_missing": reason}
                                 for i, f in enumerate(flows)])
        else:
            kinds = {f.get("index", i): f.get("kind") for i, f in enumerate(flows)}
            rows = series.assign(kind=series["flow"].map(kinds), series_missing=None)
        parts.append(rows.assign(**ids))
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=[*ID_COLUMNS, *FLOW_KEYS, *SERIES_KEYS])
    frame = frame.reindex(columns=[*_id_columns(frame), *FLOW_KEYS, *SERIES_KEYS])
    frame = frame.sort_values([*ORDER, "flow", "t_s"], kind="stable", ignore_index=True)
    types = {**{k: FLOW_SERIES_COLUMNS[k] for k in FLOW_SERIES_COLUMNS if k in frame},
             "kind": "string", "series_missing": "string"}
    return frame.astype(types)


def _flow_row(flow: dict[str, Any], i: int, summary: dict[str, Any] | None,
              reason: str | None) -> dict[str, Any]:
    """One flow's row (before its share): the record's values and its series' summary."""
    row = {**_flow_keys(flow, i),
           **{k: flow.get(k) for k in ("server", "client", "congestion_control", "link",
                                       "port", "status", "reason", "bytes_received",
                                       "goodput_mbps")},
           **workload_values(flow.get("workload"))}
    summary = summary or {}
    row.update(mean_throughput_mbps=summary.get("mean_throughput_mbps"),
               queue_delay_p95_ms=summary.get("queue_delay_p95_ms"),
               series_missing=reason if reason else
               None if summary else "no packet of this flow at the bottleneck")
    return row


def _shares(rows: pd.DataFrame, has_series: bool) -> pd.DataFrame:
    """``share`` of each flow (its value / the sum over the attempt's flows) from the
    series' mean throughput, else from the goodput."""
    column = "mean_throughput_mbps" if has_series else "goodput_mbps"
    values = pd.to_numeric(rows[column], errors="coerce").astype(float)
    total = values.sum(min_count=1)
    share = values / total if total and math.isfinite(total) else values * math.nan
    return rows.assign(share=share, share_basis="series" if has_series else "goodput")


def load_flow_results(*paths: Path | str) -> pd.DataFrame:
    """One row per attempt and flow below the campaign or results directories given: the
    attempt's identity (as :func:`load_flows`), then :data:`FLOW_RESULT_COLUMNS`: the
    flow's ``label``, ``kind``, sides, ``congestion_control``, ``link``, ``port``, its
    ``workload``, ``direction``, ``streams`` and ``connections`` (as the attempts' columns),
    ``status``, ``reason``, ``bytes_received`` and ``goodput_mbps`` (the record),
    ``mean_throughput_mbps`` (its trimmed series at the bottleneck), ``queue_delay_p95_ms``
    (95th percentile of its packets' queueing delay in that window), ``share`` (its value
    / the sum over the attempt's flows: of the series when there are captures, else of the
    goodput; ``share_basis`` says which) and ``series_missing`` (why the series' values are
    <NA>)."""
    parts = []
    for ids, flows, series, reason in _attempts(paths):
        summaries = {s["index"]: s for s in (series.attrs.get("flows", [])
                                             if series is not None else [])}
        rows = pd.DataFrame([_flow_row(f, i, summaries.get(f.get("index", i)), reason)
                             for i, f in enumerate(flows)])
        parts.append(_shares(rows, series is not None).assign(**ids))
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=[*ID_COLUMNS, *FLOW_RESULT_COLUMNS])
    frame = frame.reindex(columns=[*_id_columns(frame), *FLOW_RESULT_COLUMNS])
    frame = frame.sort_values([*ORDER, "flow"], kind="stable", ignore_index=True)
    return frame.astype(FLOW_RESULT_COLUMNS)


def _with_mean_ci(table: pd.DataFrame, frame: pd.DataFrame, keys: list[str], value: str,
                  confidence: float) -> pd.DataFrame:
    """``mean_ci_low``/``mean_ci_high`` (t interval of the mean) beside cell_stats' rows."""
    ok = frame[ok_mask(frame, value)]
    intervals = {_cell(key): mean_ci(group[value], confidence)
                 for key, group in ok.groupby(keys, sort=False, dropna=False)}
    bounds = [intervals.get(_cell(row), (math.nan, math.nan))
              for row in table[keys].itertuples(index=False, name=None)]
    return table.assign(mean_ci_low=[b[0] for b in bounds], mean_ci_high=[b[1] for b in bounds])


def flow_share_summary(flow_results: pd.DataFrame, by: Sequence[str] = ("flow_set", "variant"),
                       value: str = "share", confidence: float = 0.95) -> pd.DataFrame:
    """Per cell (``by``) and flow ``label``: the statistics of
    :func:`~interop_runner.analysis.theories.stats.cell_stats`
    of ``value`` (a flow's share by default) over the repetitions (ok flows; failed ones in
    ``failures``), with the t interval of the mean (``mean_ci_low``, ``mean_ci_high``) and
    the ``share_basis`` of the cell's rows (``series``, ``goodput`` or ``mixed``)."""
    keys = [*by, "label"]
    table = cell_stats(flow_results, keys, value, confidence=confidence)
    if table.empty:
        return table.assign(mean_ci_low=[], mean_ci_high=[], share_basis=[])
    table = _with_mean_ci(table, flow_results, keys, value, confidence)
    basis = {_cell(key): _one_basis(group["share_basis"])
             for key, group in flow_results.groupby(keys, sort=False, dropna=False)}
    cells = table[keys].itertuples(index=False, name=None)
    return table.assign(share_basis=pd.array([basis.get(_cell(c)) for c in cells],
                                             dtype="string"))


def _cell(key: Any) -> tuple[Any, ...]:
    """A cell's key as a tuple whose missing values compare equal (a campaign without a
    sweep has no variant: NaN, and NaN != NaN would lose its cell)."""
    values = key if isinstance(key, tuple) else (key,)
    return tuple(None if v is None or (not isinstance(v, str) and pd.isna(v)) else v
                 for v in values)


def _one_basis(values: "pd.Series[Any]") -> str:
    """The basis of a cell's rows: theirs when they agree, else ``mixed``."""
    distinct = values.dropna().unique()
    return str(distinct[0]) if len(distinct) == 1 else "mixed"


def fairness_summary(results: pd.DataFrame, by: Sequence[str] = ("flow_set", "variant"),
                     value: str = "jain_index", confidence: float = 0.95) -> pd.DataFrame:
    """Per cell (``by``; ``flow_set`` is the results frame's ``cell_client``) of the
    attempts with flows: :func:`~interop_runner.analysis.theories.stats.cell_stats` of ``value``
    (Jain's index by default)
    over the repetitions with the t interval of the mean (``mean_ci_low``,
    ``mean_ci_high``)."""
    if "flow_count" not in results.columns:
        return cell_stats(pd.DataFrame(), list(by), value)
    data = results[results["flow_count"].notna()]
    data = data.assign(flow_set=data["cell_client"])
    table = cell_stats(data, list(by), value, confidence=confidence)
    if table.empty:
        return table.assign(mean_ci_low=[], mean_ci_high=[])
    return _with_mean_ci(table, data, list(by), value, confidence)


def path_conditions(flows: pd.DataFrame) -> list[str]:
    """The columns that name a path condition: the swept axes other than the one that
    chooses the set of flows (its values and the flow sets go one to one); without a sweep,
    the variant; none when only the set of flows is swept."""
    axes = [c for c in flows.columns if c.startswith("axis_") and flows[c].nunique() > 1]
    sets = [c for c in axes if "flow_set" in flows.columns
            and flows.groupby(c, dropna=False)["flow_set"].nunique().max() == 1
            and flows[c].nunique() == flows["flow_set"].nunique()]
    conditions = [c for c in axes if c not in sets]
    return conditions if conditions or sets else ["variant"]


def significance(p_value: float) -> str:
    """``***`` (p < 0.001), ``**`` (< 0.01), ``*`` (< 0.05), ``n.s.``; ``""`` for NaN."""
    if not math.isfinite(p_value):
        return ""
    return next((mark for level, mark in SIGNIFICANCE if p_value < level), "n.s.")


def hedges_g(a: np.ndarray, b: np.ndarray) -> float:
    """Hedges' g of ``a`` against ``b``: the difference of the means over the pooled
    standard deviation (ddof=1), times the small-sample correction 1 - 3/(4(n_a+n_b) - 9);
    NaN below two values a side or without any spread."""
    na, nb = a.size, b.size
    if na < 2 or nb < 2:
        return math.nan
    pooled = math.sqrt(((na - 1) * a.var(ddof=1) + (nb - 1) * b.var(ddof=1)) / (na + nb - 2))
    if pooled == 0:
        return math.nan
    return float((a.mean() - b.mean()) / pooled * (1 - 3 / (4 * (na + nb) - 9)))


def _welch_row(values: np.ndarray, baseline: np.ndarray) -> dict[str, Any]:
    """The test's figures of one group against the TCP flows of its cell."""
    from scipy import stats as scipy_stats  # on first use: not with load_results

    if values.size >= 2 and baseline.size >= 2:
        test = scipy_stats.ttest_ind(values, baseline, equal_var=False)
        t, p = float(test.statistic), float(test.pvalue)
    else:
        t = p = math.nan
    mean = float(values.mean()) if values.size else math.nan
    mean_tcp = float(baseline.mean()) if baseline.size else math.nan
    return {"n": int(values.size), "n_tcp": int(baseline.size), "mean": mean,
            "mean_tcp": mean_tcp, "difference": mean - mean_tcp, "t_statistic": t,
            "p_value": p, "hedges_g": hedges_g(values, baseline),
            "significance": significance(p)}


def quic_vs_tcp(flow_results: pd.DataFrame, metric: str = "share",
                by: Sequence[str] = ("flow_set", "variant"), group: str = "label"
                ) -> pd.DataFrame:
    """Each QUIC group's flows (``group``: the flow's label by default, e.g.
    ``quic-go/cubic``) against the kernel TCP flows (``kind`` tcp) of the same cell
    (``by``: the flow set and path condition) on ``metric`` (``share`` or
    ``goodput_mbps``, ...), ok flows only: both means, their ``difference``, Welch's t-test
    (``scipy.stats.ttest_ind(equal_var=False)``: ``t_statistic``, ``p_value``), the effect
    size as Hedges' g (bias-corrected Cohen's d with the pooled SD) and a ``significance``
    mark (:func:`significance`; empty below two flows a side). Columns: ``by``, then
    :data:`WELCH_COLUMNS`."""
    columns = [*by, *WELCH_COLUMNS]
    needed = [*by, group, "kind", metric]
    if flow_results.empty or any(c not in flow_results.columns for c in needed):
        return pd.DataFrame(columns=columns)
    ok = flow_results[ok_mask(flow_results, metric)]
    rows = []
    for key, cell in ok.groupby(list(by), sort=True, dropna=False):
        cell_key = key if isinstance(key, tuple) else (key,)
        kind = cell["kind"].astype("string")
        baseline = cell.loc[(kind == "tcp").fillna(False).to_numpy(), metric]
        quic = cell[(kind == "quic").fillna(False).to_numpy()]
        for name, flows in quic.groupby(group, sort=True):
            rows.append({**dict(zip(by, cell_key)), "group": name, "metric": metric,
                         **_welch_row(flows[metric].to_numpy(dtype=float),
                                      baseline.to_numpy(dtype=float))})
    return pd.DataFrame(rows, columns=columns)
