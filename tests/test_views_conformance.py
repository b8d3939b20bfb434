"""The Conformance views (analysis.views.conformance) and the report's Conformance section,
on the real campaign tests/data/flows-runner-sample (quic-go/reno against tcp/reno,
quiche/cubic against tcp/cubic, one repetition each, no buffer or RTT sweep) and
tests/data/flows-sample (three kernel TCP flows of three congestion controls: nothing to
test). Frames DERIVED from them say what they change."""

from __future__ import annotations

import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Polygon  # noqa: E402

from interop_runner.analysis import flow_conformance, load_flow_results, load_flows  # noqa: E402
from interop_runner.analysis.theories.envelope import hull_polygons, performance_envelope  # noqa: E402
from interop_runner.analysis.theories.flow_conformance import (  # noqa: E402
    FLOW_CONFORMANCE_COLUMNS,
    conformance_table,
)
from interop_runner.analysis.views import conformance as vc  # noqa: E402
from interop_runner.report.build import build_report  # noqa: E402

DATA = Path(__file__).parent / "data"
NO_DATA = "no data for"


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Writable copies of both samples (the loaders write their caches below them)."""
    root = tmp_path_factory.mktemp("confviews")
    return {name: Path(shutil.copytree(DATA / name, root / name))
            for name in ("flows-sample", "flows-runner-sample")}


@pytest.fixture(scope="module")
def frames(stored: dict[str, Path]) -> tuple[pd.DataFrame, pd.DataFrame]:
    return load_flows(stored["flows-runner-sample"]), load_flow_results(
        stored["flows-runner-sample"])


@pytest.fixture(scope="module")
def table(stored: dict[str, Path]) -> pd.DataFrame:
    return flow_conformance(stored["flows-runner-sample"]).set_index("label")


def texts(fig: Figure) -> str:
    return " ".join(t.get_text() for ax in fig.axes for t in ax.texts) + " ".join(
        ax.get_title() for ax in fig.axes) + (fig.get_suptitle() or "")


# ----------------------------------------------------------------------------- heatmap

def test_heatmap_of_quic_against_the_kernel(stored: dict[str, Path],
                                            table: pd.DataFrame) -> None:
    """No kernel-vs-kernel runs in the sample: the heatmap draws the same-run figures and
    its title says so."""
    frame, fig = vc.conformance_heatmap([stored["flows-runner-sample"]])
    assert list(frame.columns) == vc.HEATMAP_COLUMNS
    assert frame["label"].tolist() == ["quiche/cubic", "quic-go/reno"]  # by CC, then name
    assert (frame["buffer"] == vc.ONE).all() and (frame["rtt"] == vc.ONE).all()
    assert frame["conformance"].isna().all()
    for column in ("conformance", "conformance_t", "delta_throughput", "delta_delay"):
        column += "_same_run"
        assert frame.set_index("label")[column].to_dict() == pytest.approx(
            table[column].to_dict())
    quiche = frame.set_index("label").loc["quiche/cubic"]
    assert quiche["conformance_same_run"] == 0
    assert quiche["conformance_t_same_run"] == pytest.approx(0.7273, abs=1e-4)
    (ax, _colourbar) = fig.axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["quiche/cubic", "quic-go/reno"]
    cells = [t.get_text() for t in ax.texts]
    assert cells == ["0.00 / 0.73\n(+6.7, +0.46)", "0.40 / 0.72\n(+1.4, -1.04)"]
    assert "against the kernel flow of the same run" in fig.get_suptitle()
    shown = ax.images[0].get_array()
    assert shown[0, 0] == 0 and shown[1, 0] == pytest.approx(0.3962, abs=1e-4)


def test_heatmap_cell_without_figures_is_na_with_its_reason(
        frames: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    """DERIVED: the runner's sample with the TCP Reno flow's congestion control renamed,
    so that quic-go/reno has no reference."""
    flows, results = frames[0], frames[1].copy()
    reno = (results["label"] == "tcp/reno").to_numpy()
    results.loc[reno, "congestion_control"] = "vegas"
    frame, fig = vc.conformance_heatmap(conformance_table(flows, results))
    goer = frame.set_index("label").loc["quic-go/reno"]
    assert pd.isna(goer["conformance_same_run"]) and pd.isna(goer["k_test_same_run"])
    assert goer["conformance_same_run_missing"].startswith(
        "no kernel TCP flow of congestion control reno")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.texts][1] == "NA"
    assert np.ma.is_masked(ax.images[0].get_array()[1, 0])
    cells = vc.conformance_cells(conformance_table(flows, results)).set_index("label")
    assert cells.loc["quic-go/reno", "missing: why"] == goer["conformance_missing"]
    assert pd.isna(cells.loc["quic-go/reno", "k (test/ref)"])
    assert cells.loc["quiche/cubic", "k (test/ref)"] == "1/1"


def synthetic_table() -> pd.DataFrame:
    """SYNTHETIC: a flow_conformance table of one flow over two RTTs and three buffers
    given out of order (one cell missing)."""
    rows = []
    for rtt, buffer, c in (("50ms", "5bdp", 0.1), ("10ms", "1bdp", 0.8),
                           ("10ms", "0.5bdp", 0.9), ("10ms", "5bdp", 0.2),
                           ("50ms", "1bdp", 0.7)):
        rows.append({"campaign": "c", "flow_set": "x", "variant": f"{rtt},{buffer}",
                     "axis_rtt": rtt, "axis_buffer": buffer, "label": "x/cubic",
                     "server": "x", "congestion_control": "cubic",
                     "reference_label": "tcp/cubic", "conformance": c, "conformance_t": 0.9,
                     "delta_throughput": 1.0, "delta_delay": -0.5, "k_test": 1,
                     "k_reference": 2, "trials_test": 3, "trials_reference": 3})
    return pd.DataFrame(rows).reindex(columns=["campaign", "flow_set", "variant", "axis_rtt",
                                               "axis_buffer", *FLOW_CONFORMANCE_COLUMNS])


def test_heatmap_has_a_panel_per_rtt_and_buffers_in_order() -> None:
    frame, fig = vc.conformance_heatmap(synthetic_table())
    assert list(zip(frame["rtt"], frame["buffer"])) == [
        ("10ms", "0.5bdp"), ("10ms", "1bdp"), ("10ms", "5bdp"), ("50ms", "1bdp"),
        ("50ms", "5bdp")]
    ten, fifty = fig.axes[:2]
    assert (ten.get_title(), fifty.get_title()) == ("RTT 10ms", "RTT 50ms")
    for ax in (ten, fifty):
        assert [t.get_text() for t in ax.get_xticklabels()] == ["0.5bdp", "1bdp", "5bdp"]
    assert ten.images[0].get_array().tolist() == [[0.9, 0.8, 0.2]]
    assert [t.get_text() for t in fifty.texts] == ["0.70 / 0.90\n(+1.0, -0.50)",
                                                   "0.10 / 0.90\n(+1.0, -0.50)"]
    assert np.ma.is_masked(fifty.images[0].get_array()[0, 0])  # no 0.5 BDP cell at 50 ms
    cells = vc.conformance_cells(synthetic_table())
    assert list(cells.columns) == list(vc.CELLS_COLUMNS.values())
    assert cells["trials (test/ref)"].tolist() == ["3/3"] * 5


def test_heatmap_without_a_tested_flow(stored: dict[str, Path]) -> None:
    """flows-sample: cubic, bbr and reno once each: no QUIC flow, and no congestion
    control that two kernel flows share."""
    frame, fig = vc.conformance_heatmap([stored["flows-sample"]])
    assert frame.empty and NO_DATA in texts(fig)
    grid, grid_fig = vc.conformance_envelope_grid([stored["flows-sample"]])
    assert grid.empty and NO_DATA in texts(grid_fig)


def test_every_view_degrades_on_empty_frames() -> None:
    for view, source in ((vc.conformance_heatmap, pd.DataFrame()),
                         (vc.conformance_envelopes, (pd.DataFrame(), pd.DataFrame())),
                         (vc.conformance_envelope_grid, (pd.DataFrame(), pd.DataFrame())),
                         (vc.conformance_envelope_grid, pd.DataFrame())):
        frame, fig = view(source)
        assert frame.empty and len(frame.columns) > 0 and NO_DATA in texts(fig)
    assert vc.conformance_cells(pd.DataFrame()).columns.tolist() == list(
        vc.CELLS_COLUMNS.values())


# --------------------------------------------------------------------------- envelopes

def test_hull_polygons_are_in_data_units() -> None:
    square = np.array([[0, 0], [1, 0], [1, 1], [0, 1], [0.5, 0.5]], dtype=float)
    (trial,) = hull_polygons(performance_envelope([square], 1), (10.0, 2.0))
    (corners,) = trial
    assert sorted(map(tuple, corners.tolist())) == [(0, 0), (0, 2), (10, 0), (10, 2)]


def test_envelopes_of_quiche_against_the_kernel(
        frames: tuple[pd.DataFrame, pd.DataFrame], table: pd.DataFrame) -> None:
    frame, fig = vc.conformance_envelopes(frames, "quiche/cubic")
    row = table.loc["quiche/cubic"]  # no kernel-vs-kernel runs: the same-run figures
    assert (frame["compared_with"] == "the kernel flow of the same run").all()
    for column in ("conformance", "conformance_t", "delta_throughput", "delta_delay"):
        assert frame[column].iloc[0] == pytest.approx(row[column + "_same_run"])
    points = frame[frame["part"] == "point"]
    assert (points["side"] == "test").sum() == row["points_test_same_run"] == 24
    assert (points["side"] == "reference").sum() == row["points_reference_same_run"] == 31
    assert points["kept"].all()  # one trial: its own envelope keeps every point
    hulls = frame[frame["part"] == "hull"]
    for side in ("test", "reference"):  # k = 1: one hull around the cloud
        mine, cloud = hulls[hulls["side"] == side], points[points["side"] == side]
        assert mine["hull"].nunique() == 1
        assert mine["delay_ms"].max() == pytest.approx(cloud["delay_ms"].max())
        assert mine["throughput_mbps"].min() == pytest.approx(cloud["throughput_mbps"].min())
    moved = frame[frame["part"] == "translated hull"].reset_index(drop=True)
    original = hulls[hulls["side"] == "test"].reset_index(drop=True)
    assert np.allclose(moved["throughput_mbps"],
                       original["throughput_mbps"] - row["delta_throughput_same_run"])
    assert np.allclose(moved["delay_ms"], original["delay_ms"] - row["delta_delay_same_run"])
    (ax,) = fig.axes
    patches = [p for p in ax.patches if isinstance(p, Polygon)]
    assert len(patches) == 3 and sum(p.get_linestyle() == "--" for p in patches) == 1
    assert "quiche/cubic against tcp/cubic" in ax.get_title()
    assert "C = 0.00, C-T = 0.73, Δ = (+6.7 Mbit/s, +0.46 ms) (same run)" in ax.get_title()
    plain = vc.conformance_envelopes_frame(frames, "quiche/cubic", translated=False)
    assert "translated hull" not in set(plain["part"])


def test_envelopes_by_default_and_by_cell(frames: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    first = vc.conformance_envelopes_frame(frames)
    assert first["label"].iloc[0] == "quic-go/reno"  # the first cell by flow set
    chosen = vc.conformance_envelopes_frame(frames, "quic-go/reno",
                                            flow_set="quic-go-reno+tcp-reno")
    assert chosen["conformance"].iloc[0] == pytest.approx(first["conformance"].iloc[0])
    assert (chosen["flow_set"] == "quic-go-reno+tcp-reno").all()


def test_envelopes_without_clouds_say_why(frames: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    frame, fig = vc.conformance_envelopes(frames, "quiche/cubic",
                                          flow_set="quic-go-reno+tcp-reno")
    assert frame.empty and frame.attrs["missing"].endswith(
        "no cell with a tested flow quiche/cubic")
    assert NO_DATA in texts(fig) and "quiche/cubic" in texts(fig)


def test_envelope_grid_of_the_runner_sample(stored: dict[str, Path]) -> None:
    chosen, fig = vc.conformance_envelope_grid([stored["flows-runner-sample"]])
    assert chosen["label"].tolist() == ["quiche/cubic", "quic-go/reno"]  # least conformant
    titles = [ax.get_title() for ax in fig.axes if ax.axison]
    assert len(titles) == 2 and titles[0].startswith("quiche/cubic vs tcp/cubic\nC = 0.00")
    assert all(len(ax.collections) >= 2 for ax in fig.axes if ax.axison)  # the clouds


# ------------------------------------------------------------------------------ report

def test_report_has_a_conformance_section_only_for_tested_flows(
        stored: dict[str, Path], tmp_path: Path) -> None:
    report = build_report([stored["flows-runner-sample"], stored["flows-sample"]],
                          tmp_path / "out")
    assert not report.view_errors, report.view_errors
    by_name = {c.name.split("_")[0]: c for c in report.campaigns}
    quic, kernel = by_name["flows-quic-sample"], by_name["flowsample"]
    drawn = {f.view.name: f for f in quic.figures}
    assert {"conformance", "conformance-envelopes"} <= set(drawn)
    cells = drawn["conformance"].table
    assert cells is not None and cells["label"].tolist() == ["quiche/cubic", "quic-go/reno"]
    assert not {"conformance", "conformance-envelopes"} & {f.view.name for f in
                                                          kernel.figures}
    skipped = {s.view.name: s.reason for s in kernel.skipped}
    assert skipped["conformance"] == skipped["conformance-envelopes"] == \
        "no data in this campaign"
    html = (tmp_path / "out" / "report.html").read_text()
    quic_part = html.split('<section id="c-flows-quic-sample')[1].split("</section>")[0]
    assert "<b>Conformance per cell</b>" in quic_part
    assert "<th>Conformance-T</th>" in quic_part and "<td>quiche/cubic</td>" in quic_part
    for stem in ("conformance", "conformance-envelopes"):
        assert list((tmp_path / "out" / "figures").glob(f"flows-quic-sample*__{stem}.svg"))
