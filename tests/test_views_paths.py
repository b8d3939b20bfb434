"""The Paths view (analysis.views.paths): goodput as a fraction of the bottleneck rate per
buffer, the paths' calibration and the bottleneck counters.

Values come from ``tests/data/path-sample`` (one real attempt over a 20 Mbit/s, 20 ms,
1 BDP path; tests/data/path-sample/README.md). The sweep of :func:`derived_sweep` is DERIVED
from that one attempt: copies of its row with buffer, pair, goodput fraction, status and
calibration set by hand, so that medians, ranges and failures are known exactly; it was not
measured.
"""

import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from interop_runner.analysis import load_results  # noqa: E402
from interop_runner.analysis.views import (  # noqa: E402
    path_buffer_figure,
    path_buffer_frame,
    path_buffer_sweep,
    path_calibration_frame,
    path_counters_frame,
)
from interop_runner.analysis.views.paths import (  # noqa: E402
    BUFFER_COLUMNS,
    CALIBRATION_COLUMNS,
    COUNTER_COLUMNS,
)

DATA = Path(__file__).parent / "data"
PATH_SAMPLE = DATA / "path-sample"
SAMPLE = DATA / "results-sample"  # over the direct link: no path
# the sample's attempt (run.json): goodput 18.685... Mbit/s over a 20 Mbit/s bottleneck
SAMPLE_GOODPUT = 18.68538217613238
SAMPLE_FRACTION = SAMPLE_GOODPUT / 20.0


@pytest.fixture(scope="module")
def sample() -> pd.DataFrame:
    return load_results(PATH_SAMPLE, cache=False)


def line_data(ax, label: str) -> tuple[list[float], list[float]]:
    (line,) = [ln for ln in ax.lines if ln.get_label() == label]
    return [float(x) for x in line.get_xdata()], [float(y) for y in line.get_ydata()]


def labels(ax) -> list[str]:
    return sorted(str(ln.get_label()) for ln in ax.lines
                  if not str(ln.get_label()).startswith("_"))


# ----------------------------------------------------------------------------- the real sample

def test_buffer_frame_of_the_real_sample(sample: pd.DataFrame) -> None:
    table = path_buffer_frame(sample)
    assert list(table.columns) == BUFFER_COLUMNS
    (row,) = table.to_dict("records")
    assert (row["rate_mbps"], row["rtt_ms"], row["buffer_bdp"], row["buffer_bytes"]) == \
        (20.0, 20.0, 1.0, 50000)  # 50000 B = 20 Mbit/s x 20 ms
    assert (row["loss_fraction"], row["jitter_cv"], row["links"]) == (0.0, 0.0, 1)
    assert (row["server"], row["client"], row["pair"]) == ("quic-go", "quic-go", "quic-go")
    assert (row["attempts"], row["failures"], row["n"]) == (1, 0, 1)
    for stat in ("median", "min", "max"):
        assert row[f"goodput_fraction_{stat}"] == pytest.approx(SAMPLE_FRACTION)
    assert row["goodput_median_mbps"] == pytest.approx(SAMPLE_GOODPUT)
    assert row["bottleneck_drops_median_packets"] == 125.0  # run.json counters.bottleneck
    assert not pd.isna(row["calibration_ok"]) and bool(row["calibration_ok"])


def test_calibration_frame_of_the_real_sample(sample: pd.DataFrame, tmp_path: Path) -> None:
    table = path_calibration_frame(sample)
    assert list(table.columns) == CALIBRATION_COLUMNS
    (row,) = table.to_dict("records")
    assert (row["path_key"], row["backend"], row["placement"]) == \
        ("path-e332eb1128b4", "nfqueue", "server-egress")
    assert (row["rtt_configured_ms"], row["rtt_calibrated_ms"]) == (20.0, 20.2)
    assert row["rate_configured_mbps"] == 20.0
    assert row["rate_calibrated_mbps"] == pytest.approx(19.80091144984366)
    assert row["queue_configured_ms"] == pytest.approx(20.0)  # 50000 B * 8 / 20 Mbit/s
    assert row["queue_calibrated_ms"] == pytest.approx(18.6)
    assert row["loss_configured"] == 0.0 and pd.isna(row["loss_calibrated"])  # not measured
    assert bool(row["calibration_ok"]) and row["attempts"] == 1
    # the same from the campaign directory (a copy: load_results caches below it)
    copy = tmp_path / PATH_SAMPLE.name
    shutil.copytree(PATH_SAMPLE, copy)
    pd.testing.assert_frame_equal(path_calibration_frame(copy), table)
    pd.testing.assert_frame_equal(path_calibration_frame([copy]), table)


def test_counters_frame_of_the_real_sample(sample: pd.DataFrame) -> None:
    table = path_counters_frame(sample)
    assert list(table.columns) == COUNTER_COLUMNS
    (row,) = table.to_dict("records")
    assert (row["status"], row["repetition"], row["attempt"]) == ("ok", 1, 1)
    assert (row["bottleneck_sent_bytes"], row["bottleneck_sent_packets"],
            row["bottleneck_drops"], row["bottleneck_overlimits"]) == (11060016, 7914, 125, 14525)
    assert row["goodput_fraction"] == pytest.approx(SAMPLE_FRACTION)
    # the sample's data direction has no delay line (the delay sits on the reverse one)
    assert all(pd.isna(row[c]) for c in ("delayline_received", "delayline_delivered",
                                          "delayline_dropped", "delayline_reordered"))


def test_figure_of_the_real_sample(sample: pd.DataFrame) -> None:
    before = plt.get_fignums()
    table, fig = path_buffer_sweep(sample)
    assert plt.get_fignums() == before  # no pyplot state
    assert isinstance(fig, Figure) and len(fig.axes) == 1
    (ax,) = fig.axes
    assert labels(ax) == ["quic-go"]
    assert line_data(ax, "quic-go") == ([1.0], [pytest.approx(SAMPLE_FRACTION)])
    assert ax.get_ylim() == (0.0, 1.05)
    assert ax.get_xscale() == "log"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1"]
    assert ax.get_xlabel() == "bottleneck buffer [BDP]"
    assert ax.get_ylabel() == "goodput / bottleneck rate"
    assert ax.get_title() == "20 Mbit/s, 20 ms RTT"
    assert fig.get_suptitle() == "Goodput against the bottleneck buffer"


# ----------------------------------------------------------------------------- derived sweep

BUFFERS = (0.5, 1.0, 3.0, 5.0)
# goodput fractions per pair and buffer, two repetitions each (DERIVED: set by hand)
FRACTIONS = {"quic-go": {0.5: (0.70, 0.74), 1.0: (0.85, 0.87), 3.0: (0.92, 0.94),
                         5.0: (0.93, 0.95)},
             "quiche": {0.5: (0.60, 0.66), 1.0: (0.80, 0.82), 3.0: (0.90, 0.90),
                        5.0: (0.91, 0.93)},
             "tcp-tls": {0.5: (0.88, 0.90), 1.0: (0.93, 0.95), 3.0: (0.95, 0.95),
                         5.0: (0.95, 0.95)}}


def derived(base: pd.DataFrame, **values) -> pd.DataFrame:
    """The one-row frame ``base`` with columns set (dtypes kept)."""
    row = base.copy()
    for column, value in values.items():
        row[column] = value
    return row


def derived_sweep(sample: pd.DataFrame) -> pd.DataFrame:
    """DERIVED from the real attempt: the issue's buffer sweep (quic-go, quiche and tcp-tls at
    0.5/1/3/5 BDP) on the sample's path, two repetitions per cell, plus

    - quic-go at 1 BDP: a third, failed attempt (no goodput);
    - quic-go ran as ``quic-go@v0.64.0`` (``cell_server``/``cell_client`` say ``quic-go``);
    - tcp-tls: no bottleneck counters (<NA>);
    - a second path (100 Mbit/s, 50 ms) whose calibration missed: quiche at 1 BDP twice ok,
      at 3 BDP only failed attempts;
    - one attempt over the direct link (no path), which the view leaves out.
    """
    rows = []
    for pair, cells in FRACTIONS.items():
        ran = "quic-go@v0.64.0" if pair == "quic-go" else pair
        for bdp, fractions in cells.items():
            for rep, fraction in enumerate(fractions, start=1):
                rows.append(derived(
                    sample, server=ran, client=ran, cell_server=pair, cell_client=pair,
                    repetition=rep, path_buffer_bdp=bdp, path_buffer_bytes=int(50000 * bdp),
                    goodput_fraction=fraction, goodput_mbps=20.0 * fraction,
                    bottleneck_drops=None if pair == "tcp-tls" else int(100 / bdp)))
    rows.append(derived(sample, server="quic-go@v0.64.0", client="quic-go@v0.64.0",
                        cell_server="quic-go", cell_client="quic-go", repetition=3,
                        path_buffer_bdp=1.0, status="failed", goodput_mbps=None,
                        goodput_fraction=None, bottleneck_drops=7))
    other = dict(server="quiche", client="quiche", cell_server="quiche", cell_client="quiche",
                 path_key="path-other", path_rate_mbps=100.0, path_rtt_ms=50.0,
                 path_calibration_ok=False)
    rows.append(derived(sample, **other, repetition=1, path_buffer_bdp=1.0,
                        goodput_fraction=0.50))
    rows.append(derived(sample, **other, repetition=2, path_buffer_bdp=1.0,
                        goodput_fraction=0.60))
    rows.append(derived(sample, **other, repetition=1, path_buffer_bdp=3.0, status="timeout",
                        goodput_fraction=None))
    rows.append(derived(sample, path_key=None, path_rate_mbps=None, path_buffer_bdp=None,
                        goodput_fraction=None, repetition=9))
    return pd.concat(rows, ignore_index=True)


def test_buffer_frame_of_a_derived_sweep(sample: pd.DataFrame) -> None:
    table = path_buffer_frame(derived_sweep(sample))
    assert len(table) == 12 + 2  # 3 pairs x 4 buffers on the sample's path, 2 on the other
    first = table[table["rate_mbps"] == 20.0]
    assert first["pair"].tolist() == ["quic-go"] * 4 + ["quiche"] * 4 + ["tcp-tls"] * 4
    assert first["buffer_bdp"].tolist() == list(BUFFERS) * 3  # sorted by path, pair, buffer
    assert first["buffer_bytes"].tolist() == [25000, 50000, 150000, 250000] * 3
    cells = first.set_index(["pair", "buffer_bdp"])
    for pair, by_buffer in FRACTIONS.items():
        for bdp, (low, high) in by_buffer.items():
            cell = cells.loc[(pair, bdp)]
            assert cell["goodput_fraction_median"] == pytest.approx((low + high) / 2)
            assert (cell["goodput_fraction_min"], cell["goodput_fraction_max"]) == \
                pytest.approx((low, high))
            assert cell["goodput_median_mbps"] == pytest.approx(20.0 * (low + high) / 2)
    # the failed attempt: counted, not in the statistics (nor its 7 drops)
    assert tuple(cells.loc[("quic-go", 1.0), ["attempts", "failures", "n"]]) == (3, 1, 2)
    assert cells.loc[("quic-go", 1.0), "bottleneck_drops_median_packets"] == 100.0
    assert cells.loc[("quic-go", 0.5), "bottleneck_drops_median_packets"] == 200.0
    assert cells.loc[("tcp-tls", 1.0), "bottleneck_drops_median_packets"] != \
        cells.loc[("tcp-tls", 1.0), "bottleneck_drops_median_packets"]  # NaN: not counted
    assert set(first["server"]) == {"quic-go", "quiche", "tcp-tls"}  # as written, not ran
    assert first["calibration_ok"].tolist() == [True] * 12
    second = table[table["rate_mbps"] == 100.0].set_index("buffer_bdp")
    assert second["rtt_ms"].tolist() == [50.0, 50.0]
    assert second.loc[1.0, "goodput_fraction_median"] == pytest.approx(0.55)
    assert tuple(second.loc[3.0, ["attempts", "failures", "n"]]) == (1, 1, 0)
    assert pd.isna(second.loc[3.0, "goodput_fraction_median"])
    assert second["calibration_ok"].tolist() == [False, False]


def test_figure_of_a_derived_sweep(sample: pd.DataFrame) -> None:
    table = path_buffer_frame(derived_sweep(sample))
    before = plt.get_fignums()
    fig = path_buffer_figure(table)
    assert plt.get_fignums() == before
    assert len(fig.axes) == 2  # one panel per path
    first, second = fig.axes
    assert first.get_title() == "20 Mbit/s, 20 ms RTT"
    assert second.get_title() == "100 Mbit/s, 50 ms RTT (calibration missed)"
    assert labels(first) == ["quic-go", "quiche", "tcp-tls"]  # one line per pair
    for pair, by_buffer in FRACTIONS.items():
        x, y = line_data(first, pair)
        assert x == list(BUFFERS)
        assert y == pytest.approx([(lo + hi) / 2 for lo, hi in by_buffer.values()])
    assert [t.get_text() for t in first.get_xticklabels()] == ["0.5", "1", "3", "5"]
    assert first.get_xscale() == "log" and first.get_ylim() == (0.0, 1.05)
    # error bars: one per pair, spanning min to max
    assert len(first.collections) == 3
    segments = first.collections[0].get_segments()  # quic-go, in buffer order
    spans = [float(y) for segment in segments for y in (segment[0][1], segment[1][1])]
    assert spans == pytest.approx([v for pair in FRACTIONS["quic-go"].values() for v in pair])
    # the other path: quiche's line at 1 BDP, a cross at 0 for 3 BDP (no ok attempt)
    assert line_data(second, "quiche") == ([1.0], [pytest.approx(0.55)])
    (cross,) = [ln for ln in second.lines if ln.get_marker() == "x"]
    assert [float(v) for v in cross.get_xdata()] == [3.0]
    assert [float(v) for v in cross.get_ydata()] == [0.0]
    legend = first.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["quic-go", "quiche", "tcp-tls"]


def test_rows_without_a_value_leave_out_what_they_lack(sample: pd.DataFrame) -> None:
    """A path attempt without its buffer in BDP cannot be placed: left out of the buffer view,
    still in the calibration and the counters."""
    frame = pd.concat([sample, derived(sample, path_buffer_bdp=None, repetition=2)],
                      ignore_index=True)
    assert path_buffer_frame(frame)["attempts"].tolist() == [1]
    assert path_calibration_frame(frame)["attempts"].tolist() == [2]
    assert path_counters_frame(frame)["repetition"].tolist() == [1, 2]


# ----------------------------------------------------------------------------- no path

@pytest.mark.parametrize("source", ["empty", "direct link"])
def test_without_a_path_everything_is_empty(source: str) -> None:
    frame = pd.DataFrame() if source == "empty" else load_results(SAMPLE, cache=False)
    table, fig = path_buffer_sweep(frame)
    assert table.empty and list(table.columns) == BUFFER_COLUMNS
    assert len(fig.axes) == 1
    assert [t.get_text() for t in fig.axes[0].texts] == \
        ["no data for an emulated path (path_* columns)"]
    calibration = path_calibration_frame(frame)
    assert calibration.empty and list(calibration.columns) == CALIBRATION_COLUMNS
    counters = path_counters_frame(frame)
    assert counters.empty and list(counters.columns) == COUNTER_COLUMNS
