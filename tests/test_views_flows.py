"""The Flows views (analysis.views.flows) and the report's Flows section, on the real
campaign tests/data/flows-sample (three kernel TCP flows through a tbf bottleneck;
tests/data/flows-sample/README.md). The QUIC-vs-TCP grid's frame is DERIVED from the
sample's flows (bbr relabelled as a QUIC implementation, stated in :func:`derived_quic`):
the sample has no QUIC flow."""

import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from interop_runner.analysis import load_flow_results, load_flows, load_results  # noqa: E402
from interop_runner.analysis.views import flows as vf  # noqa: E402
from interop_runner.report.build import build_report  # noqa: E402

DATA = Path(__file__).parent / "data"
SAMPLE = DATA / "flows-sample"
PATH_SAMPLE = DATA / "path-sample"  # one pair over a path: no flows
NO_DATA = "no data for"


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("flows") / SAMPLE.name
    shutil.copytree(SAMPLE, target)
    return target


@pytest.fixture(scope="module")
def results(copy: Path) -> pd.DataFrame:
    return load_results(copy)


@pytest.fixture(scope="module")
def flows(copy: Path) -> pd.DataFrame:
    return load_flow_results(copy)


def texts(fig: Figure) -> str:
    return " ".join(t.get_text() for ax in fig.axes for t in ax.texts) + " ".join(
        ax.get_title() for ax in fig.axes)


def derived_quic(frame: pd.DataFrame) -> pd.DataFrame:
    """DERIVED, not measured: the sample's bbr flows relabelled as QUIC ("quic-x/bbr")."""
    out = frame.copy()
    bbr = out["label"] == "tcp/bbr"
    out.loc[bbr, "kind"], out.loc[bbr, "label"] = "quic", "quic-x/bbr"
    return out


def test_timeline_of_one_attempt(copy: Path) -> None:
    table, fig = vf.flow_timeline([copy])
    assert list(table.columns) == vf.TIMELINE_COLUMNS
    assert table["path"].nunique() == 1
    assert (table["variant"] == "rate=10mbit").all() and (table["repetition"] == 1).all()
    assert set(table["label"]) == {"tcp/cubic", "tcp/bbr", "tcp/reno"}
    top, bottom = fig.axes
    kept = [ln for ln in top.lines if not ln.get_label().startswith("_")]
    assert sorted(ln.get_label() for ln in kept) == ["tcp/bbr", "tcp/cubic", "tcp/reno"]
    assert len(top.lines) == 6 and len(bottom.lines) == 6  # kept solid + all dotted
    assert "500 ms bins" in top.get_title()
    series = load_flows(copy)
    other = series.loc[series["variant"] == "rate=20mbit", "path"].dropna().iloc[0]
    chosen = vf.flow_timeline_frame(series, path=other)
    assert (chosen["variant"] == "rate=20mbit").all() and len(chosen)


def test_timeline_without_series(tmp_path: Path) -> None:
    target = tmp_path / PATH_SAMPLE.name  # a copy: the loaders write their caches
    shutil.copytree(PATH_SAMPLE, target, ignore=shutil.ignore_patterns(".cache"))
    table, fig = vf.flow_timeline([target])
    assert table.empty and NO_DATA in texts(fig)
    assert NO_DATA in texts(vf.flow_timeline_figure(vf.flow_timeline_frame(pd.DataFrame())))


def test_fairness_against_the_swept_rate(results: pd.DataFrame) -> None:
    table, fig = vf.flow_fairness_sweep(results)
    assert list(table["x"]) == ["10mbit", "20mbit"] and (table["axis"] == "axis_rate").all()
    assert (table["n"] == 3).all()
    assert ((table["mean_ci_low"] <= table["mean"]) & (table["mean"] <= table["mean_ci_high"])
            ).all()
    (ax,) = fig.axes
    assert ax.get_xlabel() == "rate" and ax.has_data()
    assert table["sliding_min_mean"].notna().sum() == 1  # 20 Mbit/s: no 5 s window
    by_variant = vf.flow_fairness_frame(results, axis="variant")
    assert list(by_variant["x"]) == ["rate=10mbit", "rate=20mbit"]
    rows = vf.flow_fairness_table(results)
    assert len(rows) == 6 and set(rows["fairness_basis"]) == {"series", "goodput"}


def test_fairness_without_flows() -> None:
    frame = load_results(PATH_SAMPLE, cache=False)
    table, fig = vf.flow_fairness_sweep(frame)
    assert table.empty and NO_DATA in texts(fig)
    assert vf.flow_fairness_table(frame).empty
    assert NO_DATA in texts(vf.flow_fairness_figure(pd.DataFrame()))


def test_share_matrix(flows: pd.DataFrame) -> None:
    table, fig = vf.flow_share_matrix(flows)
    assert list(table.columns) == vf.SHARE_COLUMNS
    assert len(table) == 6  # three labels, ordered pairs
    pairs = table.set_index(["row", "column"])["share_mean"]
    for (a, b), value in pairs.items():
        assert value + pairs[(b, a)] == pytest.approx(1.0)
    assert pairs[("tcp/bbr", "tcp/cubic")] > 0.5
    assert (table["n"] == 6).all()  # six attempts with a share each
    assert set(table["share_basis"]) == {"mixed"}  # one attempt without captures
    assert "0.71" in texts(fig)
    by_cc = vf.flow_share_frame(flows, group="congestion_control")
    assert set(by_cc["row"]) == {"cubic", "bbr", "reno"}
    assert NO_DATA in texts(vf.flow_share_figure(vf.flow_share_frame(pd.DataFrame())))


def test_quic_against_tcp_grid(flows: pd.DataFrame, copy: Path) -> None:
    table, fig = vf.flow_quic_vs_tcp(derived_quic(flows))
    assert list(table["group"]) == ["quic-x/bbr"] * 2
    written = texts(fig)
    assert "***" in written and "n.s." in written and "g = " in written
    assert vf.flow_quic_vs_tcp_frame(derived_quic(flows), metric="goodput_mbps")[
        "metric"].eq("goodput_mbps").all()
    empty, nothing = vf.flow_quic_vs_tcp([copy])  # only TCP flows
    assert empty.empty and NO_DATA in texts(nothing)
    assert NO_DATA in texts(vf.flow_quic_vs_tcp_figure(empty))


def test_report_has_a_flows_section_only_for_flows(tmp_path: Path, copy: Path) -> None:
    path_copy = tmp_path / PATH_SAMPLE.name
    shutil.copytree(PATH_SAMPLE, path_copy, ignore=shutil.ignore_patterns(".cache"))
    report = build_report([copy, path_copy], tmp_path / "out")
    assert not report.view_errors, report.view_errors
    by_name = {c.name.split("_")[0]: c for c in report.campaigns}
    flows, path = by_name["flowsample"], by_name["pathcheck"]
    drawn = {f.view.name for f in flows.figures}
    assert {"flows-time", "flows-fairness", "flows-share"} <= drawn
    skipped = {s.view.name: s.reason for s in flows.skipped}
    assert skipped["flows-quic-tcp"] == "no data in this campaign"  # no QUIC flow
    fairness = next(f for f in flows.figures if f.view.name == "flows-fairness")
    assert fairness.table is not None and len(fairness.table) == 6
    assert not {f.view.name for f in path.figures} & {"flows-time", "flows-fairness"}
    reasons = {s.view.name: s.reason for s in path.skipped}
    assert reasons["flows-time"] == "no competing flows in this campaign"
    html = (tmp_path / "out" / "report.html").read_text()
    assert "Flows: throughput per flow over time" in html
