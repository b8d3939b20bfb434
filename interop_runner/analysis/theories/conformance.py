"""Conformance of a congestion control against a reference one (paper 000, §3;
docs/conformance.md) on point clouds of (delay_ms, throughput_mbps), one cloud per trial.

Each cloud's performance envelope (PE, :mod:`.envelope`) is the intersection over its trials
of the union of the convex hulls of each trial's k-means clusters, k chosen per cloud before
the steepest drop of R(k) averaged over several clusterings, with a margin. Conformance
(§3.1) counts the points that lie in both PEs: a cloud's points are the ones its own PE
keeps (the paper's "points in both PEs"), and

    conformance = (kept test points inside the reference PE
                   + kept reference points inside the test PE)
                  / (kept test points + kept reference points).

Conformance-T (§3.3) is that share once the test cloud and its PE are moved by the
translation that maximises it (:func:`best_translation`). On a loose cloud the maximum is
reached over a region of translations (a plateau); ``delta_throughput`` and ``delta_delay``
are its centroid negated, how far the test lies from the reference (positive: more
throughput / more delay than the kernel's), and ``delta_*_range`` its extent per axis: a
point of the plateau, such as the shortest translation reaching the maximum, would be biased
towards one of its edges.

k-means is seeded: every figure has a ``*_spread``, its range (max - min) over the seeds
:data:`SPREAD_SEEDS`, which says how much the clustering, not the measurement, moves it.

Axes are scaled before clustering: each divided by the reference cloud's standard deviation
(k-means weighs squared distances, so a ms and a Mbit/s must weigh alike; the reference is
the yardstick, so a test's own spread does not move it). Deterministic: seeded k-means and a
fixed sequence of grids. Timing: docs/conformance.md, "Cost".
"""

from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np
from numpy.typing import NDArray

from interop_runner.analysis.theories import cloud_store
from interop_runner.analysis.theories.envelope import (
    K_MAX,
    Envelope,
    choose_k,
    content_digest,
    performance_envelope,
    retention,
)

__all__ = ["Cloud", "ConformanceResult", "DELAY_COLUMNS", "Fitted", "SPREAD_SEEDS",
           "THROUGHPUT_COLUMNS", "Translation", "as_trials", "axis_scale", "best_translation",
           "cloud", "conformance", "fit_conformance", "overlaps", "plateau"]

Points = NDArray[np.float64]  # (n, 2): delay, throughput (ms, Mbit/s; or scaled)
CountOf = Callable[[Points], NDArray[np.int64]]  # translations -> points in the overlap

COARSE_STEPS = 25  # grid points per axis of the first translation grid
FINE_STEPS = 5  # grid points per axis of each refinement, around the best so far
FINE_ROUNDS = 10  # refinements; each divides the grid step by (FINE_STEPS - 1) / 2
CHUNK_POINTS = 400_000  # shifted points tested at once (bounds the memory of a grid)
PLATEAU_STEPS = 13  # grid points per axis of each map of the plateau
PLATEAU_ROUNDS = 8  # maps of the plateau at most (each widens, narrows or re-centres it)
PLATEAU_CELLS = 4  # grid steps the plateau must span per axis to place its centroid
#: The seeds whose figures' range is a figure's ``*_spread``.
SPREAD_SEEDS = tuple(range(10))
#: Column names a frame's delay and throughput are read by (:func:`as_trials`).
DELAY_COLUMNS = ("delay_ms", "delay", "queue_delay_ms", "queue_delay_ms_mean",
                 "queue_delay_ms_p95", "queueing_delay_ms", "rtt_ms")
THROUGHPUT_COLUMNS = ("throughput_mbps", "throughput", "tput_mbps", "tput")


@dataclass(frozen=True)
class Cloud:
    """One cloud on scaled axes: its PE, the k it was made with, R(k) for k = 1, 2, ...
    (averaged over the clusterings) and the points of all trials that PE keeps."""

    envelope: Envelope
    k: int
    retention: tuple[float, ...]
    kept: Points

    @functools.cached_property
    def signature(self) -> str:
        """What the figures depend on: the PE's hulls, trial by trial (equal for two seeds
        whose clusterings are the same)."""
        digest = hashlib.sha256()
        for hulls in self.envelope.trials:
            for corners in sorted(h.corners.tobytes() for h in hulls):
                digest.update(corners)
            digest.update(b"|")
        return digest.hexdigest()

    @functools.cached_property
    def content(self) -> str:
        """What the figures against another cloud are computed from: the PE's hulls
        (:attr:`signature`) and the points it keeps."""
        return hashlib.sha256(f"{self.signature}|{content_digest([self.kept])}".encode()
                              ).hexdigest()


def cloud(trials: Sequence[Points], k: int | None = None, k_max: int = K_MAX,
          seed: int = 0) -> Cloud:
    """The PE of ``trials`` (scaled) with ``k`` clusters, or with the k of
    :func:`~.envelope.choose_k` on R among 1 .. ``k_max`` (capped at the smallest trial's
    points). The same trials, k and seed give the same cloud, computed once
    (:func:`_cloud`: a reference shared by several tests, a seed asked again)."""
    return _cloud(_Trials.of(trials), k, k_max, seed)


@dataclass(frozen=True, eq=False)
class _Trials:
    """Trials as a cache key: equal when their bytes are."""

    arrays: tuple[Points, ...]
    digest: str

    @classmethod
    def of(cls, trials: Sequence[Points]) -> _Trials:
        arrays = tuple(np.ascontiguousarray(t, dtype=np.float64) for t in trials)
        return cls(arrays, content_digest(arrays))

    def __hash__(self) -> int:
        return hash(self.digest)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Trials) and other.digest == self.digest


@functools.lru_cache(maxsize=256)
def _cloud(trials: _Trials, k: int | None, k_max: int, seed: int) -> Cloud:
    # in this process once (the LRU cache); across processes once (the report, a notebook's
    # kernel and compare's figures of one campaign are made by three)
    return stored_cloud(trials.digest, k, k_max, seed, code=cloud_store.CODE_KEY,
                        trials=trials)


@cloud_store.cached("trials")
def stored_cloud(digest: str, k: int | None, k_max: int, seed: int, *, code: str,
                 trials: _Trials) -> Cloud:
    """:func:`_cloud` as :mod:`.cloud_store` keeps it: keyed by the trials' ``digest`` (the
    trials themselves are not hashed again), k, k_max, the seed and the ``code`` it is
    computed by."""
    pooled = np.vstack(trials.arrays)
    if k is not None:
        envelope = performance_envelope(trials.arrays, k, seed)
        return Cloud(envelope, k, (), pooled[envelope.contains(pooled)])
    if len(trials.arrays) == 1:  # R(k) is 1 for every k: k = 1, nothing to cluster
        largest = max(1, min(k_max, len(pooled)))
        envelope = performance_envelope(trials.arrays, 1, seed)
        return Cloud(envelope, 1, (1.0,) * largest, pooled[envelope.contains(pooled)])
    found = retention(trials.arrays, k_max, seed)
    chosen = choose_k(found.curve)
    return Cloud(found.envelopes[chosen - 1], chosen, found.curve,
                 pooled[found.kept[chosen - 1]])


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
    then the smallest delay, then throughput component (a start for :func:`plateau`)."""
    order = np.lexsort((shifts[:, 1], shifts[:, 0], np.hypot(*shifts.T), -counts))
    return shifts[order[0]], int(counts[order[0]])


def _grid(centre: Points, half_width: Points, steps: int) -> Points:
    """A steps x steps grid of translations over centre +- half_width."""
    axes = [np.linspace(c - h, c + h, steps) for c, h in zip(centre, half_width)]
    return np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 2)


@dataclass(frozen=True)
class Translation:
    """The translation of the test cloud (scaled) that :func:`best_translation` reports:
    ``shift``, the centroid of the plateau (the grid translations reaching the most points
    in the overlap), ``count`` that most, and ``extent`` the plateau's size per axis (0: a
    single translation reaches it)."""

    shift: Points
    count: int
    extent: Points


def best_translation(test: Cloud, reference: Cloud) -> Translation:
    """The translation of the test cloud (scaled) with the most points in the overlap.
    Search: candidates none; the differences of the kept points' means, medians and
    midranges; a :data:`COARSE_STEPS` x :data:`COARSE_STEPS` grid over every translation
    that lets the clouds' bounding boxes meet; then :data:`FINE_ROUNDS` finer grids around
    the best so far (the count is a step function of the translation, no gradient, hence
    grids). Then the plateau of that maximum is mapped around it (:func:`plateau`): its
    centroid is the translation reported, not one of its points."""
    mine, theirs = test.kept, reference.kept
    middle = (theirs.max(0) + theirs.min(0) - mine.max(0) - mine.min(0)) / 2
    seeds = np.vstack([np.zeros(2), theirs.mean(0) - mine.mean(0),
                       np.median(theirs, 0) - np.median(mine, 0), middle])
    reach = (np.ptp(theirs, 0) + np.ptp(mine, 0)) / 2
    shifts = np.vstack([seeds, _grid(middle, reach, COARSE_STEPS)])
    counts = overlaps(test, reference, shifts)
    best, count = _best(shifts, counts)
    coarse = step = 2 * reach / (COARSE_STEPS - 1)
    for _ in range(FINE_ROUNDS):
        fine = _grid(best, step, FINE_STEPS)
        shifts = np.vstack([shifts, fine])
        counts = np.concatenate([counts, overlaps(test, reference, fine)])
        best, count = _best(shifts, counts)
        step = step / ((FINE_STEPS - 1) / 2)
    return plateau(lambda grid: overlaps(test, reference, grid), best, count, coarse, step)


def plateau(count_of: CountOf, best: Points, count: int, width: Points, finest: Points
            ) -> Translation:
    """The plateau of the maximum ``count`` reached at ``best``: regular grids of
    :data:`PLATEAU_STEPS` x :data:`PLATEAU_STEPS` translations (``count_of``: grid ->
    counts) around it, first +- ``width``; a grid whose translations at the maximum touch
    its edge is widened (doubled) that way, one where they span fewer than
    :data:`PLATEAU_CELLS` steps of an axis is narrowed to them (not below ``finest``), a
    higher count found restarts the map there. The plateau: the last grid's translations at
    the maximum, each standing for a cell of the grid's step (its extent per axis: their
    span plus one step; 0 for a single translation). Its centroid is unbiased where the
    plateau is symmetric about the true shift; where the plateau is not convex and its
    centroid falls outside, the plateau's translation nearest the centroid is reported."""
    centre, half = np.asarray(best, float), np.maximum(np.asarray(width, float), 1e-12)
    finest = np.maximum(np.asarray(finest, float), 1e-12)
    top: Points = centre[None, :]
    cell = finest  # the step of the grid ``top`` lies on
    for _ in range(PLATEAU_ROUNDS):
        grid = _grid(centre, half, PLATEAU_STEPS)
        counts = count_of(grid)
        if counts.max() > count:  # a higher maximum between the search's grids: map it
            count, top = int(counts.max()), grid[counts == counts.max()]
            centre, cell = top.mean(axis=0), 2 * half / (PLATEAU_STEPS - 1)
            continue
        if not (counts == count).any():  # narrower than a cell: look closer at the best
            half = np.maximum(half / ((PLATEAU_STEPS - 1) / 2), finest)
            continue
        top, cell = grid[counts == count], 2 * half / (PLATEAU_STEPS - 1)
        centre, half, settled = _next_map(top, grid, half, finest)
        if settled:
            break
    return _translation(top, count, count_of, cell, finest)


def _next_map(top: Points, grid: Points, half: Points, finest: Points
              ) -> tuple[Points, Points, bool]:
    """The next map's centre and half-width per axis, and whether this one is final: it
    holds the plateau and resolves its width (or can resolve it no finer)."""
    step = 2 * half / (PLATEAU_STEPS - 1)
    low, high = top.min(axis=0), top.max(axis=0)
    touches = (low <= grid.min(axis=0) + step / 2) | (high >= grid.max(axis=0) - step / 2)
    narrow = (high - low < PLATEAU_CELLS * step) & (half > finest)
    centre = (low + high) / 2
    if touches.any():
        return centre, np.where(touches, 2 * half, half), False
    if narrow.any():
        return centre, np.where(narrow, np.maximum((high - low + step), finest), half), False
    return centre, half, True


def _translation(top: Points, count: int, count_of: CountOf, cell: Points, finest: Points
                 ) -> Translation:
    """The plateau's centroid (or its translation nearest it, when the centroid is not on
    it), its count and extent (the span of its translations plus a ``cell``, where they
    span any). A component far below the finest step is rounding of a symmetric plateau's
    mean: 0 (a cloud against itself has no offset, not 1e-19)."""
    centroid = top.mean(axis=0)
    if len(top) > 1 and int(count_of(centroid[None, :])[0]) < count:
        centroid = top[int(np.argmin(np.hypot(*(top - centroid).T)))]
    centroid = np.where(np.abs(centroid) < 1e-6 * finest, 0.0, centroid)
    span = np.ptp(top, axis=0)
    return Translation(centroid, count, np.where(span > 0, span + cell, 0.0))


@dataclass(frozen=True)
class ConformanceResult:
    """The figures of :func:`conformance`. Units: throughput Mbit/s, delay ms.

    ``conformance``: share of the kept points of both clouds inside both PEs (0..1);
    ``conformance_t``: the same after the best translation of the test cloud;
    ``delta_throughput``, ``delta_delay``: that translation (the centroid of the plateau of
    translations reaching the maximum) negated, test minus reference (positive: the test
    has more throughput / delay; 0 when no translation helps); ``delta_throughput_range``,
    ``delta_delay_range``: the plateau's extent per axis, the uncertainty of the offset (0:
    one translation reaches the maximum); ``*_spread``: the range (max - min) of that
    figure over the k-means seeds :data:`SPREAD_SEEDS` (NaN where a seed has no figure);
    ``delta_mean_throughput``, ``delta_mean_delay``: the mean of all test points minus
    that of all reference points; ``k_test``, ``k_reference``: clusters per trial of each
    PE; ``points_*``: the points of all trials; ``trials_*``: the trials; ``retained_*``:
    the share R of a cloud's points its own PE keeps; ``retention_*``: R(k) for k = 1, 2,
    ... averaged over the clusterings (the curve k was chosen on; empty when k was given);
    ``scale_throughput``, ``scale_delay``: Mbit/s and ms per scaled unit."""

    conformance: float
    conformance_t: float
    delta_throughput: float
    delta_delay: float
    delta_throughput_range: float
    delta_delay_range: float
    conformance_spread: float
    conformance_t_spread: float
    delta_throughput_spread: float
    delta_delay_spread: float
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


def as_trials(points: Any) -> tuple[Points, ...]:
    """A cloud as its trials: one (n, 2) array-like of (delay, throughput), or a sequence of
    them (one per trial). A pandas DataFrame is read by its column names, never by position
    (:func:`_frame_points`). Raises ValueError for another shape, an empty trial, a frame
    whose columns name no delay or no throughput, or a value that is not finite."""
    if _is_frame(points):
        trials: tuple[Points, ...] = (_frame_points(points),)
    elif isinstance(points, (list, tuple)) and points and all(_is_frame(p) for p in points):
        trials = tuple(_frame_points(p) for p in points)
    else:
        trials = _array_trials(points)
    if not trials or any(t.ndim != 2 or t.shape[1] != 2 or not len(t) for t in trials):
        raise ValueError("a cloud is (n, 2) points (delay_ms, throughput_mbps), n >= 1, "
                         "or a sequence of them (one per trial)")
    if not all(np.isfinite(t).all() for t in trials):
        raise ValueError("points must be finite")
    return trials


def _array_trials(points: Any) -> tuple[Points, ...]:
    """Trials of array-likes, by position: (delay, throughput)."""
    try:
        array: Points | None = np.asarray(points, dtype=np.float64)
    except ValueError:  # ragged: trials of different lengths
        array = None
    if array is None:
        return tuple(np.asarray(t, dtype=np.float64) for t in points)
    return (array,) if array.ndim == 2 else tuple(array) if array.ndim == 3 else ()


def _is_frame(value: Any) -> bool:
    """Whether ``value`` is a pandas DataFrame (pandas is not imported to ask)."""
    return type(value).__name__ == "DataFrame" and hasattr(value, "columns")


def _frame_points(frame: Any) -> Points:
    """A frame's (delay, throughput) points by column name (:data:`DELAY_COLUMNS`,
    :data:`THROUGHPUT_COLUMNS`, any case): a frame of ``throughput, delay`` is not read as
    (delay, throughput). ValueError, naming the columns, when a frame has none or several of
    either (``queue_delay_ms_mean`` and ``_p95``: pick one)."""
    names = {str(c).lower(): c for c in frame.columns}
    chosen = []
    for what, known in (("delay", DELAY_COLUMNS), ("throughput", THROUGHPUT_COLUMNS)):
        found = [names[n] for n in known if n in names]
        if len(found) != 1:
            problem = "names no" if not found else f"names several ({found})"
            raise ValueError(
                f"a frame of points is read by column name: its columns {list(frame.columns)} "
                f"{problem} {what} column; expected one of {list(known)}")
        chosen.append(found[0])
    return np.asarray(frame[chosen].to_numpy(dtype=np.float64, na_value=np.nan))


def axis_scale(reference: Points, test: Points) -> Points:
    """Per axis the standard deviation of the reference's points; where that is 0, the
    test's; where both are, 1."""
    scale = reference.std(axis=0)
    other = test.std(axis=0)
    return np.where(scale > 0, scale, np.where(other > 0, other, 1.0))


@dataclass(frozen=True)
class _Figures:
    """One seed's figures on scaled axes: (conformance, Conformance-T), the test's offset
    from the reference (the translation negated) and the plateau's extent."""

    shares: tuple[float, float]
    delta: Points
    extent: Points

    def values(self, units: Points) -> Points:
        """conformance, Conformance-T, Δ-throughput, Δ-delay (data units)."""
        delta = self.delta * units
        return np.array([*self.shares, delta[1], delta[0]])


_NO_FIGURES = _Figures((math.nan, math.nan), np.full(2, math.nan), np.full(2, math.nan))


def _figures(test: Cloud, reference: Cloud) -> _Figures:
    """The figures of two clouds; NaN when a PE keeps none of its points (its trials have
    no region in common: nothing to compare). The translation search is most of a table's
    cost once the clouds are stored: kept in the store too, by what it depends on (each
    PE's hulls and kept points)."""
    if not len(test.kept) or not len(reference.kept):
        return _NO_FIGURES
    return stored_figures(test.content, reference.content, code=cloud_store.CODE_KEY,
                          test=test, reference=reference)


@cloud_store.cached("test", "reference")
def stored_figures(test_key: str, reference_key: str, *, code: str, test: Cloud,
                   reference: Cloud) -> _Figures:
    """:func:`_figures` as :mod:`.cloud_store` keeps it: keyed by each cloud's
    :attr:`Cloud.content` and the ``code`` it is computed by."""
    total = len(test.kept) + len(reference.kept)
    at_zero = int(overlaps(test, reference, np.zeros((1, 2)))[0])
    best = best_translation(test, reference)
    return _Figures((at_zero / total, best.count / total), -best.shift, best.extent)


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


def conformance(test_points: Any, reference_points: Any, *, k: int | None = None,
                k_max: int = K_MAX, seed: int = 0, scale: tuple[float, float] | None = None,
                spread_seeds: Iterable[int] = SPREAD_SEEDS) -> ConformanceResult:
    """Conformance and Conformance-T of the test cloud against the reference cloud (paper
    000 §3; docs/conformance.md). Each cloud: an (n, 2) array-like of (delay_ms,
    throughput_mbps) points, or a sequence of such arrays, one per trial (a point outside
    the envelope of any other trial of its cloud is an outlier and left out); or a pandas
    DataFrame (or a list of them, one per trial) with a delay and a throughput column,
    read by name (:func:`as_trials`).

    ``k``: clusters per trial of both PEs (None: chosen per cloud on R(k) among 1 ..
    ``k_max``, :func:`~.envelope.choose_k`); ``seed``: k-means'; ``scale``: (ms, Mbit/s)
    per scaled unit of (delay, throughput) (None: the reference's standard deviation per
    axis); ``spread_seeds``: the seeds whose range is each ``*_spread`` (empty: NaN, and
    nothing computed for them)."""
    return fit_conformance(test_points, reference_points, k=k, k_max=k_max, seed=seed,
                           scale=scale, spread_seeds=spread_seeds).result


def fit_conformance(test_points: Any, reference_points: Any, *, k: int | None = None,
                    k_max: int = K_MAX, seed: int = 0,
                    scale: tuple[float, float] | None = None,
                    spread_seeds: Iterable[int] = SPREAD_SEEDS) -> Fitted:
    """:func:`conformance` with the clouds it was computed on (to draw their envelopes)."""
    tests, references = as_trials(test_points), as_trials(reference_points)
    pooled_test, pooled_ref = np.vstack(tests), np.vstack(references)
    units = np.asarray(scale, dtype=np.float64) if scale is not None else \
        axis_scale(pooled_ref, pooled_test)
    scaled = ([t / units for t in tests], [t / units for t in references])
    seen: dict[tuple[str, str], _Figures] = {}

    def fitted(at: int) -> tuple[Cloud, Cloud, _Figures]:
        # a seed whose clusterings equal another's has its figures: computed once
        test, reference = cloud(scaled[0], k, k_max, at), cloud(scaled[1], k, k_max, at)
        key = (test.signature, reference.signature)
        if key not in seen:
            seen[key] = _figures(test, reference)
        return test, reference, seen[key]

    test, reference, figures = fitted(seed)
    spread = _spread([fitted(s)[2].values(units) for s in spread_seeds])
    delta, extent = figures.delta * units + 0.0, figures.extent * units + 0.0  # no -0
    mean_delta = pooled_test.mean(axis=0) - pooled_ref.mean(axis=0)
    result = ConformanceResult(
        conformance=figures.shares[0], conformance_t=figures.shares[1],
        delta_throughput=float(delta[1]), delta_delay=float(delta[0]),
        delta_throughput_range=float(extent[1]), delta_delay_range=float(extent[0]),
        conformance_spread=spread[0], conformance_t_spread=spread[1],
        delta_throughput_spread=spread[2], delta_delay_spread=spread[3],
        delta_mean_throughput=float(mean_delta[1]), delta_mean_delay=float(mean_delta[0]),
        k_test=test.k, k_reference=reference.k, points_test=len(pooled_test),
        points_reference=len(pooled_ref), trials_test=len(tests),
        trials_reference=len(references), retained_test=len(test.kept) / len(pooled_test),
        retained_reference=len(reference.kept) / len(pooled_ref),
        retention_test=test.retention, retention_reference=reference.retention,
        scale_throughput=float(units[1]), scale_delay=float(units[0]))
    return Fitted(result, test, reference, units)


def _spread(values: list[Points]) -> list[float]:
    """Per figure its range over the seeds (NaN without seeds, or where one has none)."""
    if not values:
        return [math.nan] * 4
    stacked = np.vstack(values)
    return [float(v) + 0.0 for v in np.ptp(stacked, axis=0)]
