"""A/B verdicts on the conformance of a congestion control against the kernel's (paper 000
§3; docs/conformance.md, "For maintainers"; docs/compare.md).

A cell's Conformance (:func:`~interop_runner.analysis.theories.flow_conformance.flow_conformance`)
is one value computed from all its trials at once: the performance envelope is the
intersection over the trials, so there is no per-trial sample to run the goodput rule on.
The sample here is **per attempt**: the attempt's QUIC flow (one trial) against the kernel
TCP flow of the same congestion control that shared the bottleneck with it in that attempt
(:func:`trial_conformance`, each attempt against its own reference, one hull per trial as
the paper does for a single trial). Attempts are independent runs, so these values are
independent draws of "how kernel-like was the flow in one run", as an attempt's goodput is;
the goodput rule (:func:`~.compare.compare`: medians, bootstrap CI, Mann-Whitney U or,
for arms run in pairs, the Wilcoxon signed-rank test, ``min_effect``, ``min_samples``)
then runs on them unchanged, with the change measured as a difference of conformance
(``change="absolute"``: a share may be 0). Leave-one-out (jackknife) values of the cell
figure were not taken: they share all but one trial, so they are not independent samples
and a rank test on them would be far too confident.

A conformance that rises is ``better`` (closer to the kernel's), one that falls is
``worse`` (it gates like ``slower``). The cell figures of each side (all trials together,
each side against its own kernel flows) are shown beside the verdict: against the
kernel-vs-kernel runs (paper 000's reference, <NA> without them) and against the kernel flow
of the same attempts (``*_same_run``).

The per-attempt sample is a same-run figure (``conformance_same_run``): each attempt's flow
against the kernel flow that competed with it. Each value against the one reference made of
all kernel-vs-kernel runs would not be independent (see above).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from interop_runner.analysis.ab.compare import _held_fixed, _normalized, compare
from interop_runner.analysis.ab.cost import as_value
from interop_runner.analysis.theories.flow_conformance import conformance_table

__all__ = ["CELL_FIGURES", "CONFORMANCE_VERDICTS", "MIN_EFFECT", "NOT_BY_NAME",
           "TRIAL_COLUMNS", "VALUE", "Side", "compare_conformance", "conformance_keys",
           "conformance_of_campaigns", "conformance_of_variants", "has_flows", "not_compared",
           "side_of", "trial_conformance", "worse"]

CONFORMANCE_VERDICTS = {"faster": "better", "slower": "worse"}
"""Goodput verdict -> conformance verdict (the conformance rose / fell)."""
MIN_EFFECT = 0.1
"""The smallest change of conformance that matters, in share points (0.1: 10 points of the
0..1 scale); see docs/conformance.md for why."""
# the attempt's identity, the flow, then what the compare rule reads
TRIAL_COLUMNS: dict[str, str] = {
    "label": "string", "stack": "string", "congestion_control": "string",
    "reference_label": "string", "repetition": "Int64", "attempt": "Int64",
    "path": "string", "status": "string", "reason": "string",
    "conformance_same_run": "Float64"}
#: The value compared per attempt (a column of :data:`TRIAL_COLUMNS`).
VALUE = "conformance_same_run"
#: The all-trials figures of each side shown beside a verdict (suffixes ``_a``, ``_b``):
#: against the kernel-vs-kernel runs, then against the kernel flow of the same attempts.
CELL_FIGURES = ("conformance", "conformance_t", "conformance_t_spread", "delta_throughput",
                "delta_delay", "trials_test", "conformance_missing", "conformance_same_run",
                "conformance_t_same_run", "delta_throughput_same_run",
                "delta_delay_same_run", "trials_test_same_run", "conformance_same_run_missing")
CELL_ID = ("campaign", "flow_set", "variant")  # the axis_* columns follow


def has_flows(results: pd.DataFrame) -> bool:
    """Whether a results frame has attempts with flow sets (a conformance to compare)."""
    return "flow_count" in results.columns and bool(results["flow_count"].notna().any())


def _axes(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if str(c).startswith("axis_")]


def trial_conformance(flows: pd.DataFrame, flow_results: pd.DataFrame,
                      delay: str = "queue_delay_ms_mean") -> pd.DataFrame:
    """Per attempt and QUIC flow label (frames of
    :func:`~interop_runner.analysis.frames.flows.load_flows` and
    :func:`~interop_runner.analysis.frames.flows.load_flow_results`): the conformance of that
    attempt's flow against the
    same attempt's kernel TCP flow of its congestion control (``conformance_same_run``),
    one trial each, k = 1 (a single trial keeps all its points: the paper's rule for one
    trial; k-means draws nothing, so no seed spread is computed). Columns: the cell
    (``campaign``, ``flow_set``, ``variant``, ``axis_*``), then :data:`TRIAL_COLUMNS`;
    ``status`` is ``ok`` with a value, else ``failed`` with ``reason`` (the table's
    ``conformance_same_run_missing``: the flow failed, no reference, no series, too few
    points)."""
    cell = [*CELL_ID, *_axes(flow_results)]
    by_path = dict(iter(flows.groupby("path", sort=False))) if not flows.empty else {}
    parts = []
    for path, attempt in flow_results.groupby("path", sort=False):
        table = conformance_table(by_path.get(path, flows.iloc[0:0]), attempt, delay=delay,
                                  k=1, spread_seeds=())
        table = table[table["label"].notna().to_numpy(dtype=bool)]
        first = attempt.iloc[0]
        value = table[VALUE]
        parts.append(pd.DataFrame({
            **{c: table[c] for c in cell}, "label": table["label"],
            "stack": _stack(table), "congestion_control": table["congestion_control"],
            "reference_label": table["reference_label"],
            "repetition": first["repetition"], "attempt": first["attempt"], "path": path,
            "status": value.notna().map({True: "ok", False: "failed"}),
            "reason": table["conformance_same_run_missing"], VALUE: value}))
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=[*cell, *TRIAL_COLUMNS])
    return frame.astype(TRIAL_COLUMNS)


def _stack(table: pd.DataFrame) -> "pd.Series[Any]":
    """The flow's stack: its server, else (a kernel flow tested against another) what its
    label names (``tcp``)."""
    named = table["label"].astype("string").str.split("/").str[0]
    return table["server"].astype("string").fillna(named)


def conformance_keys(side_a: pd.DataFrame, side_b: pd.DataFrame,
                     exclude: Sequence[str] = ()) -> list[str]:
    """The cell of a conformance comparison: flow set, flow label, variant and sweep axes,
    without ``exclude`` (the compared column) and without the keys whose values on the two
    sides have nothing in common (the variant id when comparing one of its axes)."""
    keys = [k for k in ("flow_set", "label", "variant", *sorted(
        set(_axes(side_a)) | set(_axes(side_b)))) if k not in exclude]
    return _held_fixed(side_a, side_b, keys)


def compare_conformance(trials_a: pd.DataFrame, trials_b: pd.DataFrame, *,
                        cells_a: pd.DataFrame | None = None,
                        cells_b: pd.DataFrame | None = None,
                        by: Sequence[str] | None = None, min_effect: float = MIN_EFFECT,
                        **stats: Any) -> pd.DataFrame:
    """The goodput rule (:func:`~.compare.compare`) on the per-attempt conformance of side
    B against side A (:func:`trial_conformance` frames), the change a difference in share
    points; verdicts ``better`` / ``worse`` / ``no change`` / ``inconclusive``. ``by``: the
    cell keys (default :func:`conformance_keys`); ``stats``: ``paired``, ``confidence``,
    ``alpha``, ``n_boot``, ``seed``, ``min_samples`` as for compare. ``cells_a``/``cells_b``
    (:func:`~interop_runner.analysis.theories.flow_conformance.conformance_table` of each side):
    their figures are added as
    ``<figure>_a``/``<figure>_b`` (:data:`CELL_FIGURES`)."""
    keys = list(by) if by is not None else conformance_keys(trials_a, trials_b)
    result = compare(as_value(trials_a, VALUE), as_value(trials_b, VALUE),
                     by=keys, min_effect=min_effect, change="absolute", **stats)
    result["verdict"] = result["verdict"].map(lambda v: CONFORMANCE_VERDICTS.get(v, v))
    result = _with_flow(result.drop(columns=["versions_a", "versions_b"]),
                        pd.concat([trials_a, trials_b], ignore_index=True), keys)
    for side, cells in (("a", cells_a), ("b", cells_b)):
        if cells is not None:
            result = _with_figures(result, cells, keys, side)
    result.attrs.update(value="conformance", keys=keys)
    return result


def _with_flow(result: pd.DataFrame, trials: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """``result`` with each cell's ``stack`` and ``congestion_control`` (from either side)."""
    attrs = result.attrs
    flow = _normalized(trials[[*keys, "stack", "congestion_control"]], keys)
    flow = flow.dropna(subset=["congestion_control"]).drop_duplicates(subset=keys)
    merged = result.merge(flow, on=keys, how="left")
    merged.attrs = attrs
    return merged


def _with_figures(result: pd.DataFrame, cells: pd.DataFrame, keys: list[str],
                  side: str) -> pd.DataFrame:
    """``result`` with one side's all-trials figures per cell (``<figure>_<side>``)."""
    attrs = result.attrs
    figures = cells[cells["label"].notna().to_numpy(dtype=bool)]
    figures = _normalized(figures[[*keys, *CELL_FIGURES]], keys)  # keys as compare has them
    figures = figures.drop_duplicates(subset=keys).rename(
        columns={f: f"{f}_{side}" for f in CELL_FIGURES})
    merged = result.merge(figures, on=keys, how="left")
    merged.attrs = attrs
    return merged


def worse(result: pd.DataFrame) -> bool:
    """Whether any cell of a :func:`compare_conformance` result conforms significantly
    less (the CI gate, as ``slower``)."""
    return bool((result["verdict"] == "worse").any())


# ---------------------------------------------------------------- campaigns and variants ----

NOT_BY_NAME = ("flow sets are cells by their written names: compare variants of a stack "
               "by a sweep axis (impl.<name>) or as two campaigns")
"""Why ``--column server/client/implementation`` compares no conformance."""


@dataclass(frozen=True)
class Side:
    """One side of a conformance comparison: its per-attempt values
    (:func:`trial_conformance`) and its all-trials cell figures
    (:func:`~interop_runner.analysis.theories.flow_conformance.conformance_table`), each against
    its own kernel flows."""

    trials: pd.DataFrame
    cells: pd.DataFrame


def side_of(flows: pd.DataFrame, flow_results: pd.DataFrame) -> Side:
    """The :class:`Side` of the attempts in ``flow_results`` (``flows``: their series)."""
    paths = set(flow_results["path"].astype(str))
    own = flows[flows["path"].astype(str).isin(paths).to_numpy(dtype=bool)] \
        if not flows.empty else flows
    return Side(trial_conformance(own, flow_results), conformance_table(own, flow_results))


def _loaded(directory: Path | str) -> tuple[pd.DataFrame, pd.DataFrame]:
    from interop_runner.analysis.frames.flows import load_flow_results, load_flows

    return load_flows(directory), load_flow_results(directory)


def conformance_of_campaigns(dir_a: Path | str, dir_b: Path | str,
                             **options: Any) -> pd.DataFrame:
    """:func:`compare_conformance` of two campaign directories (A: baseline), each side
    against its own kernel flows; ``options`` as for it."""
    a, b = side_of(*_loaded(dir_a)), side_of(*_loaded(dir_b))
    return compare_conformance(a.trials, b.trials, cells_a=a.cells, cells_b=b.cells,
                               **options)


def conformance_of_variants(directory: Path | str, column: str, a: str, b: str,
                            **options: Any) -> pd.DataFrame:
    """:func:`compare_conformance` of two variants of one campaign: the attempts whose
    ``column`` (``variant`` or a sweep axis, e.g. ``axis_version`` of an ``impl.<name>``
    axis) is ``a`` against those where it is ``b``; the cells are held fixed but for that
    column. Another column compares nothing (:func:`not_compared`, :data:`NOT_BY_NAME`)."""
    if column != "variant" and not column.startswith("axis_"):
        return not_compared(NOT_BY_NAME)
    flows, flow_results = _loaded(directory)
    if column not in flow_results.columns:
        return not_compared(f"no column {column!r} in the flow results")
    values = flow_results[column].astype("string")
    sides = [side_of(flows, flow_results[(values == v).fillna(False).to_numpy(dtype=bool)])
             for v in (a, b)]
    keys = conformance_keys(sides[0].trials, sides[1].trials, exclude=(column,))
    return compare_conformance(sides[0].trials, sides[1].trials, cells_a=sides[0].cells,
                               cells_b=sides[1].cells, by=keys, **options)


def not_compared(reason: str) -> pd.DataFrame:
    """An empty comparison that says why there is none (``attrs["not_compared"]``)."""
    frame = pd.DataFrame(columns=["verdict"])
    frame.attrs.update(value="conformance", not_compared=reason)
    return frame
