"""Conformance of a congestion control against a reference one (paper 000, §3;
docs/conformance.md) on point clouds of (delay_ms, throughput_mbps), one cloud per trial.

Each cloud's performance envelope (PE, :mod:`.envelope`) is the intersection over its trials
of the union of the convex hulls of each trial's k-means clusters, k chosen per cloud before
the steepest drop of R(k). Conformance (§3.1) counts the points that lie in both PEs: a
cloud's points are the ones its own PE keeps (the paper's "points in both PEs"), and

    conformance = (kept test points inside the reference PE
                   + kept reference points inside the test PE)
                  / (kept test points + kept reference points).

Conformance-T (§3.3) is that share once the test cloud and its PE are moved by the
translation that maximises it (:func:`best_translation`); ``delta_throughput`` and
``delta_delay`` are that translation negated: how far the test lies from the reference
(positive: more throughput / more delay than the kernel's).

Axes are scaled before clustering: each divided by the reference cloud's standard deviation
(k-means weighs squared distances, so a ms and a Mbit/s must weigh alike; the reference is
the yardstick, so a test's own spread does not move it). Deterministic: seeded k-means and a
fixed sequence of grids. Timing (the 2-vCPU development VM, beside a running campaign): two
clouds of 5 trials x 500 points in about 1.5 s, of 5 x 1000 in about 3.5 s
(docs/conformance.md).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from interop_runner.analysis.envelope import (
    K_MAX,
    Envelope,
    choose_k,
    performance_envelope,
    retention,
)

__all__ = ["Cloud", "ConformanceResult", "Fitted", "as_trials", "axis_scale",
           "best_translation", "cloud", "conformance", "fit_conformance", "overlaps"]

Points = NDArray[np.float64]  # (n, 2): delay, throughput (ms, Mbit/s; or scaled)

COARSE_STEPS = 25  # grid points per axis of the first translation grid
FINE_STEPS = 5  # grid points per axis of each refinement, around the best so far
FINE_ROUNDS = 10  # refinements; each divides the grid step by (FINE_STEPS - 1) / 2
CHUNK_POINTS = 400_000  # shifted points tested at once (bounds the memory of a grid)


@dataclass(frozen=True)
class Cloud:
    """One cloud on scaled axes: its PE, the k it was made with, R(k) for k = 1, 2, ...
    and the points of all trials that PE keeps."""

    envelope: Envelope
    k: int
    retention: tuple[float, ...]
    kept: Points


def cloud(trials: Sequence[Points], k: int | None = None, k_max: int = K_MAX,
          seed: int = 0) -> Cloud:
    """The PE of ``trials`` (scaled) with ``k`` clusters, or with the k before the steepest
    drop of R among 1 .. ``k_max`` (capped at the smallest trial's points)."""
    pooled = np.vstack(trials)
    if k is not None:
        envelope = performance_envelope(trials, k, seed)
        return Cloud(envelope, k, (), pooled[envelope.contains(pooled)])
    envelopes, kept = retention(trials, k_max, seed)
    chosen = choose_k([int(inside.sum()) for inside in kept])
    return Cloud(envelopes[chosen - 1], chosen, tuple(float(i.mean()) for i in kept),
                 pooled[kept[chosen - 1]])


def overlaps(test: Cloud, reference: Cloud, shifts: Points) -> NDArray[np.int64]:
    """Per translation of the test cloud (rows of ``shifts``, scaled): the kept points of
    both clouds inside both PEs once the test cloud and its PE are moved by it."""
    per_chunk = max(1, CHUNK_POINTS // max(len(test.kept), len(reference.kept), 1))
    counts = []
    for start in range(0, len(shifts), per_chunk):
        chunk = shifts[start:start + per_chunk]
        moved_test = (test.kept[None, :, :] + chunk[:, None, :]).reshape(-1, 2)
        moved_ref = (reference.kept[None, :, :] - chunk[:, None, :]).reshape(-1, 2)
        in_ref = reference.envelope.contains(moved_test).reshape(len(chunk), -1)
        in_test = test.envelope.contains(moved_ref).reshape(len(chunk), -1)
        counts.append(in_ref.sum(axis=1) + in_test.sum(axis=1))
    return np.concatenate(counts).astype(np.int64)


def _best(shifts: Points, counts: NDArray[np.int64]) -> tuple[Points, int]:
    """The translation with the most points in the overlap; ties: the shortest (scaled),
    then the smallest delay, then throughput component."""
    order = np.lexsort((shifts[:, 1], shifts[:, 0], np.hypot(*shifts.T), -counts))
    return shifts[order[0]], int(counts[order[0]])


def _grid(centre: Points, half_width: Points, steps: int) -> Points:
    """A steps x steps grid of translations over centre +- half_width."""
    axes = [np.linspace(c - h, c + h, steps) for c, h in zip(centre, half_width)]
    return np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 2)


def best_translation(test: Cloud, reference: Cloud) -> tuple[Points, int]:
    """The translation of the test cloud (scaled) with the most points in the overlap,
    and that count. Candidates: none; the differences of the kept points' means, medians
    and midranges; a :data:`COARSE_STEPS` x :data:`COARSE_STEPS` grid over every
    translation that lets the clouds' bounding boxes meet; then :data:`FINE_ROUNDS` finer
    grids around the best so far. The count is a step function of the translation (no
    gradient), hence grids. Ties: the shortest translation (:func:`_best`)."""
    mine, theirs = test.kept, reference.kept
    middle = (theirs.max(0) + theirs.min(0) - mine.max(0) - mine.min(0)) / 2
    seeds = np.vstack([np.zeros(2), theirs.mean(0) - mine.mean(0),
                       np.median(theirs, 0) - np.median(mine, 0), middle])
    reach = (np.ptp(theirs, 0) + np.ptp(mine, 0)) / 2
    shifts = np.vstack([seeds, _grid(middle, reach, COARSE_STEPS)])
    counts = overlaps(test, reference, shifts)
    best, count = _best(shifts, counts)
    step = 2 * reach / (COARSE_STEPS - 1)
    for _ in range(FINE_ROUNDS):
        fine = _grid(best, step, FINE_STEPS)
        shifts = np.vstack([shifts, fine])
        counts = np.concatenate([counts, overlaps(test, reference, fine)])
        best, count = _best(shifts, counts)
        step = step / ((FINE_STEPS - 1) / 2)
    return best, count


@dataclass(frozen=True)
class ConformanceResult:
    """The figures of :func:`conformance`. Units: throughput Mbit/s, delay ms.

    ``conformance``: share of the kept points of both clouds inside both PEs (0..1);
    ``conformance_t``: the same after the best translation of the test cloud;
    ``delta_throughput``, ``delta_delay``: that translation negated, test minus reference
    (positive: the test has more throughput / delay; 0 when no translation helps);
    ``delta_mean_throughput``, ``delta_mean_delay``: the mean of all test points minus
    that of all reference points; ``k_test``, ``k_reference``: clusters per trial of each
    PE; ``points_*``: the points of all trials; ``trials_*``: the trials; ``retained_*``:
    the share R of a cloud's points its own PE keeps; ``retention_*``: R(k) for k = 1, 2,
    ... (the curve k was chosen on; empty when k was given); ``scale_throughput``,
    ``scale_delay``: Mbit/s and ms per scaled unit."""

    conformance: float
    conformance_t: float
    delta_throughput: float
    delta_delay: float
    delta_mean_throughput: float
    delta_mean_delay: float
    k_test: int
    k_reference: int
    points_test: int
    points_reference: int
    trials_test: int
    trials_reference: int
    retained_test: float
    retained_reference: float
    retention_test: tuple[float, ...]
    retention_reference: tuple[float, ...]
    scale_throughput: float
    scale_delay: float

    def as_dict(self) -> dict[str, Any]:
        """The fields as a dict (the retention curves as tuples)."""
        return asdict(self)


def as_trials(points: ArrayLike | Sequence[ArrayLike]) -> tuple[Points, ...]:
    """A cloud as its trials: one (n, 2) array-like, or a sequence of them (one per trial).
    Raises ValueError for another shape, an empty trial or a value that is not finite."""
    try:
        array: Points | None = np.asarray(points, dtype=np.float64)
    except ValueError:  # ragged: trials of different lengths
        array = None
    if array is None:
        trials = tuple(np.asarray(t, dtype=np.float64)
                       for t in points)  # type: ignore[union-attr]
    else:
        trials = (array,) if array.ndim == 2 else tuple(array) if array.ndim == 3 else ()
    if not trials or any(t.ndim != 2 or t.shape[1] != 2 or not len(t) for t in trials):
        raise ValueError("a cloud is (n, 2) points (delay_ms, throughput_mbps), n >= 1, "
                         "or a sequence of them (one per trial)")
    if not all(np.isfinite(t).all() for t in trials):
        raise ValueError("points must be finite")
    return trials


def axis_scale(reference: Points, test: Points) -> Points:
    """Per axis the standard deviation of the reference's points; where that is 0, the
    test's; where both are, 1."""
    scale = reference.std(axis=0)
    other = test.std(axis=0)
    return np.where(scale > 0, scale, np.where(other > 0, other, 1.0))


def _shares(test: Cloud, reference: Cloud) -> tuple[tuple[float, float], Points]:
    """(conformance, conformance-T) and the test's offset from the reference (scaled:
    the best translation negated); NaN when a PE keeps none of its points (its trials
    have no region in common: nothing to compare)."""
    total = len(test.kept) + len(reference.kept)
    if not len(test.kept) or not len(reference.kept):
        return (math.nan, math.nan), np.full(2, math.nan)
    at_zero = int(overlaps(test, reference, np.zeros((1, 2)))[0])
    shift, best = best_translation(test, reference)
    return (at_zero / total, best / total), -shift


@dataclass(frozen=True)
class Fitted:
    """What :func:`fit_conformance` computed: the figures, both clouds on scaled axes (their
    PEs and kept points) and ``units``: (ms, Mbit/s) per scaled unit of (delay,
    throughput); multiply a scaled point or hull by it for data units
    (:func:`~.envelope.hull_polygons`)."""

    result: ConformanceResult
    test: Cloud
    reference: Cloud
    units: Points


def conformance(test_points: ArrayLike | Sequence[ArrayLike],
                reference_points: ArrayLike | Sequence[ArrayLike], *, k: int | None = None,
                k_max: int = K_MAX, seed: int = 0,
                scale: tuple[float, float] | None = None) -> ConformanceResult:
    """Conformance and Conformance-T of the test cloud against the reference cloud (paper
    000 §3; docs/conformance.md). Each cloud: an (n, 2) array-like of (delay_ms,
    throughput_mbps) points, or a sequence of such arrays, one per trial (a point outside
    the envelope of any other trial of its cloud is an outlier and left out).

    ``k``: clusters per trial of both PEs (None: chosen per cloud, the k before the steepest
    drop of R among 1 .. ``k_max``); ``seed``: k-means'; ``scale``: (ms, Mbit/s) per scaled
    unit of (delay, throughput) (None: the reference's standard deviation per axis)."""
    return fit_conformance(test_points, reference_points, k=k, k_max=k_max, seed=seed,
                           scale=scale).result


def fit_conformance(test_points: ArrayLike | Sequence[ArrayLike],
                    reference_points: ArrayLike | Sequence[ArrayLike], *,
                    k: int | None = None, k_max: int = K_MAX, seed: int = 0,
                    scale: tuple[float, float] | None = None) -> Fitted:
    """:func:`conformance` with the clouds it was computed on (to draw their envelopes)."""
    tests, references = as_trials(test_points), as_trials(reference_points)
    pooled_test, pooled_ref = np.vstack(tests), np.vstack(references)
    units = np.asarray(scale, dtype=np.float64) if scale is not None else \
        axis_scale(pooled_ref, pooled_test)
    test = cloud([t / units for t in tests], k, k_max, seed)
    reference = cloud([t / units for t in references], k, k_max, seed)
    shares, delta = _shares(test, reference)
    delta = delta * units + 0.0  # + 0.0: 0, not -0, when no translation helps
    mean_delta = pooled_test.mean(axis=0) - pooled_ref.mean(axis=0)
    result = ConformanceResult(
        conformance=shares[0], conformance_t=shares[1],
        delta_throughput=float(delta[1]), delta_delay=float(delta[0]),
        delta_mean_throughput=float(mean_delta[1]), delta_mean_delay=float(mean_delta[0]),
        k_test=test.k, k_reference=reference.k, points_test=len(pooled_test),
        points_reference=len(pooled_ref), trials_test=len(tests),
        trials_reference=len(references), retained_test=len(test.kept) / len(pooled_test),
        retained_reference=len(reference.kept) / len(pooled_ref),
        retention_test=test.retention, retention_reference=reference.retention,
        scale_throughput=float(units[1]), scale_delay=float(units[0]))
    return Fitted(result, test, reference, units)
