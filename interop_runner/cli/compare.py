"""``run.py compare``: A/B goodput comparison of two campaigns or two variants (issue 8).

::

    run.py compare A B                            # two campaign directories, B vs baseline A
    run.py compare DIR --variants X Y [--column C]  # two variants within one campaign
    run.py compare DIR --variants X Y --unpaired     # ... as independent samples

The statistics live in :mod:`interop_runner.analysis.ab.compare`; this module parses the options,
loads the results, checks the host facts, lets :func:`~.analysis.compare.compare_variants`
choose paired statistics for arms run back to back (``--unpaired`` forbids it), renders a
terminal table, Markdown (for a pull request comment) or JSON, and sets the exit status: 5
when any cell is ``slower`` or any side's CPU cost per byte ``costlier`` (for CI gating), 0
otherwise, 2 for a usage error (one line on
stderr, no traceback).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interop_runner.errors import UserError
from interop_runner.exit_codes import ExitCode

if TYPE_CHECKING:
    import pandas as pd

DESCRIPTION = (
    "Compare the goodput of B against the baseline A per cell (same server, client, testcase "
    "and sweep parameters): medians, the relative change with a bootstrap confidence "
    "interval, the two-sided Mann-Whitney U p-value, Cliff's delta and a verdict. A cell is "
    "'slower'/'faster' when the CI excludes 0, the change is at least --min-effect and "
    "p < --alpha; 'no change' when the whole CI lies within +-min-effect; 'inconclusive' "
    "otherwise or with fewer than --min-samples ok attempts per side. With --variants in a "
    "campaign run in order paired the arms are compared pair by pair (A and B of the same "
    "repetition: median pair ratio, pairs resampled, Wilcoxon signed-rank test) unless "
    "--unpaired. Two campaigns must have "
    "run on hosts with the same facts (CPU, cores, kernel, NIC driver/speed, MTU, buffer "
    "sysctls) unless --force. The same rule gives each side's CPU cost per byte (CPU-s/GiB) "
    "a verdict: 'costlier'/'cheaper'/'no change'/'inconclusive'. Exit status: 0, or 5 when "
    "any cell is slower or costlier (CI gate; --ignore-cpu: slower only); 2 for "
    "usage errors. Details: docs/compare.md.")


def register(subparsers: Any) -> None:
    """Add the ``compare`` command to the ``run.py`` sub-command parsers."""
    p = subparsers.add_parser(
        "compare", help="A/B goodput comparison of two campaigns or two variants",
        description=DESCRIPTION)
    p.add_argument("a", type=Path, metavar="A",
                   help="baseline campaign directory (with --variants: the campaign)")
    p.add_argument("b", type=Path, nargs="?", default=None, metavar="B",
                   help="candidate campaign directory (not with --variants)")
    p.add_argument("--variants", nargs=2, metavar=("X", "Y"), default=None,
                   help="compare variant Y against baseline X within campaign A, e.g. "
                        "quic-go@v0.48.0 quic-go@v0.49.0 or rmem=1x rmem=4x")
    p.add_argument("--column", default=None,
                   help="with --variants: where X and Y are found: implementation (server "
                        "or client name), server, client, variant, an axis_* column, "
                        "server_version, ... (default: the first column holding both)")
    p.add_argument("--unpaired", action="store_true",
                   help="with --variants: treat the arms as independent samples even when "
                        "the campaign ran them in pairs (order paired); two campaigns are "
                        "always unpaired")
    p.add_argument("--min-effect", type=float, default=0.02, metavar="FRACTION",
                   help="smallest relative change that matters (default 0.02 = 2 %%)")
    p.add_argument("--confidence", type=float, default=0.95,
                   help="confidence level of the bootstrap interval (default 0.95)")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="significance level of the Mann-Whitney U / Wilcoxon signed-rank "
                        "test (default 0.05)")
    p.add_argument("--min-samples", type=int, default=5, metavar="N",
                   help="ok attempts (paired: pairs) needed per side for any verdict but "
                        "inconclusive (default 5)")
    p.add_argument("--n-boot", type=int, default=10_000, metavar="N",
                   help="bootstrap resamples (default 10000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--format", choices=["table", "markdown", "json"], default="table",
                   help="output format (default table; markdown for a pull request comment)")
    p.add_argument("-o", "--output", type=Path, default=None, metavar="FILE",
                   help="write the output to FILE (a one-line summary goes to stdout)")
    p.add_argument("--ignore-cpu", action="store_true",
                   help="exit 5 only for slower goodput, not for a costlier CPU cost per byte "
                        "(the CPU verdicts are still shown)")
    p.add_argument("--force", action="store_true",
                   help="compare campaigns whose host facts differ (the output says so)")
    p.add_argument("--plan", action="store_true",
                   help="also estimate the repetitions per side each cell needs to detect "
                        "--effect with --power (from the observed noise)")
    p.add_argument("--effect", type=float, default=None, metavar="FRACTION",
                   help="with --plan: relative change to detect (default: --min-effect)")
    p.add_argument("--power", type=float, default=0.8,
                   help="with --plan: wanted power (default 0.8)")
    p.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    """Run ``compare``; a :class:`~interop_runner.errors.UserError` is one line and exit 2."""
    try:
        return _compare(args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.USAGE


def _check_options(args: argparse.Namespace) -> None:
    if args.variants is None and args.b is None:
        raise UserError("compare needs two campaign directories (A B) or one with "
                        "--variants X Y")
    if args.variants is not None and args.b is not None:
        raise UserError("give either two campaign directories or one with --variants, "
                        "not both")
    if args.column is not None and args.variants is None:
        raise UserError("--column only goes with --variants")
    if args.min_effect < 0:
        raise UserError(f"--min-effect must not be negative, not {args.min_effect}")
    for name in ("confidence", "alpha", "power"):
        value = getattr(args, name)
        if not 0 < value < 1:
            raise UserError(f"--{name} must be between 0 and 1, not {value}")
    if args.effect is not None and args.effect <= 0:
        raise UserError(f"--effect must be positive, not {args.effect}")
    if args.n_boot < 100:
        raise UserError(f"--n-boot must be at least 100, not {args.n_boot}")
    if args.min_samples < 2:
        raise UserError(f"--min-samples must be at least 2, not {args.min_samples}")
    for directory in (args.a, args.b):
        if directory is not None and not (directory / "campaign.json").is_file():
            raise UserError(f"{directory}: not a campaign directory (no campaign.json)")


def _load(directory: Path) -> "pd.DataFrame":
    from interop_runner.analysis import load_results

    try:
        frame = load_results(directory)
    except (OSError, ValueError) as exc:
        raise UserError(f"{directory}: cannot load the results: {exc}") from None
    if frame.empty:
        raise UserError(f"{directory}: no attempts stored")
    return frame


class _Sides:
    """What is compared: the comparison to run on a pair of frames (the goodput, and each
    side's CPU cost through :func:`~interop_runner.analysis.ab.cost.compare_cost`), the
    frames it runs on and the host-fact differences of two campaigns."""

    def __init__(self, args: argparse.Namespace, stats: dict[str, Any]) -> None:
        from interop_runner.analysis.ab.compare import (campaign_hosts, facts_differences,
                                                        facts_message)

        self.args, self.stats = args, stats
        self.frame_a = _load(args.a)
        self.frame_b: "pd.DataFrame | None" = None
        self.differences: list[str] = []
        if args.variants is None:
            self.differences = facts_differences(campaign_hosts(args.a), campaign_hosts(args.b))
            if self.differences and not args.force:
                raise UserError(f"{facts_message(self.differences)}: the campaigns are not "
                                f"comparable; --force compares them anyway")
            self.frame_b = _load(args.b)

    def compare(self, fa: "pd.DataFrame", fb: "pd.DataFrame | None") -> "pd.DataFrame":
        """The comparison of ``fa`` with ``fb`` (variants: within ``fa``)."""
        from interop_runner.analysis.ab.compare import compare, compare_variants, find_column

        args = self.args
        if fb is not None:
            out = compare(fa, fb, **self.stats)
            out.attrs.update(a=str(args.a), b=str(args.b),
                             method_reason="two campaigns: independent samples")
            return out
        x, y = args.variants
        out = compare_variants(fa, args.column or find_column(fa, x, y), x, y,
                               paired=False if args.unpaired else None, **self.stats)
        out.attrs["campaign"] = str(args.a)
        return out

    def planned(self, result: "pd.DataFrame") -> "pd.DataFrame | None":
        """With --plan: the repetitions each cell needs."""
        from interop_runner.analysis.ab.compare import find_column, plan, split_variants

        args = self.args
        if not args.plan:
            return None
        effect = args.effect if args.effect is not None else args.min_effect
        if effect <= 0:
            raise UserError("--plan needs a positive --effect (or --min-effect)")
        if self.frame_b is not None:
            side_a, side_b, keys = self.frame_a, self.frame_b, list(result.attrs["keys"])
        else:
            x, y = args.variants
            column = args.column or find_column(self.frame_a, x, y)
            side_a, side_b, keys = split_variants(self.frame_a, column, x, y)
        return plan(side_a, effect, args.power, args.alpha, by=keys, other=side_b,
                    min_samples=args.min_samples, paired=result.attrs.get("method") == "paired")


def _compare(args: argparse.Namespace) -> int:
    from interop_runner.analysis.ab.compare import NotComparableError
    from interop_runner.analysis.ab.cost import compare_cost, costlier

    _check_options(args)
    stats = dict(min_effect=args.min_effect, confidence=args.confidence, alpha=args.alpha,
                 n_boot=args.n_boot, seed=args.seed, min_samples=args.min_samples)
    try:
        sides = _Sides(args, stats)
        result = sides.compare(sides.frame_a, sides.frame_b)
        cost = compare_cost(sides.compare, sides.frame_a, sides.frame_b)
        plan_frame = sides.planned(result)
    except NotComparableError as exc:
        raise UserError(str(exc)) from None
    if result.empty:
        raise UserError("nothing to compare: no ok or failed attempts on either side")
    result.attrs.update(forced=bool(sides.differences), host_differences=sides.differences)
    _emit(args, render(result, args.format, plan_frame, cost), result, cost)
    slower = bool((result["verdict"] == "slower").any())
    gate = slower or (costlier(cost) and not args.ignore_cpu)
    return ExitCode.SLOWER_OR_REGRESSION if gate else ExitCode.OK


def _emit(args: argparse.Namespace, text: str, result: "pd.DataFrame",
          cost: "pd.DataFrame") -> None:
    """The text on stdout, or written to --output with a summary line on stdout."""
    if args.output is None:
        print(text, end="")
        return
    try:
        args.output.write_text(text)
    except OSError as exc:
        raise UserError(f"{args.output}: cannot write: {exc}") from None
    cost_line = _summary_line(cost) if _measured(cost) else "not measured"
    print(f"{args.output}: {_summary_line(result)}; CPU cost: {cost_line}")


# ------------------------------------------------------------------------------- rendering ----


def render(result: "pd.DataFrame", fmt: str, plan_frame: "pd.DataFrame | None" = None,
           cost: "pd.DataFrame | None" = None) -> str:
    """The comparison (and the plan, and the CPU cost per byte) as ``table``, ``markdown``
    or ``json`` text."""
    if fmt == "json":
        out = to_json(result, plan_frame)
        if cost is not None:
            out["cpu_cost"] = {"unit": "CPU-s/GiB", "summary": _counts(cost),
                               "cells": _records(cost)}
        return json.dumps(out, indent=2) + "\n"
    if fmt == "markdown":
        return to_markdown(result, plan_frame) + ("" if cost is None else cost_markdown(cost))
    return to_table(result, plan_frame) + ("" if cost is None else cost_table(cost))


def _counts(result: "pd.DataFrame") -> dict[str, int]:
    return {str(v): int(n) for v, n in result["verdict"].value_counts().items()}


def _records(result: "pd.DataFrame") -> list[dict[str, Any]]:
    return [{str(k): _clean(v) for k, v in row.items()}
            for row in result.to_dict(orient="records")]


NO_COST = "not measured (NA) on either side of either campaign"
COST_HEADING = ("CPU cost per byte (CPU-s/GiB: user + system seconds of each side's processes "
                "per GiB delivered; higher is worse): costlier/cheaper by the same rule")


def _cost_frame(cost: "pd.DataFrame") -> "pd.DataFrame":
    import pandas as pd

    keys = _key_columns(cost)
    return pd.DataFrame({
        "side": cost["side"],
        **{k: cost[k].astype(str) for k in keys},
        "n A/B": [f"{r.n_a}/{r.n_b}" for r in cost.itertuples()],
        "median A": [_num(v, ".2f") for v in cost["median_a"]],
        "median B": [_num(v, ".2f") for v in cost["median_b"]],
        "change %": [_pct(v) for v in cost["rel_diff"]],
        "CI": [_ci(r) for _, r in cost.iterrows()],
        "p": [_p(v) for v in cost["p_value"]],
        "verdict": cost["verdict"],
        "note": cost["note"],
    })


def _measured(cost: "pd.DataFrame") -> bool:
    return bool((cost["n_a"] + cost["n_b"]).sum())


def cost_table(cost: "pd.DataFrame") -> str:
    """The CPU cost comparison as plain text for a terminal."""
    if not _measured(cost):
        return f"\nCPU cost per byte: {NO_COST}\n"
    return "\n".join(["", COST_HEADING, "", _cost_frame(cost).to_string(index=False), "",
                      f"CPU cost: {_summary_line(cost)}"]) + "\n"


def cost_markdown(cost: "pd.DataFrame") -> str:
    """The CPU cost comparison as a Markdown section."""
    if not _measured(cost):
        return f"\n**CPU cost per byte**: {NO_COST}\n"
    table = _cost_frame(cost)
    lines = ["", f"### CPU cost per byte: {_summary_line(cost)}", "", _md(COST_HEADING), "",
             "| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(_md(v) for v in row) + " |"
              for row in table.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def _summary_line(result: "pd.DataFrame") -> str:
    from interop_runner.analysis.ab.compare import summary

    if result.attrs.get("value") == "cpu_s_per_gib":
        found = _counts(result)
        counts = {v: found.get(v, 0) for v in ("costlier", "cheaper", "no change",
                                                "inconclusive")}
    else:
        counts = summary(result)
    return ", ".join(f"{n} {v}" for v, n in counts.items() if n) or "no cells"


def _sides(result: "pd.DataFrame") -> tuple[str, str]:
    attrs = result.attrs
    if "column" in attrs:
        where = f" ({attrs['column']}, campaign {attrs.get('campaign', '?')})"
        return f"{attrs['a']}{where}", f"{attrs['b']}{where}"
    return str(attrs.get("a", "A")), str(attrs.get("b", "B"))


def _rule(result: "pd.DataFrame") -> str:
    from interop_runner.analysis.ab.compare import CompareSettings

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


def _method(result: "pd.DataFrame") -> str:
    """``paired (why)`` or ``unpaired (why)``."""
    method = str(result.attrs.get("method", "unpaired"))
    reason = result.attrs.get("method_reason")
    return f"{method} ({reason})" if reason else method


def _pct(value: Any, signed: bool = True) -> str:
    if value is None or not math.isfinite(float(value)):
        return "n/a"
    return f"{100 * float(value):+.1f}" if signed else f"{100 * float(value):.1f}"


def _num(value: Any, fmt: str) -> str:
    if value is None or not math.isfinite(float(value)):
        return "n/a"
    return format(float(value), fmt)


def _p(value: Any) -> str:
    if value is None or not math.isfinite(float(value)):
        return "n/a"
    return "<0.0001" if float(value) < 1e-4 else f"{float(value):.4f}"


def _ci(row: Any) -> str:
    if not (math.isfinite(row["ci_low"]) and math.isfinite(row["ci_high"])):
        return "n/a"
    return f"[{_pct(row['ci_low'])}, {_pct(row['ci_high'])}] %"


def _key_columns(result: "pd.DataFrame") -> list[str]:
    """Key columns worth showing: server and client always, others when not constant."""
    keys = list(result.attrs.get("keys", ["server", "client"]))
    return [k for k in keys if k in ("server", "client")
            or result[k].astype(str).nunique() > 1
            or (len(result) and str(result[k].iloc[0]) not in ("", "goodput"))]


def to_table(result: "pd.DataFrame", plan_frame: "pd.DataFrame | None" = None) -> str:
    """Plain-text report for a terminal."""
    import pandas as pd

    a, b = _sides(result)
    lines = [f"A (baseline): {a}", f"B:            {b}", f"method: {_method(result)}",
             f"rule: {_rule(result)}"]
    if result.attrs.get("forced"):
        from interop_runner.analysis.ab.compare import facts_message

        lines.append(f"FORCED: {facts_message(result.attrs['host_differences'])}")
    for column, (va, vb) in (result.attrs.get("settings") or {}).items():
        lines.append(f"differs: {column}: {va} -> {vb}")
    keys = _key_columns(result)
    table = pd.DataFrame({
        **{k: result[k].astype(str) for k in keys},
        "n A/B": [f"{r.n_a}/{r.n_b}" for r in result.itertuples()],
        **({"pairs": [_int(v) for v in result["n_pairs"]]} if _paired(result) else {}),
        "failed A/B": [f"{r.failed_a}/{r.failed_b}" for r in result.itertuples()],
        "median A": [_num(v, ".1f") for v in result["median_a"]],
        "median B": [_num(v, ".1f") for v in result["median_b"]],
        "change %": [_pct(v) for v in result["rel_diff"]],
        "CI": [_ci(r) for _, r in result.iterrows()],
        "p": [_p(v) for v in result["p_value"]],
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


def _paired(result: "pd.DataFrame") -> bool:
    return result.attrs.get("method") == "paired" and "n_pairs" in result.columns


def _int(value: Any) -> str:
    import pandas as pd

    return "n/a" if value is None or pd.isna(value) else str(int(value))


def _plan_heading(plan_frame: "pd.DataFrame") -> str:
    attrs = plan_frame.attrs
    if attrs.get("method") == "paired":
        return (f"plan: pairs (repetitions per arm) to detect a {100 * attrs['effect']:g} % "
                f"change with power {attrs['power']:g} at alpha {attrs['alpha']:g} (normal "
                f"approximation with the observed robust spread of the pair log ratios, "
                f"Wilcoxon signed-rank ARE 0.955)")
    return (f"plan: repetitions per side to detect a {100 * attrs['effect']:g} % change with "
            f"power {attrs['power']:g} at alpha {attrs['alpha']:g} (normal approximation with "
            f"the observed robust CV, Mann-Whitney ARE 0.955)")


def _plan_table(plan_frame: "pd.DataFrame") -> "pd.DataFrame":
    import pandas as pd

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


def to_markdown(result: "pd.DataFrame", plan_frame: "pd.DataFrame | None" = None) -> str:
    """GitHub-flavoured Markdown for a pull request comment."""
    from interop_runner.analysis.ab.compare import facts_message

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
    keys = _key_columns(result)
    paired = _paired(result)
    header = [*keys, "A Mbit/s", "B Mbit/s", *(["pairs"] if paired else []), "change", "CI",
              "p", "Cliff's δ", "verdict"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for _, row in result.iterrows():
        side_a = f"{_num(row['median_a'], '.1f')} (n={row['n_a']}" + (
            f", {row['failed_a']} failed)" if row["failed_a"] else ")")
        side_b = f"{_num(row['median_b'], '.1f')} (n={row['n_b']}" + (
            f", {row['failed_b']} failed)" if row["failed_b"] else ")")
        verdict = _MD_VERDICT.get(str(row["verdict"]), str(row["verdict"]))
        if row["note"]:
            verdict += f" ({_md(row['note'])})"
        cells = [*(_md(row[k]) for k in keys), side_a, side_b,
                 *([_int(row["n_pairs"])] if paired else []),
                 "n/a" if _pct(row["rel_diff"]) == "n/a" else f"{_pct(row['rel_diff'])} %",
                 _ci(row), _p(row["p_value"]), _num(row["cliffs_delta"], "+.2f"), verdict]
        lines.append("| " + " | ".join(cells) + " |")
    how = ("Change: the median over the pairs (A and B of one repetition, both ok) of B / A, "
           "minus 1; CI: percentile bootstrap of that, pairs resampled; p: two-sided Wilcoxon "
           "signed-rank test of log(B / A)" if paired else
           "Change: median B / median A − 1 over the ok attempts; CI: percentile bootstrap of "
           "that ratio, both sides resampled; p: two-sided Mann-Whitney U")
    lines += ["", "<details><summary>Method</summary>", "", _md(_rule(result)) + ". " + how +
              "; Cliff's δ: P(B > A) − P(B < A) over all ok attempts. See docs/compare.md.",
              "", "</details>", ""]
    if plan_frame is not None:
        table = _plan_table(plan_frame)
        lines += [f"**{_md(_plan_heading(plan_frame))}**", "",
                  "| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
        lines += ["| " + " | ".join(_md(v) for v in row) + " |"
                  for row in table.itertuples(index=False)]
        lines.append("")
    return "\n".join(lines)


def _clean(value: Any) -> Any:
    """JSON-safe scalars: NaN/NA -> None, numpy numbers -> Python numbers."""
    import pandas as pd

    if value is None or value is pd.NA:
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def to_json(result: "pd.DataFrame", plan_frame: "pd.DataFrame | None" = None) -> dict[str, Any]:
    """The comparison as a JSON-serialisable dict: sides, settings, summary, cells, plan."""
    from interop_runner.analysis.ab.compare import CompareSettings, summary

    a, b = _sides(result)
    s = CompareSettings.of(result)
    out: dict[str, Any] = {
        "a": a, "b": b,
        "column": result.attrs.get("column"),
        "settings": {"min_effect": s.min_effect, "confidence": s.confidence,
                     "alpha": s.alpha, "n_boot": s.n_boot, "seed": s.seed,
                     "min_samples": s.min_samples, "method": s.method,
                     "method_reason": result.attrs.get("method_reason"),
                     "effect_size": "cliffs_delta (B over A, all ok attempts)",
                     **({"test": "wilcoxon signed-rank two-sided on log(b/a) per pair",
                         "ci": "percentile bootstrap of exp(median log(b/a)) - 1, pairs "
                               "resampled"} if s.method == "paired" else
                        {"test": "mann-whitney-u two-sided",
                         "ci": "percentile bootstrap of median_b/median_a - 1"})},
        "forced": bool(result.attrs.get("forced")),
        "host_differences": list(result.attrs.get("host_differences") or []),
        "changed": {k: {"a": v[0], "b": v[1]}
                    for k, v in (result.attrs.get("settings") or {}).items()},
        "summary": summary(result),
        "keys": list(result.attrs.get("keys", [])),
        "cells": [{k: _clean(v) for k, v in row.items()}
                  for row in result.to_dict(orient="records")],
    }
    if plan_frame is not None:
        out["plan"] = {"effect": plan_frame.attrs["effect"], "power": plan_frame.attrs["power"],
                       "alpha": plan_frame.attrs["alpha"],
                       "method": plan_frame.attrs.get("method", "unpaired"),
                       "cells": [{k: _clean(v) for k, v in row.items()}
                                 for row in plan_frame.to_dict(orient="records")]}
    return out
