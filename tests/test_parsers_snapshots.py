"""The counter parsers' layout paths (parsers/snapshots.py) give exactly what the line-by-line
paths give: the same deltas, the same exception with the same message, on real snapshots
whose values move (the byte-aligned path), of other lengths (the line path) and damaged
(the fuzzer's damage), with the layout caches warm from earlier examples."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from interop_runner.parsers import (
    ParseError,
    counter_delta,
    ethtool_totals_delta,
    nstat_delta,
    parse_mpstat_json,
    parse_nstat,
    parse_sysfs_stats,
)
from interop_runner.parsers.ethtool import _line_totals_delta, ethtool_totals_deltas
from interop_runner.parsers.netstat import _line_delta, nstat_deltas
from interop_runner.parsers.snapshots import Aligned, Deltas, Layout, LayoutCache, NamesMemo
from interop_runner.parsers.sysfs import sysfs_deltas
from interop_runner.parsers.sysstat import mpstat_busy

from .test_parsers_fuzz import ETHTOOL, FUZZ, MPSTAT, NSTAT, SYSFS, damaged

# where each tool prints a counter's value
VALUE = {"ethtool": re.compile(r"(?m)(?<=: )\d+$"),
         "nstat": re.compile(r"(?m)^(?!#)\S+ +(\d+)"),
         "sysfs": re.compile(r"(?m)(?<=:)\d+$"),
         "mpstat": re.compile(r"(?<=\": )\d+\.\d+")}


@st.composite
def moved(draw: st.DrawFn, corpus: tuple[str, ...], tool: str) -> tuple[str, str]:
    """A real snapshot and a later one: some values grown (often keeping their width, so
    the two compare byte by byte), now and then one shrunk or one damaged."""
    before = draw(st.sampled_from(corpus))
    spans = [m.span(m.lastindex or 0) for m in VALUE[tool].finditer(before)]
    after = before
    for start, end in sorted(draw(st.sets(st.sampled_from(spans), max_size=8)) if spans
                             else (), reverse=True):
        old = after[start:end]
        new = draw(st.one_of(
            st.integers(0, 10 ** len(old) - 1).map(lambda v, w=len(old): str(v).zfill(w)),
            st.integers(0, 10 ** 20).map(str)))
        after = after[:start] + new + after[end:]
    if draw(st.integers(0, 4)) == 0:
        after = draw(damaged((after,)))
    return (before, after) if draw(st.booleans()) else (after, before)


def outcome(fn: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    """What a call gives: ("ok", result) or ("raise", exception type, message)."""
    try:
        return "ok", fn(*args)
    except (ParseError, ValueError) as exc:
        return "raise", (type(exc), str(exc))


def same_deltas(new: Callable[[str, str], Deltas], reference: Callable[[str, str], Any],
                before: str, after: str) -> None:
    got, want = outcome(new, before, after), outcome(reference, before, after)
    if got[0] == "ok":
        got = ("ok", got[1].as_dict())
        assert all(v is None or v >= 0 for v in outcome(new, before, after)[1].values)
    assert got == want


@FUZZ
@given(st.one_of(moved(ETHTOOL, "ethtool"), st.tuples(damaged(ETHTOOL), damaged(ETHTOOL))))
def test_ethtool_layout_paths_equal_the_line_path(pair: tuple[str, str]) -> None:
    same_deltas(ethtool_totals_deltas, _line_totals_delta, *pair)
    assert outcome(ethtool_totals_delta, *pair) == outcome(_line_totals_delta, *pair)


@FUZZ
@given(st.one_of(moved(NSTAT, "nstat"), st.tuples(damaged(NSTAT), damaged(NSTAT))))
def test_nstat_layout_paths_equal_the_line_path(pair: tuple[str, str]) -> None:
    same_deltas(nstat_deltas, _line_delta, *pair)
    assert outcome(nstat_delta, *pair) == outcome(_line_delta, *pair)


def _sysfs_reference(before: str, after: str) -> dict[str, int]:
    return counter_delta(parse_sysfs_stats(before), parse_sysfs_stats(after))


@FUZZ
@given(st.one_of(moved(SYSFS, "sysfs"), st.tuples(damaged(SYSFS), damaged(SYSFS))))
def test_sysfs_layout_path_equals_parsing_both(pair: tuple[str, str]) -> None:
    same_deltas(sysfs_deltas, _sysfs_reference, *pair)


def _busy_reference(text: str) -> list[tuple[Any, float, float]]:
    return [(s.cpu, s.timestamp, 100.0 - s.idle) for s in parse_mpstat_json(text)
            if s.idle is not None and s.timestamp is not None]


@FUZZ
@given(st.one_of(moved(MPSTAT, "mpstat").map(lambda pair: pair[0]), damaged(MPSTAT)))
def test_mpstat_busy_equals_the_full_samples(text: str) -> None:
    assert outcome(mpstat_busy, text) == outcome(_busy_reference, text)


def test_moving_counters_take_the_byte_path_and_share_names() -> None:
    """Two attempts of one layout: the second pair compares byte by byte with the first
    one's reference and gets the same names tuple; a counter that went backwards is None."""
    text = next(t for t in ETHTOOL if "tx_ucast_packets" in t)
    bump = VALUE["ethtool"].sub(  # + 1 where the width stays
        lambda m: m[0][:-1] + str(int(m[0][-1]) + 1) if m[0][-1] != "9" else m[0], text)
    first = ethtool_totals_deltas(text, bump)
    second = ethtool_totals_deltas(bump, text)
    assert first.names is second.names
    assert first.complete and not second.complete
    assert first.as_dict() == _line_totals_delta(text, bump)
    assert second.as_dict() == _line_totals_delta(bump, text)
    assert {v for v in second.values} <= {None, 0}


def test_aligned_reference_accepts_value_changes_only() -> None:
    lines = ["NIC statistics:", "     rx_packets: 12", "     [0]: tx_bytes: 345", ""]
    text = "\n".join(lines)
    keys = [None, "     rx_packets", "     [0]: tx_bytes", None]
    layout = Layout(lines, keys)
    ref = Aligned(layout, text, [len(lines[0]) + 1, 17, 20, 1], digits=True)

    def array(t: str) -> np.ndarray:
        return np.frombuffer(t.encode(), np.uint8)

    assert ref.fits(array(text.replace("345", "999")))
    assert not ref.fits(array(text.replace("[0]", "[1]")))  # a key
    assert not ref.fits(array(text.replace("12", "1x")))  # not a digit
    assert not ref.fits(array(text.replace("statistics", "Statistics")))  # no value there
    assert ref.changed_lines(array(text), array(text.replace("345", "346"))) == [2]
    assert ref.changed_lines(array(text), array(text.replace("12\n", "1\n\n"))) is None


def test_layout_cache_reuses_a_layout_whose_values_differ() -> None:
    cache: LayoutCache[str] = LayoutCache(lambda line: line.partition("=")[0] or None)
    first = cache.find(["a=1", "b=2"])
    assert cache.find(["a=5", "b=7"]) is first
    other = cache.find(["a=5", "c=7"])
    assert other is not first and other.keys == ["a", "c"]


def test_names_memo_derives_once_per_tuple() -> None:
    calls: list[tuple[str, ...]] = []
    memo = NamesMemo(lambda names: calls.append(names) or len(names))
    names = ("a", "b")
    assert memo(names) == memo(names) == 2
    assert memo(("a", "b", "c")) == 3
    assert calls == [names, ("a", "b", "c")]


@pytest.mark.parametrize("before,after", [
    ("x: 1\ny: 2\n", "x: 3\ny: 1\n"),  # y went backwards
    ("[0]: x: 1\n[1]: x: 2\n", "[0]: x: 4\n[1]: x: 1\n"),  # a queue sum: 3 - 1
])
def test_ethtool_negative_totals_are_dropped(before: str, after: str) -> None:
    deltas = ethtool_totals_deltas(before, after)
    assert deltas.as_dict() == _line_totals_delta(before, after)
    assert None not in deltas.values or not deltas.complete


def test_nstat_comment_line_changes_are_not_counters() -> None:
    """A comment line ("#kernel") differing between the snapshots is skipped, as by the
    line path, on the byte path too (same length, same layout)."""
    text = next(t for t in NSTAT if t.startswith("#kernel"))
    # a line the full parse does not read (a token after the rate): a fallback would show
    text = text.replace("\n", " x\n", 2).replace(" x\n", "\n", 1)
    head, _, tail = text.partition(" x\n")  # that line stays as it is
    moved = head + " x\n" + VALUE["nstat"].sub(
        lambda m: m[0][:-1] + ("1" if m[0][-1] == "0" else "0"), tail)
    nstat_deltas(text, moved)  # the reference
    other = "#kernex" + moved[len("#kernel"):]
    assert nstat_deltas(text, other).as_dict() == _line_delta(text, other)
    assert nstat_deltas(other, moved).as_dict() == _line_delta(other, moved)
    assert _line_delta(text, other) != counter_delta(parse_nstat(text), parse_nstat(other))


def test_a_forked_child_gets_free_cache_locks() -> None:
    """A lock some thread held when the loader forked would stay held in the child."""
    cache: LayoutCache[str] = LayoutCache(lambda line: line or None)
    cache._lock.acquire()
    try:
        pid = os.fork()
        if pid == 0:  # the child: 0 when the lock is free
            os._exit(0 if cache._lock.acquire(timeout=5) else 1)
        _, status = os.waitpid(pid, 0)
    finally:
        cache._lock.release()
    assert os.waitstatus_to_exitcode(status) == 0
