"""The conformance part of ``run.py compare``'s text: the verdict per cell on the conformance
of a congestion control against the kernel's (:mod:`interop_runner.analysis.ab.conformance`)
as a terminal table, Markdown for a pull request comment and JSON, and the Markdown table of
a side's figures (:func:`cells_markdown`: stack, CC, buffer, RTT, Conformance,
Conformance-T and its seed spread, Δ-throughput, Δ-delay, trials, why missing, then the same
figures against the kernel flow of the same attempts).

Pure functions of the result frames; docs/compare.md ("Conformance") and docs/conformance.md
("For maintainers") say what the numbers are.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from interop_runner.analysis.ab.compare import CompareSettings
from interop_runner.report.compare_text import (
    _counts,
    _markdown_table,
    _md,
    _num,
    _p,
    _records,
    json_document,
    render,
)
from interop_runner.report.compare_text import output_summary as goodput_summary

VERDICT_ORDER = ("worse", "better", "no change", "inconclusive")
HEADING = ("Conformance against the kernel (paper 000 §3; 0..1, higher is closer to the "
           "kernel's): per attempt, the QUIC flow against that attempt's kernel TCP flow of "
           "its congestion control; better/worse by the goodput rule on those values")
# a side's figures: column of the compare result (before _a/_b) -> heading; without a
# suffix against the kernel-vs-kernel runs (paper 000's reference), then against the kernel
# flow of the same attempts
FIGURES = {"conformance": "Conformance", "conformance_t": "Conformance-T",
           "conformance_t_spread": "C-T seed spread",
           "delta_throughput": "Δ-throughput Mbit/s", "delta_delay": "Δ-delay ms",
           "trials_test": "trials", "conformance_missing": "missing",
           "conformance_same_run": "C same run", "conformance_t_same_run": "C-T same run",
           "delta_throughput_same_run": "Δ-throughput same run",
           "delta_delay_same_run": "Δ-delay same run", "trials_test_same_run": "trials same run",
           "conformance_same_run_missing": "missing same run"}
_OFFSETS = ("delta_throughput", "delta_delay", "delta_throughput_same_run",
            "delta_delay_same_run")
AXES = {"axis_buffer": "buffer", "axis_rtt": "RTT"}  # the axes the paper's cells have


def render_comparison(result: pd.DataFrame, fmt: str, plan_frame: pd.DataFrame | None,
                      cost: pd.DataFrame | None, conformance: pd.DataFrame | None) -> str:
    """``compare``'s whole output: the goodput (and plan and CPU cost) of
    :func:`~interop_runner.report.compare_text.render`, then the conformance (None: the
    campaigns ran no flow sets, nothing is said)."""
    if fmt == "json":
        out = json_document(result, plan_frame, cost)
        if conformance is not None:
            out["conformance"] = as_json(conformance)
        return json.dumps(out, indent=2) + "\n"
    text = render(result, fmt, plan_frame, cost)
    if conformance is None:
        return text
    return text + (markdown(conformance) if fmt == "markdown" else table(conformance))


def output_summary(result: pd.DataFrame, cost: pd.DataFrame,
                   conformance: pd.DataFrame | None) -> str:
    """The line printed when the comparison went to a file: goodput, CPU cost and, with flow
    sets, conformance verdict counts."""
    line = goodput_summary(result, cost)
    if conformance is None or "not_compared" in conformance.attrs:
        return line
    return f"{line}; conformance: {summary_line(conformance)}"


def summary_line(result: pd.DataFrame) -> str:
    """``1 worse, 2 no change`` (no cells: ``no cells``)."""
    found = _counts(result) if len(result) else {}
    return ", ".join(f"{found[v]} {v}" for v in VERDICT_ORDER if found.get(v)) or "no cells"


def rule(result: pd.DataFrame) -> str:
    """The verdict rule in one sentence, with the settings used."""
    s = CompareSettings.of(result)
    paired = s.method == "paired"
    what, test, unit = (("median pair difference", "Wilcoxon signed-rank", "pairs")
                        if paired else ("difference of the medians", "Mann-Whitney",
                                        "ok attempts per side"))
    return (f"better/worse: the {100 * s.confidence:g} % bootstrap CI of the {what} of the "
            f"per-attempt conformance excludes 0, |change| >= {s.min_effect:g} and {test} "
            f"p < {s.alpha:g}; no change: the CI lies within ±{s.min_effect:g}; inconclusive "
            f"otherwise or below {s.min_samples} {unit} ({s.method})")


def _key_columns(result: pd.DataFrame) -> list[str]:
    """The keys worth showing: the flow label, the flow set when a label is in several, the
    axes that vary (not ``axis_flows``: the label says it)."""
    keys = list(result.attrs.get("keys", []))
    shown = ["label"] if "label" in keys else []
    if "flow_set" in keys and result.groupby("label")["flow_set"].nunique().gt(1).any():
        shown.append("flow_set")
    axes = [k for k in keys if k.startswith("axis_") and k != "axis_flows"]
    return shown + [k for k in axes if k in AXES or result[k].nunique() > 1]


def _difference(value: Any) -> str:
    return "n/a" if value is None or pd.isna(value) or not math.isfinite(float(value)) \
        else f"{float(value):+.3f}"


def _ci(row: Any) -> str:
    low, high = _difference(row["ci_low"]), _difference(row["ci_high"])
    return "n/a" if "n/a" in (low, high) else f"[{low}, {high}]"


def _verdict_frame(result: pd.DataFrame) -> pd.DataFrame:
    """The verdict table's columns (terminal and Markdown alike)."""
    keys = _key_columns(result)
    return pd.DataFrame({
        **{AXES.get(k, k): result[k].astype(str) for k in keys},
        **{name: [_num(v, ".2f") for v in result.get(column, [math.nan] * len(result))]
           for name, column in (("cell A", "conformance_a"), ("cell B", "conformance_b"),
                                ("same run A", "conformance_same_run_a"),
                                ("same run B", "conformance_same_run_b"))},
        "n A/B": [f"{r.n_a}/{r.n_b}" for r in result.itertuples()],
        "median A": [_num(v, ".2f") for v in result["median_a"]],
        "median B": [_num(v, ".2f") for v in result["median_b"]],
        "change": [_difference(v) for v in result["rel_diff"]],
        "CI": [_ci(r) for _, r in result.iterrows()],
        "p": [_p(v) for v in result["p_value"]],
        "verdict": result["verdict"],
        "note": result["note"],
    })


def table(result: pd.DataFrame) -> str:
    """The conformance comparison as plain text for a terminal ("" when there is none to
    show)."""
    if "not_compared" in result.attrs:
        return f"\nConformance: not compared ({result.attrs['not_compared']})\n"
    if result.empty:
        return ""
    return "\n".join(["", HEADING, f"rule: {rule(result)}", "",
                      _verdict_frame(result).to_string(index=False), "",
                      f"Conformance: {summary_line(result)}  (cell: all trials together, "
                      f"against kernel-vs-kernel runs; same run: against the kernel flow of "
                      f"the same attempts; median: of the per-attempt same-run values; "
                      f"change: B - A)"]) + "\n"


def markdown(result: pd.DataFrame) -> str:
    """The conformance comparison as a Markdown section: the verdicts, then each side's
    figures folded (:func:`cells_markdown`)."""
    if "not_compared" in result.attrs:
        return f"\n**Conformance**: not compared ({_md(result.attrs['not_compared'])})\n"
    if result.empty:
        return ""
    lines = ["", f"### Conformance A/B: {summary_line(result)}", "", _md(HEADING) + ".", "",
             *_markdown_table(_verdict_frame(result)), ""]
    for side, name in (("a", "A (baseline)"), ("b", "B")):
        lines += ["<details><summary>Conformance of " + name + "</summary>", "",
                  cells_markdown(side_figures(result, side)), "</details>", ""]
    lines += ["<details><summary>Method</summary>", "", _md(rule(result)) + ". Cell: "
              "Conformance of all trials together (performance envelopes intersected over "
              "the trials) against the kernel-vs-kernel runs of the congestion control on "
              "the path (paper 000's reference), and against the kernel flow of the same "
              "attempts (same run); per attempt: one trial against its own kernel flow. "
              "See docs/conformance.md.", "", "</details>", ""]
    return "\n".join(lines)


def side_figures(result: pd.DataFrame, side: str) -> pd.DataFrame:
    """One side's all-trials figures of a conformance comparison as a
    :func:`~interop_runner.analysis.theories.flow_conformance.flow_conformance`-like table."""
    columns = {f"{f}_{side}": f for f in FIGURES if f"{f}_{side}" in result.columns}
    keep = [c for c in ("stack", "congestion_control", *AXES) if c in result.columns]
    return result[[*keep, *columns]].rename(columns=columns)


def cells_markdown(cells: pd.DataFrame) -> str:
    """A Markdown table of conformance figures, one row per cell: stack, CC, buffer, RTT,
    Conformance, Conformance-T, its seed spread, Δ-throughput, Δ-delay, trials, why the
    figures are missing and the same-run Conformance, Conformance-T and Δs. ``cells``: a
    :func:`~interop_runner.analysis.theories.flow_conformance.flow_conformance` table (``server`` is
    the stack) or :func:`side_figures`."""
    stack = cells["stack"] if "stack" in cells.columns else cells.get("server")
    frame = pd.DataFrame({
        "stack": _texts(stack, len(cells)),
        "CC": _texts(cells.get("congestion_control"), len(cells)),
        **{name: _texts(cells.get(axis), len(cells)) for axis, name in AXES.items()},
        **{name: _figure(cells.get(column), column, len(cells))
           for column, name in FIGURES.items()}})
    return "\n".join(_markdown_table(frame)) + "\n"


def _texts(values: "pd.Series[Any] | None", n: int) -> list[str]:
    """A column as text (missing: ``-``)."""
    if values is None:
        return ["-"] * n
    return ["-" if pd.isna(v) else str(v) for v in values]


def _figure(values: "pd.Series[Any] | None", column: str, n: int) -> list[str]:
    """A figure column as text: shares with 2 decimals, offsets signed with 1, trials as
    counts, reasons as they are (missing: ``-``)."""
    if values is None:
        return ["-"] * n
    if column.endswith("_missing"):
        return _texts(values, n)
    fmt = {"trials_test": ".0f", "trials_test_same_run": ".0f",
           **{c: "+.1f" for c in _OFFSETS}}.get(column, ".2f")
    return ["-" if pd.isna(v) else format(float(v), fmt) for v in values]


def as_json(result: pd.DataFrame) -> dict[str, Any]:
    """The conformance comparison for ``compare --format json``."""
    if "not_compared" in result.attrs:
        return {"not_compared": result.attrs["not_compared"]}
    s = CompareSettings.of(result)
    return {"unit": "share of points (0..1); change, CI and min_effect: differences B - A",
            "value": "per-attempt conformance_same_run (one trial against its own kernel "
                     "flow)",
            "min_effect": s.min_effect, "method": s.method,
            "summary": {v: int((result["verdict"] == v).sum()) for v in VERDICT_ORDER},
            "cells": _records(result)}
