"""Change points in a series of campaigns: where goodput or CPU cost moved, and whether the move
is real (docs/history.md, "Change points").

A series is one list of :class:`Point` (one campaign each, oldest first). The search runs on
the log of the campaign medians, so a step is a relative change and the noise is comparable
between pairs:

1. **Candidates** (``ruptures``): PELT with the ``l2`` cost, segments of at least
   ``min_size`` campaigns, penalty ``PENALTY * sigma^2 * ln(T)`` with ``sigma`` the robust
   noise of the series (:func:`series_noise`) and ``T`` its length.
2. **Significance**, at the campaign level, each candidate against the campaigns between its
   neighbouring candidates: the relative change of the median of campaign medians with a
   hierarchical bootstrap CI (:func:`hierarchical_ci`: campaigns resampled, then attempts
   within them), the Mann-Whitney p of the campaign medians and the project's A/B
   :func:`~interop_runner.analysis.ab.stats.verdict`. A candidate that is not significant is
   dropped (the one with the largest p first) and its neighbours are tested again over the
   merged segments, until every one left is significant.

Attempts of one campaign share its host state, so they scatter less than campaigns do; a test
on attempts would call every campaign-to-campaign wobble a change. Here the unit is the
campaign: more attempts per campaign sharpen each point, more campaigns sharpen the test.

The conformance metrics (:data:`LINEAR_METRICS`: a share that may be 0, offsets that may be
negative) run the same steps on the values themselves, not their logs: a change is a
difference in the metric's unit and counts from :data:`LINEAR_METRICS`' threshold (the
conformance's: ``ChangePointSettings.conformance_min_effect``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from interop_runner.analysis.ab.cost import COST_VERDICTS
from interop_runner.analysis.ab.stats import MAD_SCALE, mann_whitney_p, verdict

PENALTY = 3.0
"""Penalty per change point in units of ``sigma^2 ln T`` (2 is the BIC of a mean shift; 3 is
stricter, because a false alarm costs a CI run more than a late alarm)."""
MIN_SIZE = 2
N_BOOT = 2000
METRIC_DIRECTIONS: dict[str, int] = {
    "goodput_mbps": -1,
    "server_cpu_s_per_gib": 1,
    "client_cpu_s_per_gib": 1,
    "server_cycles_per_byte": 1,
    "client_cycles_per_byte": 1,
    "conformance": -1,
    "conformance_t": -1,
    "delta_throughput": 0,
    "delta_delay": 0,
    "conformance_same_run": -1,
    "conformance_t_same_run": -1,
    "delta_throughput_same_run": 0,
    "delta_delay_same_run": 0,
}
"""Metric -> the direction of a regression: -1 when lower is worse, +1 when higher is, 0
when moving away from 0 is (an offset from the kernel's)."""
LINEAR_METRICS: dict[str, float] = {"conformance": 0.1, "conformance_t": 0.1,
                                    "delta_throughput": 1.0, "delta_delay": 1.0,
                                    "conformance_same_run": 0.1,
                                    "conformance_t_same_run": 0.1,
                                    "delta_throughput_same_run": 1.0,
                                    "delta_delay_same_run": 1.0}
"""Metrics whose change is a difference (their values may be 0 or negative) -> the smallest
difference that counts, in their unit (share points, Mbit/s, ms)."""
CONFORMANCE_VERDICTS = {"faster": "better", "slower": "worse"}
OFFSET_VERDICTS = {True: "farther", False: "closer"}
"""An offset's change: ``farther`` from the kernel (``|after| > |before|``) or ``closer``."""
CHANGES = ("slower", "faster", *COST_VERDICTS.values(), *CONFORMANCE_VERDICTS.values(),
           *OFFSET_VERDICTS.values())
"""The verdicts of a change: ``slower``/``faster`` (goodput), ``costlier``/``cheaper`` (a CPU
cost, where up is worse), ``better``/``worse`` (a conformance), ``farther``/``closer`` (an
offset from the kernel)."""


def metric_verdict(said: str, metric: str, farther: bool = False) -> str:
    """The A/B verdict ``said`` in the words of ``metric``: for a cost (up is a regression) a
    rise is ``costlier`` and a fall ``cheaper``, not ``faster``/``slower``; a conformance
    rises ``better`` and falls ``worse``; an offset moves ``farther`` from 0 or ``closer``
    (``farther``: whether its size grew)."""
    if said not in ("faster", "slower"):
        return said
    direction = METRIC_DIRECTIONS.get(metric, -1)
    if direction == 0:
        return OFFSET_VERDICTS[farther]
    if metric in LINEAR_METRICS:
        return CONFORMANCE_VERDICTS[said]
    return COST_VERDICTS.get(said, said) if direction > 0 else said


@dataclass(frozen=True)
class Point:
    """One campaign of a series: the median of its ok attempts and what ran."""

    campaign: str
    time: str | None
    values: tuple[float, ...]
    server_version: str | None = None
    client_version: str | None = None
    knobs: str | None = None
    """The campaign's host knobs (JSON), shown beside the versions: a changed host setting
    explains a change point as a changed version does."""

    @property
    def median(self) -> float:
        """The campaign's median (NaN without values)."""
        return float(np.median(self.values)) if self.values else math.nan

    @property
    def n(self) -> int:
        """Its number of ok attempts with a value."""
        return len(self.values)

    @property
    def versions(self) -> str:
        """``server_version/client_version`` (one of them when both are equal)."""
        server, client = self.server_version or "?", self.client_version or "?"
        versions = server if server == client else f"{server}/{client}"
        return f"{versions} knobs {self.knobs}" if self.knobs else versions


@dataclass(frozen=True)
class ChangePointSettings:
    """The knobs of the detection and of the significance rule."""

    alpha: float = 0.05
    min_effect: float = 0.02
    min_size: int = MIN_SIZE
    penalty: float = PENALTY
    confidence: float = 0.95
    n_boot: int = N_BOOT
    seed: int = 0
    conformance_min_effect: float = LINEAR_METRICS["conformance"]
    """The smallest change of conformance and Conformance-T that counts (share points)."""

    def threshold(self, metric: str) -> float:
        """The smallest change of ``metric`` that counts: relative (``min_effect``), or for a
        linear metric a difference in its unit."""
        if metric in ("conformance", "conformance_t", "conformance_same_run",
                      "conformance_t_same_run"):
            return self.conformance_min_effect
        return LINEAR_METRICS.get(metric, self.min_effect)


@dataclass(frozen=True)
class ChangePoint:
    """A change between ``points[index - 1]`` and ``points[index]`` of a series."""

    index: int
    campaign: str
    time: str | None
    versions_before: str
    versions_after: str
    n_before: int
    n_after: int
    median_before: float
    median_after: float
    rel_change: float
    ci_low: float
    ci_high: float
    p_value: float
    p_at_split: float
    verdict: str
    regression: bool
    metric: str = "goodput_mbps"

    @property
    def significant(self) -> bool:
        """Whether the verdict is a change (:data:`CHANGES`: ``slower``/``faster``, for a CPU
        cost ``costlier``/``cheaper``, ...)."""
        return self.verdict in CHANGES


def series_noise(logs: Sequence[float] | np.ndarray) -> float:
    """Robust noise of a series of log values: ``1.4826 MAD(diff) / sqrt(2)`` of the
    successive differences, which a step moves only once (NaN below three points; the
    standard deviation of the differences when their MAD is 0)."""
    y = np.asarray(logs, dtype=float)
    if y.size < 3:
        return math.nan
    d = np.diff(y)
    mad = float(np.median(np.abs(d - np.median(d))))
    spread = MAD_SCALE * mad if mad > 0 else float(np.std(d, ddof=1))
    return spread / math.sqrt(2)


def candidates(logs: Sequence[float] | np.ndarray,
               settings: ChangePointSettings = ChangePointSettings()) -> list[int]:
    """Indices where a segment starts (PELT, ``l2`` cost, penalty scaled to the noise)."""
    y = np.asarray(logs, dtype=float)
    sigma = series_noise(y)
    if y.size < 2 * settings.min_size or not math.isfinite(sigma) or sigma <= 0:
        return []
    import ruptures

    algo = ruptures.Pelt(model="l2", min_size=settings.min_size, jump=1).fit(y.reshape(-1, 1))
    ends: list[int] = algo.predict(pen=settings.penalty * sigma ** 2 * math.log(y.size))
    return [int(e) for e in ends[:-1]]


def hierarchical_ci(before: Sequence[Sequence[float]], after: Sequence[Sequence[float]], *,
                    confidence: float = 0.95, n_boot: int = N_BOOT, seed: int = 0,
                    absolute: bool = False) -> tuple[float, float]:
    """Percentile CI of ``M(after) / M(before) - 1`` (``absolute``: ``M(after) -
    M(before)``) with ``M`` the median of campaign medians, by a two-stage bootstrap:
    campaigns resampled with replacement, then the attempts within each drawn campaign (Ren
    et al. 2010, "Nonparametric bootstrapping for hierarchical data"). Both levels of noise
    enter the interval."""
    rng = np.random.default_rng(seed)
    m_before = _two_stage_medians(before, n_boot, rng)
    m_after = _two_stage_medians(after, n_boot, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = m_after - m_before if absolute else m_after / m_before - 1
    tail = (1 - confidence) / 2
    low, high = np.quantile(ratio, [tail, 1 - tail])
    return float(low), float(high)


def _two_stage_medians(groups: Sequence[Sequence[float]], n_boot: int,
                       rng: np.random.Generator) -> np.ndarray:
    """``n_boot`` medians of campaign medians, each from resampled campaigns and attempts."""
    inner = np.empty((len(groups), n_boot))
    for i, values in enumerate(groups):
        x = np.asarray(values, dtype=float)
        inner[i] = np.median(x[rng.integers(0, x.size, size=(n_boot, x.size))], axis=1)
    drawn = rng.integers(0, len(groups), size=(n_boot, len(groups)))
    medians: np.ndarray = np.median(inner[drawn, np.arange(n_boot)[:, None]], axis=1)
    return medians


def split_p(medians: Sequence[float] | np.ndarray, *, min_size: int = MIN_SIZE,
            n_perm: int = N_BOOT, seed: int = 0) -> float:
    """Permutation p-value of the best split of ``medians`` (Pettitt's rank test): the
    statistic is the largest standardised Mann-Whitney ``|z|`` over every split that leaves
    ``min_size`` values on each side, compared with the same maximum in ``n_perm`` random
    orders of the values. A change-point search picks the most different split; taking the
    maximum in the random orders too is what keeps it from being rewarded for that."""
    ranks = _ranks(np.asarray(medians, dtype=float))
    if ranks.size < 2 * min_size or np.ptp(ranks) == 0:
        return 1.0
    rng = np.random.default_rng(seed)
    orders = np.vstack([ranks, rng.permuted(np.tile(ranks, (n_perm, 1)), axis=1)])
    stats = _max_z(orders, min_size)
    return float((1 + np.sum(stats[1:] >= stats[0] - 1e-12)) / (n_perm + 1))


def _ranks(x: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    ranks: np.ndarray = rankdata(x)
    return ranks


def _max_z(orders: np.ndarray, min_size: int) -> np.ndarray:
    """Per row of ranks: the largest ``|U_t - t (L - t) / 2| / sd_t`` over the splits ``t``."""
    length = orders.shape[1]
    t = np.arange(min_size, length - min_size + 1)
    rank_sums = np.cumsum(orders, axis=1)[:, t - 1]
    u = rank_sums - t * (t + 1) / 2
    sd = np.sqrt(t * (length - t) * (length + 1) / 12)
    z: np.ndarray = np.max(np.abs(u - t * (length - t) / 2) / sd, axis=1)
    return z


def measure_change(points: Sequence[Point], start: int, index: int, stop: int,
                   settings: ChangePointSettings = ChangePointSettings(),
                   metric: str = "goodput_mbps") -> ChangePoint:
    """The change at ``index`` measured over ``points[start:index]`` against
    ``points[index:stop]`` (a difference for :data:`LINEAR_METRICS`, else relative)."""
    before, after = points[start:index], points[index:stop]
    med_b = [p.median for p in before]
    med_a = [p.median for p in after]
    centre_b, centre_a = float(np.median(med_b)), float(np.median(med_a))
    linear = metric in LINEAR_METRICS
    rel = centre_a - centre_b if linear else centre_a / centre_b - 1 if centre_b else math.nan
    low, high = hierarchical_ci([p.values for p in before], [p.values for p in after],
                                confidence=settings.confidence, n_boot=settings.n_boot,
                                seed=settings.seed + index, absolute=linear)
    p_value = split_p([*med_b, *med_a], min_size=settings.min_size,
                      n_perm=settings.n_boot, seed=settings.seed + index)
    farther = abs(centre_a) > abs(centre_b)
    said = metric_verdict(verdict(rel, low, high, p_value, len(before), len(after),
                                  min_effect=settings.threshold(metric), alpha=settings.alpha,
                                  min_samples=settings.min_size), metric, farther)
    direction = METRIC_DIRECTIONS.get(metric, -1)
    worse = farther if direction == 0 else rel * direction > 0
    return ChangePoint(
        index=index, campaign=points[index].campaign, time=points[index].time,
        versions_before=before[-1].versions, versions_after=after[0].versions,
        n_before=len(before), n_after=len(after), median_before=centre_b,
        median_after=centre_a, rel_change=rel, ci_low=low, ci_high=high, p_value=p_value,
        p_at_split=mann_whitney_p(med_b, med_a), verdict=said, metric=metric,
        regression=said in CHANGES and worse)


def _scale(points: Sequence[Point], metric: str) -> tuple[list[Point], np.ndarray]:
    """The points a series is searched on and their values on the search's scale: the log
    of positive medians, or for :data:`LINEAR_METRICS` the finite medians themselves."""
    if metric in LINEAR_METRICS:
        kept = [p for p in points if p.n and math.isfinite(p.median)]
        return kept, np.array([p.median for p in kept], dtype=float)
    kept = [p for p in points if p.n and p.median > 0]
    return kept, np.log([p.median for p in kept]) if kept else np.empty(0)


def change_points(points: Sequence[Point], settings: ChangePointSettings = ChangePointSettings(),
                  metric: str = "goodput_mbps") -> list[ChangePoint]:
    """The significant change points of a series (oldest first; points without values are
    left out beforehand)."""
    kept, values = _scale(points, metric)
    if len(kept) < 2 * settings.min_size:
        return []
    if split_p(values, min_size=settings.min_size, n_perm=settings.n_boot,
               seed=settings.seed) >= settings.alpha:
        return []  # the series as a whole shows no change: no search, no multiplicity
    cuts = candidates(values, settings)
    while cuts:
        bounds = [0, *cuts, len(kept)]
        tested = [measure_change(kept, bounds[i], bounds[i + 1], bounds[i + 2], settings, metric)
                  for i in range(len(cuts))]
        weak = [t for t in tested if not t.significant]
        if not weak:
            return _with_positions(tested, kept, points)
        worst = max(weak, key=lambda t: (math.isnan(t.p_value), t.p_value))
        cuts.remove(worst.index)
    return []


def _with_positions(found: list[ChangePoint], kept: Sequence[Point],
                    points: Sequence[Point]) -> list[ChangePoint]:
    """Indices into the full series (``kept`` left out points without values)."""
    position = {id(p): i for i, p in enumerate(points)}
    return [replace(c, index=position[id(kept[c.index])]) for c in found]


def resampled(points: Sequence[Point], rng: np.random.Generator,
              split: int | None = None) -> list[Point]:
    """A series like ``points`` for checking the detection on real data: the campaigns in a
    random order (within each side of ``split``, so a step at ``split`` stays there), each
    campaign's values drawn with replacement, renamed ``c01``, ``c02``, ... in the new order."""
    parts = [list(points)] if split is None else [list(points[:split]), list(points[split:])]
    order = [part[i] for part in parts for i in rng.permutation(len(part))]
    return [Point(f"c{i:02d}", None, tuple(rng.choice(p.values, size=len(p.values))))
            for i, p in enumerate(order, start=1)]
