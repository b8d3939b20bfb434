"""Snapshot layouts: what each line (or token) of a counter snapshot holds, apart from values.

Counter tools (``ethtool -S``, ``nstat -asz``, sysfs statistics) print the same counters in
the same order every time; two snapshots differ only in values, and most values do not move
during an attempt. A parser recognises a snapshot's layout once (:class:`Layout`, with the
parser's ``plan`` for it) and afterwards only looks at what differs:

* :class:`LayoutCache` compares a snapshot's lines with a cached snapshot of the layout (one
  C-level comparison) and classifies only the lines that differ;
* :class:`AlignedCache` goes further for ASCII snapshots of the reference's length: numpy
  compares the bytes, and a snapshot whose bytes differ only where values may change has
  the layout, without splitting the text at all.

Deltas of one layout share one names tuple (:class:`Deltas`), so whatever callers derive
from the names is derived once per layout (:class:`NamesMemo`). Every cache is bounded and
thread-safe (the GIL for reads, a lock for reordering).
"""

from __future__ import annotations

import os
import threading
import weakref
from array import array
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import compress
from operator import ne
from typing import Any, Generic, NamedTuple, TypeVar

import numpy as np

from interop_runner.parsers import compiled

__all__ = ["Aligned", "AlignedCache", "DeltaReader", "Deltas", "Layout", "LayoutCache",
           "NamesMemo", "NotThisLayout", "changed_units"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# The caches' locks, renewed in a forked child: a lock another thread held at the fork
# would stay held there for ever (the loader parses in forked children).
_LOCKED: weakref.WeakSet[LayoutCache[Any] | AlignedCache] = weakref.WeakSet()


def _renew_locks() -> None:
    for cache in list(_LOCKED):
        cache._lock = threading.Lock()


os.register_at_fork(after_in_child=_renew_locks)


class Deltas(NamedTuple):
    """Counter deltas as two parallel sequences: ``names[i]`` moved by ``values[i]``.

    A ``None`` value marks a counter that was dropped (it went backwards); it is not part of
    :meth:`as_dict`. Deltas of snapshots with the same layout share one ``names`` tuple,
    so callers can cache whatever they derive from it.
    """

    names: tuple[str, ...]
    values: Sequence[int | None]
    complete: bool
    """True when no value is ``None``."""
    moved: Sequence[int] | None = None
    """Indices of the values that may be other than 0 (``None``: any may be)."""

    @classmethod
    def of(cls, mapping: dict[str, int]) -> Deltas:
        """The deltas of a ``{name: delta}`` dict (every value present)."""
        return cls(tuple(mapping), list(mapping.values()), True)

    def as_dict(self) -> dict[str, int]:
        """``{name: delta}`` of the counters that were not dropped, in order."""
        return {n: v for n, v in zip(self.names, self.values) if v is not None}


class Layout(Generic[K]):
    """What the units (lines or tokens) of one snapshot text hold, apart from their values.

    Built once from a snapshot (``units`` are kept as the reference); any later snapshot
    whose units differ from the reference only in values has the same layout.
    """

    __slots__ = ("units", "keys", "plan")

    def __init__(self, units: list[str], keys: list[K | None]) -> None:
        self.units = units
        self.keys = keys
        """Per unit: its key (what a parser reads from it besides the value), ``None`` for a
        unit without a counter."""
        self.plan: Any = None
        """Whatever the parser derives from ``keys`` (built once per layout)."""


class NotThisLayout(Exception):
    """Raised while reading a snapshot pair by a layout: ``before`` does not have it (the
    parser then parses both snapshots in full)."""


def changed_units(before: list[str], after: list[str]) -> compress[int]:
    """Indices of the units that differ between two snapshots of equal length."""
    return compress(range(len(after)), map(ne, before, after))


class LayoutCache(Generic[K]):
    """The layouts recently seen by one parser, a few per unit count (for ``counts`` unit
    counts at most)."""

    def __init__(self, classify: Callable[[str], K | None], per_count: int = 4,
                 counts: int = 64) -> None:
        self._classify = classify
        self._per_count = per_count
        self._counts = counts
        self._by_count: dict[int, list[Layout[K]]] = {}
        self._lock = threading.Lock()
        _LOCKED.add(self)

    def find(self, units: list[str]) -> Layout[K]:
        """The layout of ``units``: a cached one they fit, else a new one (then cached)."""
        candidates = self._by_count.get(len(units), [])
        for layout in list(candidates):
            if self._fits(layout, units):
                if layout is not candidates[0]:
                    self._remember(layout)
                return layout
        layout = Layout(units, [self._classify(u) for u in units])
        self._remember(layout)
        return layout

    def find_planned(self, units: list[str], make_plan: Callable[[list[K | None]], Any]
                     ) -> Layout[K]:
        """:meth:`find`, with the layout's ``plan`` made by ``make_plan(keys)`` once."""
        layout = self.find(units)
        if layout.plan is None:
            layout.plan = make_plan(layout.keys)
        return layout

    def _fits(self, layout: Layout[K], units: list[str]) -> bool:
        """True when every unit that differs from the reference has the reference's key."""
        classify, keys = self._classify, layout.keys
        for i in changed_units(layout.units, units):
            if classify(units[i]) != keys[i]:
                return False
        return True

    def _remember(self, layout: Layout[K]) -> None:
        """Put ``layout`` first among those of its unit count (the oldest falls out)."""
        with self._lock:
            count = len(layout.units)
            if count not in self._by_count and len(self._by_count) >= self._counts:
                del self._by_count[next(iter(self._by_count))]  # the count seen first
            candidates = self._by_count.setdefault(count, [])
            if layout in candidates:
                candidates.remove(layout)
            candidates.insert(0, layout)
            del candidates[self._per_count:]


class Aligned:
    """An ASCII snapshot of a layout as bytes: the reference for snapshots of its length.

    A snapshot of the same length whose bytes differ from this one only within values
    (at or after ``offsets[k]`` of line ``k``, never a line end, with ``digits`` only ASCII
    digits) has the same line ends and the same keys.
    """

    __slots__ = ("layout", "array", "fixed", "newlines", "begins", "ends", "digits")

    def __init__(self, layout: Layout[Any], text: str, offsets: list[int],
                 digits: bool) -> None:
        self.layout = layout
        self.array = _ascii_bytes(text)
        self.newlines = np.flatnonzero(self.array == 10)
        begins = np.concatenate(([0], self.newlines + 1)) + np.array(offsets, dtype=np.intp)
        ends = np.append(self.newlines, len(text))
        # compact, and quick to index from Python (a few hundred lines per reference)
        self.begins = array("q", begins.tolist())
        """Per line: where its value begins (beyond its end: no value)."""
        self.ends = array("q", ends.tolist())
        """Per line: where it ends."""
        values = begins < ends  # lines whose value part is not empty
        edges = np.zeros(len(text) + 1, dtype=np.intp)
        edges[begins[values]] = 1  # lines do not overlap: no index twice
        edges[ends[values]] -= 1
        self.fixed = np.cumsum(edges[:-1]) == 0
        """True where a byte may not change: keys, line ends."""
        self.digits = digits

    def _not_values(self, where: np.ndarray, changed: np.ndarray) -> bool:
        """True when a byte that changed (at ``where``, now ``changed``) is not a value's."""
        if self.fixed[where].any():
            return True
        if self.digits:  # uint8 arithmetic wraps: only "0"-"9" stay below 10
            return bool(((changed - 48) > 9).any())
        return bool((changed == 10).any())

    def fits(self, new: np.ndarray) -> bool:
        """True when ``new`` (of this length) has this layout."""
        where = np.flatnonzero(self.array != new)
        return not where.size or not self._not_values(where, new[where])

    def changed_lines(self, new: np.ndarray, old: np.ndarray) -> list[int] | None:
        """The lines in which ``old`` differs from ``new`` (which fits), ``None`` when it
        differs in more than values."""
        where = np.flatnonzero(new != old)
        if not where.size:
            return []
        if self._not_values(where, old[where]):
            return None
        return list(dict.fromkeys(np.searchsorted(self.newlines, where).tolist()))

    def fits_text(self, new: str) -> bool:
        """:meth:`fits` on an ASCII text of this length (with the compiled loop if built)."""
        if compiled.aligned_fits is not None:
            return bool(compiled.aligned_fits(self.array, self.fixed, new, self.digits))
        return self.fits(_ascii_bytes(new))

    def changed_lines_text(self, new: str, old: str) -> list[int] | None:
        """:meth:`changed_lines` on texts (``new`` fits); ``None`` also when ``old`` is not
        ASCII of the same length."""
        if compiled.aligned_changed_lines is not None:
            return compiled.aligned_changed_lines(self.array, self.fixed, self.newlines, new,
                                                  old, self.digits)
        if len(old) != len(new) or not old.isascii():
            return None
        return self.changed_lines(_ascii_bytes(new), _ascii_bytes(old))


def _ascii_bytes(text: str) -> np.ndarray:
    """The bytes of an ASCII text, as an array."""
    return np.frombuffer(text.encode("ascii"), np.uint8)


class AlignedCache:
    """References (:class:`Aligned`) of one parser's layouts, a few per text length (for
    ``lengths`` lengths at most)."""

    def __init__(self, digits: bool, per_length: int = 2, lengths: int = 128) -> None:
        self.digits = digits
        self._per_length = per_length
        self._lengths = lengths
        self._by_length: dict[int, list[Aligned]] = {}
        self._lock = threading.Lock()
        _LOCKED.add(self)

    def changes(self, before: str, after: str) -> tuple[Aligned | None, list[int] | None]:
        """The reference ``after`` fits (``None``: none cached, or not ASCII), and the lines
        in which ``before`` differs from it when only in values (else ``None``)."""
        candidates = self._by_length.get(len(after))
        if not candidates or not after.isascii():
            return None, None
        for ref in list(candidates):
            if ref.fits_text(after):
                if ref is not candidates[0]:
                    self._remember(ref)
                return ref, ref.changed_lines_text(after, before)
        return None, None

    def add(self, layout: Layout[K], text: str, lines: list[str],
            value_offset: Callable[[K | None, str], int]) -> None:
        """Make ``text`` (split into ``lines``, one unit each) a reference of ``layout`` when
        it is ASCII, the value of line ``k`` beginning at ``value_offset(key, line)``."""
        if text.isascii():
            offsets = [value_offset(k, line) for k, line in zip(layout.keys, lines)]
            self._remember(Aligned(layout, text, offsets, self.digits))

    def _remember(self, ref: Aligned) -> None:
        with self._lock:
            if len(ref.array) not in self._by_length and len(self._by_length) >= self._lengths:
                del self._by_length[next(iter(self._by_length))]  # the length seen first
            candidates = self._by_length.setdefault(len(ref.array), [])
            if ref in candidates:
                candidates.remove(ref)
            candidates.insert(0, ref)
            del candidates[self._per_length:]


DiffsOfLines = Callable[[list[K | None], list[str], list[str]], Iterator[tuple[int, int]]]


@dataclass(frozen=True)
class DeltaReader(Generic[K]):
    """How one tool's snapshot pairs become deltas through their layouts; the parser gives
    what is its own: how a line is keyed and planned, how a changed line is read."""

    layouts: LayoutCache[K]
    aligned: AlignedCache
    plan: Callable[[list[K | None]], Any]
    """A layout's plan from its keys (with ``usable``: False sends pairs to ``by_lines``)."""
    value_offset: Callable[[K | None, str], int]
    """Where a line's value begins (beyond its end: the line may not change)."""
    aligned_diffs: Callable[[Aligned, list[int], str, str], Iterator[tuple[int, int]]]
    """(line, change) of the given changed lines of a pair that compares byte by byte."""
    line_diffs: DiffsOfLines[K]
    """(line, change) of the changed lines, checking them (raises NotThisLayout)."""
    combine: Callable[[Any, Iterable[tuple[int, int]], str, str], Deltas]
    """The deltas of a usable plan from the changes (and the pair, to fall back to)."""
    by_lines: Callable[[str, str], dict[str, int]]
    """The line-by-line path, for layouts whose plan is not usable."""
    in_full: Callable[[str, str], dict[str, int]]
    """Both snapshots parsed in full, when their lines do not pair up."""
    pairs_up: Callable[[str, str], bool] = lambda before, after: True
    """Whether the lines of two snapshots with as many lines may be paired at all."""

    def deltas(self, before: str, after: str) -> Deltas:
        """The deltas of a pair: by bytes when ``after`` has a cached reference's length
        and layout, else by lines (a new reference is kept for its length)."""
        ref, lines = self.aligned.changes(before, after)
        if ref is not None and lines is not None:
            return self.combine(ref.layout.plan, self.aligned_diffs(ref, lines, before, after),
                                before, after)
        b_lines, a_lines = before.split("\n"), after.split("\n")
        if len(b_lines) != len(a_lines) or not self.pairs_up(before, after):
            return Deltas.of(self.in_full(before, after))
        layout = self.layouts.find_planned(a_lines, self.plan)
        if not layout.plan.usable:
            return Deltas.of(self.by_lines(before, after))
        if ref is None:  # a new reference for texts of this length
            self.aligned.add(layout, after, a_lines, self.value_offset)
        return self.combine(layout.plan, self.line_diffs(layout.keys, b_lines, a_lines),
                            before, after)


class NamesMemo(Generic[V]):
    """What ``derive`` makes of a names tuple, remembered per tuple object: the
    :class:`Deltas` of one layout share their names tuple, so it is derived once per layout.
    Tuples shorter than ``min_len`` are derived every time (they are not a layout's)."""

    def __init__(self, derive: Callable[[tuple[str, ...]], V], min_len: int = 0,
                 limit: int = 1024) -> None:
        self._derive = derive
        self._min_len = min_len
        self._limit = limit
        self._memo: dict[int, tuple[tuple[str, ...], V]] = {}

    def __call__(self, names: tuple[str, ...]) -> V:
        """``derive(names)``, from the memo when this tuple was seen before."""
        hit = self._memo.get(id(names))
        if hit is not None and hit[0] is names:
            return hit[1]
        value = self._derive(names)
        if len(names) >= self._min_len:
            if len(self._memo) >= self._limit:
                self._memo.clear()
            self._memo[id(names)] = (names, value)  # holding names keeps its id theirs
        return value
