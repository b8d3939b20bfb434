"""Statistics of the analysis API, checked against values computed by hand (in the comments)."""

import math

import numpy as np
import pandas as pd
import pytest
import scipy.stats

from interop_runner.analysis.theories.stats import (
    axis_number,
    axis_order,
    bootstrap_median_ci,
    cell_stats,
    describe,
    flag_outliers,
    knee,
)


def _frame() -> pd.DataFrame:
    rows = [("a", "ok", 1.0), ("a", "ok", 2.0), ("a", "ok", 3.0), ("a", "ok", 4.0),
            ("a", "ok", 100.0), ("a", "failed", None),
            ("b", "ok", 10.0), ("b", "timeout", None), ("b", "ok", 20.0),
            ("c", "failed", None), ("c", "unsupported", None)]
    frame = pd.DataFrame(rows, columns=["server", "status", "goodput_mbps"])
    frame["goodput_mbps"] = frame["goodput_mbps"].astype("Float64")  # as load_results types it
    frame.index = range(100, 100 + len(frame))  # not 0..n: results must align by label
    return frame


def test_cell_stats_of_one_to_four_and_a_hundred():
    table = cell_stats(_frame(), ["server"]).set_index("server")
    a = table.loc["a"]
    # [1, 2, 3, 4, 100]: median 3; quartiles by linear interpolation at positions 1 and 3
    # -> 2 and 4, IQR 2; mean 110 / 5 = 22; deviations -21 -20 -19 -18 78, squares
    # 441 + 400 + 361 + 324 + 6084 = 7610, / (5 - 1) = 1902.5, sqrt = 43.6176569...
    assert (a["attempts"], a["n"], a["failures"]) == (6, 5, 1)
    assert (a["median"], a["q1"], a["q3"], a["iqr"], a["mean"]) == (3.0, 2.0, 4.0, 2.0, 22.0)
    assert a["std"] == pytest.approx(43.61765697, abs=1e-8)
    assert a["std"] == pytest.approx(math.sqrt(1902.5))
    # Tukey fences 2 - 3 = -1 and 4 + 3 = 7: only 100 is outside
    assert a["outliers"] == 1
    # A resample's median is 1 (or 100) when >= 3 of its 5 draws are 1 (100):
    # P = C(5,3) .2^3 .8^2 + C(5,4) .2^4 .8 + .2^5 = .0512 + .0064 + .00032 = .05792 > .025,
    # so the 2.5th and 97.5th percentiles of the bootstrap medians are exactly 1 and 100.
    assert (a["ci_low"], a["ci_high"]) == (1.0, 100.0)


def test_cell_stats_of_two_values_and_of_a_cell_that_only_failed():
    table = cell_stats(_frame(), ["server"]).set_index("server")
    b = table.loc["b"]
    # [10, 20]: median 15, quartiles 12.5 / 17.5, std sqrt(((-5)^2 + 5^2) / 1) = sqrt(50)
    assert (b["n"], b["failures"], b["median"], b["q1"], b["q3"], b["iqr"]) == \
        (2, 1, 15.0, 12.5, 17.5, 5.0)
    assert b["std"] == pytest.approx(7.0710678118654755)
    # resample medians are 10, 15 or 20 with P 1/4, 1/2, 1/4 -> the interval is [10, 20]
    assert (b["ci_low"], b["ci_high"]) == (10.0, 20.0)
    assert b["outliers"] == 0  # fewer than four values: no quartile-based outliers
    c = table.loc["c"]  # kept and counted, not averaged away
    assert (c["attempts"], c["n"], c["failures"]) == (2, 0, 2)
    assert math.isnan(c["median"]) and math.isnan(c["ci_low"]) and c["outliers"] == 0
    assert list(table.index) == ["a", "b", "c"]


def test_cell_stats_over_several_columns_and_without_status():
    frame = pd.DataFrame({"x": ["p", "p", "q", "q", "q"], "y": [1, 2, 1, 1, 1],
                          "goodput_mbps": [5.0, 7.0, 1.0, 2.0, 6.0]})
    table = cell_stats(frame, ["x", "y"])
    assert list(zip(table["x"], table["y"], table["n"], table["median"])) == [
        ("p", 1, 1, 5.0), ("p", 2, 1, 7.0), ("q", 1, 3, 2.0)]
    assert table["failures"].tolist() == [0, 0, 0]  # no status column: every row counts
    assert math.isnan(table["std"].iloc[0])  # one value has no sample deviation
    # [1, 2, 6]: mean 3, deviations -2 -1 3 -> (4 + 1 + 9) / 2 = 7
    assert table["std"].iloc[2] == pytest.approx(math.sqrt(7))


def test_cell_stats_without_the_value_column_is_empty():
    table = cell_stats(pd.DataFrame({"server": ["a"]}), ["server"])
    assert table.empty and {"n", "failures", "median", "ci_low"} <= set(table.columns)


def test_flag_outliers_flags_and_keeps_rows():
    frame = _frame()
    flags = flag_outliers(frame, ["server"])
    assert flags.index.equals(frame.index)
    assert flags[flags].index.tolist() == [104]  # the 100 Mbit/s attempt, nothing else
    # [10, 11, 12, 13, 14, 30]: q1 at position 1.25 = 11.25, q3 at 3.75 = 13.75, IQR 2.5,
    # fences 7.5 and 17.5. [-20, 10, 11, 12, 13]: q1 10, q3 12, fences 7 and 15.
    frame = pd.DataFrame({"cell": ["u"] * 6 + ["v"] * 5,
                          "goodput_mbps": [10, 11, 12, 13, 14, 30, -20, 10, 11, 12, 13]})
    assert flag_outliers(frame, ["cell"]).tolist() == [False] * 5 + [True] + [True] + \
        [False] * 4
    assert describe([10, 11, 12, 13, 14, 30])["q1"] == 11.25
    assert describe([10, 11, 12, 13, 14, 30])["q3"] == 13.75


def test_bootstrap_ci_is_scipys_percentile_bootstrap_and_reproducible():
    values = np.random.default_rng(7).normal(1000.0, 50.0, size=25)
    ours = bootstrap_median_ci(values, n_boot=3000, seed=11, confidence=0.9)
    ref = scipy.stats.bootstrap((values,), np.median, n_resamples=3000, method="percentile",
                                confidence_level=0.9, random_state=np.random.default_rng(11))
    assert ours == pytest.approx((ref.confidence_interval.low, ref.confidence_interval.high),
                                 abs=1e-9)
    assert bootstrap_median_ci(values, n_boot=3000, seed=11, confidence=0.9) == ours
    low, high = ours
    assert low <= float(np.median(values)) <= high
    narrow = bootstrap_median_ci(values, n_boot=3000, seed=11, confidence=0.5)
    assert low <= narrow[0] <= narrow[1] <= high


def test_bootstrap_ci_of_no_value_and_one_value():
    assert all(math.isnan(v) for v in bootstrap_median_ci([]))
    assert all(math.isnan(v) for v in bootstrap_median_ci([None, float("nan")]))
    assert bootstrap_median_ci([42.0, None]) == (42.0, 42.0)


def _sweep(pair: str, levels: dict[str, list[float]]) -> list[dict[str, object]]:
    return [{"server": pair, "client": pair, "status": "ok", "rmem": level,
             "goodput_mbps": value} for level, values in levels.items() for value in values]


def test_knee_with_its_bootstrap_distribution():
    # medians 50, 80, 96, 100, 100; 95 % of 100 is 95, first reached at 4x.
    levels = {"16x": [100, 100, 100], "1x": [50, 52, 48], "2x": [80, 82, 78],
              "4x": [96, 97, 95], "8x": [100, 99, 101]}  # given out of order on purpose
    rows = _sweep("q", levels) + [{"server": "q", "client": "q", "status": "failed",
                                   "rmem": "16x", "goodput_mbps": None}]
    result = knee(pd.DataFrame(rows), "rmem", by=["server", "client"], n_boot=4000, seed=3)
    row = result.iloc[0]
    assert row["knee_x"] == "4x" and row["best_x"] == "8x" and row["best_median"] == 100.0
    # Replicates: 8x's median is 101 (>= 2 of 3 draws are 101) with P 7/27, else <= 100
    # (16x is always 100), so the bar is 95 or 95.95. 4x's median is >= 96 with P 20/27.
    # P(knee = 4x) = 20/27 + 7/27 * 20/27 = 680/729 = 0.9328; otherwise 8x (always reaches).
    assert row["knee_share"] == pytest.approx(680 / 729, abs=0.02)
    assert set(row["knee_distribution"]) == {"4x", "8x"}
    assert sum(row["knee_distribution"].values()) == pytest.approx(1.0)
    assert (row["knee_low"], row["knee_high"]) == ("4x", "8x")  # 1 - .9328 > 2.5 %
    again = knee(pd.DataFrame(rows), "rmem", by=["server", "client"], n_boot=4000, seed=3)
    assert again.iloc[0]["knee_share"] == row["knee_share"]


def test_knee_per_cell_and_a_flat_curve():
    rows = _sweep("flat", {"1x": [10, 10], "2x": [10, 10]}) + \
        _sweep("steep", {"1x": [1, 1], "2x": [5, 5], "4x": [10, 10]})
    result = knee(pd.DataFrame(rows), "rmem", by=["server"]).set_index("server")
    assert result.loc["flat", "knee_x"] == "1x" and result.loc["flat", "knee_share"] == 1.0
    assert result.loc["steep", "knee_x"] == "4x"
    assert (result.loc["steep", "knee_low"], result.loc["steep", "knee_high"]) == ("4x", "4x")
    # 90 %: 5 < 9, still 4x; 50 %: 5 >= 5, now 2x
    assert knee(pd.DataFrame(rows[4:]), "rmem", threshold=0.5).iloc[0]["knee_x"] == "2x"
    assert knee(pd.DataFrame(rows), "nope").empty


def test_axis_values_as_numbers_and_their_order():
    assert axis_number("16x") == 16.0 and axis_number("4MiB") == 4194304.0
    assert axis_number(3) == 3.0 and axis_number("0.5x") == 0.5
    assert math.isnan(axis_number("nic-local")) and math.isnan(axis_number(True))
    assert axis_order(["16x", "1x", None, "2x", "1x"]) == ["1x", "2x", "16x"]
    assert axis_order(["4MiB", 1048576]) == [1048576, "4MiB"]
    assert axis_order(["udp-only", "all-on", "off"]) == ["all-on", "off", "udp-only"]


def test_path_values_order_as_numbers():
    """A path's swept values: split ratios by the first link's share, BDP multiples, rates
    and times in their units (a sweep of path.split.ratio once plotted 1:1 before 1:9)."""
    assert axis_order(["1:1", "1:9", "3:7", "7:3", "9:1"]) == ["1:9", "3:7", "1:1", "7:3",
                                                               "9:1"]
    assert axis_number("1:3") == 0.25 and math.isnan(axis_number("0:0"))
    assert axis_order(["5bdp", "0.5bdp", "1bdp"]) == ["0.5bdp", "1bdp", "5bdp"]
    assert axis_order(["1s", "50ms", "10ms"]) == ["10ms", "50ms", "1s"]
    assert axis_order(["1gbit", "100mbit", "20mbit"]) == ["20mbit", "100mbit", "1gbit"]
