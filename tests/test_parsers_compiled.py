"""The compiled inner loops (parsers/_speedups.c) give exactly what the Python loops they
replace give, on real tool output, real output whose values moved, and damaged output; and
the parsers give the same results with the extension as without it."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from interop_runner.parsers import compiled
from interop_runner.parsers.ethtool import _READER as ETHTOOL_READER
from interop_runner.parsers.netstat import _READER as NSTAT_READER
from interop_runner.parsers.snapshots import Aligned, AlignedCache
from interop_runner.parsers.sysstat import _pidstat_shares, pidstat_cpu_summary

from .test_parsers_fuzz import ETHTOOL, FUZZ, NSTAT, PIDSTAT, damaged
from .test_parsers_snapshots import moved

RUNNER_PIDSTAT = tuple(t for t in PIDSTAT if "TGID" in t and "# Time" in t)
WINDOWS = [(float("-inf"), float("inf")), (1.7e9, 1.8e9), (0.0, 1.0)]


def test_the_extension_is_built() -> None:
    """pip install -e . (pos_scripts/install.sh) compiles it: without it the loads are slow,
    not wrong, so nothing else would notice."""
    assert compiled.pidstat_shares is not None and compiled.aligned_fits is not None
    assert compiled.aligned_changed_lines is not None


def same(got: Any, want: Any) -> None:
    """Equal values in the same order, NaN equal to NaN (repr), -0.0 unequal to 0.0."""
    assert repr(got) == repr(want)


def pidstat_columns(text: str) -> tuple[int, int, int]:
    header = next(ln.split() for ln in text.split("\n") if ln.startswith("# Time"))
    return len(header) - 1, header.index("TID") - 1, header.index("%CPU") - 1


@FUZZ
@given(st.one_of(st.sampled_from(RUNNER_PIDSTAT), damaged(RUNNER_PIDSTAT)),
       st.sampled_from(WINDOWS))
def test_pidstat_shares_equal_the_python_loop(text: str, window: tuple[float, float]) -> None:
    assert compiled.pidstat_shares is not None
    ncols, tid_i, cpu_i = pidstat_columns(RUNNER_PIDSTAT[0])
    got = compiled.pidstat_shares(text, ncols, tid_i, cpu_i, *window)
    want = _pidstat_shares(text, ncols, tid_i, cpu_i, *window)
    if text.isascii():
        same(got, want)
    else:
        assert got is None  # the caller runs the Python loop


@pytest.mark.parametrize("token", ["95.00", "-0.00", "+5", "5.", ".5", "-.5", "1e5", "1E-2",
                                   "007", "nan", "-inf", "Infinity", "1_0.5", "123456789012345",
                                   "1234567890123456789", "0.1234567890123456789", "1.2.3", "-",
                                   ".", "e", "5e", "0x10", "1__0", "\x00"])
def test_pidstat_shares_read_a_number_as_float_does(token: str) -> None:
    """Each token as the %CPU of a process row and as a time: float()'s value, or the
    row left out where float() refuses it."""
    assert compiled.pidstat_shares is not None
    header = "# Time UID TGID TID %CPU Command"
    for row in (f"1700000000 0 7 - {token} app", f"{token} 0 7 - 1.5 app"):
        text = f"Linux 6.1 (x)\n\n{header}\n{row}\n"
        same(compiled.pidstat_shares(text, 5, 2, 3, float("-inf"), float("inf")),
             _pidstat_shares(text, 5, 2, 3, float("-inf"), float("inf")))


@pytest.mark.parametrize("text", RUNNER_PIDSTAT)
def test_pidstat_summary_is_the_same_without_the_extension(text: str, monkeypatch) -> None:
    for window in WINDOWS:
        with_it = pidstat_cpu_summary(text, *window)
        monkeypatch.setattr(compiled, "pidstat_shares", None)
        same(pidstat_cpu_summary(text, *window), with_it)
        monkeypatch.undo()


def reference_of(reader: Any, before: str) -> Aligned | None:
    """The reference the parser keeps for texts of ``before``'s length (made by reading it
    as a pair with itself, when it is readable)."""
    with contextlib.suppress(ValueError):
        reader.deltas(before, before)
    reader_cache: AlignedCache = reader.aligned
    candidates = reader_cache._by_length.get(len(before))
    return candidates[0] if candidates else None


def array(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("ascii"), np.uint8)


def check_aligned(ref: Aligned, digits: bool, before: str, after: str) -> None:
    """The compiled fits/changed_lines against the numpy methods, on one pair."""
    assert compiled.aligned_fits is not None and compiled.aligned_changed_lines is not None
    usable = len(after) == len(ref.array) and after.isascii()
    fits = compiled.aligned_fits(ref.array, ref.fixed, after, digits)
    assert fits == (ref.fits(array(after)) if usable else None)
    if not fits:
        return
    lines = compiled.aligned_changed_lines(ref.array, ref.fixed, ref.newlines, after, before,
                                           digits)
    if len(before) == len(after) and before.isascii():
        assert lines == ref.changed_lines(array(after), array(before))
    else:
        assert lines is None


@FUZZ
@given(st.one_of(
    st.tuples(st.just("ethtool"), st.one_of(moved(ETHTOOL, "ethtool"),
                                             st.tuples(damaged(ETHTOOL), damaged(ETHTOOL)))),
    st.tuples(st.just("nstat"), st.one_of(moved(NSTAT, "nstat"),
                                           st.tuples(damaged(NSTAT), damaged(NSTAT))))))
def test_aligned_comparisons_equal_numpy(case: tuple[str, tuple[str, str]]) -> None:
    """ethtool's references compare digits, nstat's any value bytes but line ends."""
    tool, (before, after) = case
    reader = ETHTOOL_READER if tool == "ethtool" else NSTAT_READER
    ref = reference_of(reader, before)
    if ref is not None:
        check_aligned(ref, tool == "ethtool", before, after)


def test_aligned_changes_are_the_same_without_the_extension(monkeypatch) -> None:
    """The numpy path of AlignedCache.changes finds the same reference and lines."""
    for before in ETHTOOL:
        after = before.replace(": 0\n", ": 7\n", 3)
        reference_of(ETHTOOL_READER, before)
        with_it = ETHTOOL_READER.aligned.changes(before, after)
        monkeypatch.setattr(compiled, "aligned_fits", None)
        monkeypatch.setattr(compiled, "aligned_changed_lines", None)
        without = ETHTOOL_READER.aligned.changes(before, after)
        monkeypatch.undo()
        assert without[0] is with_it[0] and without[1] == with_it[1]
