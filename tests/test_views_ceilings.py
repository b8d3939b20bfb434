"""The closed-form view (analysis.views.ceilings): measured goodput under each pair's ceiling
curve. The real sample is tests/data/path-sample (one quic-go attempt over a calibrated
20 Mbit/s, 20 ms path without loss). The campaign of :func:`derived` is DERIVED from it: copies
of its run.json with base RTT, loss and goodput set by hand (one of them impossibly fast), so
that every point and curve is known; it was not measured."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from interop_runner.analysis import closed_form, load_results  # noqa: E402
from interop_runner.analysis.theories import ceilings  # noqa: E402
from interop_runner.analysis.views.ceilings import (  # noqa: E402
    COLUMNS,
    closed_form_figure,
    closed_form_frame,
    curve_mbps,
)

DATA = Path(__file__).parent / "data"
PATH_SAMPLE = DATA / "path-sample"
SAMPLE = DATA / "results-sample"  # over the direct link: no ceiling
RUN = "quic-go_quic-go/goodput/1/attempt-1/run.json"
PACKET = 11060016 / 7914  # the sample's mean packet at the bottleneck
LINK = 20.0 * (PACKET - 70) / PACKET  # its link ceiling, 18.998 Mbit/s
CASES = [(10.0, 0.0), (50.0, 0.0), (10.0, 0.001), (50.0, 0.001)]  # (RTT ms, loss)


@pytest.fixture(scope="module")
def sample() -> pd.DataFrame:
    return load_results(PATH_SAMPLE, cache=False)


@pytest.fixture(scope="module")
def derived(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """Four repetitions, one per case: 90 % of the link ceiling, except 0.1 % at 50 ms (90 %
    of Mathis's value, about 7.7 Mbit/s) and 0.1 % at 10 ms (25 Mbit/s: above 20 Mbit/s)."""
    root = tmp_path_factory.mktemp("closed-form") / "campaign"
    shutil.copytree(PATH_SAMPLE, root)
    record = json.loads((root / RUN).read_text())
    for rep, (rtt, loss) in enumerate(CASES, start=1):
        record.update(repetition=rep, file_size=100_000_000,
                      goodput_mbps=25.0 if (rtt, loss) == (10.0, 0.001) else 0.9 * LINK)
        record["path"]["resolved"].update(rtt_ms=rtt, loss=loss)
        if (rtt, loss) == (50.0, 0.001):
            record["goodput_mbps"] = 7.7
        attempt = root / RUN.replace("/1/", f"/{rep}/")
        attempt.parent.mkdir(parents=True, exist_ok=True)
        attempt.write_text(json.dumps(record))
    with pytest.MonkeyPatch.context() as patch:  # the cases assume Reno's halving, which
        known = {k: v for k, v in ceilings.reno_backoffs().items() if k != "quic-go"}
        patch.setattr(ceilings, "reno_backoffs", lambda: known)  # quic-go's does not do (0.7)
        return load_results(root, cache=False)


def test_frame_of_the_real_sample(sample: pd.DataFrame) -> None:
    table = closed_form_frame(sample)
    assert list(table.columns) == COLUMNS
    (row,) = table.to_dict("records")
    assert (row["pair"], row["rate_mbps"], row["rtt_ms"], row["loss"]) == \
        ("quic-go", 20.0, 20.0, 0.0)
    assert row["link_mbps"] == pytest.approx(LINK) and row["basis"] == "link"
    assert row["ratio"] == pytest.approx(18.68538217613238 / LINK)
    assert pd.isna(row["loss_mbps"]) and not row["exceeded"]


def test_figure_of_the_real_sample(sample: pd.DataFrame) -> None:
    before = plt.get_fignums()
    table, fig = closed_form(sample)
    assert plt.get_fignums() == before  # no pyplot state
    assert isinstance(fig, Figure) and len(fig.axes) == 1  # no loss: the RTT panel only
    (ax,) = fig.axes
    curve = [ln for ln in ax.lines if str(ln.get_label()).startswith("_quic-go")]
    assert len(curve) == 1
    assert np.allclose(curve[0].get_ydata(), LINK)  # no loss, a 6 MiB window: flat
    (points,) = [ln for ln in ax.lines if ln.get_label() == "quic-go"]
    assert list(points.get_xdata()) == [20.0]
    assert list(points.get_ydata()) == [pytest.approx(18.68538217613238)]


def test_curve_moves_each_ceiling_by_its_formula() -> None:
    row = pd.Series({"link_mbps": 19.0, "mathis_k": 100.0 * math.sqrt(0.001) * 10.0,
                     "window_bytes": 6 * 2 ** 20})
    # Mathis 100 Mbit/s at 10 ms and 0.1 %: 50 at 20 ms, 25 at 0.4 %; the link below both
    assert curve_mbps(row, [10.0, 20.0], 0.001) == pytest.approx([19.0, 19.0])
    row["link_mbps"] = math.nan  # a trace: no link ceiling
    assert curve_mbps(row, [10.0, 20.0], 0.001) == pytest.approx([100.0, 50.0])
    assert curve_mbps(row, 10.0, [0.004]) == pytest.approx([50.0])
    # no loss: Mathis does not apply, the window does: 8 x 6 MiB / 100 ms
    assert curve_mbps(row, [100.0], 0.0) == pytest.approx([503.31648])


def test_frame_and_flag_of_the_derived_campaign(derived: pd.DataFrame) -> None:
    table = closed_form_frame(derived)
    assert len(table) == 4
    by_case = {(r.rtt_ms, r.loss): r for r in table.itertuples(index=False)}
    assert by_case[(50.0, 0.001)].basis == "loss"
    assert by_case[(50.0, 0.001)].ratio == pytest.approx(7.7 / by_case[(50.0, 0.001)].loss_mbps)
    assert by_case[(10.0, 0.001)].basis == "link"  # Mathis about 43 Mbit/s
    assert [bool(r.exceeded) for r in table.itertuples()] == \
        [(r.rtt_ms, r.loss) == (10.0, 0.001) for r in table.itertuples()]


def test_figure_of_the_derived_campaign(derived: pd.DataFrame) -> None:
    table, fig = closed_form(derived)
    by_loss, by_rtt = fig.axes
    assert by_loss.get_xscale() == "log" and by_rtt.get_xscale() == "linear"
    # against loss: the lossy attempts only, a curve per RTT
    (points,) = [ln for ln in by_loss.lines if ln.get_label() == "quic-go"]
    assert sorted(points.get_ydata()) == [pytest.approx(7.7), 25.0]
    curves = [ln for ln in by_loss.lines if str(ln.get_label()).startswith("_quic-go")]
    assert len(curves) == 2
    tops = []
    for line in curves:  # never above the link ceiling, falling with the loss
        y = np.asarray(line.get_ydata(), float)
        assert y.max() <= LINK + 1e-9 and np.all(np.diff(y) <= 1e-9)
        tops.append(y.max())
    # 10 ms: the link binds at low loss; 50 ms: Mathis all along, the grid starting at a
    # third of the lowest loss: sqrt(3) x its value at 0.1 % (14.8 Mbit/s)
    mathis = table.loc[(table["rtt_ms"] == 50.0) & (table["loss"] == 0.001), "loss_mbps"]
    assert sorted(tops) == [pytest.approx(math.sqrt(3) * float(mathis.iloc[0])),
                            pytest.approx(LINK)]
    # the impossible attempt is crossed in both panels
    for ax in fig.axes:
        (cross,) = [ln for ln in ax.lines if ln.get_label() == "above a ceiling"]
        assert list(cross.get_ydata()) == [25.0]
    assert by_rtt.get_ylim()[1] == pytest.approx(1.15 * 25.0)


def test_a_curve_per_flow_control_window(tmp_path: Path) -> None:
    """Two attempts of one pair at 50 ms whose clients ran 32 and 64 KiB windows (the sample's
    record, DERIVED by hand: not measured): a curve each, at 8 x W / RTT, not one at the
    median window."""
    root = tmp_path / "campaign"
    shutil.copytree(PATH_SAMPLE, root)
    record = json.loads((root / RUN).read_text())
    for rep, window in enumerate((32 * 1024, 64 * 1024), start=1):
        record.update(repetition=rep, goodput_mbps=window / 8000.0)  # 80 % of 8 W / 50 ms
        record["path"]["resolved"]["rtt_ms"] = 50.0
        record["client"]["effective"]["flow_control_window"] = window
        attempt = root / RUN.replace("/1/", f"/{rep}/")
        attempt.parent.mkdir(parents=True, exist_ok=True)
        attempt.write_text(json.dumps(record))
    table, fig = closed_form(load_results(root, cache=False))
    assert list(table["window_bytes"]) == [32 * 1024, 64 * 1024]
    assert list(table["basis"]) == ["flow_control", "flow_control"]
    (ax,) = fig.axes
    curves = [ln for ln in ax.lines if str(ln.get_label()).startswith("_quic-go")]
    levels = sorted(float(np.interp(50.0, np.asarray(ln.get_xdata(), float),
                                    np.asarray(ln.get_ydata(), float))) for ln in curves)
    assert levels == [pytest.approx(8 * 32 * 1024 / 50e3, rel=1e-3),
                      pytest.approx(8 * 64 * 1024 / 50e3, rel=1e-3)]  # interpolated at 50 ms


def test_no_data_without_a_ceiling() -> None:
    frame = load_results(SAMPLE, cache=False)
    table, fig = closed_form(frame)
    assert table.empty and list(table.columns) == COLUMNS
    assert "no data for" in " ".join(t.get_text() for ax in fig.axes for t in ax.texts)
    assert closed_form_figure(closed_form_frame(pd.DataFrame())).axes
