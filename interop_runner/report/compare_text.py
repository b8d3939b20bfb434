"""The text the ``compare`` command prints: a terminal table, Markdown for a pull request
comment, or JSON, of an A/B comparison (:func:`interop_runner.analysis.ab.compare.compare`),
its sample-size plan and each side's CPU cost per byte.

Pure functions of the result frames and their ``attrs``; the command line
(``interop_runner/cli/compare.py``) reads the campaigns and writes what these return.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from interop_runner.analysis.ab.compare import CompareSettings, facts_message, summary


def render(result: pd.DataFrame, fmt: str, plan_frame: pd.DataFrame | None = None,
           cost: pd.DataFrame | None = None) -> str:
    """The comparison (and the plan, and the CPU cost per byte) as ``table``, ``markdown``
    or ``json`` text."""
    if fmt == "json":
        return json.dumps(json_document(result, plan_frame, cost), indent=2) + "\n"
    if fmt == "markdown":
        return to_markdown(result, plan_frame) + ("" if cost is None else cost_markdown(cost))
    return to_table(result, plan_frame) + ("" if cost is None else cost_table(cost))


def json_document(result: pd.DataFrame, plan_frame: pd.DataFrame | None = None,
                  cost: pd.DataFrame | None = None) -> dict[str, Any]:
    """The JSON output as a dict: :func:`to_json` and, with ``cost``, ``cpu_cost``."""
    out = to_json(result, plan_frame)
    if cost is not None:
        out["cpu_cost"] = {"unit": "CPU-s/GiB", "summary": _counts(cost),
                           "cells": _records(cost)}
    return out


def _counts(result: pd.DataFrame) -> dict[str, int]:
    return {str(v): int(n) for v, n in result["verdict"].value_counts().items()}


def _records(result: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): _clean(v) for k, v in row.items()}
            for row in result.to_dict(orient="records")]


NO_COST = "not measured (NA) on either side of either campaign"
COST_HEADING = ("CPU cost per byte (CPU-s/GiB: user + system seconds of each side's processes "
                "per GiB delivered; higher is worse): costlier/cheaper by the same rule")


def _cost_frame(cost: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "side": cost["side"],
        **{k: cost[k].astype(str) for k in _key_columns(cost)},
        "n A/B": [f"{r.n_a}/{r.n_b}" for r in cost.itertuples()],
        **_change_columns(cost, ".2f"),
        "verdict": cost["verdict"],
        "note": cost["note"],
    })


def _change_columns(result: pd.DataFrame, median_format: str) -> dict[str, list[str]]:
    """The terminal table's columns of both medians, the change, its CI and the p-value."""
    return {
        "median A": [_num(v, median_format) for v in result["median_a"]],
        "median B": [_num(v, median_format) for v in result["median_b"]],
        "change %": [_pct(v) for v in result["rel_diff"]],
        "CI": [_ci(r) for _, r in result.iterrows()],
        "p": [_p(v) for v in result["p_value"]],
    }


def _measured(cost: pd.DataFrame) -> bool:
    return bool((cost["n_a"] + cost["n_b"]).sum())


def cost_table(cost: pd.DataFrame) -> str:
    """The CPU cost comparison as plain text for a terminal."""
    if not _measured(cost):
        return f"\nCPU cost per byte: {NO_COST}\n"
    return "\n".join(["", COST_HEADING, "", _cost_frame(cost).to_string(index=False), "",
                      f"CPU cost: {_summary_line(cost)}"]) + "\n"


def cost_markdown(cost: pd.DataFrame) -> str:
    """The CPU cost comparison as a Markdown section."""
    if not _measured(cost):
        return f"\n**CPU cost per byte**: {NO_COST}\n"
    lines = ["", f"### CPU cost per byte: {_summary_line(cost)}", "", _md(COST_HEADING), "",
             *_markdown_table(_cost_frame(cost))]
    return "\n".join(lines) + "\n"


def _summary_line(result: pd.DataFrame) -> str:
    if result.attrs.get("value") == "cpu_s_per_gib":
        found = _counts(result)
        counts = {v: found.get(v, 0) for v in ("costlier", "cheaper", "no change",
                                                "inconclusive")}
    else:
        counts = summary(result)
    return ", ".join(f"{n} {v}" for v, n in counts.items() if n) or "no cells"


def _sides(result: pd.DataFrame) -> tuple[str, str]:
    attrs = result.attrs
    if "column" in attrs:
        where = f" ({attrs['column']}, campaign {attrs.get('campaign', '?')})"
        return f"{attrs['a']}{where}", f"{attrs['b']}{where}"
    return str(attrs.get("a", "A")), str(attrs.get("b", "B"))


def _rule(result: pd.DataFrame) -> str:
    s = CompareSettings.of(result)
    paired = s.method == "paired"
    what, test, unit = (("median pair ratio", "Wilcoxon signed-rank", "pairs with both "
                         "attempts ok") if paired else
                        ("median change", "Mann-Whitney", "ok attempts per side"))
    return (f"faster/slower: the {100 * s.confidence:g} % bootstrap CI of the {what} "
            f"excludes 0, |change| >= {100 * s.min_effect:g} % and {test} p < "
            f"{s.alpha:g}; no change: the CI lies within ±{100 * s.min_effect:g} %; "
            f"inconclusive otherwise or below {s.min_samples} {unit} "
            f"({s.n_boot} resamples, seed {s.seed})")


def _method(result: pd.DataFrame) -> str:
    """``paired (why)`` or ``unpaired (why)``."""
    method = str(result.attrs.get("method", "unpaired"))
    reason = result.attrs.get("method_reason")
    return f"{method} ({reason})" if reason else method


def _finite(value: Any) -> bool:
    """A number to show: not None, <NA> (a nullable column's NA cell), NaN nor infinite."""
    return value is not None and value is not pd.NA and math.isfinite(float(value))


def _pct(value: Any, signed: bool = True) -> str:
    if not _finite(value):
        return "n/a"
    return f"{100 * float(value):+.1f}" if signed else f"{100 * float(value):.1f}"


def _num(value: Any, fmt: str) -> str:
    if not _finite(value):
        return "n/a"
    return format(float(value), fmt)


def _p(value: Any) -> str:
    if not _finite(value):
        return "n/a"
    return "<0.0001" if float(value) < 1e-4 else f"{float(value):.4f}"


def _ci(row: Any) -> str:
    if not (_finite(row["ci_low"]) and _finite(row["ci_high"])):
        return "n/a"
    return f"[{_pct(row['ci_low'])}, {_pct(row['ci_high'])}] %"


def _key_columns(result: pd.DataFrame) -> list[str]:
    """Key columns worth showing: server and client always, others when not constant."""
    keys = list(result.attrs.get("keys", ["server", "client"]))
    return [k for k in keys if k in ("server", "client")
            or result[k].astype(str).nunique() > 1
            or (len(result) and str(result[k].iloc[0]) not in ("", "goodput"))]


def to_table(result: pd.DataFrame, plan_frame: pd.DataFrame | None = None) -> str:
    """Plain-text report for a terminal."""
    a, b = _sides(result)
    lines = [f"A (baseline): {a}", f"B:            {b}", f"method: {_method(result)}",
             f"rule: {_rule(result)}"]
    if result.attrs.get("forced"):
        lines.append(f"FORCED: {facts_message(result.attrs['host_differences'])}")
    for column, (va, vb) in (result.attrs.get("settings") or {}).items():
        lines.append(f"differs: {column}: {va} -> {vb}")
    keys = _key_columns(result)
    table = pd.DataFrame({
        **{k: result[k].astype(str) for k in keys},
        "n A/B": [f"{r.n_a}/{r.n_b}" for r in result.itertuples()],
        **({"pairs": [_int(v) for v in result["n_pairs"]]} if _paired(result) else {}),
        "failed A/B": [f"{r.failed_a}/{r.failed_b}" for r in result.itertuples()],
        **_change_columns(result, ".1f"),
        "delta": [_num(v, "+.2f") for v in result["cliffs_delta"]],
        "verdict": result["verdict"],
        "note": result["note"],
    })
    lines += ["", table.to_string(index=False), "",
              f"{_summary_line(result)}  (goodput medians in Mbit/s; delta: Cliff's delta of "
              f"B over A)"]
    if plan_frame is not None:
        lines += ["", _plan_heading(plan_frame), _plan_table(plan_frame).to_string(index=False)]
    return "\n".join(lines) + "\n"


def _paired(result: pd.DataFrame) -> bool:
    return result.attrs.get("method") == "paired" and "n_pairs" in result.columns


def _int(value: Any) -> str:
    return "n/a" if value is None or pd.isna(value) else str(int(value))


def _plan_heading(plan_frame: pd.DataFrame) -> str:
    attrs = plan_frame.attrs
    if attrs.get("method") == "paired":
        return (f"plan: pairs (repetitions per arm) to detect a {100 * attrs['effect']:g} % "
                f"change with power {attrs['power']:g} at alpha {attrs['alpha']:g} (normal "
                f"approximation with the observed robust spread of the pair log ratios, "
                f"Wilcoxon signed-rank ARE 0.955)")
    return (f"plan: repetitions per side to detect a {100 * attrs['effect']:g} % change with "
            f"power {attrs['power']:g} at alpha {attrs['alpha']:g} (normal approximation with "
            f"the observed robust CV, Mann-Whitney ARE 0.955)")


def _plan_table(plan_frame: pd.DataFrame) -> pd.DataFrame:
    keys = [k for k in plan_frame.columns if k not in ("n", "median", "cv", "n_needed",
                                                        "n_more", "method")]
    paired = plan_frame.attrs.get("method") == "paired"
    keys = [k for k in keys if k in ("server", "client") or plan_frame[k].astype(str).nunique()
            > 1 or (len(plan_frame) and str(plan_frame[k].iloc[0]) not in ("", "goodput"))]
    return pd.DataFrame({
        **{k: plan_frame[k].astype(str) for k in keys},
        "pairs now" if paired else "ok now": plan_frame["n"],
        "median A": [_num(v, ".1f") for v in plan_frame["median"]],
        "pair noise %" if paired else "noise (CV) %":
            [_pct(v, signed=False) for v in plan_frame["cv"]],
        "needed": [("n/a" if pd.isna(v) else str(v)) for v in plan_frame["n_needed"]],
        "more": [("n/a" if pd.isna(v) else str(v)) for v in plan_frame["n_more"]],
    })


_MD_VERDICT = {"slower": "**slower** :red_circle:", "faster": "**faster** :green_circle:",
               "no change": "no change", "inconclusive": "inconclusive :grey_question:"}


def _md(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def to_markdown(result: pd.DataFrame, plan_frame: pd.DataFrame | None = None) -> str:
    """GitHub-flavoured Markdown for a pull request comment."""
    lines = _markdown_heading(result) + _markdown_cells(result) + _markdown_method(result)
    if plan_frame is not None:
        lines += [f"**{_md(_plan_heading(plan_frame))}**", "",
                  *_markdown_table(_plan_table(plan_frame)), ""]
    return "\n".join(lines)


def _markdown_table(table: pd.DataFrame) -> list[str]:
    """A frame as Markdown table lines (the header as it is, the cells escaped)."""
    return (["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
            + ["| " + " | ".join(_md(v) for v in row) + " |"
               for row in table.itertuples(index=False)])


def _markdown_heading(result: pd.DataFrame) -> list[str]:
    """The summary heading, the sides, the method, what changed and a forced comparison."""
    a, b = _sides(result)
    lines = [f"### Goodput A/B: {_summary_line(result)}", "",
             f"**A** (baseline): `{_md(a)}`  ", f"**B**: `{_md(b)}`  ",
             f"**Method**: {_md(_method(result))}", ""]
    settings = result.attrs.get("settings") or {}
    if settings:
        lines += ["Changed from A to B: " + "; ".join(
            f"{_md(col)} `{_md(va)}` → `{_md(vb)}`" for col, (va, vb) in settings.items()), ""]
    if result.attrs.get("forced"):
        lines += [f"> :warning: **Forced comparison**: "
                  f"{_md(facts_message(result.attrs['host_differences']))}. The differences "
                  f"may come from the hosts, not from the code.", ""]
    return lines


def _markdown_cells(result: pd.DataFrame) -> list[str]:
    """The table of the cells, one row each."""
    keys = _key_columns(result)
    paired = _paired(result)
    header = [*keys, "A Mbit/s", "B Mbit/s", *(["pairs"] if paired else []), "change", "CI",
              "p", "Cliff's δ", "verdict"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for _, row in result.iterrows():
        cells = [*(_md(row[k]) for k in keys), _markdown_side(row, "a"),
                 _markdown_side(row, "b"), *([_int(row["n_pairs"])] if paired else []),
                 "n/a" if _pct(row["rel_diff"]) == "n/a" else f"{_pct(row['rel_diff'])} %",
                 _ci(row), _p(row["p_value"]), _num(row["cliffs_delta"], "+.2f"),
                 _markdown_verdict(row)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _markdown_side(row: Any, side: str) -> str:
    """``median (n=N)``, with the failed attempts of side ``a`` or ``b`` when there are any."""
    failed = row[f"failed_{side}"]
    return f"{_num(row[f'median_{side}'], '.1f')} (n={row[f'n_{side}']}" + (
        f", {failed} failed)" if failed else ")")


def _markdown_verdict(row: Any) -> str:
    verdict = _MD_VERDICT.get(str(row["verdict"]), str(row["verdict"]))
    return verdict + (f" ({_md(row['note'])})" if row["note"] else "")


def _markdown_method(result: pd.DataFrame) -> list[str]:
    """The folded explanation of the rule and the statistics."""
    how = ("Change: the median over the pairs (A and B of one repetition, both ok) of B / A, "
           "minus 1; CI: percentile bootstrap of that, pairs resampled; p: two-sided Wilcoxon "
           "signed-rank test of log(B / A)" if _paired(result) else
           "Change: median B / median A − 1 over the ok attempts; CI: percentile bootstrap of "
           "that ratio, both sides resampled; p: two-sided Mann-Whitney U")
    return ["", "<details><summary>Method</summary>", "", _md(_rule(result)) + ". " + how +
            "; Cliff's δ: P(B > A) − P(B < A) over all ok attempts. See docs/compare.md.",
            "", "</details>", ""]


def _clean(value: Any) -> Any:
    """JSON-safe scalars: NaN/NA -> None, numpy numbers -> Python numbers."""
    if value is None or value is pd.NA:
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def to_json(result: pd.DataFrame, plan_frame: pd.DataFrame | None = None) -> dict[str, Any]:
    """The comparison as a JSON-serialisable dict: sides, settings, summary, cells, plan."""
    a, b = _sides(result)
    out: dict[str, Any] = {
        "a": a, "b": b,
        "column": result.attrs.get("column"),
        "settings": _json_settings(result),
        "forced": bool(result.attrs.get("forced")),
        "host_differences": list(result.attrs.get("host_differences") or []),
        "changed": {k: {"a": v[0], "b": v[1]}
                    for k, v in (result.attrs.get("settings") or {}).items()},
        "summary": summary(result),
        "keys": list(result.attrs.get("keys", [])),
        "cells": _records(result),
    }
    if plan_frame is not None:
        out["plan"] = {"effect": plan_frame.attrs["effect"], "power": plan_frame.attrs["power"],
                       "alpha": plan_frame.attrs["alpha"],
                       "method": plan_frame.attrs.get("method", "unpaired"),
                       "cells": _records(plan_frame)}
    return out


def _json_settings(result: pd.DataFrame) -> dict[str, Any]:
    """The statistical settings and a description of the test, the CI and the effect size."""
    s = CompareSettings.of(result)
    return {"min_effect": s.min_effect, "confidence": s.confidence,
            "alpha": s.alpha, "n_boot": s.n_boot, "seed": s.seed,
            "min_samples": s.min_samples, "method": s.method,
            "method_reason": result.attrs.get("method_reason"),
            "effect_size": "cliffs_delta (B over A, all ok attempts)",
            **({"test": "wilcoxon signed-rank two-sided on log(b/a) per pair",
                "ci": "percentile bootstrap of exp(median log(b/a)) - 1, pairs "
                      "resampled"} if s.method == "paired" else
               {"test": "mann-whitney-u two-sided",
                "ci": "percentile bootstrap of median_b/median_a - 1"})}


def output_summary(result: pd.DataFrame, cost: pd.DataFrame) -> str:
    """The verdict counts of the goodput and of the CPU cost, for the one line printed when the
    comparison itself went to a file."""
    cost_line = _summary_line(cost) if _measured(cost) else "not measured"
    return f"{_summary_line(result)}; CPU cost: {cost_line}"
