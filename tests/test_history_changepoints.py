"""Change points of history series (interop_runner/analysis/history/changepoints.py), on
series built from real attempt values: the 10 lsquic<->lsquic goodputs (8 GiB, bare-metal
10G hosts) of the QIR 10G fixture in tests/data/qir10g, resampled per campaign, each campaign
scaled by its own factor (campaigns scatter more than the attempts within one)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from interop_runner.analysis import load_results
from interop_runner.analysis.ab.stats import mann_whitney_p
from interop_runner.analysis.history.changepoints import (
    ChangePointSettings,
    Point,
    candidates,
    change_points,
    hierarchical_ci,
    series_noise,
    split_p,
)

QIR10G = Path(__file__).parent / "data" / "qir10g"
CAMPAIGN_NOISE = 0.03  # between-campaign scatter (log sd); the real attempts vary ~1-3 %


@pytest.fixture(scope="module")
def real_values() -> np.ndarray:
    frame = load_results(QIR10G, cache=False)
    ok = frame[(frame["server"] == "lsquic") & (frame["client"] == "lsquic")
               & (frame["status"] == "ok")]
    values = ok["goodput_mbps"].to_numpy(dtype=float)
    assert len(values) == 10 and 2900 < np.median(values) < 3300
    return values


def make_series(values: np.ndarray, rng: np.random.Generator, n_campaigns: int, *,
                attempts: int = 8, step_at: int | None = None, factor: float = 1.0,
                noise: float = CAMPAIGN_NOISE) -> list[Point]:
    """Campaigns of resampled real attempts; from ``step_at`` on scaled by ``factor`` and
    under a new version."""
    points = []
    for i in range(n_campaigns):
        level = np.exp(rng.normal(0.0, noise))
        stepped = step_at is not None and i >= step_at
        drawn = rng.choice(values, attempts) * level * (factor if stepped else 1.0)
        version = "v2" if stepped else "v1"
        points.append(Point(f"c{i:02d}", f"2026-10-{i + 1:02d}T00:00:00+00:00",
                            tuple(float(v) for v in drawn), version, version))
    return points


def test_a_25_percent_drop_is_one_change_point_at_k_with_the_truth_in_its_ci(
        real_values: np.ndarray) -> None:
    rng = np.random.default_rng(19)
    series = make_series(real_values, rng, 14, step_at=6, factor=0.75)
    found = change_points(series)
    assert len(found) == 1
    change = found[0]
    assert change.index == 6 and change.campaign == "c06"
    assert (change.versions_before, change.versions_after) == ("v1", "v2")
    assert (change.n_before, change.n_after) == (6, 8)
    assert change.ci_low <= -0.25 <= change.ci_high
    assert -0.30 < change.rel_change < -0.20
    assert change.verdict == "slower" and change.regression and change.significant
    assert change.p_value < 0.01
    assert change.median_after / change.median_before - 1 == pytest.approx(change.rel_change)


@pytest.mark.parametrize("k", [3, 9])
def test_the_step_is_found_near_either_end(real_values: np.ndarray, k: int) -> None:
    rng = np.random.default_rng(k)
    found = change_points(make_series(real_values, rng, 12, step_at=k, factor=0.75))
    assert [(c.index, c.regression) for c in found] == [(k, True)]
    assert found[0].ci_low <= -0.25 <= found[0].ci_high


def test_aa_series_false_alarm_rate_is_at_most_5_percent(real_values: np.ndarray) -> None:
    """200 series of 12-24 campaigns, no change at all: at most 10 with a change point (the
    permutation gate holds the rate near 2.5 % here; 1,200 series: 2.3-2.7 %)."""
    rng = np.random.default_rng(2026)
    alarms = [bool(change_points(make_series(real_values, rng, int(rng.integers(12, 25)),
                                             attempts=int(rng.integers(5, 11)))))
              for _ in range(200)]
    assert sum(alarms) <= 10


def test_attempt_level_tests_would_raise_false_alarms(real_values: np.ndarray) -> None:
    """Why the test is on campaigns: with campaigns scattering more than attempts, a
    Mann-Whitney test on the attempts of the two halves of an A/A series is 'significant'
    far more often than 5 %, the campaign-level procedure is not."""
    rng = np.random.default_rng(7)
    naive = ours = 0
    for _ in range(400):
        series = make_series(real_values, rng, 12, attempts=10)
        first = [v for p in series[:6] for v in p.values]
        second = [v for p in series[6:] for v in p.values]
        naive += mann_whitney_p(first, second) < 0.05
        ours += bool(change_points(series))
    assert naive >= 120 and ours <= 20  # > 30 % against <= 5 %


def test_a_cpu_cost_increase_is_a_regression(real_values: np.ndarray) -> None:
    rng = np.random.default_rng(5)
    cost = [Point(p.campaign, p.time, tuple(8000.0 / v for v in p.values), p.server_version,
                  p.client_version)
            for p in make_series(real_values, rng, 12, step_at=6, factor=0.75)]
    found = change_points(cost, metric="server_cpu_s_per_gib")
    assert len(found) == 1 and found[0].index == 6
    assert found[0].rel_change > 0.25 and found[0].regression and found[0].verdict == "costlier"


def test_an_improvement_is_no_regression(real_values: np.ndarray) -> None:
    rng = np.random.default_rng(6)
    found = change_points(make_series(real_values, rng, 12, step_at=6, factor=1.3))
    assert len(found) == 1 and not found[0].regression and found[0].rel_change > 0.2


def test_min_effect_and_too_short_series() -> None:
    flat = [Point(f"c{i}", None, (1000.0 + i % 2, 1001.0)) for i in range(3)]
    assert change_points(flat) == []  # 3 campaigns: fewer than two sides of min_size 2
    tiny = [Point(f"c{i}", None, (1000.0 * (1.01 if i >= 6 else 1.0) + (i % 3) * 0.1,))
            for i in range(12)]
    assert change_points(tiny, ChangePointSettings(min_effect=0.02)) == []  # real, but below 2 %
    assert [c.index for c in change_points(tiny, ChangePointSettings(min_effect=0.005))] == [6]


def test_split_p_is_a_permutation_rank_test() -> None:
    assert split_p([5.0] * 10) == 1.0
    separated = [2.0, 2.1, 1.9, 2.05, 1.95, 2.02, 1.0, 1.1, 0.9, 1.05, 0.95, 1.02]
    assert split_p(separated, n_perm=2000) < 0.01
    shuffled = np.random.default_rng(0).permutation(separated)
    assert split_p(shuffled, n_perm=2000) > 0.05
    assert split_p(separated, n_perm=2000, seed=3) == split_p(separated, n_perm=2000, seed=3)


def test_noise_estimate_ignores_one_step_and_candidates_find_it() -> None:
    rng = np.random.default_rng(1)
    base = rng.normal(0.0, 0.01, 20)
    stepped = base + np.where(np.arange(20) >= 10, np.log(0.75), 0.0)
    assert series_noise(stepped) == pytest.approx(series_noise(base), rel=0.5)
    assert candidates(stepped) == [10]
    assert candidates(base) == []


def test_hierarchical_ci_is_wider_than_the_attempt_level_one() -> None:
    rng = np.random.default_rng(4)
    before = [list(1000 * np.exp(rng.normal(0, 0.03)) * rng.uniform(0.99, 1.01, 10))
              for _ in range(6)]
    after = [list(900 * np.exp(rng.normal(0, 0.03)) * rng.uniform(0.99, 1.01, 10))
             for _ in range(6)]
    low, high = hierarchical_ci(before, after, n_boot=2000)
    assert low < -0.1 < high
    from interop_runner.analysis.ab.stats import bootstrap_ci

    flat_low, flat_high = bootstrap_ci(sum(before, []), sum(after, []), n_boot=2000)
    assert high - low > flat_high - flat_low
