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

from interop_runner.analysis.compare import (SUBJECT, bootstrap_ci, cliffs_delta, compare,
                                             compare_campaigns, compare_variants,
                                             facts_differences, find_column, forest_plot,
                                             mann_whitney_p, plan, required_n, robust_cv,
                                             verdict)
from interop_runner.cli import main

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
                    written: dict[tuple[str, str, str], tuple[str, str]] | None = None
                    ) -> Path:
    """A campaign tree like tests/data/results-sample: campaign.json and one run.json per
    attempt. ``cells``: (server, client, variant) -> goodputs (None: a failed attempt);
    ``written``: the pair as the campaign wrote it (run.json ``cell``), where it differs."""
    directory = root / name
    directory.mkdir(parents=True)
    meta = json.loads(SAMPLE.read_text())
    meta["campaign"] = name
    meta["hosts"] = hosts if hosts is not None else _hosts()
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
    assert capsys.readouterr().out.strip() == f"{out_file}: 1 slower, 1 no change"
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
