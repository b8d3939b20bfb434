"""``run.py compare``: A/B goodput comparison of two campaigns or two variants (issue 8).

::

    run.py compare A B                            # two campaign directories, B vs baseline A
    run.py compare DIR --variants X Y [--column C]  # two variants within one campaign
    run.py compare DIR --variants X Y --unpaired     # ... as independent samples

The statistics live in :mod:`interop_runner.analysis.ab.compare` and the text in
:mod:`interop_runner.report.compare_text`; this module parses the options, loads the results,
checks the host facts, lets :func:`~interop_runner.analysis.ab.compare.compare_variants` choose
paired statistics for arms run back to back (``--unpaired`` forbids it), compares the
conformance of campaigns with flow sets (:mod:`interop_runner.analysis.ab.conformance`),
writes the rendered terminal table, Markdown (for a pull request comment) or JSON, and sets
the exit status: 5 when any cell is ``slower``, any side's CPU cost per byte ``costlier`` or
any flow's conformance ``worse`` (for CI gating), 0 otherwise, 2 for a usage error (one line
on stderr, no traceback) or a damaged ``run.json`` / ``campaign.json`` on either side (one
line each naming the file and what is wrong: no verdict, never a pass).
"""

from __future__ import annotations

import argparse
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
    "a verdict: 'costlier'/'cheaper'/'no change'/'inconclusive', and, for campaigns with "
    "flow sets, each QUIC flow's conformance against the kernel's congestion control (per "
    "attempt, a difference of shares): 'better'/'worse'/'no change'/'inconclusive'. Exit "
    "status: 0, or 5 when any cell is slower, costlier or worse (CI gate; --ignore-cpu, "
    "--ignore-conformance leave those out); 2 for usage errors and for a damaged run.json or "
    "campaign.json on either side (each named: no verdict). Details: docs/compare.md.")


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
    p.add_argument("--conformance-min-effect", type=float, default=None, metavar="SHARE",
                   help="smallest change of conformance that matters, in share points "
                        "(default 0.1; campaigns with flow sets)")
    p.add_argument("--ignore-conformance", action="store_true",
                   help="exit 5 not for a worse conformance (the verdicts are still shown)")
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
    for name in ("min_effect", "conformance_min_effect"):
        value = getattr(args, name)
        if value is not None and value < 0:
            raise UserError(f"--{name.replace('_', '-')} must not be negative, not {value}")
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


def _load_sides(args: argparse.Namespace) -> "tuple[pd.DataFrame, pd.DataFrame | None]":
    """Both sides' frames (B: None with --variants); a damaged run.json or campaign.json on
    either side is no verdict: every one named, exit 2 (not 5, nor a pass; before the host
    facts, which a damaged campaign.json would only show as different)."""
    from interop_runner.analysis.frames.results import refuse_damaged

    frame_a = _load(args.a)
    frame_b = _load(args.b) if args.variants is None else None
    refuse_damaged(frame_a, *([] if frame_b is None else [frame_b]))
    return frame_a, frame_b


class _Sides:
    """What is compared: the comparison to run on a pair of frames (the goodput, and each
    side's CPU cost through :func:`~interop_runner.analysis.ab.cost.compare_cost`), the
    frames it runs on and the host-fact differences of two campaigns."""

    def __init__(self, args: argparse.Namespace, stats: dict[str, Any]) -> None:
        from interop_runner.analysis.ab.compare import (
            campaign_hosts,
            facts_differences,
            facts_message,
        )

        self.args, self.stats = args, stats
        self.frame_a, self.frame_b = _load_sides(args)
        self.differences: list[str] = []
        if args.variants is None:
            self.differences = facts_differences(campaign_hosts(args.a), campaign_hosts(args.b))
            if self.differences and not args.force:
                raise UserError(f"{facts_message(self.differences)}: the campaigns are not "
                                f"comparable; --force compares them anyway")

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

    def conformance(self, result: "pd.DataFrame") -> "pd.DataFrame | None":
        """The conformance comparison (None: neither side ran flow sets), with the goodput
        comparison's method (paired or not) and settings."""
        from interop_runner.analysis.ab.conformance import (
            MIN_EFFECT,
            conformance_of_campaigns,
            conformance_of_variants,
            has_flows,
        )

        args = self.args
        if not any(has_flows(f) for f in (self.frame_a, self.frame_b) if f is not None):
            return None
        chosen = args.conformance_min_effect
        options = {**self.stats, "paired": result.attrs.get("method") == "paired",
                   "min_effect": MIN_EFFECT if chosen is None else chosen}
        if self.frame_b is not None:
            return conformance_of_campaigns(args.a, args.b, **options)
        x, y = args.variants
        return conformance_of_variants(args.a, str(result.attrs["column"]), x, y, **options)

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
    from interop_runner.analysis.ab.conformance import worse
    from interop_runner.analysis.ab.cost import compare_cost, costlier
    from interop_runner.report.conformance_text import render_comparison

    _check_options(args)
    stats = dict(min_effect=args.min_effect, confidence=args.confidence, alpha=args.alpha,
                 n_boot=args.n_boot, seed=args.seed, min_samples=args.min_samples)
    try:
        sides = _Sides(args, stats)
        result = sides.compare(sides.frame_a, sides.frame_b)
        cost = compare_cost(sides.compare, sides.frame_a, sides.frame_b)
        plan_frame = sides.planned(result)
        conformance = sides.conformance(result) if not result.empty else None
    except NotComparableError as exc:
        raise UserError(str(exc)) from None
    if result.empty:
        raise UserError("nothing to compare: no ok or failed attempts on either side")
    result.attrs.update(forced=bool(sides.differences), host_differences=sides.differences)
    _emit(args, render_comparison(result, args.format, plan_frame, cost, conformance),
          result, cost, conformance)
    slower = bool((result["verdict"] == "slower").any())
    gate = (slower or (costlier(cost) and not args.ignore_cpu)
            or (conformance is not None and worse(conformance) and not args.ignore_conformance))
    return ExitCode.SLOWER_OR_REGRESSION if gate else ExitCode.OK


def _emit(args: argparse.Namespace, text: str, result: "pd.DataFrame",
          cost: "pd.DataFrame", conformance: "pd.DataFrame | None") -> None:
    """The text on stdout, or written to --output with a summary line on stdout."""
    from interop_runner.report.conformance_text import output_summary

    if args.output is None:
        print(text, end="")
        return
    try:
        args.output.write_text(text)
    except OSError as exc:
        raise UserError(f"{args.output}: cannot write: {exc}") from None
    print(f"{args.output}: {output_summary(result, cost, conformance)}")
