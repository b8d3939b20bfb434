"""Transitivity of "beats" between competing flows (paper 000 §6, docs/conformance.md).

The paper asks whether the relative performance of congestion-control implementations is
transitive: "if a CCA X achieved higher throughput competing with CCA Y and CCA Y achieved
higher throughput competing with CCA Z, then CCA X would achieve higher throughput when
competing with CCA Z". It found it is not across congestion controls (lsquic CUBIC beats
msquic CUBIC, msquic CUBIC beats chromium BBR, lsquic CUBIC does not beat chromium BBR in
deep buffers) but seems to be within one congestion control.

Here, per path condition (:func:`~interop_runner.analysis.frames.flows.path_conditions`: the swept
axes other than the set
of flows; a pair measured in different flow sets of one condition counts as one pair), the
share of flow group A against B is x_A / (x_A + x_B) of their mean throughputs at the
bottleneck in one attempt (the goodput without captures), from attempts in which exactly
these two flows ran and ended ok (the paper's two-flow experiments; ``two_flows_only=False``
also takes each pair of flows out of attempts with more). A beats B when the mean share
over the attempts exceeds 0.5 + ``margin`` and, with two attempts or more, the lower end of
its t interval exceeds 0.5 (a single attempt: the margin alone). For every ordered triple
with A beats B and B beats C, ``transitive`` is whether A beats C; a tie (neither beats) is
not transitive, as in the paper's example; <NA> when A and C never competed. A cycle
A > B > C > A shows up once per rotation.
"""

from __future__ import annotations

import math
from itertools import permutations
from typing import Any, Sequence

import numpy as np
import pandas as pd

from interop_runner.analysis.frames.flows import path_conditions
from interop_runner.analysis.theories.stats import mean_ci

__all__ = ["BEATS", "LOSES", "NOT_MEASURED", "PAIR_COLUMNS", "TIE", "TRIPLE_COLUMNS",
           "check_transitivity", "pair_outcome", "pairwise_shares", "transitivity"]

#: Outcomes of a pair, for its first group.
BEATS, LOSES, TIE, NOT_MEASURED = "beats", "loses", "tie", "not measured"
#: The columns of :func:`pairwise_shares` after the condition's.
PAIR_COLUMNS = ["a", "b", "control_a", "control_b", "n", "share_mean", "share_ci_low",
                "share_ci_high", "share_basis"]
#: The columns of :func:`transitivity` after the condition's.
TRIPLE_COLUMNS = ["a", "b", "c", "controls", "intra_cca", "share_ab", "share_bc",
                  "share_ac", "outcome_ac", "transitive"]


def pairwise_shares(flow_results: pd.DataFrame, by: Sequence[str] | None = None,
                    group: str = "label", two_flows_only: bool = True,
                    confidence: float = 0.95) -> pd.DataFrame:
    """Per condition (``by``: default
    :func:`~interop_runner.analysis.frames.flows.path_conditions`) and ordered pair of
    flow groups (``group``: the flow's label by default, e.g. ``quiche/cubic``): ``n``
    attempts, the mean share of ``a`` against ``b`` with its t interval (``confidence``)
    and ``share_basis`` (``series``, ``goodput`` or ``mixed``); ``control_a``/``control_b``
    their congestion controls. Every pair appears in both orders (shares summing to 1)."""
    by = list(path_conditions(flow_results) if by is None else by)
    shares = _attempt_shares(flow_results, by, group, two_flows_only)
    if shares.empty:
        return pd.DataFrame(columns=[*by, *PAIR_COLUMNS])
    rows = []
    for key, pair in shares.groupby([*by, "a", "b"], sort=True, dropna=False):
        low, high = mean_ci(pair["share"], confidence)
        basis = pair["share_basis"].unique()
        rows.append({**dict(zip([*by, "a", "b"], key)),
                     "control_a": pair["control_a"].iloc[0],
                     "control_b": pair["control_b"].iloc[0], "n": len(pair),
                     "share_mean": float(pair["share"].mean()), "share_ci_low": low,
                     "share_ci_high": high,
                     "share_basis": basis[0] if len(basis) == 1 else "mixed"})
    return pd.DataFrame(rows, columns=[*by, *PAIR_COLUMNS])


def _attempt_shares(flow_results: pd.DataFrame, by: list[str], group: str,
                    two_flows_only: bool) -> pd.DataFrame:
    """One row per attempt and ordered pair of its ok flows: the share of the first."""
    columns = [*by, "a", "b", "control_a", "control_b", "share", "share_basis"]
    if flow_results.empty or group not in flow_results.columns:
        return pd.DataFrame(columns=columns)
    rows = []
    for _, attempt in flow_results.groupby("path", sort=True):
        ok = attempt[(attempt["status"].astype("string") == "ok").fillna(False).to_numpy()]
        if len(ok) < 2 or (two_flows_only and len(attempt) != 2):
            continue
        basis = str(ok["share_basis"].iloc[0])
        column = "mean_throughput_mbps" if basis == "series" else "goodput_mbps"
        values = pd.to_numeric(ok[column], errors="coerce").astype(float).to_numpy()
        flows = list(zip(ok[group], ok["congestion_control"], values))
        condition = {c: attempt[c].iloc[0] for c in by}
        for (a, control_a, x), (b, control_b, y) in permutations(flows, 2):
            if a != b and math.isfinite(x) and math.isfinite(y) and x + y > 0:
                rows.append({**condition, "a": a, "b": b, "control_a": control_a,
                             "control_b": control_b, "share": x / (x + y),
                             "share_basis": basis})
    return pd.DataFrame(rows, columns=columns)


def pair_outcome(share_mean: float, share_ci_low: float, share_ci_high: float, n: int,
                 margin: float) -> str:
    """:data:`BEATS` when the first group beats the second (its mean share above 0.5 +
    ``margin`` and, from two attempts on, the interval's lower end above 0.5), :data:`LOSES`
    when the second beats the first (the mirror image), else :data:`TIE`;
    :data:`NOT_MEASURED` without a mean."""
    if not math.isfinite(share_mean):
        return NOT_MEASURED
    # one attempt has no interval: the margin alone decides (so do intervals not computed)
    interval = n >= 2 and math.isfinite(share_ci_low) and math.isfinite(share_ci_high)
    if share_mean > 0.5 + margin and (not interval or share_ci_low > 0.5):
        return BEATS
    if share_mean < 0.5 - margin and (not interval or share_ci_high < 0.5):
        return LOSES
    return TIE


def transitivity(pairs: pd.DataFrame, margin: float = 0.05,
                 by: Sequence[str] | None = None) -> pd.DataFrame:
    """Per condition (``by``: the columns of ``pairs`` before ``a``) every ordered triple
    (a, b, c) of distinct groups with a beats b and b beats c (:func:`pair_outcome`), the
    three mean shares (``share_ac`` NaN when a and c never competed), ``outcome_ac`` (a
    :data:`BEATS`, :data:`LOSES` to, :data:`TIE` with or :data:`NOT_MEASURED` against c),
    ``transitive`` (a beats c; <NA> when not measured), the three congestion controls
    (``controls``, ``a/b/c``) and ``intra_cca`` (all three the same)."""
    by = list(pairs.columns[:list(pairs.columns).index("a")] if by is None else by)
    rows: list[dict[str, Any]] = []
    groups = pairs.groupby(by, sort=True, dropna=False) if by else [((), pairs)]
    for key, condition in groups:
        ids = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        rows += [{**ids, **row} for row in _triples(condition, margin)]
    frame = pd.DataFrame(rows, columns=[*by, *TRIPLE_COLUMNS])
    return frame.astype({"intra_cca": "boolean", "transitive": "boolean",
                         "share_ab": "Float64", "share_bc": "Float64", "share_ac": "Float64"})


def _triples(pairs: pd.DataFrame, margin: float) -> list[dict[str, Any]]:
    """The triples of one condition whose premise holds (a beats b, b beats c)."""
    share: dict[tuple[str, str], Any] = {(str(r.a), str(r.b)): r
                                         for r in pairs.itertuples(index=False)}
    beats = {k for k, r in share.items() if _outcome(r, margin) == BEATS}
    control = {**{r.a: r.control_a for r in share.values()},
               **{r.b: r.control_b for r in share.values()}}
    rows = []
    for a, b in sorted(beats):
        for c in sorted({c for (b2, c) in beats if b2 == b and c != a}):
            ac = share.get((a, c))
            outcome = NOT_MEASURED if ac is None else _outcome(ac, margin)
            controls = [_control(control.get(g)) for g in (a, b, c)]
            rows.append({"a": a, "b": b, "c": c,
                         "controls": "/".join(c or "?" for c in controls),
                         "intra_cca": None not in controls and len(set(controls)) == 1,
                         "share_ab": share[(a, b)].share_mean,
                         "share_bc": share[(b, c)].share_mean,
                         "share_ac": np.nan if ac is None else ac.share_mean,
                         "outcome_ac": outcome,
                         "transitive": pd.NA if ac is None else outcome == BEATS})
    return rows


def _control(value: Any) -> str | None:
    """A congestion control's name, None when unknown."""
    missing = value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))
    return None if missing else str(value)


def _outcome(pair: Any, margin: float) -> str:
    """:func:`pair_outcome` of a row of :func:`pairwise_shares`."""
    return pair_outcome(float(pair.share_mean), float(pair.share_ci_low),
                        float(pair.share_ci_high), int(pair.n), margin)


def check_transitivity(flow_results: pd.DataFrame, margin: float = 0.05,
                       by: Sequence[str] | None = None, two_flows_only: bool = True,
                       confidence: float = 0.95) -> pd.DataFrame:
    """:func:`transitivity` of :func:`pairwise_shares` of the frame of
    :func:`~interop_runner.analysis.frames.flows.load_flow_results` (the arguments as there)."""
    pairs = pairwise_shares(flow_results, by=by, two_flows_only=two_flows_only,
                            confidence=confidence)
    return transitivity(pairs, margin,
                        by=list(pairs.columns[:list(pairs.columns).index("a")]))
