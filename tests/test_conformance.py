"""Conformance and Conformance-T (paper 000 §3; analysis/conformance.py, envelope.py,
flow_conformance.py) on real point clouds: the per-flow series at the bottleneck of the stored
campaigns tests/data/flows-sample (three kernel TCP flows, three repetitions: one trial
each) and tests/data/flows-runner-sample (a QUIC flow against a kernel TCP flow, written by
the runner). Frames DERIVED from them say what they change. Nothing here times anything."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from interop_runner.analysis import conformance, flow_conformance, load_flow_results, load_flows
from interop_runner.analysis.conformance import as_trials
from interop_runner.analysis.envelope import (
    RASTER_MIN_POINTS,
    choose_k,
    hull_of,
    performance_envelope,
    retention,
)
from interop_runner.analysis.flow_conformance import FLOW_CONFORMANCE_COLUMNS, conformance_table

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
    assert choose_k([100, 98, 80, 75]) == 2
    assert choose_k([100, 90, 80, 70]) == 1  # equal drops: the smallest k
    assert choose_k([50, 50, 50]) == 1  # no drop (one trial): 1
    assert choose_k([100]) == 1


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
    envelopes, kept = retention(cubic, k_max=4)
    assert len(envelopes) == 4 and np.array_equal(kept[1], envelope.contains(pooled))


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
    first set): the second by name is tested against the first. Derived from the stored
    sample: its reno flow relabelled as a second cubic flow."""
    flows, results = load_flows(stored["flows-sample"]), load_flow_results(stored["flows-sample"])
    for frame in (flows, results):
        frame.loc[frame["label"] == "tcp/reno", "label"] = "tcp/cubic#2"
    results.loc[results["label"] == "tcp/cubic#2", "congestion_control"] = "cubic"
    table = conformance_table(flows, results)
    assert table["label"].tolist() == ["tcp/cubic#2", "tcp/cubic#2"]
    assert table["reference_label"].tolist() == ["tcp/cubic", "tcp/cubic"]
    assert table["conformance_missing"].isna().all()
    assert table["conformance"].between(0, 1).all() and table["trials_test"].min() >= 2


def test_flow_conformance_of_quic_against_the_kernel(stored: dict[str, Path]) -> None:
    """The runner's sample: quic-go/reno against tcp/reno, quiche/cubic against tcp/cubic,
    one repetition each. The difference of the means is checked against the flows' own
    mean throughput (load_flow_results: the same kept bins)."""
    table = flow_conformance(stored["flows-runner-sample"]).set_index("label")
    assert table.loc["quic-go/reno", "reference_label"] == "tcp/reno"
    assert table.loc["quiche/cubic", "reference_label"] == "tcp/cubic"
    assert table["conformance_missing"].isna().all()
    assert (table["trials_test"] == 1).all() and (table["retained_test"] == 1.0).all()
    assert (table["conformance"] <= table["conformance_t"]).all()
    means = load_flow_results(stored["flows-runner-sample"]).set_index("label")[
        "mean_throughput_mbps"]
    for label, reference in (("quic-go/reno", "tcp/reno"), ("quiche/cubic", "tcp/cubic")):
        assert table.loc[label, "delta_mean_throughput"] == pytest.approx(
            means[label] - means[reference])
    quiche = table.loc["quiche/cubic"]
    assert quiche["conformance"] < 0.1 < 0.5 < quiche["conformance_t"]
    assert quiche["delta_throughput"] > 3  # Mbit/s more than the kernel's CUBIC


def test_flow_conformance_without_a_reference_is_na_with_the_reason(
        stored: dict[str, Path]) -> None:
    """DERIVED: the runner's sample with its TCP flows' congestion control renamed."""
    flows, results = load_flows(stored["flows-runner-sample"]), load_flow_results(
        stored["flows-runner-sample"])
    tcp = results["kind"] == "tcp"
    results.loc[tcp, "congestion_control"] = "vegas"
    table = conformance_table(flows, results)
    assert table["conformance"].isna().all() and table["k_test"].isna().all()
    assert table["reference_label"].isna().all()
    assert table["conformance_missing"].str.startswith(
        "no kernel TCP flow of congestion control").all()


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
    table = conformance_table(*relabelled).set_index("variant")
    assert table["label"].tolist() == ["fake/cubic"] * 2
    assert table["reference_label"].tolist() == ["tcp/cubic"] * 2
    # 20 Mbit/s: repetition 3 has no captures, so two trials
    assert table["trials_test"].tolist() == [3, 2]
    assert table["trials_reference"].tolist() == [3, 2]
    assert table["conformance_missing"].isna().all()
    assert table.loc["rate=10mbit", "points_reference"] == 58


def test_flow_conformance_without_series_or_points_is_na_with_the_reason(
        relabelled: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    flows, results = relabelled
    uncaptured = results["path"].str.contains("rate=20mbit/3/")
    table = conformance_table(flows, results[uncaptured])
    assert table["conformance"].isna().all()
    assert table["conformance_missing"].tolist() == [
        "no series of the test flow: no bottleneck captures (path.record_packets off)"]
    trimmed = flows.assign(trimmed=flows["trimmed"] | (flows["label"] == "fake/cubic"))
    table = conformance_table(trimmed, results)
    assert table["conformance_missing"].str.startswith("too few points").all()
    assert table["points_test"].isna().all()


def test_trials_without_a_common_region_are_na_with_the_reason(
        cubic: list[np.ndarray]) -> None:
    """Three trials of the test flow that lie apart (each moved 10 Mbit/s from the last):
    their envelope, the intersection, is empty, so nothing can be compared (measured: quinn's
    BBR at 5 BDP)."""
    from interop_runner.analysis.flow_conformance import FlowClouds, _flow_row

    apart = [trial + np.array([0.0, 10.0 * i]) for i, trial in enumerate(cubic)]
    result = conformance(apart, cubic, k=1)
    assert np.isnan(result.conformance) and result.retained_test == 0.0
    clouds = FlowClouds("quinn/bbr", "quinn", "bbr", "tcp/bbr", apart, cubic, None)
    row = _flow_row(clouds, {"k": 1})
    assert np.isnan(row["conformance"]) and row["retained_reference"] > 0.5
    assert row["conformance_missing"] == (
        "the test flow's trials share no region: its envelope, their intersection, holds "
        "none of its points (the trials disagree)")
