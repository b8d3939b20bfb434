"""Conformance of each QUIC flow of stored campaigns against the kernel TCP flow it competed
with (paper 000 §3, docs/conformance.md), from the per-flow series at the bottleneck
(:func:`~.flows.load_flows`: bins of 10 base RTTs, the first and last 10 % of each flow's
time trimmed).

A cell is one campaign, flow set, variant and sweep point. In it, the test cloud of a QUIC
flow (by label) has one trial per attempt in which that flow ended ok: its kept bins as
(queueing delay, throughput) points. The reference cloud has, from the same attempts, the
kernel TCP flow (``kind`` tcp) of the same congestion control. A cell of kernel TCP flows
only (``[{tcp: cubic}, {tcp: cubic}]``) is the kernel against itself: the noise floor. A
trial with fewer than :data:`MIN_TRIAL_POINTS` points is left out; where no trial is left,
or there is no such flow, the figures are <NA> and ``conformance_missing`` says why (never
0).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from interop_runner.analysis.conformance import conformance
from interop_runner.analysis.envelope import K_MAX
from interop_runner.analysis.flows import load_flow_results, load_flows

__all__ = ["FLOW_CONFORMANCE_COLUMNS", "FlowClouds", "MIN_TRIAL_POINTS", "RESULT_COLUMNS",
           "conformance_table", "flow_clouds", "flow_conformance"]

#: A trial needs this many points (a hull needs 3 to have an area).
MIN_TRIAL_POINTS = 3
#: The figures of :class:`~.conformance.ConformanceResult` kept in the table.
RESULT_COLUMNS: dict[str, str] = {
    "conformance": "Float64", "conformance_t": "Float64", "delta_throughput": "Float64",
    "delta_delay": "Float64", "delta_mean_throughput": "Float64",
    "delta_mean_delay": "Float64", "k_test": "Int64", "k_reference": "Int64",
    "points_test": "Int64", "points_reference": "Int64", "trials_test": "Int64",
    "trials_reference": "Int64", "retained_test": "Float64", "retained_reference": "Float64"}
#: The columns of :func:`flow_conformance` after the cell's identity.
FLOW_CONFORMANCE_COLUMNS: dict[str, str] = {
    "label": "string", "server": "string", "congestion_control": "string",
    "reference_label": "string", **RESULT_COLUMNS, "conformance_missing": "string"}
CELL = ["campaign", "flow_set", "variant"]  # then the axis_<name> columns

Trials = list[np.ndarray[Any, np.dtype[np.float64]]]


def flow_conformance(*paths: Path | str, delay: str = "queue_delay_ms_mean",
                     k: int | None = None, k_max: int = K_MAX, seed: int = 0) -> pd.DataFrame:
    """Per cell of the campaign or results directories given and QUIC flow label: the
    conformance of that flow against the kernel TCP flow of its congestion control (see the
    module). Columns: ``campaign``, ``flow_set``, ``variant``, ``axis_<name>``, then
    :data:`FLOW_CONFORMANCE_COLUMNS`: the flow's ``label``, ``server`` and
    ``congestion_control``, the reference's label, the figures of
    :func:`~.conformance.conformance` (Mbit/s, ms; ``delta_*``: test minus reference) and
    ``conformance_missing``. ``delay``: the series' delay column (``queue_delay_ms_mean``
    or ``queue_delay_ms_p95``); ``k``, ``k_max``, ``seed``: as for
    :func:`~.conformance.conformance`. A cell without a QUIC flow has one row, label <NA>."""
    return conformance_table(load_flows(*paths), load_flow_results(*paths), delay=delay,
                             k=k, k_max=k_max, seed=seed)


def conformance_table(flows: pd.DataFrame, flow_results: pd.DataFrame,
                      delay: str = "queue_delay_ms_mean", **options: Any) -> pd.DataFrame:
    """:func:`flow_conformance` on frames already loaded (:func:`~.flows.load_flows`,
    :func:`~.flows.load_flow_results` of the same directories)."""
    cells = [*CELL, *(c for c in flow_results.columns if c.startswith("axis_"))]
    points, missing = _points(flows, delay), _missing(flows)
    rows = []
    for key, cell in flow_results.groupby(cells, sort=True, dropna=False):
        ids = dict(zip(cells, key if isinstance(key, tuple) else (key,)))
        rows += [{**ids, **row} for row in _cell_rows(cell, points, missing, options)]
    frame = pd.DataFrame(rows, columns=[*cells, *FLOW_CONFORMANCE_COLUMNS])
    return frame.astype(FLOW_CONFORMANCE_COLUMNS)


def _points(flows: pd.DataFrame, delay: str) -> dict[tuple[str, int], Any]:
    """Per (attempt path, flow): its kept bins as (delay, throughput) points."""
    if flows.empty:
        return {}
    whole = ~flows["trimmed"].astype("boolean").fillna(True).to_numpy(dtype=bool)
    kept = flows[whole & flows[delay].notna().to_numpy()
                 & flows["throughput_mbps"].notna().to_numpy()]
    return {_key(*key): group[[delay, "throughput_mbps"]].to_numpy(np.float64)
            for key, group in kept.groupby(["path", "flow"], sort=False)}


def _missing(flows: pd.DataFrame) -> dict[tuple[str, int], str]:
    """Per (attempt path, flow) without a series: why."""
    gone = flows[flows["series_missing"].notna().to_numpy()] if not flows.empty else flows
    return {_key(p, f): str(r) for p, f, r
            in zip(gone.get("path", []), gone.get("flow", []), gone.get("series_missing", []))}


def _key(path: Any, flow: Any) -> tuple[str, int]:
    """A flow of an attempt: the attempt's directory and the flow's index."""
    return str(path), int(flow)


def _first(values: "pd.Series[Any]") -> Any:
    """The first value present, else None."""
    present = values.dropna()
    return present.iloc[0] if len(present) else None


def _cell_rows(cell: pd.DataFrame, points: dict[tuple[str, int], Any],
               missing: dict[tuple[str, int], str], options: dict[str, Any]
               ) -> list[dict[str, Any]]:
    """One row per QUIC flow label of the cell (see :func:`_tested`); one row, label
    <NA>, without a flow to test."""
    quic, tcp = _tested(cell)
    if quic.empty:
        return [{"conformance_missing": "no QUIC flow in the cell"}]
    return [_flow_row(_clouds(str(label), flows, tcp, points, missing), options)
            for label, flows in quic.groupby("label", sort=True)]


def _tested(cell: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the flows to test, the kernel TCP flows) of a cell. A cell of kernel TCP flows only
    is the kernel against itself (the testbed's noise floor): every TCP label but the first
    by name against that first."""
    kind = cell["kind"].astype("string")
    quic = cell[(kind == "quic").fillna(False).to_numpy()]
    tcp = cell[(kind == "tcp").fillna(False).to_numpy()]
    return _kernel_against_itself(tcp) if quic.empty else (quic, tcp)


def _kernel_against_itself(tcp: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(tests, references) among kernel TCP flows: per congestion control run by two or
    more labels, the first label by name is the reference and the others are tested."""
    labels = tcp[["label", "congestion_control"]].dropna().astype(str).drop_duplicates()
    references = {str(group["label"].min()) for _, group in labels.groupby(
        "congestion_control") if len(group) > 1}
    tested_controls = set(labels[labels["label"].isin(references)]["congestion_control"])
    name = tcp["label"].astype("string")
    is_reference = name.isin(references).fillna(False).to_numpy()
    in_pair = tcp["congestion_control"].astype("string").isin(tested_controls) \
        .fillna(False).to_numpy()
    return tcp[in_pair & ~is_reference], tcp[is_reference]


@dataclass(frozen=True)
class FlowClouds:
    """A tested flow's cloud and its reference's in one cell: the trials as (n, 2) arrays of
    (delay ms, throughput Mbit/s), or ``missing``: why there are none (then both empty)."""

    label: str
    server: Any
    congestion_control: Any
    reference_label: str | None
    test: Trials
    reference: Trials
    missing: str | None


def _clouds(label: str, flows: pd.DataFrame, tcp: pd.DataFrame,
            points: dict[tuple[str, int], Any], missing: dict[tuple[str, int], str]
            ) -> FlowClouds:
    """The clouds of one tested flow label against the cell's kernel TCP flows."""
    control = _first(flows["congestion_control"])
    none = FlowClouds(label, _first(flows["server"]), control, None, [], [], None)
    ok = flows[(flows["status"].astype("string") == "ok").fillna(False).to_numpy()]
    if ok.empty:
        return replace(none, missing="the flow ended ok in no attempt")
    reference = _reference(tcp, set(ok["path"].astype(str)), control)
    if reference is None:
        return replace(none, missing="no kernel TCP flow of congestion control "
                       f"{control or '<unknown>'} in the attempts where the flow ended ok")
    none = replace(none, reference_label=_first(reference["label"]))
    test_trials, test_reason = _trials(ok, points, missing, "test")
    ref_trials, ref_reason = _trials(reference, points, missing, "reference")
    if test_reason or ref_reason:
        return replace(none, missing=test_reason or ref_reason)
    return replace(none, test=test_trials, reference=ref_trials)


# why a flow has no figures when the trials of one cloud or both share no region
_NO_COMMON_REGION = {
    ("test",): "the test flow's trials share no region: its envelope, their intersection, "
               "holds none of its points (the trials disagree)",
    ("reference",): "the reference flow's trials share no region: its envelope, their "
                    "intersection, holds none of its points (the trials disagree)",
    ("test", "reference"): "neither flow's trials share a region: both envelopes, the "
                           "intersections of their trials, hold none of their points (the "
                           "trials disagree)"}


def _flow_row(clouds: FlowClouds, options: dict[str, Any]) -> dict[str, Any]:
    """The row of one tested flow label: its identity and figures, or why there are none."""
    row: dict[str, Any] = {"label": clouds.label, "server": clouds.server,
                           "congestion_control": clouds.congestion_control,
                           "reference_label": clouds.reference_label}
    if clouds.missing:
        return {**row, "conformance_missing": clouds.missing}
    result = conformance(clouds.test, clouds.reference, **options).as_dict()
    row.update({c: result[c] for c in RESULT_COLUMNS})
    empty = [side for side in ("test", "reference") if result[f"retained_{side}"] == 0]
    if empty:  # conformance() leaves the shares NaN: nothing inside an envelope to compare
        row["conformance_missing"] = _NO_COMMON_REGION[tuple(empty)]
    return row


def flow_clouds(flows: pd.DataFrame, flow_results: pd.DataFrame, label: str,
                delay: str = "queue_delay_ms_mean", **cell: Any) -> FlowClouds:
    """The clouds :func:`conformance_table` compares for the flow ``label`` in the first
    cell (by its columns, sorted) whose columns equal ``cell`` (e.g. ``flow_set=...,
    axis_buffer="1bdp"``; none given: any cell) and that has that flow. ``missing`` says
    why there are no clouds, also when no such cell exists."""
    rows = flow_results
    for column, value in cell.items():
        if column not in rows.columns:
            return FlowClouds(label, None, None, None, [], [], f"no column {column}")
        values = rows[column].astype("string")
        rows = rows[values.isna().to_numpy() if pd.isna(value)
                    else values.eq(str(value)).fillna(False).to_numpy()]
    columns = [*CELL, *(c for c in flow_results.columns if c.startswith("axis_"))]
    for _, group in rows.groupby(columns, sort=True, dropna=False):
        tested, tcp = _tested(group)
        mine = tested[(tested["label"].astype("string") == label).fillna(False).to_numpy()]
        if not mine.empty:
            return _clouds(label, mine, tcp, _points(flows, delay), _missing(flows))
    return FlowClouds(label, None, None, None, [], [], f"no cell with a tested flow {label}")


def _reference(tcp: pd.DataFrame, paths: set[str], control: Any) -> pd.DataFrame | None:
    """The kernel TCP flows of ``control`` (any, when unknown) in the attempts ``paths``
    (ended ok), one label: the first by name when several qualify."""
    rows = tcp[tcp["path"].astype(str).isin(paths).to_numpy()
               & (tcp["status"].astype("string") == "ok").fillna(False).to_numpy()]
    if control is not None:
        rows = rows[(rows["congestion_control"].astype("string") == control)
                    .fillna(False).to_numpy()]
    if rows.empty:
        return None
    return rows[rows["label"] == sorted(rows["label"].astype(str))[0]]


def _trials(flows: pd.DataFrame, points: dict[tuple[str, int], Any],
            missing: dict[tuple[str, int], str], side: str) -> tuple[Trials, str | None]:
    """A cloud's trials (attempts with at least :data:`MIN_TRIAL_POINTS` points), or why
    there is none."""
    keys = [_key(p, f) for p, f in zip(flows["path"], flows["flow"])]
    trials = [points[key] for key in keys if len(points.get(key, ())) >= MIN_TRIAL_POINTS]
    if trials:
        return trials, None
    if all(key in missing for key in keys):
        reasons = "; ".join(sorted({missing[key] for key in keys}))
        return [], f"no series of the {side} flow: {reasons}"
    return [], (f"too few points: no attempt with {MIN_TRIAL_POINTS} kept bins of the "
                f"{side} flow")
