"""The A/B verdict on conformance (interop_runner/analysis/ab/conformance.py) and its text
(report/conformance_text.py) on the runner's real sample tests/data/flows-runner-sample
(quic-go/reno against tcp/reno, quiche/cubic against tcp/cubic, one attempt each).

The comparisons need several attempts per side; the sides here are DERIVED from the one real
attempt of each flow set: attempt i leaves bin i + 3 of every flow out (so the trials differ
a little, as repeated runs do), and side B of the "worse" pair has the QUIC flows' throughput
series shifted by +2 Mbit/s (the kernel flows as measured)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from interop_runner.analysis import flow_conformance, load_flow_results, load_flows
from interop_runner.analysis.ab.conformance import (
    MIN_EFFECT,
    Side,
    compare_conformance,
    conformance_of_variants,
    side_of,
    trial_conformance,
    worse,
)
from interop_runner.report.conformance_text import cells_markdown, markdown, table

DATA = Path(__file__).parent / "data" / "flows-runner-sample"
ATTEMPTS = 6  # more than compare's default min_samples (5), enough pairs for Wilcoxon (6)


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A writable copy of the sample (the loaders write their caches below it)."""
    return Path(shutil.copytree(DATA, tmp_path_factory.mktemp("cc") / "sample"))


@pytest.fixture(scope="module")
def frames(sample: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    return load_flows(sample), load_flow_results(sample)


def repeated(flows: pd.DataFrame, results: pd.DataFrame, shift: float = 0.0
             ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """DERIVED: :data:`ATTEMPTS` attempts from the real one (see the module), the QUIC
    flows' throughput shifted by ``shift`` Mbit/s."""
    series, records = [], []
    for i in range(ATTEMPTS):
        path = flows["path"].astype(str) + f"#{i}"
        moved = flows.assign(path=path, repetition=i + 1)
        moved = moved[(moved.groupby(["path", "flow"]).cumcount() != i + 3).to_numpy()]
        quic = (moved["kind"] == "quic").to_numpy()
        moved.loc[quic, "throughput_mbps"] = moved.loc[quic, "throughput_mbps"] + shift
        series.append(moved)
        records.append(results.assign(path=results["path"].astype(str) + f"#{i}",
                                      repetition=i + 1))
    return pd.concat(series, ignore_index=True), pd.concat(records, ignore_index=True)


@pytest.fixture(scope="module")
def baseline(frames: tuple[pd.DataFrame, pd.DataFrame]) -> Side:
    return side_of(*repeated(*frames))


@pytest.fixture(scope="module")
def shifted(frames: tuple[pd.DataFrame, pd.DataFrame]) -> Side:
    return side_of(*repeated(*frames, shift=2.0))


def test_each_attempt_is_a_trial_against_its_own_kernel_flow(
        frames: tuple[pd.DataFrame, pd.DataFrame], sample: Path) -> None:
    """Real: one attempt per flow set, so the per-attempt value is the cell's figure."""
    trials = trial_conformance(*frames).set_index("label")
    cells = flow_conformance(sample).set_index("label")
    assert trials["status"].tolist() == ["ok", "ok"]
    assert trials.loc["quic-go/reno", "reference_label"] == "tcp/reno"
    assert trials.loc["quiche/cubic", "stack"] == "quiche"
    for label in ("quic-go/reno", "quiche/cubic"):
        assert trials.loc[label, "conformance_same_run"] == pytest.approx(
            cells.loc[label, "conformance_same_run"])


def test_a_failed_reference_is_a_failed_trial(frames: tuple[pd.DataFrame, pd.DataFrame]
                                              ) -> None:
    """DERIVED: the real sample with its kernel flows marked failed."""
    flows, results = frames
    broken = results.assign(status=results["status"].where(results["kind"] != "tcp", "failed"))
    trials = trial_conformance(flows, broken)
    assert trials["status"].tolist() == ["failed", "failed"]
    assert trials["reason"].str.startswith("no kernel TCP flow").all()
    assert trials["conformance_same_run"].isna().all()


def test_a_test_flow_shifted_from_the_kernel_conforms_worse(baseline: Side,
                                                            shifted: Side) -> None:
    result = compare_conformance(baseline.trials, shifted.trials, cells_a=baseline.cells,
                                 cells_b=shifted.cells).set_index("label")
    quic_go = result.loc["quic-go/reno"]
    assert quic_go["verdict"] == "worse" and worse(result)
    assert quic_go["n_a"] == quic_go["n_b"] == ATTEMPTS
    assert quic_go["rel_diff"] < -MIN_EFFECT and quic_go["ci_high"] < 0  # share points
    assert quic_go["conformance_same_run_b"] < quic_go["conformance_same_run_a"]
    # a translation: Conformance-T is the same, the offset 2 Mbit/s larger
    assert quic_go["conformance_t_same_run_b"] == pytest.approx(
        quic_go["conformance_t_same_run_a"])
    # the offsets are the centroids of their plateaus: equal within their extent
    moved = quic_go["delta_throughput_same_run_b"] - quic_go["delta_throughput_same_run_a"]
    assert moved == pytest.approx(2.0, abs=baseline.cells["delta_throughput_range_same_run"]
                                  .max())
    # derived attempts have no records, so no kernel-vs-kernel runs to be found by
    assert pd.isna(quic_go["conformance_a"])
    assert quic_go["conformance_missing_a"].startswith("no run record of the test's attempts")
    # quiche/cubic conforms 0 on both sides: a difference, not a ratio, says "no change"
    assert result.loc["quiche/cubic", "verdict"] == "no change"
    assert result.loc["quiche/cubic", "median_a"] == 0.0


def test_paired_attempts_give_the_same_verdict(baseline: Side, shifted: Side) -> None:
    result = compare_conformance(baseline.trials, shifted.trials, paired=True)
    verdicts = dict(zip(result["label"], result["verdict"]))
    assert verdicts == {"quic-go/reno": "worse", "quiche/cubic": "no change"}
    assert (result["n_pairs"] == ATTEMPTS).all() and (result["method"] == "paired").all()


def test_an_a_a_comparison_is_no_change(baseline: Side) -> None:
    result = compare_conformance(baseline.trials, baseline.trials)
    assert result["verdict"].tolist() == ["no change", "no change"]
    assert not worse(result)


def test_one_attempt_a_side_is_inconclusive(frames: tuple[pd.DataFrame, pd.DataFrame]
                                            ) -> None:
    """Real: the sample's single attempt on both sides (the goodput rule needs 5)."""
    one = trial_conformance(*frames)
    result = compare_conformance(one, one)
    assert result["verdict"].tolist() == ["inconclusive", "inconclusive"]
    assert result["note"].str.contains("too few ok attempts").all()


def test_variants_named_in_the_pairs_are_not_compared(sample: Path) -> None:
    result = conformance_of_variants(sample, "implementation", "quic-go", "quiche")
    assert result.empty and "impl.<name>" in result.attrs["not_compared"]
    assert "not compared" in table(result) and "not compared" in markdown(result)


def test_the_markdown_section_has_the_verdicts_and_each_sides_figures(
        baseline: Side, shifted: Side) -> None:
    result = compare_conformance(baseline.trials, shifted.trials, cells_a=baseline.cells,
                                 cells_b=shifted.cells)
    text = markdown(result)
    assert "### Conformance A/B: 1 worse, 1 no change" in text
    assert "| quic-go/reno |" in text and "| worse |" in text
    assert text.count("| stack | CC | buffer | RTT | Conformance | Conformance-T | C-T seed "
                      "spread |") == 2
    assert "Conformance: 1 worse, 1 no change" in table(result)


def test_the_conformance_table_in_markdown(sample: Path) -> None:
    """Real: the sample's figures (docs/conformance.md, "On the stored samples"): no
    kernel-vs-kernel runs, so no figures against them and why, then the same-run ones."""
    lines = cells_markdown(flow_conformance(sample)).splitlines()
    assert lines[0] == ("| stack | CC | buffer | RTT | Conformance | Conformance-T | "
                        "C-T seed spread | Δ-throughput Mbit/s | Δ-delay ms | trials | "
                        "missing | C same run | C-T same run | Δ-throughput same run | "
                        "Δ-delay same run | trials same run | missing same run |")
    assert lines[2].startswith("| quic-go | reno | - | - | - | - | - | - | - | - | no "
                               "kernel-vs-kernel runs of reno on this path")
    assert lines[2].endswith("| 0.40 | 0.72 | +1.4 | -1.0 | 1 | - |")
    assert lines[3].startswith("| quiche | cubic | - | - | - |")
    assert "| 0.00 | 0.73 | +6.7 |" in lines[3]
    assert len(lines) == 4


def test_a_missing_figure_says_why_in_markdown(frames: tuple[pd.DataFrame, pd.DataFrame]
                                               ) -> None:
    """DERIVED: the sample with its kernel flows' congestion control renamed."""
    flows, results = frames
    from interop_runner.analysis.theories.flow_conformance import conformance_table

    renamed = results.assign(congestion_control=results["congestion_control"].where(
        results["kind"] != "tcp", "vegas"))
    lines = cells_markdown(conformance_table(flows, renamed)).splitlines()
    assert lines[2].endswith("| - | - | - | - | - | no kernel TCP flow of congestion control "
                             "reno in the attempts where the flow ended ok |")
