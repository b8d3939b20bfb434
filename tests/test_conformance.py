"""Conformance and Conformance-T (paper 000 §3; analysis/theories/conformance.py, envelope.py,
flow_conformance.py) on real point clouds: the per-flow series at the bottleneck of the stored
campaigns tests/data/flows-sample (three kernel TCP flows, three repetitions: one trial
each) and tests/data/flows-runner-sample (a QUIC flow against a kernel TCP flow, written by
the runner). Frames DERIVED from them say what they change. Nothing here times anything."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import pytest

from interop_runner.analysis import conformance, flow_conformance, load_flow_results, load_flows
from interop_runner.analysis.theories.conformance import Translation, as_trials, plateau
from interop_runner.analysis.theories.envelope import (
    K_MARGIN,
    RASTER_MIN_POINTS,
    choose_k,
    hull_of,
    performance_envelope,
    retention,
)
from interop_runner.analysis.theories.flow_conformance import (
    FLOW_CONFORMANCE_COLUMNS,
    conformance_table,
)
from interop_runner.analysis.theories.kernel_reference import attempt_contexts, halves

DATA = Path(__file__).parent / "data"
CELL = ["campaign", "flow_set", "variant"]


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Writable copies of both samples (the loaders write their caches below them)."""
    root = tmp_path_factory.mktemp("conformance")
    return {name: Path(shutil.copytree(DATA / name, root / name))
            for name in ("flows-sample", "flows-runner-sample")}


def trials_of(flows: pd.DataFrame, label: str, variant: str) -> list[np.ndarray]:
    """A flow's kept bins per repetition as (queueing delay ms, throughput Mbit/s)."""
    rows = flows[(flows["label"] == label) & (flows["variant"] == variant)
                 & ~flows["trimmed"].fillna(True).astype(bool)
                 & flows["queue_delay_ms_mean"].notna()]
    return [group[["queue_delay_ms_mean", "throughput_mbps"]].to_numpy(float)
            for _, group in rows.groupby("repetition")]


@pytest.fixture(scope="module")
def cubic(stored: dict[str, Path]) -> list[np.ndarray]:
    """tcp/cubic at 10 Mbit/s: three trials of 19-20 points (real)."""
    return trials_of(load_flows(stored["flows-sample"]), "tcp/cubic", "rate=10mbit")


# ------------------------------------------------------------------ the metric, real clouds

def test_the_real_cloud_is_what_the_tests_assume(cubic: list[np.ndarray]) -> None:
    assert [len(t) for t in cubic] == [20, 19, 19]
    pooled = np.vstack(cubic)
    assert 17 < pooled[:, 0].min() < pooled[:, 0].max() < 48  # ms of queueing delay
    assert 0.4 < pooled[:, 1].min() < pooled[:, 1].max() < 7  # Mbit/s


def test_a_cloud_against_itself_conforms_fully(cubic: list[np.ndarray]) -> None:
    result = conformance(cubic, cubic)
    assert result.conformance == 1.0 and result.conformance_t == 1.0
    assert result.delta_throughput == 0.0 and result.delta_delay == 0.0
    assert result.delta_mean_throughput == 0.0 and result.delta_mean_delay == 0.0
    assert result.k_test == result.k_reference
    assert result.points_test == result.points_reference == 58
    assert result.trials_test == 3
    # three trials that differ: their intersection keeps part of the points, not all
    assert 0.3 < result.retained_test == result.retained_reference < 1


def test_a_single_trial_against_itself_conforms_fully(stored: dict[str, Path]) -> None:
    flows = load_flows(stored["flows-runner-sample"])
    quiche = trials_of(flows, "quiche/cubic", "flows=quiche-quiche-cubic+cubic-3MB")
    result = conformance(quiche[0], quiche[0])
    assert (result.conformance, result.conformance_t) == (1.0, 1.0)
    assert (result.delta_throughput, result.delta_delay) == (0.0, 0.0)
    assert result.trials_test == 1 and result.retained_test == 1.0  # nothing is an outlier
    assert result.k_test == 1 and set(result.retention_test) == {1.0}  # R flat: no drop


@pytest.mark.parametrize("shift", [(4.0, 1.5), (-6.0, 0.8), (-3.0, -2.0)],
                         ids=lambda s: f"{s[0]:+}ms{s[1]:+}Mbps")
def test_a_shifted_cloud_keeps_its_shape_and_the_shift_is_recovered(
        cubic: list[np.ndarray], shift: tuple[float, float]) -> None:
    """The test cloud is the real one moved by (delay, throughput): conformance drops,
    Conformance-T finds the move back (test minus reference: the shift itself)."""
    moved = [t + np.asarray(shift) for t in cubic]
    result = conformance(moved, cubic)
    assert result.conformance < 0.5
    assert result.conformance_t >= 0.9
    assert result.delta_delay == pytest.approx(shift[0], rel=0.05)
    assert result.delta_throughput == pytest.approx(shift[1], rel=0.05)
    assert result.delta_mean_delay == pytest.approx(shift[0])
    assert result.delta_mean_throughput == pytest.approx(shift[1])
    reverse = conformance(cubic, moved)
    assert reverse.delta_delay == pytest.approx(-shift[0], rel=0.05)
    assert reverse.delta_throughput == pytest.approx(-shift[1], rel=0.05)


def test_other_kernel_flows_conform_less(stored: dict[str, Path],
                                         cubic: list[np.ndarray]) -> None:
    """tcp/reno shares the bottleneck much like tcp/cubic; tcp/bbr does not (real)."""
    flows = load_flows(stored["flows-sample"])
    reno = conformance(trials_of(flows, "tcp/reno", "rate=10mbit"), cubic)
    bbr = conformance(trials_of(flows, "tcp/bbr", "rate=10mbit"), cubic)
    assert bbr.conformance < 0.1 < 0.5 < reno.conformance < 1
    for result in (reno, bbr):
        assert result.conformance <= result.conformance_t <= 1


def loose(rng: np.random.Generator, clusters: int, n: int = 60) -> np.ndarray:
    """SYNTHETIC: one trial of a loose cloud of two or three clusters of wide spread (4-5 ms
    and 1.2-1.8 Mbit/s, centres 10-20 ms and 4-8 Mbit/s apart)."""
    centres = [(20.0, 8.0), (35.0, 4.0), (10.0, 12.0)][:clusters]
    spreads = [(4.0, 1.5), (5.0, 1.2), (3.0, 1.8)][:clusters]
    return np.vstack([np.column_stack([rng.normal(cx, sx, n // clusters),
                                       rng.normal(cy, sy, n // clusters)])
                      for (cx, cy), (sx, sy) in zip(centres, spreads)])


@pytest.mark.parametrize("clusters", [2, 3])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_loose_cloud_of_clusters_moved_by_a_known_shift_comes_back(
        clusters: int, seed: int) -> None:
    """Five trials of a loose two- or three-cluster cloud, moved: the offset comes back
    within 5 % on each axis, with the k the rule chooses and with one hull per cluster."""
    rng = np.random.default_rng(seed)
    reference = [loose(rng, clusters) for _ in range(5)]
    for shift in ((6.0, 2.0), (-8.0, 1.5), (10.0, -3.0)):
        for k in (None, clusters):
            moved = [t + np.asarray(shift) for t in reference]
            result = conformance(moved, reference, k=k, spread_seeds=())
            assert result.delta_delay == pytest.approx(shift[0], rel=0.05)
            assert result.delta_throughput == pytest.approx(shift[1], rel=0.05)
            assert result.conformance_t == 1.0 > result.conformance
            assert 0 <= result.delta_delay_range < abs(shift[0]) * 0.05
            assert 0 <= result.delta_throughput_range < abs(shift[1]) * 0.05


def disc(centre: tuple[float, float], radius: float) -> Callable[[np.ndarray], np.ndarray]:
    """SYNTHETIC: a count of points in the overlap that is 10 on a disc of translations (a
    plateau) and 3 elsewhere."""
    middle = np.asarray(centre)

    def count_of(grid: np.ndarray) -> np.ndarray:
        return np.where(np.hypot(*(grid - middle).T) <= radius, 10, 3).astype(np.int64)
    return count_of


@pytest.mark.parametrize("start", [(0.0, -1.0), (0.0, 1.0), (-1.0, 0.0), (0.7, 0.7)],
                         ids=["near", "far", "left", "diagonal"])
def test_the_offset_is_the_centroid_of_the_plateau_not_a_point_on_its_edge(
        start: tuple[float, float]) -> None:
    """A plateau (the disc of radius 0.3 around (2, 1)) reached by the search at a point of
    its edge: the point nearest zero, the old tie rule's pick, is 12 % short of the centre.
    The plateau's map reports its centroid (within 1 %) and its extent, the disc's
    diameter (within a grid step)."""
    centre, radius = np.array([2.0, 1.0]), 0.3
    best = centre + radius * np.asarray(start) / np.hypot(*start)
    found = plateau(disc(tuple(centre), radius), best, 10, np.array([0.5, 0.5]),
                    np.array([1e-4, 1e-4]))
    assert isinstance(found, Translation) and found.count == 10
    assert np.hypot(*(found.shift - centre)) < 0.01 * np.hypot(*centre)
    assert found.extent == pytest.approx([2 * radius, 2 * radius], abs=0.05)
    nearest = centre - radius * centre / np.hypot(*centre)
    assert np.hypot(*nearest) < 0.9 * np.hypot(*centre)  # what the old rule reported


def test_a_higher_count_found_while_mapping_the_plateau_restarts_the_map() -> None:
    """The search stopped on a lower plateau (count 10 at (2, 1)); a higher one (12 around
    (2.4, 1)) lies within the first map: it is mapped and reported."""
    low, high = disc((2.0, 1.0), 0.3), disc((2.4, 1.0), 0.1)

    def count_of(grid: np.ndarray) -> np.ndarray:
        return np.maximum(low(grid), high(grid) + 2)
    found = plateau(count_of, np.array([2.0, 1.0]), 10, np.array([0.5, 0.5]),
                    np.array([1e-4, 1e-4]))
    assert found.count == 12 and np.hypot(*(found.shift - [2.4, 1.0])) < 0.01


def test_a_single_translation_at_the_maximum_has_no_extent(cubic: list[np.ndarray]) -> None:
    """A real cloud moved: only the shift itself reaches every point (the kept points on
    the envelope's edges leave no room), so the plateau has no extent."""
    result = conformance([t + [4.0, 1.5] for t in cubic], cubic, spread_seeds=())
    assert (result.delta_delay_range, result.delta_throughput_range) == (0.0, 0.0)


def test_the_spread_over_seeds_is_reported_beside_each_figure(
        cubic: list[np.ndarray]) -> None:
    """A cloud against itself is 1 whatever the seed: no spread. Without seeds to spread
    over (``spread_seeds=()``) the spreads are NaN."""
    result = conformance(cubic, cubic)
    assert (result.conformance_spread, result.conformance_t_spread,
            result.delta_throughput_spread, result.delta_delay_spread) == (0, 0, 0, 0)
    none = conformance(cubic, cubic, spread_seeds=())
    assert np.isnan(none.conformance_t_spread) and none.conformance_t == 1.0


def test_bbr_like_clouds_keep_their_k_and_figures_over_the_seeds() -> None:
    """Two BBR-like clouds of five trials each (independent draws of one behaviour): k = 2
    for seeds 0-9 and Conformance-T within 0.05 over them (one k-means clustering per seed
    moved k and the figures; R(k) averaged over K_DRAWS clusterings, the margin and the
    best of 6 k-means runs per trial do not)."""
    rng = np.random.default_rng(7)
    test, reference = [bbr_like(rng) for _ in range(5)], [bbr_like(rng) for _ in range(5)]
    result = conformance(test, reference)
    assert (result.k_test, result.k_reference) == (2, 2)
    assert result.conformance_t_spread <= 0.05 and result.conformance_spread <= 0.05
    assert 0.5 < result.conformance <= result.conformance_t


def test_the_result_is_deterministic_and_a_dict(cubic: list[np.ndarray]) -> None:
    moved = [t + [3.0, 0.5] for t in cubic]
    first, second = conformance(moved, cubic), conformance(moved, cubic)
    assert first == second
    assert first.as_dict()["conformance_t"] == first.conformance_t
    assert first.as_dict()["retention_test"] == first.retention_test


# ------------------------------------------------------------------ the envelope

def bbr_like(rng: np.random.Generator) -> np.ndarray:
    """One trial of a BBR-like cloud: ProbeBW (most bins: ~9 Mbit/s, ~20 ms queueing) and
    ProbeRTT (a few bins: cwnd of 4 packets, the queue drained)."""
    probe_bw = np.column_stack([rng.normal(20, 2, 100), rng.normal(9, 1, 100)])
    probe_rtt = np.column_stack([rng.normal(3, 0.5, 10), rng.normal(1, 0.3, 10)])
    return np.vstack([probe_bw, probe_rtt])


@pytest.mark.parametrize("seed", range(5))
def test_k_before_the_steepest_drop_is_two_for_bbr_like_clusters(seed: int) -> None:
    """Five trials (the paper's repetitions); R(k) falls fastest from k = 2 to 3: k-means
    then splits ProbeBW differently in each trial and the intersection loses the seams."""
    rng = np.random.default_rng(seed)
    trials = [bbr_like(rng) for _ in range(5)]
    result = conformance(trials, trials)
    assert result.k_test == 2
    drops = -np.diff(result.retention_test)
    assert int(np.argmax(drops)) == 1 and drops[1] > 2 * drops[0]
    assert result.retention_test[0] >= result.retention_test[1] > 0.7


def test_choose_k_takes_the_k_before_the_steepest_drop() -> None:
    assert choose_k([1.0, 0.98, 0.80, 0.75]) == 2
    assert choose_k([1.0, 0.9, 0.8, 0.7]) == 1  # equal drops: the smallest k
    assert choose_k([0.5, 0.5, 0.5]) == 1  # no drop (one trial): 1
    assert choose_k([1.0]) == 1


def test_a_drop_must_stand_out_by_the_margin_to_add_clusters() -> None:
    """The curves of the stored A/A' clouds (tests/data/conformance-variants: picoquic's
    CUBIC, k-means seeds 0, 2 and 5 of one clustering): drops of 0.1-0.17 at k = 1, 3 and
    4, the steepest by 0.01-0.04, so the steepest drop alone flipped k between 1, 3 and 4
    with the seed. Within K_MARGIN of the steepest a drop counts as steep: k = 1, whatever the
    order of the near-equal drops."""
    for curve in ([0.854, 0.749, 0.653, 0.585, 0.444, 0.345, 0.311, 0.259],
                  [0.854, 0.746, 0.669, 0.547, 0.442, 0.418, 0.325, 0.288],
                  [0.768, 0.617, 0.57, 0.507, 0.333, 0.272, 0.268, 0.225]):
        assert choose_k(curve, margin=0.0) != 1  # the old rule: k = 3 or 4
        assert choose_k(curve) == 1 and K_MARGIN == 0.1
    assert choose_k([0.84, 0.78, 0.46, 0.33]) == 2  # a drop that stands out (BBR-like)


def test_a_point_of_one_trial_only_is_outside_the_envelope(cubic: list[np.ndarray]) -> None:
    outlier = np.array([[60.0, 9.0]])  # beyond every real bin of the cloud
    trials = [np.vstack([cubic[0], outlier]), cubic[1], cubic[2]]
    for k in (1, 2):
        assert not performance_envelope(trials, k).contains(outlier)[0]
    assert performance_envelope([trials[0]], 1).contains(outlier)[0]  # alone: kept
    with_outlier = conformance(trials, cubic)
    plain = conformance(cubic, cubic)
    assert with_outlier.points_test == plain.points_test + 1
    kept = round(with_outlier.retained_test * with_outlier.points_test)
    assert kept <= round(plain.retained_test * plain.points_test)


def test_the_envelope_is_the_intersection_of_the_trials(cubic: list[np.ndarray]) -> None:
    envelope = performance_envelope(cubic, 2)
    pooled = np.vstack(cubic)
    each = [performance_envelope([t], 2).contains(pooled) for t in cubic]
    assert np.array_equal(envelope.contains(pooled), each[0] & each[1] & each[2])
    found = retention(cubic, k_max=4)
    assert len(found.envelopes) == 4 and np.array_equal(found.kept[1],
                                                        envelope.contains(pooled))
    assert len(found.curve) == 4 and found.curve[0] == found.kept[0].mean()  # k = 1: exact


def test_the_cached_grid_answers_as_the_hulls_do(cubic: list[np.ndarray]) -> None:
    """Above RASTER_MIN_POINTS points the envelope answers from its grid of cells: the
    same answers as the exact test, also on the hulls' corners and edges."""
    envelope = performance_envelope(cubic, 3)
    rng = np.random.default_rng(0)
    low, high = envelope.box()
    points = [rng.uniform(low - 1, high + 1, (RASTER_MIN_POINTS, 2)), np.vstack(cubic)]
    for hulls in envelope.trials:
        for hull in hulls:
            points += [hull.corners, (hull.corners + np.roll(hull.corners, 1, axis=0)) / 2]
    everything = np.vstack(points)
    assert len(everything) >= RASTER_MIN_POINTS
    inside = envelope.contains(everything)
    assert np.array_equal(inside, envelope.contains_exactly(everything))
    assert 0 < inside.sum() < len(everything)


def test_a_cluster_without_area_is_its_segment_or_point() -> None:
    line = hull_of(np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]))
    assert line.equations is None
    assert line.contains(np.array([[0.5, 0.5], [2.0, 2.0], [1.0, 1.1], [3.0, 3.0]])).tolist() \
        == [True, True, False, False]
    point = hull_of(np.array([[1.0, 2.0], [1.0, 2.0]]))
    assert point.contains(np.array([[1.0, 2.0], [1.0, 2.001]])).tolist() == [True, False]
    triangle = hull_of(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]))
    assert triangle.contains(np.array([[0.2, 0.2], [1.0, 0.0], [0.6, 0.6]])).tolist() \
        == [True, True, False]


def test_a_frame_is_read_by_its_column_names(cubic: list[np.ndarray]) -> None:
    """A frame of (throughput, delay) is not read as (delay, throughput): its columns say
    which is which, the project's names (``delay_ms``, ``throughput_mbps``,
    ``queue_delay_ms_mean`` ...) and the obvious aliases (``delay``, ``throughput``)."""
    swapped = [pd.DataFrame({"throughput_mbps": t[:, 1], "delay_ms": t[:, 0]}) for t in cubic]
    assert all(np.array_equal(a, b) for a, b in zip(as_trials(swapped), cubic))
    plain = pd.DataFrame({"throughput": cubic[0][:, 1], "queue_delay_ms_mean": cubic[0][:, 0],
                          "trial": 1})  # other columns are no matter
    (points,) = as_trials(plain)
    assert np.array_equal(points, cubic[0])
    assert conformance(swapped, cubic, spread_seeds=()) == conformance(cubic, cubic,
                                                                        spread_seeds=())


@pytest.mark.parametrize("columns", [["a", "b"], [0, 1], ["throughput", "rtt_p95"],
                                     ["queue_delay_ms_mean", "queue_delay_ms_p95",
                                      "throughput_mbps"]],
                         ids=["unknown", "positions", "no-delay", "two-delays"])
def test_a_frame_whose_columns_say_neither_is_refused(columns: list[object]) -> None:
    frame = pd.DataFrame(np.ones((4, len(columns))), columns=columns)
    with pytest.raises(ValueError, match="read by column name") as error:
        as_trials(frame)
    assert str(list(frame.columns)) in str(error.value)
    with pytest.raises(ValueError):
        conformance(frame, frame)


def test_clouds_of_another_shape_are_refused() -> None:
    assert len(as_trials([[1.0, 2.0], [3.0, 4.0]])) == 1
    assert [len(t) for t in as_trials([[[1.0, 2.0]], [[3.0, 4.0], [5.0, 6.0]]])] == [1, 2]
    for bad in ([1.0, 2.0], [[1.0, 2.0, 3.0]], [], [[[1.0, 2.0]], []], [[np.nan, 1.0]]):
        with pytest.raises(ValueError):
            as_trials(bad)


# ------------------------------------------------------------------ stored campaigns

def test_flow_conformance_of_a_campaign_without_quic_says_so(stored: dict[str, Path]) -> None:
    table = flow_conformance(stored["flows-sample"])
    assert list(table.columns) == [*CELL, "axis_rate", *FLOW_CONFORMANCE_COLUMNS]
    assert dict(table[list(FLOW_CONFORMANCE_COLUMNS)].dtypes.astype(str)) \
        == FLOW_CONFORMANCE_COLUMNS
    assert table["variant"].tolist() == ["rate=10mbit", "rate=20mbit"]
    # kernel cubic, bbr and reno: no two flows of one congestion control either
    assert (table["conformance_missing"] == "no QUIC flow in the cell").all()
    assert table["conformance"].isna().all() and table["conformance_t"].isna().all()


def test_the_kernel_against_itself_is_the_noise_floor(stored: dict[str, Path]) -> None:
    """Two kernel flows of one congestion control and no QUIC flow (configs/conformance.yml's
    kernel-vs-kernel sets): the row's figures are the noise floor, one half of the runs
    (repetitions 1 and 3) against the other (2), both flows of a run pooled; its same-run
    figures the second label by name against the first. Derived from the stored sample:
    its reno flow relabelled as a second cubic flow."""
    flows, results = load_flows(stored["flows-sample"]), load_flow_results(stored["flows-sample"])
    for frame in (flows, results):
        frame.loc[frame["label"] == "tcp/reno", "label"] = "tcp/cubic#2"
    results.loc[results["label"] == "tcp/cubic#2", "congestion_control"] = "cubic"
    table = conformance_table(flows, results, spread_seeds=())
    assert table["label"].tolist() == ["tcp/cubic#2", "tcp/cubic#2"]
    assert table["reference_label"].tolist() == ["tcp/cubic", "tcp/cubic"]
    assert table["conformance_same_run_missing"].isna().all()
    assert table["conformance_same_run"].between(0, 1).all()
    assert table["trials_test_same_run"].min() >= 2
    ten = table.set_index("variant").loc["rate=10mbit"]
    assert pd.isna(ten["conformance_missing"]) and ten["reference_runs"] == 3
    assert (ten["trials_test"], ten["trials_reference"]) == (1, 2)  # run 2 against 1 and 3
    assert ten["conformance"] == ten["conformance_floor"] and 0 <= ten["conformance"] <= 1
    assert ten["points_reference"] > ten["points_reference_same_run"]  # both flows a run
    twenty = table.set_index("variant").loc["rate=20mbit"]  # repetition 3 has no captures
    assert twenty["reference_runs"] == 2 and twenty["trials_test_floor"] == 1


def test_flow_conformance_of_quic_against_the_kernel(stored: dict[str, Path]) -> None:
    """The runner's sample: quic-go/reno against tcp/reno, quiche/cubic against tcp/cubic,
    one repetition each, no kernel-vs-kernel runs: the figures against those are <NA> and
    say why, the same-run ones are given. The difference of the means is checked against
    the flows' own mean throughput (load_flow_results: the same kept bins)."""
    table = flow_conformance(stored["flows-runner-sample"]).set_index("label")
    assert table.loc["quic-go/reno", "reference_label"] == "tcp/reno"
    assert table.loc["quiche/cubic", "reference_label"] == "tcp/cubic"
    assert table["conformance"].isna().all() and (table["reference_runs"] == 0).all()
    assert table["conformance_missing"].str.startswith(
        "no kernel-vs-kernel runs of ").all()
    assert "a flow set of two {tcp: cubic} flows" in table.loc["quiche/cubic",
                                                                "conformance_missing"]
    assert not table["reference_kernel_mismatch"].any()
    assert table["kernel"].str.startswith("6.18.44-fc-v657 (tcp_rmem=4096 131072").all()
    assert table["conformance_same_run_missing"].isna().all()
    assert (table["trials_test_same_run"] == 1).all()
    assert (table["retained_test_same_run"] == 1.0).all()
    assert (table["conformance_same_run"] <= table["conformance_t_same_run"]).all()
    means = load_flow_results(stored["flows-runner-sample"]).set_index("label")[
        "mean_throughput_mbps"]
    for label, reference in (("quic-go/reno", "tcp/reno"), ("quiche/cubic", "tcp/cubic")):
        assert table.loc[label, "delta_mean_throughput_same_run"] == pytest.approx(
            means[label] - means[reference])
    quiche = table.loc["quiche/cubic"]
    assert quiche["conformance_same_run"] < 0.1 < 0.5 < quiche["conformance_t_same_run"]
    assert quiche["delta_throughput_same_run"] > 3  # Mbit/s more than the kernel's CUBIC
    assert quiche["conformance_t_spread_same_run"] == 0  # one trial: k = 1, no k-means


def test_flow_conformance_without_a_reference_is_na_with_the_reason(
        stored: dict[str, Path]) -> None:
    """DERIVED: the runner's sample with its TCP flows' congestion control renamed."""
    flows, results = load_flows(stored["flows-runner-sample"]), load_flow_results(
        stored["flows-runner-sample"])
    tcp = results["kind"] == "tcp"
    results.loc[tcp, "congestion_control"] = "vegas"
    table = conformance_table(flows, results)
    assert table["conformance_same_run"].isna().all() and table["k_test_same_run"].isna().all()
    assert table["reference_label"].isna().all()
    assert table["conformance_same_run_missing"].str.startswith(
        "no kernel TCP flow of congestion control").all()
    assert table["conformance_missing"].str.startswith("no kernel-vs-kernel runs").all()


@pytest.fixture(scope="module")
def relabelled(stored: dict[str, Path]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """DERIVED from flows-sample: its tcp/bbr flow relabelled ``fake/cubic``, kind quic,
    congestion control cubic, so that it has a reference (tcp/cubic) and three trials."""
    flows, results = load_flows(stored["flows-sample"]), load_flow_results(
        stored["flows-sample"])
    for frame in (flows, results):
        bbr = frame["label"] == "tcp/bbr"
        frame.loc[bbr, ["label", "kind"]] = ["fake/cubic", "quic"]
    results.loc[results["label"] == "fake/cubic", "congestion_control"] = "cubic"
    return flows, results


def test_flow_conformance_takes_a_trial_per_repetition(
        relabelled: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    table = conformance_table(*relabelled, spread_seeds=()).set_index("variant")
    assert table["label"].tolist() == ["fake/cubic"] * 2
    assert table["reference_label"].tolist() == ["tcp/cubic"] * 2
    # 20 Mbit/s: repetition 3 has no captures, so two trials
    assert table["trials_test_same_run"].tolist() == [3, 2]
    assert table["trials_reference_same_run"].tolist() == [3, 2]
    assert table["conformance_same_run_missing"].isna().all()
    assert table.loc["rate=10mbit", "points_reference_same_run"] == 58


def test_flow_conformance_without_series_or_points_is_na_with_the_reason(
        relabelled: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    flows, results = relabelled
    uncaptured = results["path"].str.contains("rate=20mbit/3/")
    table = conformance_table(flows, results[uncaptured])
    assert table["conformance"].isna().all() and table["conformance_same_run"].isna().all()
    reason = "no series of the test flow: no bottleneck captures (path.record_packets off)"
    assert table["conformance_missing"].tolist() == [reason]
    assert table["conformance_same_run_missing"].tolist() == [reason]
    trimmed = flows.assign(trimmed=flows["trimmed"] | (flows["label"] == "fake/cubic"))
    table = conformance_table(trimmed, results, spread_seeds=())
    assert table["conformance_same_run_missing"].str.startswith("too few points").all()
    assert table["points_test_same_run"].isna().all()


def test_trials_without_a_common_region_are_na_with_the_reason(
        cubic: list[np.ndarray]) -> None:
    """Three trials of the test flow that lie apart (each moved 10 Mbit/s from the last):
    their envelope, the intersection, is empty, so nothing can be compared (measured: quinn's
    BBR at 5 BDP)."""
    from interop_runner.analysis.theories.flow_conformance import FlowClouds, _flow_row

    apart = [trial + np.array([0.0, 10.0 * i]) for i, trial in enumerate(cubic)]
    result = conformance(apart, cubic, k=1)
    assert np.isnan(result.conformance) and result.retained_test == 0.0
    clouds = FlowClouds("quinn/bbr", "quinn", "bbr", "tcp/bbr", apart, cubic, None,
                        kernel_test=apart, kernel_reference=cubic, kernel_missing=None)
    row = _flow_row(clouds, None, {"k": 1})
    assert np.isnan(row["conformance"]) and row["retained_reference"] > 0.5
    assert np.isnan(row["conformance_same_run"]) and row["retained_reference_same_run"] > 0.5
    reason = ("the test flow's trials share no region: its envelope, their intersection, "
              "holds none of its points (the trials disagree)")
    assert row["conformance_missing"] == row["conformance_same_run_missing"] == reason


# ------------------------------------------------------------------ the reference (paper 000)

def derived_runs(flows: pd.DataFrame, results: pd.DataFrame, tests: int, runs: int,
                 kernel_of_runs: str = "K") -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """DERIVED from the runner's sample, its quiche/cubic + tcp/cubic attempt: ``tests``
    attempts of it (attempt i leaves bin i + 3 of every flow out, so the trials differ a
    little) and ``runs`` kernel-vs-kernel runs made of it, the quiche flow relabelled a
    second kernel CUBIC flow (flow set ``tcp-cubic+tcp-cubic``), with their contexts: one
    path, the tests' kernel ``K`` and the runs' ``kernel_of_runs``."""
    mine = results["flow_set"] == "quiche-cubic+tcp-cubic"
    (path,) = set(results.loc[mine, "path"])
    series, records, contexts = [], [], []
    for i in range(tests + runs):
        kernel_run = i >= tests
        name = f"{path}#{'k' if kernel_run else 't'}{i}"
        moved = flows[flows["path"] == path].assign(path=name, repetition=i + 1)
        moved = moved[(moved.groupby("flow").cumcount() != i + 3).to_numpy()]
        record = results[results["path"] == path].assign(path=name, repetition=i + 1)
        if kernel_run:
            quic = (moved["kind"] == "quic").to_numpy()
            moved.loc[quic, ["label", "kind"]] = ["tcp/cubic#2", "tcp"]
            quic = (record["kind"] == "quic").to_numpy()
            record.loc[quic, ["label", "kind", "server", "client"]] = [
                "tcp/cubic#2", "tcp", None, None]
            for frame in (moved, record):
                frame["flow_set"], frame["variant"] = "tcp-cubic+tcp-cubic", "flows=cubic+cubic"
        series.append(moved)
        records.append(record)
        contexts.append({"path": name, "path_key": "rate_bps=10000000, rtt_ms=20",
                         "kernel": kernel_of_runs if kernel_run else "K"})
    return (pd.concat(series, ignore_index=True), pd.concat(records, ignore_index=True),
            pd.DataFrame(contexts).astype("string"))


@pytest.fixture(scope="module")
def runner_frames(stored: dict[str, Path]) -> tuple[pd.DataFrame, pd.DataFrame]:
    return load_flows(stored["flows-runner-sample"]), load_flow_results(
        stored["flows-runner-sample"])


def test_the_reference_is_the_kernel_competing_with_itself(
        runner_frames: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    """Three test attempts and four kernel-vs-kernel runs on the same path and kernel: the
    figures are against the runs (one trial each, both flows pooled), the same-run ones
    against the kernel flow of the test's attempts, the noise floor two runs against two;
    the kernel-vs-kernel cell's own figures are that floor."""
    flows, results, contexts = derived_runs(*runner_frames, tests=3, runs=4)
    table = conformance_table(flows, results, contexts=contexts, spread_seeds=())
    quiche = table.set_index("label").loc["quiche/cubic"]
    assert pd.isna(quiche["conformance_missing"]) and quiche["reference_runs"] == 4
    assert (quiche["trials_test"], quiche["trials_reference"]) == (3, 4)
    assert quiche["kernel"] == "K" and not quiche["reference_kernel_mismatch"]
    assert 0 <= quiche["conformance"] <= quiche["conformance_t"] <= 1
    assert quiche["points_reference"] > 1.8 * quiche["points_reference_same_run"]  # 2 flows
    assert quiche["trials_reference_same_run"] == 3  # the tcp/cubic flow of each attempt
    assert quiche["conformance_t"] != quiche["conformance_t_same_run"]
    assert (quiche["trials_test_floor"], quiche["trials_reference_floor"]) == (2, 2)
    kernel = table.set_index("label").loc["tcp/cubic#2"]
    assert kernel["conformance"] == kernel["conformance_floor"] == quiche["conformance_floor"]
    assert kernel["reference_label"] == "tcp/cubic" and kernel["trials_test_same_run"] == 4


def test_a_reference_of_another_kernel_is_refused(
        runner_frames: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    """The kernel-vs-kernel runs ran on another kernel (release or TCP sysctls): no figures
    against them, the column says so; the same-run figures stay."""
    flows, results, contexts = derived_runs(*runner_frames, tests=3, runs=4,
                                            kernel_of_runs="K2")
    table = conformance_table(flows, results, contexts=contexts, spread_seeds=())
    quiche = table.set_index("label").loc["quiche/cubic"]
    assert quiche["reference_kernel_mismatch"] and pd.isna(quiche["conformance"])
    assert "ran on another kernel (K2), not the test's (K)" in quiche["conformance_missing"]
    assert pd.notna(quiche["conformance_same_run"])


def test_fewer_reference_runs_than_test_trials_give_no_figures(
        runner_frames: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    flows, results, contexts = derived_runs(*runner_frames, tests=3, runs=2)
    table = conformance_table(flows, results, contexts=contexts, spread_seeds=())
    quiche = table.set_index("label").loc["quiche/cubic"]
    assert pd.isna(quiche["conformance"]) and quiche["reference_runs"] == 2
    assert quiche["conformance_missing"] == ("2 kernel-vs-kernel run(s) of cubic on this "
                                             "path, fewer than the test's 3 trials")
    assert pd.notna(quiche["conformance_floor"])  # one run against the other


def test_the_kernel_of_an_attempt_is_its_release_and_tcp_sysctls(
        stored: dict[str, Path]) -> None:
    """Real: the runner's sample records both nodes' kernel in run.json and their sysctls
    in campaign.json; the path is the resolved one."""
    results = load_flow_results(stored["flows-runner-sample"])
    contexts = attempt_contexts(results["path"])
    assert len(contexts) == 2 and contexts["kernel"].nunique() == 1
    assert contexts["kernel"].iloc[0] == ("6.18.44-fc-v657 (tcp_rmem=4096 131072 33554432, "
                                          "tcp_wmem=4096 16384 4194304)")
    assert set(contexts["path_key"]) == {"rate_bps=10000000, rtt_ms=20, buffer_bytes=25000"}
    gone = attempt_contexts(["/nonexistent/attempt"])
    assert gone["kernel"].isna().all() and gone["path_key"].isna().all()


def test_the_noise_floor_halves_interleave_the_runs() -> None:
    assert halves([1, 2, 3, 4, 5]) == ([1, 3, 5], [2, 4])
    assert halves([1]) == ([1], [])


CONFIGS = Path(__file__).parent.parent / "configs"


def flow_sets(config: dict[str, object]) -> list[list[dict[str, object]]]:
    """The flow sets a campaign file plans: its ``flows`` and the values of a ``flows``
    sweep axis."""
    sets = [config["flows"]]
    for axis in config.get("sweep", {}).get("axes", []):  # type: ignore[attr-defined]
        if axis["path"] == "flows":
            sets += axis["values"]
    return sets  # type: ignore[return-value]


@pytest.mark.parametrize("name", ["conformance", "conformance-ab", "conformance-history"])
def test_the_conformance_campaigns_plan_the_kernel_against_itself(name: str) -> None:
    """Every congestion control a test flow of a shipped conformance campaign uses has a
    kernel-vs-kernel set (two kernel flows of it) in the same ``flows`` axis: run in the
    same shuffled or paired order as the tests, interleaved with them."""
    from interop_runner.config.yaml12 import read_config_yaml

    config = read_config_yaml(CONFIGS / f"{name}.yml")
    sets = flow_sets(config)
    tested = {f.get("congestion_control") for s in sets for f in s if "server" in f}
    kernel_pairs = {s[0]["tcp"] for s in sets
                    if len(s) == 2 and all(set(f) == {"tcp"} for f in s)
                    and s[0]["tcp"] == s[1]["tcp"]}
    assert tested and tested <= kernel_pairs
    assert any(a["path"] == "flows" for a in config["sweep"]["axes"])
