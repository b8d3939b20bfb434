"""`run.py compare` and `history check` on conformance, with REAL source variants of a stack
(tests/data/conformance-variants, its README.md): picoquic's CUBIC against kernel CUBIC at
20 Mbit/s, 10 ms, 1 BDP, 30 s flows, built from a git tree of the pinned picoquic at its
pinned commit (A: ``picoquic@base``), from the registry's upstream archive (A':
``picoquic``, the same code) and at a pull request's head (B: ``picoquic@pr``: beta 0.7 and
a back-off on the first loss of an epoch, where upstream waits for a smoothed loss rate of
15 %); B2 (``picoquic@pr2``) is its first commit alone (beta 0.7).

- ``ab/``: configs/conformance-ab.yml, the four builds paired per repetition, 6 each;
- ``history/``: configs/conformance-history.yml, one trial per campaign: eight campaigns of
  A and A' alternating with five of B (the pull request measured while open), then four of
  B (after its merge). Main's history A -> B is the eight A-side campaigns and the four after
  the merge; the A/A history is the eight A-side ones; the B/B history all nine of B.

Stored without the bottleneck captures (18 MB an attempt): each attempt's series is its
``flows.parquet`` (docs/flows.md, "The cache"), keyed by the bytes of its record: git does
not keep file times, and a plain copy (as here) keeps every cache."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from interop_runner.analysis.history import ingest
from interop_runner.cli.main import main

DATA = Path(__file__).parent / "data" / "conformance-variants"
A, A2, B = "picoquic@base", "picoquic", "picoquic@pr"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A writable copy (the loaders write their caches below it), with new file times."""
    return Path(shutil.copytree(DATA, tmp_path_factory.mktemp("cv") / DATA.name,
                                copy_function=shutil.copy))


def ab_campaign(data: Path) -> Path:
    (campaign,) = (data / "ab").iterdir()
    return campaign


def played(campaign: Path) -> str:
    """Which build played ``picoquic`` in a history campaign (its config's ``impl``)."""
    return str(json.loads((campaign / "campaign.json").read_text())["config"]["impl"]
               ["picoquic"])


def histories(data: Path) -> dict[str, list[Path]]:
    """The histories of the module: ``a_to_b``, ``a_a`` and ``b_b``."""
    campaigns = sorted((data / "history").iterdir())  # by their UTC start in the name
    a_side = [c for c in campaigns if played(c) != B]
    assert {played(c) for c in a_side} == {A, A2} and len(a_side) == 8
    merged = [c for c in campaigns if c.name > a_side[-1].name]
    assert len(merged) == 4 and {played(c) for c in merged} == {B}
    b_side = [c for c in campaigns if played(c) == B]
    return {"a_to_b": a_side + merged, "a_a": a_side, "b_b": b_side}


def compare_json(campaign: Path, a: str, b: str, capsys: pytest.CaptureFixture[str]
                 ) -> tuple[int, dict[str, Any]]:
    """``run.py compare DIR --column axis_build --variants a b --format json``: its exit
    status and its one conformance cell."""
    code = main(["compare", str(campaign), "--column", "axis_build", "--variants", a, b,
                 "--format", "json"])
    (cell,) = json.loads(capsys.readouterr().out)["conformance"]["cells"]
    return code, cell


def test_the_pull_request_conforms_better_and_its_revert_worse(
        data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """B backs off like the kernel: its flow overlaps the kernel's, A's never does."""
    code, cell = compare_json(ab_campaign(data), A, B, capsys)
    assert (cell["verdict"], cell["n_pairs"], cell["method"]) == ("better", 6, "paired")
    # A starves the kernel flow it competes with
    assert cell["median_a"] == 0.0 and cell["conformance_same_run_a"] == 0.0
    assert cell["median_b"] > 0.3 and cell["ci_low"] > 0.1 and cell["p_value"] < 0.05
    assert cell["delta_throughput_same_run_b"] < cell["delta_throughput_same_run_a"] - 5
    # no kernel-vs-kernel runs in this campaign: no figures against paper 000's reference
    assert cell["conformance_a"] is None and cell["conformance_b"] is None
    assert cell["conformance_missing_a"].startswith("no kernel-vs-kernel runs of cubic on "
                                                    "this path (rate_bps=20000000")
    assert code == 0  # better gates nothing
    code, cell = compare_json(ab_campaign(data), B, A, capsys)  # a PR bringing A's back
    assert cell["verdict"] == "worse" and code == 5


@pytest.mark.parametrize("other", [A2, "picoquic@pr2"])
def test_the_same_behaviour_is_no_change(data: Path, capsys: pytest.CaptureFixture[str],
                                         other: str) -> None:
    """A against A' (the same commit, built from the tree and from the upstream archive),
    and against B2 (beta 0.7 alone: picoquic still waits for 15 % loss)."""
    code, cell = compare_json(ab_campaign(data), A, other, capsys)
    assert (cell["verdict"], cell["n_pairs"]) == ("no change", 6)
    assert cell["median_a"] == cell["median_b"] == 0.0
    assert code == 0


def history_check(db: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """``run.py history check --db db --metric conformance``: exit status, output lines."""
    code = main(["history", "check", "--db", str(db), "--metric", "conformance"])
    return code, capsys.readouterr().out.strip().splitlines()


def test_history_finds_the_change_at_the_merge(data: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The offset from the kernel flow of the same run falls at the merge (12 -> 6 Mbit/s);
    the conformance rises too, but the first two campaigns after the merge conformed at 0.05
    and 0.11 (one 30 s trial a campaign scatters), within 0.1 of the zeros before: its change
    point is the third (0 -> 0.44)."""
    to_b = histories(data)["a_to_b"]
    report = ingest(tmp_path / "ab.duckdb", to_b)
    assert not report.refused
    code, lines = history_check(tmp_path / "ab.duckdb", capsys)
    name = [json.loads((c / "campaign.json").read_text())["campaign"] for c in to_b]
    # no kernel-vs-kernel runs in these campaigns: the series are of the same-run figures
    assert not [x for x in lines if " conformance delta_throughput: " in x]
    offset, = [x for x in lines if " conformance delta_throughput_same_run: " in x]
    assert f": improvement at {name[8]} " in offset and "(8/4 campaigns)" in offset
    assert "d199d45b (picoquic" in offset and "-> source-e61f4c66ce30" in offset
    share, = [x for x in lines if " conformance conformance_same_run: " in x]
    assert f": improvement at {name[10]} " in share and "(10/2 campaigns)" in share
    assert lines[-1] == "1 series, 2 change point(s), 0 open regression(s)" and code == 0


@pytest.mark.parametrize("history", ["a_a", "b_b"])
def test_a_history_of_the_same_code_has_no_change_point(
        data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], history: str) -> None:
    assert not ingest(tmp_path / "h.duckdb", histories(data)[history]).refused
    code, lines = history_check(tmp_path / "h.duckdb", capsys)
    assert code == 0 and lines[-1] == "1 series, 0 change point(s), 0 open regression(s)"


def test_every_envelope_panel_names_its_build(data: Path) -> None:
    """The report's envelope grid of the A/B campaign: four panels of the same flows, each
    titled with the build it measured (the axis ``build``), not four times "picoquic/cubic vs
    tcp/cubic"."""
    from interop_runner.analysis.views import conformance_envelope_grid

    chosen, fig = conformance_envelope_grid([ab_campaign(data)])
    titles = [ax.get_title().split("\n")[0] for ax in fig.axes if ax.get_title()]
    assert sorted(titles) == sorted(f"picoquic/cubic vs tcp/cubic (build={b})"
                                    for b in (A, A2, B, "picoquic@pr2"))
    assert len(chosen) == 4


def test_the_figures_of_a_build_do_not_move_with_the_k_means_seed(data: Path) -> None:
    """Each build against the kernel flow of its runs (the campaign ran no kernel-vs-kernel
    set, so the figures against paper 000's reference are <NA> and say why): over the seeds
    0-9 Conformance-T moves by at most 0.05, here not at all. One k-means clustering per
    seed and the steepest drop of its R(k) moved A's between 0.62 and 0.90 and A''s between
    0.65 and 0.96 (docs/conformance.md, "Choice of k")."""
    from interop_runner.analysis import flow_conformance
    table = flow_conformance(ab_campaign(data)).set_index("axis_build")
    assert set(table.index) == {A, A2, B, "picoquic@pr2"}
    for build, row in table.iterrows():
        assert row["conformance_t_spread_same_run"] <= 0.05, build
        assert row["conformance_spread_same_run"] <= 0.05, build
        assert (row["k_test_same_run"], row["k_reference_same_run"]) == (1, 1)
        assert pd.isna(row["conformance"]) and row["reference_runs"] == 0
        assert row["conformance_missing"].startswith("no kernel-vs-kernel runs of cubic")
    assert table.loc[A2, "conformance_t_same_run"] == pytest.approx(0.964, abs=0.001)
    assert table.loc[A, "conformance_t_same_run"] == pytest.approx(0.897, abs=0.001)
