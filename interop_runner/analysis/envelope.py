"""The performance envelope (PE) of a point cloud (paper 000, §3.2; docs/conformance.md).

A cloud is one (n, 2) array of points per trial, on scaled axes (the caller scales them).
Per trial its points are clustered with k-means and each cluster's convex hull taken; the
PE is the intersection over the trials of each trial's union of hulls: a point is inside
when some hull of every trial holds it. Hulls are closed (a point on the boundary is inside,
within :data:`TOLERANCE`); a cluster without area (fewer than 3 points, or all on a line)
is the segment or point itself, with no area around it.

k is chosen on R(k), the share of all trials' points the PE with k clusters keeps: the k
before R's steepest drop (:func:`choose_k`). With one trial R(k) is 1 for every k (each
point is in its own trial's hulls), so k is 1 and no outlier is removed.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

__all__ = ["Envelope", "Hull", "K_MAX", "TOLERANCE", "choose_k", "clusters", "hull_of",
           "hull_polygons", "performance_envelope", "retention"]

Points = NDArray[np.float64]  # (n, 2)

#: The most clusters tried per trial when k is chosen.
K_MAX = 8
#: Distance (scaled units) within which a point counts as on a hull: hulls are closed and
#: their own vertices must stay inside despite rounding.
TOLERANCE = 1e-9
KMEANS_RUNS = 3  # k-means restarts per clustering; the lowest squared error is kept
KMEANS_ITERATIONS = 20
RASTER_CELLS = 256  # per axis, of the grid that caches an envelope's answer
RASTER_MIN_POINTS = 20_000  # fewer points are tested exactly (the grid costs ~70k tests)


@dataclass(frozen=True)
class Hull:
    """The closed convex hull of one cluster. ``corners``: its vertices in order (Qhull's,
    counter-clockwise), or the two ends of a segment (equal for a single point);
    ``equations``: Qhull's facets (a·x + b <= 0 inside), None without area; ``box``: the
    bounding box (low, high)."""

    corners: Points
    equations: Points | None
    box: Points

    def contains(self, points: Points) -> NDArray[np.bool_]:
        """Which of the (n, 2) points lie in the hull (within :data:`TOLERANCE`)."""
        in_box = ((points >= self.box[0] - TOLERANCE)
                  & (points <= self.box[1] + TOLERANCE)).all(axis=1)
        candidates = np.flatnonzero(in_box)
        if self.equations is None:
            candidates = candidates[_on_segment(points[candidates], self.corners)]
        else:
            for a, b, offset in self.equations:  # facet by facet: drop who is outside
                x, y = points[candidates].T
                candidates = candidates[a * x + b * y + offset <= TOLERANCE]
        inside = np.zeros(len(points), dtype=bool)
        inside[candidates] = True
        return inside

    def edges(self) -> list[tuple[Points, Points]]:
        """The hull's boundary as segments (a segment hull: itself)."""
        return [(self.corners[i - 1], self.corners[i]) for i in range(len(self.corners))]


def _on_segment(points: Points, ends: Points) -> NDArray[np.bool_]:
    """Which points lie on the segment ``ends`` (within :data:`TOLERANCE`)."""
    start, end = ends
    direction = end - start
    length2 = float(direction @ direction)
    along = np.clip((points - start) @ direction / length2, 0, 1) if length2 else 0.0
    nearest = start + np.multiply.outer(along, direction)
    distance: Points = np.hypot(*(points - nearest).T)
    return distance <= TOLERANCE


def hull_of(points: Points) -> Hull:
    """The closed convex hull of a cluster; a segment or point when it has no area."""
    from scipy.spatial import ConvexHull, QhullError

    box = np.vstack([points.min(axis=0), points.max(axis=0)])
    spread = np.linalg.svd(points - points.mean(axis=0), compute_uv=False)
    if len(points) >= 3 and spread[-1] > 1e-9 * spread[0]:
        try:
            hull = ConvexHull(points)
            return Hull(points[hull.vertices], hull.equations, box)
        except QhullError:  # nearly collinear: Qhull finds no area, so neither do we
            pass
    return Hull(_segment(points), None, box)


def _segment(points: Points) -> Points:
    """The two extreme points of collinear points along their line (one point: twice)."""
    if len(points) == 1:
        return np.vstack([points[0], points[0]])
    _, _, axes = np.linalg.svd(points - points.mean(axis=0))
    along = (points - points.mean(axis=0)) @ axes[0]
    return np.vstack([points[int(np.argmin(along))], points[int(np.argmax(along))]])


@dataclass(frozen=True)
class Envelope:
    """A performance envelope: per trial the hulls of its clusters. A point is inside when
    it lies in some hull of every trial (the union per trial, intersected over trials)."""

    trials: tuple[tuple[Hull, ...], ...]

    def contains(self, points: Points) -> NDArray[np.bool_]:
        """Which of the (n, 2) points lie in the envelope. Many points at once are looked up
        in a grid of cells whose answer is the same all over the cell (:class:`_Raster`),
        the others tested exactly: the same answer, faster."""
        if len(points) >= RASTER_MIN_POINTS:
            return self._raster.contains(points, self.contains_exactly)
        return self.contains_exactly(points)

    def contains_exactly(self, points: Points) -> NDArray[np.bool_]:
        """:meth:`contains`, every point tested against the hulls."""
        inside = np.ones(len(points), dtype=bool)
        for hulls in self.trials:
            in_trial = np.zeros(len(points), dtype=bool)
            for hull in hulls:
                open_ = inside & ~in_trial  # only points still in doubt are tested
                in_trial[open_] = hull.contains(points[open_])
            inside &= in_trial
        return inside

    def box(self) -> Points:
        """The bounding box (low, high) the envelope lies in: the intersection of the
        trials' boxes (low > high on some axis: the envelope is empty)."""
        lows = [np.min([h.box[0] for h in hulls], axis=0) for hulls in self.trials]
        highs = [np.max([h.box[1] for h in hulls], axis=0) for hulls in self.trials]
        return np.vstack([np.max(lows, axis=0), np.min(highs, axis=0)])

    @cached_property
    def _raster(self) -> _Raster:
        return _Raster.of(self)


def hull_polygons(envelope: Envelope, scale: Sequence[float] = (1.0, 1.0)
                  ) -> list[list[Points]]:
    """Per trial of the envelope, each hull's corners in order, multiplied per axis by
    ``scale`` (units per scaled unit: the polygons in data units); a hull without area is
    its segment's two ends (one point: twice). For drawing: the PE is where a hull of every
    trial overlaps."""
    units = np.asarray(scale, dtype=np.float64)
    return [[hull.corners * units for hull in hulls] for hulls in envelope.trials]


@dataclass(frozen=True)
class _Raster:
    """An envelope's answer cached on a grid over its box: per cell 1 (inside), 0 (outside)
    or -1 (a hull's edge passes through the cell or next to it: test exactly). A cell no
    edge touches is wholly inside or wholly outside, so its centre's answer is exact."""

    low: Points
    cell: Points
    state: NDArray[np.int8]

    @classmethod
    def of(cls, envelope: Envelope) -> _Raster:
        low, high = envelope.box()
        if (high < low).any():  # empty: every point outside
            return cls(low, np.ones(2), np.zeros((1, 1), dtype=np.int8))
        cell = np.maximum((high - low) / RASTER_CELLS, 1e-12)
        low = low - cell  # a margin of one cell: nothing inside lies on the grid's rim
        shape = (RASTER_CELLS + 2, RASTER_CELLS + 2)
        centres = np.stack(np.meshgrid(*[low[i] + cell[i] * (np.arange(shape[i]) + 0.5)
                                         for i in range(2)], indexing="ij"), axis=-1)
        state = envelope.contains_exactly(centres.reshape(-1, 2)).astype(np.int8)
        state = state.reshape(shape)
        for hulls in envelope.trials:
            for hull in hulls:
                for start, end in hull.edges():
                    _mark_unsure(state, low, cell, start, end)
        return cls(low, cell, state)

    def contains(self, points: Points, exact: Callable[[Points], NDArray[np.bool_]]
                 ) -> NDArray[np.bool_]:
        """The cached answer; points in unsure cells asked of ``exact``."""
        index = np.floor((points - self.low) / self.cell)
        on_grid = ((index >= 0) & (index < self.state.shape)).all(axis=1)
        state = np.zeros(len(points), dtype=np.int8)
        cells = index[on_grid].astype(np.intp)
        state[on_grid] = self.state[cells[:, 0], cells[:, 1]]
        inside: NDArray[np.bool_] = state == 1
        unsure = state == -1
        inside[unsure] = exact(points[unsure])
        return inside


def _mark_unsure(state: NDArray[np.int8], low: Points, cell: Points, start: Points,
                 end: Points) -> None:
    """Mark the cells a segment passes through, and their neighbours, unsure: samples at
    most half a cell apart land in or next to every cell the segment crosses."""
    cells_long = float(np.abs((end - start) / cell).max())
    along = np.linspace(0.0, 1.0, math.ceil(2 * cells_long) + 1)
    index = np.floor((start + np.multiply.outer(along, end - start) - low) / cell)
    index = index.astype(np.intp)
    for dx in (-1, 0, 1):
        for dy in (-1, 0, 1):
            x = np.clip(index[:, 0] + dx, 0, state.shape[0] - 1)
            y = np.clip(index[:, 1] + dy, 0, state.shape[1] - 1)
            state[x, y] = -1


def clusters(points: Points, k: int, seed: int = 0) -> list[Points]:
    """The non-empty clusters of k-means (scipy's kmeans2, k-means++ seeding from a
    generator seeded with ``seed`` and k; the best of :data:`KMEANS_RUNS` runs by squared
    error): the same points always give the same clusters, wherever they lie."""
    from scipy.cluster.vq import kmeans2

    k = min(k, len(np.unique(points, axis=0)))  # k-means++ needs k distinct points
    if k <= 1:
        return [points]
    rng = np.random.default_rng([seed, k])
    best: tuple[float, NDArray[np.int32]] | None = None
    for _ in range(KMEANS_RUNS):
        with warnings.catch_warnings():  # an empty cluster: one hull fewer, nothing to say
            warnings.simplefilter("ignore", UserWarning)
            centroids, labels = kmeans2(points, k, iter=KMEANS_ITERATIONS, minit="++",
                                        rng=rng)
        error = float(((points - centroids[labels]) ** 2).sum())
        if best is None or error < best[0]:
            best = (error, labels)
    assert best is not None
    return [points[best[1] == label] for label in np.unique(best[1])]


def performance_envelope(trials: Sequence[Points], k: int, seed: int = 0) -> Envelope:
    """The PE of ``trials`` ((n, 2) arrays, scaled) with ``k`` clusters per trial."""
    return Envelope(tuple(tuple(hull_of(c) for c in clusters(t, k, seed)) for t in trials))


def choose_k(retained: Sequence[int]) -> int:
    """The number of clusters before the steepest drop of R (``retained[i]``: the points
    the PE with i + 1 clusters keeps; counts, so that equal drops are equal). Ties: the
    smallest k; no drop at all: 1."""
    drops = -np.diff(np.asarray(retained, dtype=np.int64))
    if not drops.size or drops.max() <= 0:
        return 1
    return int(np.argmax(drops)) + 1  # argmax: the first of equal drops


def retention(trials: Sequence[Points], k_max: int = K_MAX, seed: int = 0
              ) -> tuple[list[Envelope], list[NDArray[np.bool_]]]:
    """The PEs with k = 1 .. min(k_max, the smallest trial's points) clusters and, for
    each, which of the trials' points (stacked in order) it keeps; R(k) is their mean."""
    pooled = np.vstack(trials)
    largest = max(1, min(k_max, *(len(t) for t in trials)))
    envelopes = [performance_envelope(trials, k, seed) for k in range(1, largest + 1)]
    return envelopes, [e.contains(pooled) for e in envelopes]
