"""The statistics of the A/B goodput comparison (:mod:`.compare`): pure numpy/scipy on arrays.

Two designs:

unpaired
    side A and side B are independent samples (two campaigns, or arms that did not run back
    to back): :func:`bootstrap_ci` of ``median(b) / median(a) - 1`` (both sides resampled),
    :func:`mann_whitney_p`, :func:`cliffs_delta`; planning with :func:`required_n`.
paired
    attempt ``i`` of A and attempt ``i`` of B ran back to back (an A/B campaign in ``order:
    paired``), so whatever drifted on the host between pairs hits both alike and cancels in
    the per-pair ratio ``b_i / a_i``: :func:`log_ratios`, :func:`paired_change` (the median
    pair ratio minus 1), :func:`paired_bootstrap_ci` (pairs resampled), :func:`wilcoxon_p`
    (signed-rank test of the log ratios); planning with :func:`pair_noise` and
    :func:`required_pairs`.

Both end in the same :func:`verdict`. The change is relative by default (goodput, CPU cost:
``median(b) / median(a) - 1``, pair ratios); ``absolute=True`` makes it a difference in the
value's own unit (``median(b) - median(a)``, pair differences ``b_i - a_i``) for a value that
may be 0 or negative, such as the conformance of a congestion control (:mod:`.conformance`).
scipy is imported on use: loading results does not need it.
"""

from __future__ import annotations

import json
import math
import zlib
from typing import Any, Sequence

import numpy as np

Values = Sequence[float] | np.ndarray

VERDICTS: tuple[str, ...] = ("slower", "faster", "no change", "inconclusive")
# Mann-Whitney U vs the t-test for normal data (3/pi): the MWU needs 1/0.955 as many samples.
# The same holds for the Wilcoxon signed-rank test vs the paired t-test.
MWU_ARE = 3 / math.pi
WILCOXON_ARE = 3 / math.pi
# 1.4826 * MAD is the standard deviation for normal data
MAD_SCALE = 1.4826


def _cell_rng(seed: int, key: Sequence[Any]) -> np.random.Generator:
    """A generator for one cell: seeded by ``seed`` and a stable hash of the cell key."""
    digest = zlib.crc32(json.dumps([str(k) for k in key]).encode())
    return np.random.default_rng(np.random.SeedSequence([seed, digest]))


def _generator(rng: np.random.Generator | int | None) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


# ------------------------------------------------------------------------------- unpaired ----


def bootstrap_ci(a: Values, b: Values, *, confidence: float = 0.95, n_boot: int = 10_000,
                 rng: np.random.Generator | int | None = 0,
                 absolute: bool = False) -> tuple[float, float]:
    """Percentile bootstrap CI of ``median(b) / median(a) - 1`` (``absolute``: of
    ``median(b) - median(a)``).

    Both samples are resampled independently with replacement (two-sample bootstrap), which
    is what ``scipy.stats.bootstrap((a, b), ..., paired=False, method="percentile")`` does.
    """
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.size == 0 or y.size == 0:
        return (math.nan, math.nan)
    gen = _generator(rng)
    med_a = np.median(x[gen.integers(0, x.size, size=(n_boot, x.size))], axis=1)
    med_b = np.median(y[gen.integers(0, y.size, size=(n_boot, y.size))], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = med_b - med_a if absolute else med_b / med_a - 1
    tail = (1 - confidence) / 2
    low, high = np.quantile(ratio, [tail, 1 - tail])
    return (float(low), float(high))


def cliffs_delta(a: Values, b: Values) -> float:
    """Cliff's delta of ``b`` over ``a``: ``P(b > a) - P(b < a)`` over all pairs (-1..1).

    Equal to the rank-biserial correlation ``2 U_b / (n_a n_b) - 1`` with ``U_b`` the
    Mann-Whitney statistic of ``b``. Positive: B tends to be faster.
    """
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.size == 0 or y.size == 0:
        return math.nan
    diff = y[:, None] - x[None, :]
    return float((np.sum(diff > 0) - np.sum(diff < 0)) / diff.size)


def mann_whitney_p(a: Values, b: Values) -> float:
    """Two-sided Mann-Whitney U p-value (scipy, ``method="auto"``); NaN for an empty side.

    Two constant, equal samples give p = 1 (scipy would return NaN: no variance at all).
    """
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.size == 0 or y.size == 0:
        return math.nan
    if np.ptp(np.concatenate([x, y])) == 0:
        return 1.0
    from scipy import stats

    return float(stats.mannwhitneyu(y, x, alternative="two-sided").pvalue)


# --------------------------------------------------------------------------------- paired ----


def log_ratios(a: Values, b: Values) -> np.ndarray:
    """``log(b_i / a_i)`` per pair (``a`` and ``b`` aligned: element ``i`` is one pair).

    Raises :class:`ValueError` when the lengths differ or a value is not positive and finite
    (a goodput of 0 has no ratio).
    """
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"paired samples need equal lengths, not {x.shape} and {y.shape}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y)) and np.all(x > 0)
            and np.all(y > 0)):
        raise ValueError("paired samples must be positive and finite")
    return np.asarray(np.log(y) - np.log(x), dtype=float)


def differences(a: Values, b: Values) -> np.ndarray:
    """``b_i - a_i`` per pair (``a`` and ``b`` aligned); ValueError when the lengths differ or
    a value is not finite."""
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"paired samples need equal lengths, not {x.shape} and {y.shape}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("paired samples must be finite")
    return np.asarray(y - x, dtype=float)


def _pair_values(a: Values, b: Values, absolute: bool) -> np.ndarray:
    """What a pair contributes: its difference (``absolute``), else its log ratio."""
    return differences(a, b) if absolute else log_ratios(a, b)


def _from_pair_scale(value: float, absolute: bool) -> float:
    """A statistic of :func:`_pair_values` as a change: a difference as it is, a log ratio
    as a relative change (``exp(q) - 1``)."""
    return value if absolute else float(math.expm1(value))


def paired_change(a: Values, b: Values, absolute: bool = False) -> float:
    """The relative change of B over A from pairs: ``exp(median(log(b_i / a_i))) - 1``, the
    median pair ratio minus 1 (−0.05: B is 5 % slower in the typical pair); ``absolute``:
    the median pair difference ``median(b_i - a_i)``. NaN without pairs."""
    r = _pair_values(a, b, absolute)
    return _from_pair_scale(float(np.median(r)), absolute) if r.size else math.nan


def paired_bootstrap_ci(a: Values, b: Values, *, confidence: float = 0.95,
                        n_boot: int = 10_000, rng: np.random.Generator | int | None = 0,
                        absolute: bool = False) -> tuple[float, float]:
    """Percentile bootstrap CI of :func:`paired_change`: the pairs are resampled with
    replacement (a pair stays together), the median log ratio of each resample is taken,
    and the ``(1 - c)/2`` and ``(1 + c)/2`` quantiles are turned into relative changes
    (``exp(q) - 1``). The same interval as ``scipy.stats.bootstrap((log_ratios,), np.median,
    method="percentile")`` transformed by ``expm1``. ``absolute``: the same on the pair
    differences, untransformed. NaN without pairs."""
    r = _pair_values(a, b, absolute)
    if r.size == 0:
        return (math.nan, math.nan)
    gen = _generator(rng)
    medians = np.median(r[gen.integers(0, r.size, size=(n_boot, r.size))], axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(medians, [tail, 1 - tail])
    return (_from_pair_scale(float(low), absolute), _from_pair_scale(float(high), absolute))


def wilcoxon_p(a: Values, b: Values, absolute: bool = False) -> float:
    """Two-sided Wilcoxon signed-rank p-value of the pair log ratios against 0
    (``scipy.stats.wilcoxon(log_ratios(a, b))``: exact for small samples without ties or
    zeros, else the normal approximation; zero differences dropped, ``zero_method="wilcox"``).

    NaN without pairs; 1 when every pair has the same value on both sides. With fewer than
    6 pairs the exact test cannot reach p < 0.05 (5 pairs, all one way: p = 2/32 = 0.0625).
    ``absolute``: the test of the pair differences ``b_i - a_i`` instead.
    """
    r = _pair_values(a, b, absolute)
    if r.size == 0:
        return math.nan
    if np.all(r == 0):
        return 1.0
    from scipy import stats

    return float(stats.wilcoxon(r, alternative="two-sided").pvalue)


def min_pairs(alpha: float = 0.05) -> int:
    """The fewest pairs with which the exact two-sided signed-rank test can give
    ``p < alpha`` (all pairs one way: ``p = 2 / 2^n``): 6 for alpha 0.05, 8 for 0.01."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1, not {alpha}")
    n = 1
    while 2.0 ** (1 - n) >= alpha:
        n += 1
    return n


# ------------------------------------------------------------------------------- verdicts ----


def verdict(rel_diff: float, ci_low: float, ci_high: float, p_value: float, n_a: int,
            n_b: int, *, min_effect: float = 0.02, alpha: float = 0.05,
            min_samples: int = 5) -> str:
    """The verdict for one cell (docs/compare.md, "The verdict rule").

    1. ``inconclusive`` when a side has fewer than ``min_samples`` ok attempts (paired: pass
       the number of pairs as both ``n_a`` and ``n_b``) or a number is missing;
    2. ``faster``/``slower`` when the CI excludes 0 (``ci_low > 0`` or ``ci_high < 0``),
       ``|rel_diff| >= min_effect`` and ``p_value < alpha``;
    3. ``no change`` when ``-min_effect <= ci_low`` and ``ci_high <= min_effect``;
    4. ``inconclusive`` otherwise.
    """
    values = (rel_diff, ci_low, ci_high, p_value)
    if n_a < min_samples or n_b < min_samples or any(not math.isfinite(v) for v in values):
        return "inconclusive"
    if (ci_low > 0 or ci_high < 0) and abs(rel_diff) >= min_effect and p_value < alpha:
        return "faster" if rel_diff > 0 else "slower"
    if -min_effect <= ci_low and ci_high <= min_effect:
        return "no change"
    return "inconclusive"


# ------------------------------------------------------------------------------- planning ----


def _z(power: float, alpha: float) -> float:
    if not 0 < power < 1 or not 0 < alpha < 1:
        raise ValueError("power and alpha must be between 0 and 1")
    from scipy import stats

    return float(stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power))


def required_n(cv: float, effect: float, power: float = 0.8, alpha: float = 0.05) -> float:
    """Repetitions per side for a two-sided Mann-Whitney U test to detect a relative shift
    ``effect`` with ``power`` at level ``alpha`` when the noise (coefficient of variation)
    is ``cv``: the normal approximation of the two-sample t-test,
    ``2 (z_{1-alpha/2} + z_power)^2 (cv / effect)^2``, divided by the asymptotic relative
    efficiency of the U test, 3/pi = 0.955. Not rounded."""
    if effect <= 0:
        raise ValueError(f"effect must be positive, not {effect}")
    z = _z(power, alpha)
    return float(2 * z * z * (cv / effect) ** 2 / MWU_ARE)


def required_pairs(noise: float, effect: float, power: float = 0.8,
                   alpha: float = 0.05) -> float:
    """Pairs (repetitions per arm) for a two-sided Wilcoxon signed-rank test of the pair log
    ratios to detect a relative shift ``effect`` with ``power`` at level ``alpha`` when the
    log ratios scatter by ``noise`` (:func:`pair_noise`): the one-sample normal
    approximation ``(z_{1-alpha/2} + z_power)^2 (noise / effect)^2`` divided by the
    asymptotic relative efficiency of the signed-rank test, 3/pi. Not rounded.

    Independent noise ``cv`` per attempt gives ``noise = sqrt(2) cv`` and the same number as
    :func:`required_n`; drift shared by the two attempts of a pair lowers ``noise``.
    """
    if effect <= 0:
        raise ValueError(f"effect must be positive, not {effect}")
    z = _z(power, alpha)
    return float(z * z * (noise / effect) ** 2 / WILCOXON_ARE)


def robust_cv(values: Values) -> float:
    """Noise of a sample relative to its median: ``1.4826 * MAD / median`` (the standard
    deviation for normal data, insensitive to an odd slow attempt); the ordinary ``std /
    mean`` when the MAD is 0; NaN below two values."""
    x = np.asarray(values, dtype=float)
    if x.size < 2:
        return math.nan
    med = float(np.median(x))
    mad = float(np.median(np.abs(x - med)))
    if mad > 0 and med > 0:
        return MAD_SCALE * mad / med
    mean = float(np.mean(x))
    return float(np.std(x, ddof=1) / mean) if mean > 0 else math.nan


def pair_noise(ratios: Values) -> float:
    """The scatter of pair log ratios (:func:`log_ratios`): ``1.4826 * MAD`` (robust; the
    ordinary standard deviation when the MAD is 0); NaN below two pairs. For small values
    it is the coefficient of variation of the ratio B/A from pair to pair."""
    r = np.asarray(ratios, dtype=float)
    if r.size < 2:
        return math.nan
    mad = float(np.median(np.abs(r - np.median(r))))
    return MAD_SCALE * mad if mad > 0 else float(np.std(r, ddof=1))
