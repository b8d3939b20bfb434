"""A/B comparison (issue 8): statistics against scipy, verdicts, plans, host facts, the CLI."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from interop_runner.analysis.ab import stats as abstats
from interop_runner.analysis.ab.compare import (
    PAIR_COLUMN,
    SUBJECT,
    bootstrap_ci,
    cliffs_delta,
    compare,
    compare_campaigns,
    compare_variants,
    facts_differences,
    find_column,
    forest_plot,
    log_ratios,
    mann_whitney_p,
    min_pairs,
    pair_noise,
    pair_up,
    paired_bootstrap_ci,
    paired_change,
    plan,
    required_n,
    required_pairs,
    robust_cv,
    sweep_order,
    verdict,
    wilcoxon_p,
    with_pair_ids,
)
from interop_runner.cli.main import main

SAMPLE = Path(__file__).parent / "data" / "results-sample" / "campaign.json"


# ----------------------------------------------------------------------------- helpers ----


def _frame(cells: dict[tuple[str, str], list[float | None]], **extra: Any) -> pd.DataFrame:
    """A results-like frame: per (server, client) the goodputs; None is a failed attempt."""
    rows = []
    for (server, client), values in cells.items():
        for value in values:
            rows.append({"server": server, "client": client, "testcase": "goodput",
                         "status": "ok" if value is not None else "failed",
                         "goodput_mbps": value, **extra})
    return pd.DataFrame(rows)


def _noisy(median: float, cv: float, n: int, seed: int) -> list[float]:
    return list(np.random.default_rng(seed).normal(median, median * cv, n))


def _hosts() -> dict[str, Any]:
    hosts: dict[str, Any] = json.loads(SAMPLE.read_text())["hosts"]
    return hosts


def _write_campaign(root: Path, name: str, cells: dict[tuple[str, str, str], list[float | None]],
                    *, version: str = "v1.0.0", hosts: dict[str, Any] | None = None,
                    written: dict[tuple[str, str, str], tuple[str, str]] | None = None,
                    order: str | None = None, client_cpu_s: list[float] | None = None) -> Path:
    """A campaign tree like tests/data/results-sample: campaign.json and one run.json per
    attempt. ``cells``: (server, client, variant) -> goodputs (None: a failed attempt), the
    i-th value is repetition i; ``written``: the pair as the campaign wrote it (run.json
    ``cell``), where it differs; ``order``: the run order recorded in campaign.json;
    ``client_cpu_s``: the client's CPU seconds of repetition i (user time), bytes_received
    then being the file size."""
    directory = root / name
    directory.mkdir(parents=True)
    meta = json.loads(SAMPLE.read_text())
    meta["campaign"] = name
    meta["hosts"] = hosts if hosts is not None else _hosts()
    if order is not None:
        meta["plan"] = {"order": order, "seed": 1}
    (directory / "campaign.json").write_text(json.dumps(meta))
    for (server, client, variant), values in cells.items():
        axes = dict(part.split("=", 1) for part in variant.split(",")) if variant else {}
        for rep, value in enumerate(values, start=1):
            base = directory / f"{server}_{client}" / "goodput"
            out = (base / variant if variant else base) / str(rep) / "attempt-1"
            out.mkdir(parents=True)
            record = {
                "campaign": name, "testcase": "goodput", "repetition": rep, "attempt": 1,
                "server": {"implementation": server, "version": version, "params": {}},
                "client": {"implementation": client, "version": version, "params": {}},
                "status": "ok" if value is not None else "failed",
                "reason": None if value is not None else "client exited with 1",
                "file_size": 8388608, "goodput_mbps": value,
                "duration_s": None if value is None else 8 * 8388608 / value / 1e6,
                "variant": variant, "axes": axes, "testbed": "local", "monitors": {},
                "schema_version": 2,
            }
            if client_cpu_s is not None and value is not None:
                record["bytes_received"] = 8388608
                record["start_ns"], record["end_ns"] = 10**18, 10**18 + 10**8
                record["client"].update(cpu_user_s=client_cpu_s[rep - 1], cpu_system_s=0.0)
            if written and (server, client, variant) in written:
                ws, wc = written[(server, client, variant)]
                record["cell"] = {"server": ws, "client": wc}
            (out / "run.json").write_text(json.dumps(record))
    return directory


# -------------------------------------------------------------------- statistics vs scipy ----


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_mann_whitney_and_cliffs_delta_match_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.normal(1000, 30, 12)
    b = rng.normal(1010, 30, 9)
    ref = stats.mannwhitneyu(b, a, alternative="two-sided")
    assert mann_whitney_p(a, b) == pytest.approx(ref.pvalue, rel=1e-12)
    # Cliff's delta is the rank-biserial correlation 2 U_B / (n_a n_b) - 1
    assert cliffs_delta(a, b) == pytest.approx(2 * ref.statistic / (a.size * b.size) - 1)
    brute = sum(np.sign(y - x) for y in b for x in a) / (a.size * b.size)
    assert cliffs_delta(a, b) == pytest.approx(brute)


def test_mann_whitney_with_ties_matches_scipy_and_constant_samples_are_p1() -> None:
    a, b = [10.0, 10, 11, 12, 12, 13], [12.0, 12, 13, 14, 14, 15]
    assert mann_whitney_p(a, b) == pytest.approx(
        stats.mannwhitneyu(b, a, alternative="two-sided").pvalue)
    assert mann_whitney_p([5.0] * 5, [5.0] * 5) == 1.0
    assert math.isnan(mann_whitney_p([], [1.0]))


def test_bootstrap_ci_agrees_with_scipy_bootstrap() -> None:
    rng = np.random.default_rng(7)
    a, b = rng.normal(1000, 20, 40), rng.normal(950, 20, 40)

    def ratio(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.asarray(np.median(y, axis=axis) / np.median(x, axis=axis) - 1)

    ref = stats.bootstrap((a, b), ratio, paired=False, vectorized=True, method="percentile",
                          n_resamples=20_000, confidence_level=0.95,
                          rng=np.random.default_rng(1)).confidence_interval
    low, high = bootstrap_ci(a, b, confidence=0.95, n_boot=20_000, rng=2)
    # two Monte Carlo estimates of the same interval: equal up to resampling noise
    assert low == pytest.approx(ref.low, abs=0.002)
    assert high == pytest.approx(ref.high, abs=0.002)
    assert low < np.median(b) / np.median(a) - 1 < high


def test_bootstrap_is_seeded_and_per_cell() -> None:
    cells = {("s", "c"): _noisy(1000, 0.02, 10, 1), ("s", "d"): _noisy(900, 0.02, 10, 2)}
    other = {("s", "c"): _noisy(990, 0.02, 10, 3), ("s", "d"): _noisy(905, 0.02, 10, 4)}
    first = compare(_frame(cells), _frame(other), seed=5)
    again = compare(_frame(cells), _frame(other), seed=5)
    pd.testing.assert_frame_equal(first, again)
    reseeded = compare(_frame(cells), _frame(other), seed=6)
    assert not np.allclose(first["ci_low"], reseeded["ci_low"])
    # a cell's numbers do not depend on which other cells are compared
    alone = compare(_frame({("s", "d"): cells[("s", "d")]}),
                    _frame({("s", "d"): other[("s", "d")]}), seed=5)
    assert alone.loc[0, "ci_low"] == first.loc[1, "ci_low"]
    assert alone.loc[0, "ci_high"] == first.loc[1, "ci_high"]


# ----------------------------------------------------------------------------- verdicts ----


def test_verdict_rule() -> None:
    kw: dict[str, Any] = dict(min_effect=0.02, alpha=0.05, min_samples=5)
    assert verdict(-0.10, -0.12, -0.08, 0.001, 10, 10, **kw) == "slower"
    assert verdict(0.10, 0.08, 0.12, 0.001, 10, 10, **kw) == "faster"
    assert verdict(0.001, -0.01, 0.012, 0.7, 10, 10, **kw) == "no change"
    # significant but smaller than the minimum effect, CI inside the band: no change
    assert verdict(-0.005, -0.008, -0.002, 0.001, 10, 10, **kw) == "no change"
    # CI excludes 0, effect large enough, but the rank test disagrees
    assert verdict(-0.05, -0.09, -0.01, 0.08, 10, 10, **kw) == "inconclusive"
    # CI excludes 0 and p small, but the point estimate is below the minimum effect
    assert verdict(-0.015, -0.03, -0.001, 0.01, 10, 10, **kw) == "inconclusive"
    # wide CI over 0
    assert verdict(-0.05, -0.15, 0.04, 0.2, 10, 10, **kw) == "inconclusive"
    # too few samples, or a missing number
    assert verdict(-0.10, -0.12, -0.08, 0.001, 4, 10, **kw) == "inconclusive"
    assert verdict(math.nan, math.nan, math.nan, math.nan, 10, 10, **kw) == "inconclusive"


def test_a_a_is_no_change() -> None:
    a = _frame({("quic-go", "quic-go"): _noisy(1000, 0.005, 10, 1)})
    b = _frame({("quic-go", "quic-go"): _noisy(1000, 0.005, 10, 2)})
    row = compare(a, b).iloc[0]
    assert row["verdict"] == "no change"
    assert -0.02 <= row["ci_low"] <= row["ci_high"] <= 0.02


def test_b_ten_percent_slower_is_slower_with_ci_excluding_zero() -> None:
    a = _frame({("quic-go", "quic-go"): _noisy(1000, 0.01, 10, 1)})
    b = _frame({("quic-go", "quic-go"): _noisy(900, 0.01, 10, 2)})
    row = compare(a, b).iloc[0]
    assert row["verdict"] == "slower"
    assert row["ci_high"] < 0 and row["rel_diff"] == pytest.approx(-0.1, abs=0.015)
    assert row["p_value"] < 0.001 and row["cliffs_delta"] == -1.0
    assert compare(b, a).iloc[0]["verdict"] == "faster"


def test_noisy_small_shift_is_inconclusive_and_few_samples_too() -> None:
    a = _frame({("x", "y"): _noisy(1000, 0.15, 8, 1)})
    b = _frame({("x", "y"): _noisy(970, 0.15, 8, 2)})
    assert compare(a, b).iloc[0]["verdict"] == "inconclusive"
    few_a = _frame({("x", "y"): [1000.0, 1001, 999]})
    few_b = _frame({("x", "y"): [800.0, 801, 799]})
    row = compare(few_a, few_b).iloc[0]
    assert row["verdict"] == "inconclusive" and "too few" in row["note"]
    assert compare(few_a, few_b, min_samples=3).iloc[0]["verdict"] == "inconclusive"  # p=0.1


def test_significant_but_negligible_change_is_no_change() -> None:
    a = _frame({("x", "y"): _noisy(1000, 0.001, 30, 1)})
    b = _frame({("x", "y"): _noisy(995, 0.001, 30, 2)})
    row = compare(a, b).iloc[0]
    assert row["p_value"] < 0.001 and row["ci_high"] < 0
    assert row["verdict"] == "no change"


def test_failures_are_counted_and_one_sided_cells_kept() -> None:
    a = _frame({("x", "y"): _noisy(1000, 0.01, 6, 1) + [None],
                ("x", "z"): _noisy(1000, 0.01, 6, 3)})
    b = _frame({("x", "y"): _noisy(1000, 0.01, 5, 2) + [None, None, None]})
    result = compare(a, b)
    xy = result[result["client"] == "y"].iloc[0]
    assert (xy["n_a"], xy["n_b"], xy["failed_a"], xy["failed_b"]) == (6, 5, 1, 3)
    assert "more failures in B (3 vs 1)" in xy["note"]
    xz = result[result["client"] == "z"].iloc[0]
    assert xz["verdict"] == "inconclusive" and xz["note"] == "only in A" and xz["n_b"] == 0
    assert math.isnan(xz["median_b"])


def test_cells_follow_variants_and_axes() -> None:
    rows_a = pd.concat([_frame({("x", "y"): _noisy(1000, 0.01, 6, 1)}, variant="rmem=1x",
                               axis_rmem="1x"),
                        _frame({("x", "y"): _noisy(2000, 0.01, 6, 2)}, variant="rmem=4x",
                               axis_rmem="4x")])
    rows_b = rows_a.copy()
    rows_b.loc[rows_b["variant"] == "rmem=4x", "goodput_mbps"] *= 0.8
    result = compare(rows_a, rows_b)
    assert list(result["variant"]) == ["rmem=1x", "rmem=4x"]
    assert list(result["verdict"]) == ["no change", "slower"]
    assert result.attrs["keys"] == ["server", "client", "testcase", "variant", "axis_rmem"]


def test_an_upload_is_never_compared_with_a_download() -> None:
    downloads = _frame({("x", "y"): _noisy(1000, 0.01, 6, 1)}, workload="download")
    uploads = _frame({("x", "y"): _noisy(500, 0.01, 6, 2)}, workload="upload")
    result = compare(downloads, uploads)
    assert result.attrs["keys"] == ["server", "client", "testcase", "workload"]
    assert sorted(result["note"]) == ["only in A", "only in B"]
    # campaigns of the default download alone keep the keys they had before workloads
    again = compare(downloads, _frame({("x", "y"): _noisy(1000, 0.01, 6, 2)},
                                      workload="download"))
    assert again.attrs["keys"] == ["server", "client", "testcase"]
    assert list(again["verdict"]) == ["no change"]


def test_compare_variants_of_implementations() -> None:
    old, new = "quic-go@v0.48.0", "quic-go@v0.49.0"
    frame = _frame({(old, old): _noisy(1000, 0.01, 6, 1), (new, new): _noisy(900, 0.01, 6, 2),
                    (old, "quiche"): _noisy(800, 0.01, 6, 3),
                    (new, "quiche"): _noisy(800, 0.01, 6, 4),
                    (old, new): _noisy(500, 0.01, 6, 5)})  # involves both: left out
    assert find_column(frame, old, new) == "implementation"
    result = compare_variants(frame, "implementation", old, new)
    cells = {(r.server, r.client): r.verdict for r in result.itertuples()}
    assert cells == {(SUBJECT, SUBJECT): "slower", (SUBJECT, "quiche"): "no change"}
    server_only = compare_variants(frame, "server", old, new)
    assert set(server_only["client"]) == {SUBJECT, "quiche"}
    with pytest.raises(ValueError, match="does not occur"):
        compare_variants(frame, "implementation", old, "quic-go@v9")


def test_compare_variants_of_an_impl_axis_keys_cells_as_written() -> None:
    """configs/ab.yml: the written quic-go is played by quic-go@v0.64.0 (A) or quic-go (B);
    run.json has the written pair as ``cell`` (columns cell_server/cell_client)."""
    old = "quic-go@v0.64.0"
    parts = []
    for arm, median, seed in ((old, 1000.0, 1), ("quic-go", 900.0, 2)):
        for written_client, ran_client, scale in (("quic-go", arm, 1.0),
                                                  ("quiche", "quiche", 0.8)):
            part = _frame({(arm, ran_client): _noisy(median * scale, 0.01, 6, seed)},
                          variant=f"version={arm}", axis_version=arm,
                          server_version="v0.64.0" if arm == old else "v0.65.0")
            part["cell_server"], part["cell_client"] = "quic-go", written_client
            parts.append(part)
            seed += 10
    frame = pd.concat(parts, ignore_index=True)
    assert find_column(frame, old, "quic-go") == "axis_version"
    result = compare_variants(frame, "axis_version", old, "quic-go")
    assert result.attrs["keys"] == ["server", "client", "testcase"]
    assert list(zip(result["server"], result["client"], result["verdict"])) == [
        ("quic-go", "quic-go", "slower"), ("quic-go", "quiche", "slower")]
    assert result.loc[0, "versions_a"] == "quic-go@v0.64.0 v0.64.0"
    assert result.attrs["settings"]["axis_version"] == [old, "quic-go"]
    # the same runs compared by implementation name: keyed by what ran
    by_impl = compare_variants(frame, "implementation", old, "quic-go")
    assert list(zip(by_impl["server"], by_impl["client"])) == [(SUBJECT, SUBJECT),
                                                               (SUBJECT, "quiche")]
    assert list(by_impl["verdict"]) == ["slower", "slower"]


def test_compare_variants_of_a_sweep_axis() -> None:
    frame = pd.concat([
        _frame({("x", "y"): _noisy(1000, 0.01, 6, 1)}, variant="cc=cubic,rmem=1x",
               axis_cc="cubic", axis_rmem="1x"),
        _frame({("x", "y"): _noisy(1100, 0.01, 6, 2)}, variant="cc=cubic,rmem=4x",
               axis_cc="cubic", axis_rmem="4x"),
        _frame({("x", "y"): _noisy(700, 0.01, 6, 3)}, variant="cc=reno,rmem=1x",
               axis_cc="reno", axis_rmem="1x"),
        _frame({("x", "y"): _noisy(700, 0.01, 6, 4)}, variant="cc=reno,rmem=4x",
               axis_cc="reno", axis_rmem="4x")])
    by_axis = compare_variants(frame, "axis_rmem", "1x", "4x")
    assert list(by_axis["axis_cc"]) == ["cubic", "reno"]
    assert list(by_axis["verdict"]) == ["faster", "no change"]
    by_variant = compare_variants(frame, "variant", "cc=cubic,rmem=1x", "cc=reno,rmem=1x")
    assert len(by_variant) == 1 and by_variant.iloc[0]["verdict"] == "slower"


# -------------------------------------------------------------------------------- plans ----


def test_required_n_known_case_and_monotonic() -> None:
    # 2 (z_0.975 + z_0.8)^2 (cv / effect)^2 / (3 / pi) with cv = effect
    z = 1.959963984540054 + 0.8416212335729143
    assert required_n(0.02, 0.02) == pytest.approx(2 * z * z * math.pi / 3, rel=1e-9)
    assert required_n(0.02, 0.02) == pytest.approx(16.4385, abs=1e-3)
    assert required_n(0.02, 0.04) == pytest.approx(required_n(0.02, 0.02) / 4)
    assert required_n(0.02, 0.02, power=0.9) > required_n(0.02, 0.02)
    assert required_n(0.02, 0.02, alpha=0.01) > required_n(0.02, 0.02)
    assert required_n(0.04, 0.02) > required_n(0.02, 0.02)


def test_required_n_gives_the_power_it_promises() -> None:
    """Simulation: Mann-Whitney on normal data with cv 2 % and n = 17 detects a 2 % shift in
    about 80 % of the runs."""
    n = math.ceil(required_n(0.02, 0.02))
    rng = np.random.default_rng(11)
    a = rng.normal(1.0, 0.02, (4000, n))
    b = rng.normal(0.98, 0.02, (4000, n))
    power = np.mean(stats.mannwhitneyu(b, a, axis=1).pvalue < 0.05)
    assert 0.75 < power < 0.86


def test_plan_per_cell_from_observed_noise() -> None:
    quiet = [1000.0 + d for d in (-4, -2, 0, 2, 4, -4, 4, 0)]
    loud = [1000.0 + d for d in (-100, -50, 0, 50, 100, -100, 100, 0)]
    frame = _frame({("x", "quiet"): quiet, ("x", "loud"): loud, ("x", "one"): [1000.0]})
    result = plan(frame, effect=0.02).set_index("client")
    assert result.loc["quiet", "cv"] == pytest.approx(robust_cv(quiet))
    assert result.loc["quiet", "cv"] == pytest.approx(1.4826 * 3 / 1000)
    assert result.loc["quiet", "n_needed"] == 5  # at least min_samples
    expected = math.ceil(required_n(robust_cv(loud), 0.02))
    assert result.loc["loud", "n_needed"] == expected > 100
    assert result.loc["loud", "n_more"] == expected - 8
    assert pd.isna(result.loc["one", "n_needed"])
    larger = plan(frame, effect=0.05).set_index("client")
    assert larger.loc["loud", "n_needed"] < result.loc["loud", "n_needed"]
    # with the other side: the noisier of the two counts
    both = plan(_frame({("x", "y"): quiet}), other=_frame({("x", "y"): loud}))
    assert both.iloc[0]["n_needed"] == expected


# --------------------------------------------------------------------------- host facts ----


def test_facts_differences() -> None:
    a = _hosts()
    assert facts_differences(a, copy.deepcopy(a)) == []
    b = copy.deepcopy(a)
    b["server"]["kernel"] = "6.1.0-28-amd64"
    b["client"]["sysctl"]["net.core.rmem_max"] = "16777216"
    b["management"]["kernel"] = "other"  # the management host does not count
    b["server"]["hostname"] = "elsewhere"  # neither does the name
    assert facts_differences(a, b) == [
        "client net.core.rmem_max: '4194304' vs '16777216'",
        "server kernel: '6.18.44-fc-v669' vs '6.1.0-28-amd64'"]
    c = copy.deepcopy(a)
    c["client"]["nic_driver"] = None
    assert facts_differences(a, c) == ["client nic_driver: 'veth' vs unknown"]
    assert facts_differences(a, {"server": a["server"]}) == ["client: no host facts in B"]
    multi = {"by_testbed": {"lab": a}}
    assert facts_differences(multi, {"by_testbed": {"lab": b}})[0].startswith("lab/client")


def test_compare_campaigns_refuses_different_hosts_unless_forced(tmp_path: Path) -> None:
    hosts = _hosts()
    hosts["server"]["cpu_model"] = "Intel Xeon Gold 6312U"
    a = _write_campaign(tmp_path, "a", {("x", "x", ""): _noisy(1000, 0.01, 5, 1)})
    b = _write_campaign(tmp_path, "b", {("x", "x", ""): _noisy(1000, 0.01, 5, 2)},
                        hosts=hosts)
    with pytest.raises(ValueError, match=r"host facts differ \(server cpu_model: 'AMD EPYC' "
                                         r"vs 'Intel Xeon Gold 6312U'\)") as info:
        compare_campaigns(a, b)
    assert "\n" not in str(info.value)
    result = compare_campaigns(a, b, force=True)
    assert result.attrs["forced"] is True
    assert result.attrs["host_differences"] == [
        "server cpu_model: 'AMD EPYC' vs 'Intel Xeon Gold 6312U'"]


# --------------------------------------------------------------------------------- plots ----


def test_forest_plot_one_row_per_cell(tmp_path: Path) -> None:
    from matplotlib.figure import Figure

    a = _frame({("x", "y"): _noisy(1000, 0.01, 6, 1), ("x", "z"): _noisy(1000, 0.01, 6, 2),
                ("x", "w"): [1000.0]})
    b = _frame({("x", "y"): _noisy(900, 0.01, 6, 3), ("x", "z"): _noisy(1000, 0.01, 6, 4)})
    result = compare(a, b)
    fig = forest_plot(result, title="B vs A")
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["x -> z", "x -> y", "x -> w"]  # first cell on top
    out = tmp_path / "forest.png"
    fig.savefig(out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ----------------------------------------------------------------------------------- CLI ----


@pytest.fixture
def campaigns(tmp_path: Path) -> dict[str, Path]:
    """Baseline A, an A/A copy, a candidate B 10 % slower on one pair, B on other hosts."""
    base = {("quic-go", "quic-go", ""): _noisy(1000, 0.004, 6, 1),
            ("quic-go", "quiche", ""): _noisy(800, 0.004, 6, 2)}
    same = {("quic-go", "quic-go", ""): _noisy(1000, 0.004, 6, 3),
            ("quic-go", "quiche", ""): _noisy(800, 0.004, 6, 4) + [None]}
    slower = {("quic-go", "quic-go", ""): _noisy(900, 0.004, 6, 5),
              ("quic-go", "quiche", ""): _noisy(800, 0.004, 6, 6)}
    hosts = _hosts()
    hosts["client"]["kernel"] = "6.1.0-28-amd64"
    return {"a": _write_campaign(tmp_path, "a", base, version="v0.48.0"),
            "aa": _write_campaign(tmp_path, "aa", same, version="v0.48.0"),
            "b": _write_campaign(tmp_path, "b", slower, version="v0.49.0"),
            "other": _write_campaign(tmp_path, "other", slower, version="v0.49.0",
                                     hosts=hosts)}


def test_cli_a_a_exits_0_with_a_table(campaigns: dict[str, Path],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(campaigns["a"]), str(campaigns["aa"])]) == 0
    out = capsys.readouterr().out
    assert "A (baseline):" in out and "verdict" in out and "2 no change" in out
    assert "0/1" in out  # failed A/B of the quiche cell


def test_cli_slower_exits_5_markdown(campaigns: dict[str, Path],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["compare", str(campaigns["a"]), str(campaigns["b"]), "--format", "markdown"])
    assert code == 5
    out = capsys.readouterr().out
    assert out.startswith("### Goodput A/B: 1 slower, 1 no change")
    assert "server_version `v0.48.0` → `v0.49.0`" in out
    lines = [line for line in out.splitlines() if line.startswith("| quic-go | quic-go |")]
    assert len(lines) == 1 and "**slower**" in lines[0] and "(n=6)" in lines[0]
    assert "<details><summary>Method</summary>" in out and "Forced" not in out


def test_cli_json_and_output_file(campaigns: dict[str, Path], tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "cmp.json"
    code = main(["compare", str(campaigns["a"]), str(campaigns["b"]), "--format", "json",
                 "-o", str(out_file), "--min-effect", "0.05"])
    assert code == 5
    assert capsys.readouterr().out.strip() == (f"{out_file}: 1 slower, 1 no change; "
                                               "CPU cost: not measured")
    data = json.loads(out_file.read_text())
    assert data["summary"] == {"slower": 1, "faster": 0, "no change": 1, "inconclusive": 0}
    assert data["settings"]["min_effect"] == 0.05 and data["forced"] is False
    assert data["changed"]["server_version"] == {"a": "v0.48.0", "b": "v0.49.0"}
    cell = next(c for c in data["cells"] if c["client"] == "quic-go")
    assert cell["verdict"] == "slower" and cell["ci_high"] < 0 and cell["n_a"] == 6
    assert set(cell) >= {"median_a", "median_b", "rel_diff", "ci_low", "p_value",
                         "cliffs_delta", "failed_a", "failed_b"}


def test_cli_refuses_other_hosts_unless_forced(campaigns: dict[str, Path],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(campaigns["a"]), str(campaigns["other"])]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: host facts differ (client kernel")
    assert "--force" in err
    code = main(["compare", str(campaigns["a"]), str(campaigns["other"]), "--force",
                 "--format", "markdown"])
    assert code == 5
    assert "**Forced comparison**: host facts differ (client kernel" in capsys.readouterr().out
    main(["compare", str(campaigns["a"]), str(campaigns["other"]), "--force", "--format",
          "json"])
    data = json.loads(capsys.readouterr().out)
    assert data["forced"] is True and data["host_differences"][0].startswith("client kernel")
    main(["compare", str(campaigns["a"]), str(campaigns["other"]), "--force"])
    assert "FORCED: host facts differ" in capsys.readouterr().out


def test_cli_variants_in_one_campaign(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    old, new = "quic-go@v0.48.0", "quic-go@v0.49.0"
    one = _write_campaign(tmp_path, "ab", {
        (old, old, ""): _noisy(1000, 0.01, 6, 1), (new, new, ""): _noisy(1000, 0.01, 6, 2),
        (old, "quiche", ""): _noisy(800, 0.01, 6, 3),
        (new, "quiche", ""): _noisy(700, 0.01, 6, 4)})
    assert main(["compare", str(one), "--variants", old, new]) == 5
    out = capsys.readouterr().out
    assert f"{old} (implementation, campaign {one})" in out
    assert main(["compare", str(one), "--variants", old, new, "--column", "server",
                 "--format", "json"]) == 5
    data = json.loads(capsys.readouterr().out)
    assert data["column"] == "server" and data["summary"]["slower"] == 1
    swept = _write_campaign(tmp_path, "sweep", {
        ("x", "x", "rmem=1x"): _noisy(1000, 0.01, 6, 1),
        ("x", "x", "rmem=4x"): _noisy(1002, 0.01, 6, 2)})
    assert main(["compare", str(swept), "--variants", "1x", "4x", "--plan"]) == 0
    out = capsys.readouterr().out
    assert "(axis_rmem, campaign" in out and "no change" in out
    assert "plan: repetitions per side to detect a 2 % change" in out


def test_cli_ab_campaign_with_an_impl_axis(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The layout of configs/ab.yml: axis ``version`` says which implementation plays the
    written quic-go; cells are the written pairs."""
    old = "quic-go@v0.64.0"
    cells: dict[tuple[str, str, str], list[float | None]] = {}
    written: dict[tuple[str, str, str], tuple[str, str]] = {}
    for arm, median, seed in ((old, 1000.0, 1), ("quic-go", 1001.0, 2)):
        variant = f"version={arm}"
        cells[(arm, arm, variant)] = _noisy(median, 0.004, 6, seed)
        cells[(arm, "quiche", variant)] = _noisy(median * 0.8, 0.004, 6, seed + 10)
        written[(arm, arm, variant)] = ("quic-go", "quic-go")
        written[(arm, "quiche", variant)] = ("quic-go", "quiche")
    one = _write_campaign(tmp_path, "ab", cells, written=written)
    assert main(["compare", str(one), "--variants", old, "quic-go", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["column"] == "axis_version" and data["keys"] == ["server", "client", "testcase"]
    assert [(c["server"], c["client"], c["verdict"]) for c in data["cells"]] == [
        ("quic-go", "quic-go", "no change"), ("quic-go", "quiche", "no change")]
    assert data["cells"][0]["versions_a"].startswith(f"{old} ")
    assert data["changed"]["axis_version"] == {"a": old, "b": "quic-go"}


@pytest.mark.parametrize("mode", ["campaigns", "variants"])
def test_notebook_runs_on_two_campaigns_and_on_variants(
        campaigns: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        mode: str) -> None:
    """notebooks/compare.ipynb end to end (nbclient), with the paths from the environment;
    the variants case sets VARIANTS in the parameter cell like papermill would."""
    import nbclient
    import nbformat

    from .test_notebooks import ensure_kernelspec

    ensure_kernelspec()  # pos_scripts/install.sh installs it; this keeps the test standalone
    notebooks = Path(__file__).resolve().parent.parent / "notebooks"
    nb = nbformat.read(notebooks / "compare.ipynb", as_version=4)
    params = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    if mode == "campaigns":
        monkeypatch.setenv("QIR_RESULTS_A", str(campaigns["a"]))
        monkeypatch.setenv("QIR_RESULTS_B", str(campaigns["b"]))
    else:
        old, new = "quic-go@v0.48.0", "quic-go@v0.49.0"
        one = _write_campaign(tmp_path, "ab", {
            (old, old, ""): _noisy(1000, 0.004, 6, 1), (new, new, ""): _noisy(900, 0.004, 6, 2)})
        monkeypatch.setenv("QIR_RESULTS_A", str(one))
        params.source += f"\nVARIANTS = ({old!r}, {new!r})"
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=600,
                            resources={"metadata": {"path": str(notebooks)}}).execute()
    streams = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", [])
                      if o.get("output_type") == "stream")
    assert ("1 slower, 1 no change" if mode == "campaigns" else "1 slower") in streams
    images = [o for c in nb.cells for o in c.get("outputs", [])
              if "image/png" in o.get("data", {})]
    assert len(images) == 2  # the forest plot and the attempts


@pytest.mark.parametrize("argv, message", [
    (["compare", "{a}"], "needs two campaign directories"),
    (["compare", "{a}", "{b}", "--variants", "x", "y"], "not both"),
    (["compare", "{a}", "{missing}"], "not a campaign directory"),
    (["compare", "{a}", "--variants", "quic-go", "nope"], "no column holds both"),
    (["compare", "{a}", "--variants", "quic-go", "nope", "--column", "server"],
     "'nope' does not occur in column 'server'"),
    (["compare", "{a}", "{b}", "--confidence", "95"], "--confidence must be between 0 and 1"),
])
def test_cli_usage_errors_exit_2_on_one_line(campaigns: dict[str, Path], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str],
                                             argv: list[str], message: str) -> None:
    paths = {**{k: str(v) for k, v in campaigns.items()}, "missing": str(tmp_path / "none")}
    assert main([arg.format(**paths) for arg in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err


def test_cli_help_names_exit_5(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "5 compare found a slower cell" in capsys.readouterr().out


# --------------------------------------------------------------------------- paired A/B ----


def _paired_frame(a: list[float | None], b: list[float | None], *, campaign: str = "ab",
                  server: str = "x", client: str = "y") -> pd.DataFrame:
    """One campaign, axis ``arm`` with A and B; the i-th values of ``a`` and ``b`` are
    repetition i (None: a failed attempt)."""
    rows = []
    for arm, values in (("a", a), ("b", b)):
        for rep, value in enumerate(values, start=1):
            rows.append({"campaign": campaign, "testbed": "local", "server": server,
                         "client": client, "testcase": "goodput", "repetition": rep,
                         "attempt": 1, "status": "ok" if value is not None else "failed",
                         "goodput_mbps": value, "variant": f"arm={arm}", "axis_arm": arm})
    return pd.DataFrame(rows)


def _drifting(seed: int = 0, n: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """A and B both scaled by a host drift of up to ±30 % from pair to pair (shared within a
    pair), B always 5 % lower, 0.5 % noise per attempt."""
    rng = np.random.default_rng(seed)
    drift = rng.uniform(0.7, 1.3, n)
    return 1000 * drift * rng.normal(1, 0.005, n), 950 * drift * rng.normal(1, 0.005, n)


def test_wilcoxon_p_exact_values_and_scipy() -> None:
    a = np.full(6, 1000.0)
    # log ratios 0.01 * (1, 2, 3, 4, 5, -6): T- = 6; 14 of the 64 sign patterns have T- <= 6
    b = a * np.exp(0.01 * np.array([1.0, 2, 3, 4, 5, -6]))
    assert wilcoxon_p(a, b) == pytest.approx(2 * 14 / 64, rel=1e-12)
    assert wilcoxon_p(a, b) == pytest.approx(stats.wilcoxon(np.log(b / a)).pvalue, rel=1e-12)
    # all pairs one way: p = 2 / 2^n, exact
    assert wilcoxon_p(a, a * 0.95) == pytest.approx(2 / 64, rel=1e-12)
    assert wilcoxon_p(a[:5], a[:5] * 1.05) == pytest.approx(2 / 32, rel=1e-12)
    assert min_pairs(0.05) == 6 and min_pairs(0.01) == 8
    for seed in (1, 2, 3):
        rng = np.random.default_rng(seed)
        x, y = rng.normal(1000, 30, 15), rng.normal(1005, 30, 15)
        ref = stats.wilcoxon(np.log(y) - np.log(x), alternative="two-sided")
        assert wilcoxon_p(x, y) == pytest.approx(ref.pvalue, rel=1e-12)
    assert wilcoxon_p([5.0] * 6, [5.0] * 6) == 1.0
    assert math.isnan(wilcoxon_p([], []))
    with pytest.raises(ValueError, match="equal lengths"):
        log_ratios([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="positive"):
        log_ratios([1.0, 0.0], [1.0, 1.0])


def test_paired_change_by_hand() -> None:
    # ratios 0.95, 1.05, 0.95, 0.90, 1.02: the median pair ratio is 0.95
    a = [100.0, 200.0, 400.0, 1000.0, 50.0]
    b = [95.0, 210.0, 380.0, 900.0, 51.0]
    assert paired_change(a, b) == pytest.approx(-0.05, abs=1e-12)
    # median B / median A - 1 would say +5 % (210 / 200): the pairs tell otherwise
    assert np.median(b) / np.median(a) - 1 == pytest.approx(0.05)
    # an even number of pairs: the geometric mean of the two middle ratios (0.96 and 1.04)
    assert paired_change([100.0] * 4, [90.0, 96.0, 104.0, 110.0]) == pytest.approx(
        math.sqrt(0.96 * 1.04) - 1, abs=1e-12)
    assert math.isnan(paired_change([], []))
    assert pair_noise(np.log([0.95, 1.05, 0.95, 0.90, 1.02])) == pytest.approx(
        1.4826 * np.median(np.abs(np.log([0.95, 1.05, 0.95, 0.90, 1.02]) - np.log(0.95))))


def test_paired_bootstrap_ci_agrees_with_scipy_bootstrap() -> None:
    a, b = _drifting(seed=3, n=30)
    ref = stats.bootstrap((np.log(b / a),), np.median, method="percentile",
                          n_resamples=20_000, rng=np.random.default_rng(1)).confidence_interval
    low, high = paired_bootstrap_ci(a, b, n_boot=20_000, rng=2)
    assert low == pytest.approx(math.expm1(ref.low), abs=0.002)
    assert high == pytest.approx(math.expm1(ref.high), abs=0.002)
    assert low < paired_change(a, b) < high
    assert paired_bootstrap_ci(a, b, rng=5) == paired_bootstrap_ci(a, b, rng=5)


def test_required_pairs_matches_unpaired_for_independent_noise() -> None:
    # independent noise cv per attempt: the log ratio scatters by sqrt(2) cv
    assert required_pairs(math.sqrt(2) * 0.02, 0.02) == pytest.approx(required_n(0.02, 0.02))
    z = 1.959963984540054 + 0.8416212335729143
    assert required_pairs(0.01, 0.02) == pytest.approx(z * z / 4 * math.pi / 3, rel=1e-9)
    with pytest.raises(ValueError):
        required_pairs(0.01, 0.0)


def test_statistics_live_in_abstats_and_are_reexported() -> None:
    import importlib

    module = importlib.import_module("interop_runner.analysis.ab.compare")  # not the function
    for name in ("bootstrap_ci", "cliffs_delta", "mann_whitney_p", "verdict", "required_n",
                 "robust_cv", "_cell_rng", "wilcoxon_p", "paired_change"):
        assert getattr(module, name) is getattr(abstats, name)


def test_pairing_counts_failed_and_missing_partners() -> None:
    a: list[float | None] = [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1000.0, 1002.0]
    b: list[float | None] = [950.0, 960.0, None, 955.0, None, 950.0]  # 3 and 5 failed, 7 missing
    frame = _paired_frame(a, b)
    # a rerun: repetition 2 of A has a second ok attempt, the latest counts
    rerun = frame[(frame["variant"] == "arm=a") & (frame["repetition"] == 2)].assign(
        attempt=2, goodput_mbps=1020.0)
    # B's repetition 8 has no A partner
    lone = frame[(frame["variant"] == "arm=b") & (frame["repetition"] == 1)].assign(
        repetition=8)
    frame = pd.concat([frame, rerun, lone], ignore_index=True)
    groups = {arm: frame[frame["variant"] == f"arm={arm}"] for arm in "ab"}
    pairs = pair_up(groups["a"], groups["b"])
    assert list(pairs.a) == [1000.0, 1020.0, 1005.0, 1000.0]  # repetitions 1, 2, 4, 6
    assert list(pairs.b) == [950.0, 960.0, 955.0, 950.0]
    # A: 8 ok attempts, 4 paired (rep 2's first attempt, 3, 5, 7 are not); B: 5 ok, 4 paired
    assert (pairs.unpaired_a, pairs.unpaired_b) == (4, 1)
    row = compare_variants(frame, "axis_arm", "a", "b", paired=True, min_samples=3).iloc[0]
    assert row["method"] == "paired" and row["n_pairs"] == 4
    assert (row["n_a"], row["n_b"], row["failed_a"], row["failed_b"]) == (8, 5, 0, 2)
    assert (row["unpaired_a"], row["unpaired_b"]) == (4, 1)
    assert "5 ok attempts without an ok partner left out (A 4, B 1)" in row["note"]
    assert "the signed-rank test needs 6 pairs" in row["note"]
    assert row["rel_diff"] == pytest.approx(
        math.expm1(np.median(np.log(pairs.b / pairs.a))), abs=1e-12)
    assert row["p_value"] == pytest.approx(2 / 16)  # 4 pairs, all slower
    assert row["verdict"] == "inconclusive"
    # other testbeds or other written pairs are other blocks: no partners
    other = frame.assign(testbed=np.where(frame["variant"] == "arm=b", "lab", "local"))
    none = pair_up(other[other["variant"] == "arm=a"], other[other["variant"] == "arm=b"])
    assert none.a.size == 0 and (none.unpaired_a, none.unpaired_b) == (8, 5)
    written = with_pair_ids(frame.assign(cell_server="w"))
    assert written[PAIR_COLUMN].iloc[0] == json.dumps(["ab", "local", "goodput", "w", "y",
                                                       "1"])
    assert with_pair_ids(frame.drop(columns="repetition"))[PAIR_COLUMN].eq("").all()


def test_common_drift_is_slower_paired_and_inconclusive_unpaired() -> None:
    a, b = _drifting(seed=0)
    frame = _paired_frame(list(a), list(b))
    paired = compare_variants(frame, "axis_arm", "a", "b", paired=True).iloc[0]
    unpaired = compare_variants(frame, "axis_arm", "a", "b", paired=False).iloc[0]
    assert paired["method"] == "paired" and unpaired["method"] == "unpaired"
    assert paired["verdict"] == "slower" and paired["n_pairs"] == 12
    assert paired["rel_diff"] == pytest.approx(-0.0498, abs=5e-4)
    assert -0.06 < paired["ci_low"] < paired["ci_high"] < -0.04
    assert paired["p_value"] == pytest.approx(2 / 2 ** 12)  # every pair slower
    assert unpaired["verdict"] == "inconclusive" and pd.isna(unpaired["n_pairs"])
    assert unpaired["ci_low"] < -0.2 and unpaired["ci_high"] > 0.2
    assert unpaired["p_value"] > 0.3
    # the planned repetitions follow the noise each method sees
    side_a, side_b = frame[frame["axis_arm"] == "a"], frame[frame["axis_arm"] == "b"]
    keys = ["server", "client", "testcase"]
    by_pairs = plan(side_a, 0.02, by=keys, other=side_b, paired=True).iloc[0]
    by_sides = plan(side_a, 0.02, by=keys, other=side_b).iloc[0]
    noise = pair_noise(np.log(b / a))
    assert by_pairs["method"] == "paired" and by_pairs["cv"] == pytest.approx(noise)
    assert by_pairs["n"] == 12
    assert by_pairs["n_needed"] == max(6, math.ceil(required_pairs(noise, 0.02)))
    assert by_sides["n_needed"] > 50 * by_pairs["n_needed"]


def test_compare_of_two_campaigns_stays_unpaired() -> None:
    a, b = _drifting(seed=0)
    frame = _paired_frame(list(a), list(b))
    result = compare(frame[frame["axis_arm"] == "a"], frame[frame["axis_arm"] == "b"],
                     by=["server", "client", "testcase"])
    assert result.attrs["method"] == "unpaired" and list(result["method"]) == ["unpaired"]


def test_paired_is_chosen_for_a_campaign_in_paired_order(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _drifting(seed=0)
    cells: dict[tuple[str, str, str], list[float | None]] = {
        ("x", "y", "arm=a"): list(a), ("x", "y", "arm=b"): list(b)}
    paired_dir = _write_campaign(tmp_path, "ab", cells, order="paired")
    shuffled_dir = _write_campaign(tmp_path, "shuffled", cells, order="shuffled")
    from interop_runner.analysis import load_results

    frame = load_results(paired_dir)
    assert sweep_order(frame) == "paired"
    result = compare_variants(frame, "axis_arm", "a", "b")
    assert result.attrs["method"] == "paired" and result.iloc[0]["verdict"] == "slower"
    assert result.attrs["method_reason"].startswith("order paired")
    shuffled = compare_variants(load_results(shuffled_dir), "axis_arm", "a", "b")
    assert shuffled.attrs["method"] == "unpaired"
    assert shuffled.attrs["method_reason"] == "the campaign ran in order shuffled, not paired"
    # the CLI: paired by default (exit 5: slower), --unpaired forces the old way
    assert main(["compare", str(paired_dir), "--variants", "a", "b", "--format", "json",
                 "--plan"]) == 5
    data = json.loads(capsys.readouterr().out)
    assert data["settings"]["method"] == "paired" and "wilcoxon" in data["settings"]["test"]
    (cell,) = data["cells"]
    assert cell["method"] == "paired" and cell["n_pairs"] == 12 and cell["verdict"] == "slower"
    assert data["plan"]["method"] == "paired" and data["plan"]["cells"][0]["n"] == 12
    assert main(["compare", str(paired_dir), "--variants", "a", "b", "--unpaired",
                 "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["settings"]["method"] == "unpaired" and data["cells"][0]["n_pairs"] is None
    assert data["cells"][0]["verdict"] == "inconclusive"
    assert main(["compare", str(paired_dir), "--variants", "a", "b", "--plan"]) == 5
    out = capsys.readouterr().out
    assert "method: paired (order paired: A and B of a repetition ran back to back)" in out
    assert "Wilcoxon signed-rank p < 0.05" in out and " pairs " in out
    assert "plan: pairs (repetitions per arm)" in out
    assert main(["compare", str(paired_dir), "--variants", "a", "b", "--format",
                 "markdown"]) == 5
    out = capsys.readouterr().out
    assert "**Method**: paired" in out and "| pairs |" in out and "Wilcoxon" in out
    assert main(["compare", str(shuffled_dir), "--variants", "a", "b"]) == 0
    assert "method: unpaired (the campaign ran in order shuffled" in capsys.readouterr().out


def test_cli_same_goodput_but_20_percent_more_cpu_per_byte_is_costlier_and_gates(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cells = {("quic-go", "quic-go", ""): _noisy(1000, 0.004, 6, 1)}
    cpu_a = _noisy(0.05, 0.01, 6, 7)
    a = _write_campaign(tmp_path, "a", cells, client_cpu_s=cpu_a)
    b = _write_campaign(tmp_path, "b", cells, client_cpu_s=[1.2 * v for v in cpu_a])
    code = main(["compare", str(a), str(b), "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert out["summary"]["no change"] == 1 and out["summary"]["slower"] == 0
    (client,) = [c for c in out["cpu_cost"]["cells"] if c["side"] == "client"]
    assert client["verdict"] == "costlier" and client["rel_diff"] == pytest.approx(0.2)
    assert client["median_a"] == pytest.approx(np.median(cpu_a) / (8388608 / 2**30))
    (server,) = [c for c in out["cpu_cost"]["cells"] if c["side"] == "server"]
    assert server["verdict"] == "inconclusive" and server["note"].startswith("no CPU cost")
    assert code == 5
    assert main(["compare", str(a), str(b), "--ignore-cpu"]) == 0
    table = capsys.readouterr().out
    assert "CPU cost: 1 costlier, 1 inconclusive" in table
