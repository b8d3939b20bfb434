"""The ACK-ratio view (analysis.views.ack_ratio, paper 003 Fig. 7) on a real sweep:
tests/data/ack-ratio-sample (aioquic and quiche at 1:1, 1:2, 1:10; 2 and 10 ms; 0.1 % loss)."""

from __future__ import annotations

import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from interop_runner.analysis import load_results  # noqa: E402
from interop_runner.analysis.views import ack_ratio_sweep  # noqa: E402
from interop_runner.analysis.views.ack_ratio import COLUMNS, ack_ratio_frame  # noqa: E402

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    root = tmp_path_factory.mktemp("ack") / "campaign"
    shutil.copytree(DATA / "ack-ratio-sample", root)  # loading writes a cache beside it
    return load_results(root, cache=False)


def test_one_row_per_pair_rtt_and_ratio(sample: pd.DataFrame) -> None:
    table = ack_ratio_frame(sample)
    assert list(table.columns) == COLUMNS
    assert len(table) == 12 and set(table["n"]) == {1}
    assert set(zip(table["pair"], table["path_rtt_ms"], table["ack_ratio"])) == {
        (p, r, n) for p in ("aioquic", "quiche") for r in (2.0, 10.0) for n in (1, 2, 10)}
    assert (table["goodput_mean"] > 0).all()
    assert (table["goodput_min"] == table["goodput_max"]).all()  # one attempt per row


def test_both_stacks_ack_as_asked(sample: pd.DataFrame) -> None:
    """quiche and aioquic hold their ACKs exactly: datagrams sent / received is 1/n."""
    table = ack_ratio_frame(sample)
    expected = 1.0 / table["ack_ratio"].astype(float)
    assert (table["ratio"] - expected).abs().max() < 0.01
    assert (table["sent"] < table["received"] * 1.01).all()


def test_the_figure_has_a_line_per_pair_and_rtt(sample: pd.DataFrame) -> None:
    table, fig = ack_ratio_sweep(sample)
    left, right = fig.axes
    assert len(left.get_legend().get_texts()) == 4  # 2 pairs x 2 RTTs
    assert [t.get_text() for t in left.get_xticklabels()] == ["1:1", "1:2", "1:10"]
    assert "ideal 1/n" in [line.get_label() for line in right.get_lines()]
    assert not table.empty


def test_without_an_ack_ratio_no_data() -> None:
    frame = load_results(DATA / "path-sample", cache=False)
    table, fig = ack_ratio_sweep(frame)
    assert table.empty and list(table.columns) == COLUMNS
    assert "no data" in fig.axes[0].texts[0].get_text()
