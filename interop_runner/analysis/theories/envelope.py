"""The performance envelope (PE) of a point cloud (paper 000, §3.2; docs/conformance.md).

A cloud is one (n, 2) array of points per trial, on scaled axes (the caller scales them).
Per trial its points are clustered with k-means and each cluster's convex hull taken; the
PE is the intersection over the trials of each trial's union of hulls: a point is inside
when some hull of every trial holds it. Hulls are closed (a point on the boundary is inside,
within :data:`TOLERANCE`); a cluster without area (fewer than 3 points, or all on a line)
is the segment or point itself, with no area around it.

k is chosen on R(k), the share of all trials' points the PE with k clusters keeps, averaged
over :data:`K_DRAWS` independent clusterings of every trial (:func:`retention`): the k before
R's steepest drop, a drop within :data:`K_MARGIN` of the steepest counting as steep and the
smallest such k winning (:func:`choose_k`). One clustering's R(k) moves with the k-means
seed by more than the drops of a cloud without natural clusters differ, so the steepest
drop of one clustering flipped k between identical builds; the mean and the margin do not
(docs/conformance.md, "Choice of k"). The PE made with k is, per trial, the clustering of
the lowest squared error among all draws. With one trial R(k) is 1 for every k (each point
is in its own trial's hulls), so k is 1 and no outlier is removed.
"""

from __future__ import annotations

import hashlib
import math
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Hashable, Sequence, TypeVar

import numpy as np
from numpy.typing import NDArray

__all__ = ["Envelope", "Hull", "K_DRAWS", "K_MARGIN", "K_MAX", "Retention", "TOLERANCE",
           "choose_k", "clusters", "content_digest", "hull_of", "hull_polygons",
           "performance_envelope", "retention"]

Points = NDArray[np.float64]  # (n, 2)

#: The most clusters tried per trial when k is chosen.
K_MAX = 8
#: Distance (scaled units) within which a point counts as on a hull: hulls are closed and
#: their own vertices must stay inside despite rounding.
TOLERANCE = 1e-9
KMEANS_RUNS = 2  # k-means restarts per clustering; the lowest squared error is kept
KMEANS_ITERATIONS = 20
#: Independent clusterings (each the best of KMEANS_RUNS restarts) of every trial per k:
#: R(k) is their mean, the PE takes each trial's best of all of them (6 k-means++ runs).
K_DRAWS = 3
#: Drops of R(k) within this share of the steepest are as steep: the smallest such k wins
#: (a drop must stand out by 10 points of R to add clusters).
K_MARGIN = 0.1
RASTER_CELLS = 256  # per axis, of the grid that caches an envelope's answer
RASTER_MIN_POINTS = 20_000  # fewer points are tested exactly (the grid costs ~70k tests)
HULL_CACHE = 8192  # hulls remembered by their cluster's points (draws, k, seeds share them)
KEPT_CACHE = 1024  # envelopes' answers on their own trials' points remembered (R(k), kept)

_T = TypeVar("_T")


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
        else:  # inside every facet's half-plane, all facets in one product
            sides = points[candidates] @ self.equations[:, :2].T + self.equations[:, 2]
            candidates = candidates[(sides <= TOLERANCE).all(axis=1)]
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


@dataclass(frozen=True)
class _Clustering:
    """One k-means clustering of a trial: its squared error and each point's cluster."""

    error: float
    labels: NDArray[np.int32]

    def clusters(self, points: Points) -> list[Points]:
        """The non-empty clusters of ``points``, in label order."""
        return [points[self.labels == label] for label in np.unique(self.labels)]


def _kmeans(points: Points, k: int, rng: np.random.Generator) -> _Clustering:
    """The best of :data:`KMEANS_RUNS` runs of scipy's kmeans2 (k-means++ seeding) by
    squared error."""
    from scipy.cluster.vq import kmeans2

    best: _Clustering | None = None
    for _ in range(KMEANS_RUNS):
        with warnings.catch_warnings():  # an empty cluster: one hull fewer, nothing to say
            warnings.simplefilter("ignore", UserWarning)
            centroids, labels = kmeans2(points, k, iter=KMEANS_ITERATIONS, minit="++",
                                        rng=rng, check_finite=False)  # checked: as_trials
        error = float(((points - centroids[labels]) ** 2).sum())
        if best is None or error < best.error:
            best = _Clustering(error, labels)
    assert best is not None
    return best


def _draws(points: Points, k: int, seed: int, draws: int) -> list[_Clustering]:
    """``draws`` independent clusterings of ``points`` into k clusters (:func:`_kmeans`, a
    generator seeded with ``seed``, k and the draw): the same points always give the same
    clusters, wherever they lie. k is capped at the distinct points (k-means++ needs k of
    them); k = 1 is one clustering, the points themselves."""
    k = min(k, len(np.unique(points, axis=0)))
    if k <= 1:  # nothing random: one draw
        return [_Clustering(0.0, np.zeros(len(points), dtype=np.int32))]
    return [_kmeans(points, k, np.random.default_rng([seed, k, draw]))
            for draw in range(draws)]


def clusters(points: Points, k: int, seed: int = 0) -> list[Points]:
    """The clusters of the PE: of the :data:`K_DRAWS` clusterings of :func:`_draws` (each
    the best of :data:`KMEANS_RUNS` k-means runs), the one of the lowest squared error."""
    best = min(_draws(points, k, seed, K_DRAWS), key=lambda c: c.error)
    return best.clusters(points)


def performance_envelope(trials: Sequence[Points], k: int, seed: int = 0) -> Envelope:
    """The PE of ``trials`` ((n, 2) arrays, scaled) with ``k`` clusters per trial."""
    return Envelope(tuple(tuple(_hull(c) for c in clusters(t, k, seed)) for t in trials))


def choose_k(retention_curve: Sequence[float], margin: float = K_MARGIN) -> int:
    """The number of clusters before the steepest drop of R (``retention_curve[i]``: the
    share of the points the PE with i + 1 clusters keeps), drops within ``margin`` of the
    steepest counting as steep: the smallest such k. No drop at all: 1."""
    drops = -np.diff(np.asarray(retention_curve, dtype=np.float64))
    if not drops.size or drops.max() <= 0:
        return 1
    # a drop as steep as the steepest up to the margin (and rounding): the first of them
    return int(np.flatnonzero(drops >= drops.max() - margin - 1e-12)[0]) + 1


@dataclass(frozen=True)
class Retention:
    """What :func:`retention` computed, per k = 1, 2, ...: ``envelopes``, the PE (each
    trial's clustering of the lowest squared error among the draws); ``kept``, which of the
    trials' points (stacked in order) it keeps; ``curve``, R(k): the share of the points the
    PE of one draw keeps, averaged over the draws (what k is chosen on)."""

    envelopes: list[Envelope]
    kept: list[NDArray[np.bool_]]
    curve: tuple[float, ...]


def retention(trials: Sequence[Points], k_max: int = K_MAX, seed: int = 0,
              draws: int = K_DRAWS) -> Retention:
    """The PEs with k = 1 .. min(k_max, the smallest trial's points) clusters, which points
    each keeps and R(k) averaged over ``draws`` clusterings (:class:`Retention`)."""
    pooled = np.vstack(trials)
    content = content_digest(trials)
    largest = max(1, min(k_max, *(len(t) for t in trials)))
    envelopes, kept, curve = [], [], []
    for k in range(1, largest + 1):
        per_trial = [_draws(t, k, seed, draws) for t in trials]
        shares = [_kept(trials, pooled, content, [d[i % len(d)] for d in per_trial]).mean()
                  for i in range(max(len(d) for d in per_trial))]
        chosen = [min(d, key=lambda c: c.error) for d in per_trial]
        envelopes.append(_envelope(trials, chosen))
        kept.append(_kept(trials, pooled, content, chosen).copy())  # the caller's own
        curve.append(float(np.mean(shares)))
    return Retention(envelopes, kept, tuple(curve))


def _envelope(trials: Sequence[Points], chosen: Sequence[_Clustering]) -> Envelope:
    """The envelope of one clustering per trial."""
    return Envelope(tuple(tuple(_hull(c) for c in clustering.clusters(t))
                          for t, clustering in zip(trials, chosen)))


_CACHE_LOCK = threading.Lock()
_HULLS: OrderedDict[Hashable, Hull] = OrderedDict()
_KEPT: OrderedDict[Hashable, NDArray[np.bool_]] = OrderedDict()


def _remembered(cache: OrderedDict[Hashable, _T], size: int, key: Hashable,
                compute: Callable[[], _T]) -> _T:
    """``compute()``, or what it returned for ``key`` before (the last ``size`` keys)."""
    with _CACHE_LOCK:
        if key in cache:
            cache.move_to_end(key)
            return cache[key]
    value = compute()  # outside the lock: a race computes the same value twice
    with _CACHE_LOCK:
        cache[key] = value
        if len(cache) > size:
            cache.popitem(last=False)
    return value


def _hull(points: Points) -> Hull:
    """:func:`hull_of` ``points``, computed once per content: a cluster found again (by
    another draw, k or seed) has the same points in the same order, so the same hull."""
    key = (points.dtype.str, points.shape, points.tobytes())
    return _remembered(_HULLS, HULL_CACHE, key, lambda: hull_of(points))


def content_digest(trials: Sequence[Points]) -> str:
    """The trials' points as a key (SHA-256 hex of their dtypes, shapes and bytes): equal
    trials, equal key, wherever they lie in memory."""
    digest = hashlib.sha256()
    for t in trials:
        digest.update(f"{t.dtype.str}{t.shape}".encode() + np.ascontiguousarray(t).tobytes())
    return digest.hexdigest()


def _kept(trials: Sequence[Points], pooled: Points, content: Hashable,
          chosen: Sequence[_Clustering]) -> NDArray[np.bool_]:
    """Which of the ``pooled`` trials' points the envelope of ``chosen`` keeps, computed
    once per clustering: draws (and seeds) often find the same labels. Keyed by the labels
    as numbered, not by the partition: the hulls are tried in label order and a point's
    test against a hull may round differently in another batch of points, so only the same
    order is certain to give the same answer. Read-only: shared by every caller."""
    key = (content, tuple(c.labels.dtype.str.encode() + c.labels.tobytes() for c in chosen))

    def compute() -> NDArray[np.bool_]:
        inside = _envelope(trials, chosen).contains(pooled)
        inside.flags.writeable = False
        return inside
    return _remembered(_KEPT, KEPT_CACHE, key, compute)
