"""Conformance of each QUIC flow of stored campaigns against the kernel (paper 000 §3,
docs/conformance.md), from the per-flow series at the bottleneck
(:func:`~interop_runner.analysis.frames.flows.load_flows`: bins of 10 base RTTs, the first
and last 10 % of each flow's time trimmed).

A cell is one campaign, flow set, variant and sweep point. In it, the test cloud of a QUIC
flow (by label) has one trial per attempt in which that flow ended ok: its kept bins as
(queueing delay, throughput) points. Its reference, as paper 000 defines it, is the kernel
competing with itself: the kernel-vs-kernel runs of the same congestion control on the same
path with the same kernel (:mod:`.kernel_reference`), one trial per run (both flows pooled),
at least as many as the test has; the figures without a suffix are against it. When no such
runs exist (or only on another kernel, ``reference_kernel_mismatch``) they are <NA> and
``conformance_missing`` says why (never 0). The ``*_same_run`` figures compare the flow with
the kernel TCP flow of its congestion control that competed with it in the same attempts
(this module's figure before issue 35: it pins Δ-delay near 0, both flows seeing one queue),
``conformance_same_run_missing`` why they are missing. The ``*_floor`` figures are the noise
floor of the reference: its runs in two interleaved halves, one against the other.

A cell of kernel TCP flows only (``[{tcp: cubic}, {tcp: cubic}]``) is the kernel against
itself: its row's figures are that noise floor, its same-run figures the second flow by name
against the first. A trial with fewer than :data:`MIN_TRIAL_POINTS` points is left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from interop_runner.analysis.frames.flows import load_flow_results, load_flows
from interop_runner.analysis.theories.conformance import SPREAD_SEEDS, conformance
from interop_runner.analysis.theories.envelope import K_MAX
from interop_runner.analysis.theories.kernel_reference import (
    ReferenceKey,
    attempt_contexts,
    halves,
    kernel_runs,
)

__all__ = ["FLOOR_COLUMNS", "FLOW_CONFORMANCE_COLUMNS", "FlowClouds", "MIN_TRIAL_POINTS",
           "REFERENCE_COLUMNS", "RESULT_COLUMNS", "SAME_RUN_COLUMNS", "conformance_table",
           "flow_clouds", "flow_conformance"]

#: A trial needs this many points (a hull needs 3 to have an area).
MIN_TRIAL_POINTS = 3
#: The figures of :class:`~.conformance.ConformanceResult` kept in the table.
RESULT_COLUMNS: dict[str, str] = {
    "conformance": "Float64", "conformance_t": "Float64", "delta_throughput": "Float64",
    "delta_delay": "Float64", "delta_throughput_range": "Float64",
    "delta_delay_range": "Float64", "conformance_spread": "Float64",
    "conformance_t_spread": "Float64", "delta_throughput_spread": "Float64",
    "delta_delay_spread": "Float64", "delta_mean_throughput": "Float64",
    "delta_mean_delay": "Float64", "k_test": "Int64", "k_reference": "Int64",
    "points_test": "Int64", "points_reference": "Int64", "trials_test": "Int64",
    "trials_reference": "Int64", "retained_test": "Float64", "retained_reference": "Float64"}
#: What the figures without a suffix were compared with: the kernel-vs-kernel runs pooled,
#: the test's kernel (:func:`~.kernel_reference.kernel_key`) and whether such runs exist
#: only on another kernel (then no figures).
REFERENCE_COLUMNS: dict[str, str] = {
    "reference_runs": "Int64", "kernel": "string", "reference_kernel_mismatch": "boolean"}
_SAME_RUN = tuple(RESULT_COLUMNS)
#: The figures against the kernel flow of the same attempts (each of
#: :data:`RESULT_COLUMNS` with the suffix ``_same_run``), and why they are missing.
SAME_RUN_COLUMNS: dict[str, str] = {
    **{f"{f}_same_run": RESULT_COLUMNS[f] for f in _SAME_RUN},
    "conformance_same_run_missing": "string"}
_FLOOR = ("conformance", "conformance_t", "conformance_spread", "conformance_t_spread",
          "trials_test", "trials_reference")
#: The noise floor of the reference: one half of its runs against the other.
FLOOR_COLUMNS: dict[str, str] = {f"{f}_floor": RESULT_COLUMNS[f] for f in _FLOOR}
#: The columns of :func:`flow_conformance` after the cell's identity.
FLOW_CONFORMANCE_COLUMNS: dict[str, str] = {
    "label": "string", "server": "string", "congestion_control": "string",
    "reference_label": "string", **RESULT_COLUMNS, **REFERENCE_COLUMNS,
    "conformance_missing": "string", **SAME_RUN_COLUMNS, **FLOOR_COLUMNS}
CELL = ["campaign", "flow_set", "variant"]  # then the axis_<name> columns

Trials = list[np.ndarray[Any, np.dtype[np.float64]]]


def flow_conformance(*paths: Path | str, delay: str = "queue_delay_ms_mean",
                     k: int | None = None, k_max: int = K_MAX, seed: int = 0,
                     spread_seeds: Any = SPREAD_SEEDS) -> pd.DataFrame:
    """Per cell of the campaign or results directories given and QUIC flow label: the
    conformance of that flow against the kernel (see the module). Columns: ``campaign``,
    ``flow_set``, ``variant``, ``axis_<name>``, then :data:`FLOW_CONFORMANCE_COLUMNS`: the
    flow's ``label``, ``server`` and ``congestion_control``, the label of the kernel flow of
    the same attempts, the figures of :func:`~.conformance.conformance` against the
    kernel-vs-kernel runs (Mbit/s, ms; ``delta_*``: test minus reference), what they were
    compared with (:data:`REFERENCE_COLUMNS`), ``conformance_missing``, the same-run
    figures (:data:`SAME_RUN_COLUMNS`) and the reference's noise floor
    (:data:`FLOOR_COLUMNS`). ``delay``: the series' delay column (``queue_delay_ms_mean``
    or ``queue_delay_ms_p95``); ``k``, ``k_max``, ``seed``, ``spread_seeds``: as for
    :func:`~.conformance.conformance`. A cell without a tested flow has one row, label
    <NA>. The runs of the reference come from the same directories."""
    return conformance_table(load_flows(*paths), load_flow_results(*paths), delay=delay,
                             k=k, k_max=k_max, seed=seed, spread_seeds=spread_seeds)


def conformance_table(flows: pd.DataFrame, flow_results: pd.DataFrame,
                      delay: str = "queue_delay_ms_mean",
                      contexts: pd.DataFrame | None = None, **options: Any) -> pd.DataFrame:
    """:func:`flow_conformance` on frames already loaded
    (:func:`~interop_runner.analysis.frames.flows.load_flows`,
    :func:`~interop_runner.analysis.frames.flows.load_flow_results` of the same directories).
    ``contexts``: each attempt's path and kernel (:func:`~.kernel_reference.attempt_contexts`,
    read from the attempts' records when None)."""
    cells = [*CELL, *(c for c in flow_results.columns if c.startswith("axis_"))]
    sources = _sources(flows, flow_results, delay, contexts)
    rows = []
    for key, cell in flow_results.groupby(cells, sort=True, dropna=False):
        ids = dict(zip(cells, key if isinstance(key, tuple) else (key,)))
        rows += [{**ids, **row} for row in _cell_rows(cell, sources, options)]
    frame = pd.DataFrame(rows, columns=[*cells, *FLOW_CONFORMANCE_COLUMNS])
    return frame.astype(FLOW_CONFORMANCE_COLUMNS)


@dataclass
class _Sources:
    """What the rows of a table are made from: per (attempt, flow) its points and why it
    has none, each attempt's path and kernel, the kernel-vs-kernel runs by reference key
    and the noise floors computed so far (one per key)."""

    points: dict[tuple[str, int], Any]
    missing: dict[tuple[str, int], str]
    contexts: dict[str, tuple[str, str]]
    runs: dict[ReferenceKey, list[tuple[str, list[int]]]]
    floors: dict[ReferenceKey, dict[str, Any]] = field(default_factory=dict)


def _sources(flows: pd.DataFrame, flow_results: pd.DataFrame, delay: str,
             contexts: pd.DataFrame | None) -> _Sources:
    """The sources of a table: the frames' points and reasons, the attempts' contexts
    (read from their records when not given) and the kernel-vs-kernel runs among them."""
    if contexts is None:
        contexts = attempt_contexts(flow_results["path"].astype(str))
    known = contexts.dropna(subset=["path_key", "kernel"])
    return _Sources(_points(flows, delay), _missing(flows),
                    {str(p): (str(k), str(n)) for p, k, n
                     in zip(known["path"], known["path_key"], known["kernel"])},
                    kernel_runs(flow_results, contexts))


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


def _cell_rows(cell: pd.DataFrame, sources: _Sources, options: dict[str, Any]
               ) -> list[dict[str, Any]]:
    """One row per QUIC flow label of the cell (see :func:`_tested`); one row, label
    <NA>, without a flow to test."""
    quic, tcp = _tested(cell)
    if quic.empty:
        return [{"conformance_missing": "no QUIC flow in the cell"}]
    kernel_cell = not (cell["kind"].astype("string") == "quic").fillna(False).any()
    return [_flow_row(_clouds(str(label), flows, tcp, sources, kernel_cell), sources, options)
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
    """A tested flow's clouds in one cell, trials as (n, 2) arrays of (delay ms, throughput
    Mbit/s). Against the kernel flow of the same attempts: ``test`` and ``reference``, or
    ``missing`` (why there are none; then both empty). Against the kernel-vs-kernel runs
    (the figures without a suffix): ``kernel_test`` (the test's trials; in a cell of kernel
    flows one half of the runs) and ``kernel_reference`` (one trial per run), or
    ``kernel_missing``; ``reference_runs`` the runs of that reference, ``kernel`` the test's
    kernel, ``mismatch`` whether such runs exist only on another kernel, ``key`` the
    reference's (None when the test's attempts give none)."""

    label: str
    server: Any
    congestion_control: Any
    reference_label: str | None
    test: Trials
    reference: Trials
    missing: str | None
    kernel_test: Trials = field(default_factory=list)
    kernel_reference: Trials = field(default_factory=list)
    kernel_missing: str | None = "not looked up"
    reference_runs: int | None = None
    kernel: str | None = None
    mismatch: bool | None = None
    key: ReferenceKey | None = None


def _clouds(label: str, flows: pd.DataFrame, tcp: pd.DataFrame, sources: _Sources,
            kernel_cell: bool = False) -> FlowClouds:
    """The clouds of one tested flow label: against the cell's kernel TCP flows of the same
    attempts and against the kernel-vs-kernel runs (in a cell of kernel flows: one half of
    those runs against the other)."""
    same = _same_run(label, flows, tcp, sources)
    ok = flows[(flows["status"].astype("string") == "ok").fillna(False).to_numpy()]
    if ok.empty:
        return replace(same, kernel_missing=same.missing)
    trials, reason = _trials(ok, sources.points, sources.missing, "test")
    key, why = _reference_key(ok, same.congestion_control, sources)
    if key is None:
        return replace(same, kernel_missing=reason or why)
    found = _kernel_reference(key, trials, sources, kernel_cell)
    return replace(found, **_same_fields(same), kernel_missing=reason or found.kernel_missing)


def _same_fields(clouds: FlowClouds) -> dict[str, Any]:
    """The fields of a flow's identity and its same-run clouds."""
    return {name: getattr(clouds, name) for name in (
        "label", "server", "congestion_control", "reference_label", "test", "reference",
        "missing")}


def _same_run(label: str, flows: pd.DataFrame, tcp: pd.DataFrame, sources: _Sources
              ) -> FlowClouds:
    """The clouds of one tested flow label against the cell's kernel TCP flows of the same
    attempts (the ``*_same_run`` figures)."""
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
    test_trials, test_reason = _trials(ok, sources.points, sources.missing, "test")
    ref_trials, ref_reason = _trials(reference, sources.points, sources.missing, "reference")
    if test_reason or ref_reason:
        return replace(none, missing=test_reason or ref_reason)
    return replace(none, test=test_trials, reference=ref_trials)


def _reference_key(ok: pd.DataFrame, control: Any, sources: _Sources
                   ) -> tuple[ReferenceKey | None, str]:
    """The reference key of a test's attempts (ended ok): its congestion control, their one
    path and one kernel; or None and why there is none."""
    found = [sources.contexts.get(str(p)) for p in ok["path"]]
    contexts = {c for c in found if c is not None}
    if len(contexts) < len(set(found)):
        return None, ("no run record of the test's attempts: no path and kernel to find "
                      "the kernel-vs-kernel runs of its reference by")
    if len(contexts) > 1:
        return None, ("the test's attempts ran on several paths or kernels: "
                      + "; ".join(sorted(f"{p} with {k}" for p, k in contexts if p)))
    ((path, kernel),) = contexts
    return ReferenceKey(str(control or "<unknown>"), path, kernel), ""


def _kernel_reference(key: ReferenceKey, test: Trials, sources: _Sources, kernel_cell: bool
                      ) -> FlowClouds:
    """The kernel-vs-kernel clouds of a test on ``key`` (its identity fields left blank),
    or why there are none: no runs of that congestion control on that path, runs only on
    another kernel (``mismatch``), fewer runs than the test has trials; in a cell of kernel
    flows the runs' two halves (fewer than two runs: none)."""
    runs = _run_trials(sources.runs.get(key, []), sources)
    blank = FlowClouds("", None, None, None, [], [], None, key=key, kernel=key.kernel,
                       reference_runs=len(runs), mismatch=False)
    if not runs:
        return replace(blank, **_no_runs(key, sources))
    if kernel_cell:
        first, second = halves(runs)
        if not second:
            return replace(blank, kernel_missing="one kernel-vs-kernel run of "
                           f"{key.congestion_control} on this path: no two halves to compare")
        return replace(blank, kernel_test=second, kernel_reference=first, kernel_missing=None)
    if len(runs) < len(test):
        return replace(blank, kernel_missing=(
            f"{len(runs)} kernel-vs-kernel run(s) of {key.congestion_control} on this path, "
            f"fewer than the test's {len(test)} trials"))
    return replace(blank, kernel_test=test, kernel_reference=runs, kernel_missing=None)


def _no_runs(key: ReferenceKey, sources: _Sources) -> dict[str, Any]:
    """Why a reference key has no runs: none of its congestion control on its path at all,
    or only on other kernels (a reference holds for one kernel: ``mismatch``)."""
    others = sorted({k.kernel for k in sources.runs if (k.congestion_control, k.path)
                     == (key.congestion_control, key.path) and k.kernel != key.kernel})
    if others:
        return {"mismatch": True, "kernel_missing": (
            f"the kernel-vs-kernel runs of {key.congestion_control} on this path ran on "
            f"another kernel ({'; '.join(others)}), not the test's ({key.kernel}): a "
            f"reference holds for one kernel")}
    return {"kernel_missing": (
        f"no kernel-vs-kernel runs of {key.congestion_control} on this path ({key.path}): "
        f"the reference is the kernel competing with itself, a flow set of two "
        f"{{tcp: {key.congestion_control}}} flows; the *_same_run figures compare with the "
        f"kernel flow of the same attempts")}


def _run_trials(runs: list[tuple[str, list[int]]], sources: _Sources) -> Trials:
    """One trial per kernel-vs-kernel run: its flows' points pooled (runs with fewer than
    :data:`MIN_TRIAL_POINTS` left out)."""
    trials = []
    for path, flows in runs:
        parts = [sources.points[(path, f)] for f in flows if (path, f) in sources.points]
        if parts and sum(len(p) for p in parts) >= MIN_TRIAL_POINTS:
            trials.append(np.vstack(parts))
    return trials


# why a flow has no figures when the trials of one cloud or both share no region
_NO_COMMON_REGION = {
    ("test",): "the test flow's trials share no region: its envelope, their intersection, "
               "holds none of its points (the trials disagree)",
    ("reference",): "the reference flow's trials share no region: its envelope, their "
                    "intersection, holds none of its points (the trials disagree)",
    ("test", "reference"): "neither flow's trials share a region: both envelopes, the "
                           "intersections of their trials, hold none of their points (the "
                           "trials disagree)"}


def _flow_row(clouds: FlowClouds, sources: _Sources | None, options: dict[str, Any]
              ) -> dict[str, Any]:
    """The row of one tested flow label: its identity, the figures against the
    kernel-vs-kernel runs, the same-run figures and the reference's noise floor, each set
    with why it is missing."""
    row: dict[str, Any] = {"label": clouds.label, "server": clouds.server,
                           "congestion_control": clouds.congestion_control,
                           "reference_label": clouds.reference_label,
                           "reference_runs": clouds.reference_runs, "kernel": clouds.kernel,
                           "reference_kernel_mismatch": clouds.mismatch}
    figures, why = _figures(clouds.kernel_test, clouds.kernel_reference,
                            clouds.kernel_missing, options)
    row.update({c: figures.get(c) for c in RESULT_COLUMNS}, conformance_missing=why)
    same, why = _figures(clouds.test, clouds.reference, clouds.missing, options)
    row.update({f"{c}_same_run": same.get(c) for c in _SAME_RUN},
               conformance_same_run_missing=why)
    floor = _floor(clouds.key, sources, options) if sources is not None else {}
    row.update({f"{c}_floor": floor.get(c) for c in _FLOOR})
    return row


def _figures(test: Trials, reference: Trials, missing: str | None, options: dict[str, Any]
             ) -> tuple[dict[str, Any], str | None]:
    """The figures of two clouds and why they are <NA> (``missing``, or trials that share
    no region); none when ``missing``."""
    if missing:
        return {}, missing
    result = conformance(test, reference, **options).as_dict()
    empty = [side for side in ("test", "reference") if result[f"retained_{side}"] == 0]
    # conformance() leaves the shares NaN: nothing inside an envelope to compare
    return result, _NO_COMMON_REGION[tuple(empty)] if empty else None


def _floor(key: ReferenceKey | None, sources: _Sources, options: dict[str, Any]
           ) -> dict[str, Any]:
    """The noise floor of a reference: the second half of its runs against the first
    (:func:`~.kernel_reference.halves`), computed once per key; none below two runs."""
    if key is None:
        return {}
    if key not in sources.floors:
        first, second = halves(_run_trials(sources.runs.get(key, []), sources))
        sources.floors[key] = _figures(second, first, None if second else "one run",
                                       options)[0]
    return sources.floors[key]


def flow_clouds(flows: pd.DataFrame, flow_results: pd.DataFrame, label: str,
                delay: str = "queue_delay_ms_mean", contexts: pd.DataFrame | None = None,
                **cell: Any) -> FlowClouds:
    """The clouds :func:`conformance_table` compares for the flow ``label`` in the first
    cell (by its columns, sorted) whose columns equal ``cell`` (e.g. ``flow_set=...,
    axis_buffer="1bdp"``; none given: any cell) and that has that flow. ``missing`` (and
    ``kernel_missing``) say why there are no clouds, also when no such cell exists."""
    rows = flow_results
    for column, value in cell.items():
        if column not in rows.columns:
            return FlowClouds(label, None, None, None, [], [], f"no column {column}",
                              kernel_missing=f"no column {column}")
        values = rows[column].astype("string")
        rows = rows[values.isna().to_numpy() if pd.isna(value)
                    else values.eq(str(value)).fillna(False).to_numpy()]
    columns = [*CELL, *(c for c in flow_results.columns if c.startswith("axis_"))]
    for _, group in rows.groupby(columns, sort=True, dropna=False):
        tested, tcp = _tested(group)
        mine = tested[(tested["label"].astype("string") == label).fillna(False).to_numpy()]
        if not mine.empty:
            kernel_cell = not (group["kind"].astype("string") == "quic").fillna(False).any()
            return _clouds(label, mine, tcp, _sources(flows, flow_results, delay, contexts),
                           kernel_cell)
    none = f"no cell with a tested flow {label}"
    return FlowClouds(label, None, None, None, [], [], none, kernel_missing=none)


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
