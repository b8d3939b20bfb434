"""The analysis views: the frames they plot (values checked by hand) and their figures."""

import json
import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from interop_runner.analysis import load_results  # noqa: E402
from interop_runner.analysis.views import (  # noqa: E402
    bottlenecks,
    buffer_sweep,
    crypto,
    goodput_over_time,
    hardware,
    host_facts,
    interop_heatmap,
    offloads,
    path_buffer_sweep,
    perf_categories,
    pinning,
)

SAMPLE = Path(__file__).parent / "data" / "results-sample"
VIEWS = [buffer_sweep, crypto, interop_heatmap, perf_categories, hardware, offloads, pinning,
         bottlenecks, path_buffer_sweep]


def artists(fig: Figure) -> int:
    """Things drawn in the figure's axes (lines, bars, images, texts, ...)."""
    return sum(len(ax.lines) + len(ax.patches) + len(ax.collections) + len(ax.images)
               + len(ax.texts) for ax in fig.axes)


def texts(fig: Figure) -> str:
    return " ".join(t.get_text() for ax in fig.axes for t in ax.texts)


def bar_heights(ax) -> list[float]:
    """Heights of the drawn bars, sorted (legend-only placeholders of height 0 left out)."""
    return sorted(float(p.get_height()) for p in ax.patches if p.get_height())


def line_data(ax, label: str) -> tuple[list[float], list[float]]:
    """x and y of the line with this legend label."""
    (line,) = [ln for ln in ax.lines if ln.get_label() == label]
    return [float(x) for x in line.get_xdata()], [float(y) for y in line.get_ydata()]


# what each view says about attempts without goodput (_buffers() without goodput_mbps)
NO_DATA_FOR = {"buffer_sweep": "no data for goodput",
               "crypto": "no data for cipher (params.cipher)",
               "interop_heatmap": "no data for goodput",
               "perf_categories": "no data for perf categories (perf monitor)",
               "hardware": "no data for testbed",
               "offloads": "no data for an offload preset axis (knobs.offload)",
               "pinning": "no data for a pinning axis (server_knobs.pin / client_knobs.pin)",
               "bottlenecks": "no data for bottleneck labels",
               "path_buffer_sweep": "no data for an emulated path (path_* columns)"}


def rows(**common):
    """Factory of attempt rows: rows(server="q")(goodput, **more)."""
    def make(goodput, status="ok", **more):
        return {"server": "q", "client": "q", **common, "status": status,
                "goodput_mbps": goodput, **more}
    return make


def frame(records) -> pd.DataFrame:
    out = pd.DataFrame(records)
    out["status"] = pd.Categorical(out["status"], categories=["ok", "failed", "timeout",
                                                              "unsupported"])
    out["goodput_mbps"] = out["goodput_mbps"].astype("Float64")
    return out


def _buffers() -> pd.DataFrame:
    r = rows()
    records = []
    medians = {"1x": [50, 52, 48], "2x": [80, 82, 78], "4x": [96, 97, 95],
               "8x": [100, 99, 101], "16x": [100, 100, 100]}
    for i, (level, values) in enumerate(medians.items()):
        for value in values:
            records.append(r(value, axis_rmem=level, client_tx_packets=1000.0 * (5 - i),
                             client_udp_rcvbuf_errors=100.0 / (i + 1),
                             client_udp_in_datagrams=99900.0, client_cpu_pct=90.0))
    records.append(r(None, "failed", axis_rmem="1x"))
    records.append(rows(server="t", client="t")(10.0, axis_rmem="1x"))
    records.append(rows(server="t", client="t")(20.0, axis_rmem="2x"))
    return frame(records)


def test_buffer_sweep_values_and_knee():
    table, fig = buffer_sweep(_buffers(), n_boot=1000)
    q = table[table["server"] == "q"].set_index("buffer")
    assert list(q.index) == ["1x", "2x", "4x", "8x", "16x"]  # numeric, not text order
    assert q["multiple"].tolist() == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert q["median"].tolist() == [50.0, 80.0, 96.0, 100.0, 100.0]
    assert (q.loc["1x", "n"], q.loc["1x", "failures"]) == (3, 1)
    assert q["client_packets_sent"].tolist() == [5000.0, 4000.0, 3000.0, 2000.0, 1000.0]
    assert set(q["packets_source"]) == {"client_tx_packets"}
    assert q.loc["1x", "client_rcvbuf_drops"] == 100.0
    assert q.loc["1x", "client_drop_share"] == pytest.approx(100 / 100000)  # 100 of 99900+100
    assert q.loc["2x", "client_rcvbuf_drops"] == 50.0
    assert set(q["knee_x"]) == {"4x"} and set(q["knee_multiple"]) == {4.0}
    assert set(q["knee_low"]) == {"4x"} and set(q["knee_high"]) == {"8x"}  # see test_stats
    assert set(q["knee_distribution"].iloc[0]) == {"4x", "8x"}
    t = table[table["server"] == "t"]
    assert t["median"].tolist() == [10.0, 20.0] and set(t["knee_x"]) == {"2x"}
    assert len(fig.axes) == 3
    # the plotted lines hold the table's values: medians, packets sent, drops per buffer
    assert line_data(fig.axes[0], "q") == ([1.0, 2.0, 4.0, 8.0, 16.0],
                                           [50.0, 80.0, 96.0, 100.0, 100.0])
    assert line_data(fig.axes[0], "t") == ([1.0, 2.0], [10.0, 20.0])
    assert line_data(fig.axes[1], "q")[1] == [5000.0, 4000.0, 3000.0, 2000.0, 1000.0]
    assert line_data(fig.axes[2], "q")[1] == pytest.approx([100.0, 50.0, 100 / 3, 25.0, 20.0])
    # the knees as vertical lines: 4x for q, 2x for t
    knees = sorted(float(ln.get_xdata()[0]) for ln in fig.axes[0].lines
                   if list(ln.get_ydata()) == [0, 1])
    assert knees == [2.0, 4.0]


def test_buffer_sweep_axis_by_path_in_campaign_json(tmp_path):
    camp = tmp_path / "buffers_x"
    attempt = camp / "q_q" / "goodput" / "buf=1x" / "1" / "attempt-1"
    attempt.mkdir(parents=True)
    (camp / "campaign.json").write_text(json.dumps({"config": {"sweep": {"axes": [
        {"path": "knobs.rmem", "values": ["1x", "2x"], "name": "buf"}]}}}))
    r = rows(path=str(attempt))
    data = frame([r(10.0, axis_buf="1x"), r(30.0, axis_buf="2x"), r(20.0, axis_buf="2x")])
    table, _ = buffer_sweep(data, n_boot=200)
    assert table["buffer"].tolist() == ["1x", "2x"] and table["median"].tolist() == [10.0, 25.0]
    assert table["client_packets_sent"].isna().all()  # no counter: missing, not 0
    # sizes in bytes are shown as multiples of 208 KiB; the axis named explicitly
    data = frame([r(10.0, axis_socket_rcvbuf=212992), r(12.0, axis_socket_rcvbuf=851968)])
    table, fig = buffer_sweep(data, axis="params.socket_rcvbuf", n_boot=200)
    assert table["multiple"].tolist() == [1.0, 4.0]
    assert "no data for client packets sent" in texts(fig)


def test_crypto_modes_quic_and_tcp():
    r, t = rows(), rows(server="tcp-tls", client="tcp-tls")
    aes, chacha = "TLS_AES_128_GCM_SHA256", "TLS_CHACHA20_POLY1305_SHA256"
    records = [r(1000.0, cipher=aes, axis_aes_hw=True, wire_cipher=aes),
               r(1200.0, cipher=aes, axis_aes_hw=True, wire_cipher=aes),
               r(500.0, cipher=aes, axis_aes_hw=False, wire_cipher=aes,
                 client_unhonoured="aes_hw"),
               r(None, "failed", cipher=aes, axis_aes_hw=False),
               r(990.0, cipher=chacha, axis_aes_hw=True, wire_cipher=chacha),
               t(3000.0, cipher=aes, axis_aes_hw=True), t(2000.0, cipher=aes, axis_aes_hw=False)]
    table, fig = crypto(frame(records), n_boot=200)
    got = {(row.server, row.mode): row for row in table.itertuples()}
    assert got[("q", "AES-128-GCM")].median == 1100.0
    assert got[("q", "AES-128-GCM")].n == 2 and got[("q", "AES-128-GCM")].wire_cipher == aes
    no_hw = got[("q", "AES-128-GCM (no AES-NI)")]
    assert (no_hw.median, no_hw.n, no_hw.failures, no_hw.unhonoured) == (500.0, 1, 1, "aes_hw")
    assert no_hw.aes_hw is False
    assert got[("q", "ChaCha20-Poly1305")].median == 990.0
    assert got[("tcp-tls", "AES-128-GCM (no AES-NI)")].median == 2000.0
    assert set(table.loc[table["server"] == "tcp-tls", "stack"]) == {"TCP/TLS"}
    assert set(table.loc[table["server"] == "q", "stack"]) == {"QUIC"}
    assert len(fig.axes) == 1 and len(fig.axes[0].patches) == 5  # one bar per cell with a value
    assert bar_heights(fig.axes[0]) == [500.0, 990.0, 1100.0, 2000.0, 3000.0]  # the medians
    assert texts(fig) == "1 failed"


def test_interop_heatmap_medians_and_failures():
    data = pd.DataFrame([
        ("a", "a", "ok", 100.0), ("a", "a", "ok", 300.0), ("a", "a", "ok", 200.0),
        ("a", "b", "ok", 50.0), ("a", "b", "failed", None), ("a", "b", "ok", 70.0),
        ("b", "a", "unsupported", None), ("b", "b", "timeout", None),
    ], columns=["server", "client", "status", "goodput_mbps"])
    table, fig = interop_heatmap(data, n_boot=200)
    got = table.set_index(["server", "client"])
    assert got.loc[("a", "a"), "median"] == 200.0 and got.loc[("a", "b"), "median"] == 60.0
    assert got.loc[("a", "b"), "failures"] == 1 and got.loc[("a", "b"), "failed"] == 1
    assert got.loc[("a", "b"), "label"] == "60.0 (failed 1/3)"
    assert got.loc[("b", "a"), "label"] == "unsupported" and got.loc[("b", "a"), "n"] == 0
    assert got.loc[("b", "b"), "timeout"] == 1
    assert len(fig.axes[0].images) == 1 and "n/s" in texts(fig)
    cells = fig.axes[0].images[0].get_array()
    assert cells[0].tolist() == [200.0, 60.0] and cells.mask[1].all()  # b: no median


def test_perf_categories_from_every_source(tmp_path):
    long = pd.DataFrame([
        {"server": "q", "client": "c", "repetition": 1, "attempt": 1, "role": "server",
         "scope": "process", "category": "Crypto", "share": 0.2},
        {"server": "q", "client": "c", "repetition": 1, "attempt": 1, "role": "server",
         "scope": "process", "category": "Packet I/O", "share": 0.8},
        {"server": "q", "client": "c", "repetition": 2, "attempt": 1, "role": "server",
         "scope": "process", "category": "Packet I/O", "share": 1.0},
        {"server": "q", "client": "c", "repetition": 2, "attempt": 1, "role": "server",
         "scope": "system", "category": "Crypto", "share": 0.5}])
    table, fig = perf_categories(long)
    got = table.set_index(["implementation", "role", "category"])
    # Crypto: 0.2 and 0 (absent in repetition 2 counts as 0; the system scope is ignored)
    assert got.loc[("q", "server", "Crypto"), "mean_share"] == pytest.approx(0.1)
    assert got.loc[("q", "server", "Packet I/O"), "median_share"] == pytest.approx(0.9)
    assert got.loc[("q", "server", "Packet I/O"), "attempts"] == 2
    assert table["category"].tolist() == ["Packet I/O", "Crypto"]  # the paper's order
    assert [round(p.get_width(), 6) for p in fig.axes[0].patches] == [0.9, 0.1]  # mean shares
    wide = frame([rows()(10.0, server_perf_packet_io_share=0.75,
                         server_perf_crypto_share=0.25, client_perf_io_share=1.0)])
    table, _ = perf_categories(wide)
    assert dict(zip(zip(table["role"], table["category"]), table["mean_share"])) == {
        ("client", "I/O"): 1.0, ("server", "Packet I/O"): 0.75, ("server", "Crypto"): 0.25}
    camp = tmp_path / "sample"
    shutil.copytree(SAMPLE, camp)
    (next(camp.glob("*/*/*/attempt-1")) / "server" / "perf-process.folded").write_text(
        "quic-go;main;syscall.sendmsg 30\nquic-go;main;aes_gcm_enc 10\n")
    table, _ = perf_categories(camp)
    got = table.set_index("category")["mean_share"]
    assert got["Packet I/O"] == pytest.approx(0.75) and got["Crypto"] == pytest.approx(0.25)
    assert set(table["implementation"]) == {"quic-go"} and set(table["role"]) == {"server"}


def test_hardware_normalised_to_the_lowest_max_frequency():
    a, b = rows(testbed="slow"), rows(testbed="fast")
    facts = {"slow": {"server_cpu_max_mhz": 2200.0, "server_cpu_model": "A"},
             "fast": {"server_cpu_max_mhz": 3300.0, "server_cpu_model": "B"}}
    records = [a(1000.0), a(1200.0), b(3000.0), b(None, "failed")]
    data = frame([{**rec, "campaign": "c", **facts[rec["testbed"]]} for rec in records])
    table, fig = hardware(data, n_boot=200)
    got = table.set_index("testbed")
    assert got.loc["slow", "median"] == 1100.0 and got.loc["fast", "failures"] == 1
    assert got.loc["fast", "cpu_model"] == "B" and got.loc["fast", "cpu_max_mhz"] == 3300.0
    assert set(got["reference_mhz"]) == {2200.0}
    assert got.loc["fast", "median_normalised"] == pytest.approx(3000.0 * 2200 / 3300)
    assert got.loc["slow", "median_normalised"] == 1100.0
    assert all(len(ax.patches) == 2 for ax in fig.axes[:2])
    assert bar_heights(fig.axes[0]) == [1100.0, 3000.0]  # medians
    assert bar_heights(fig.axes[1]) == [1100.0, 2000.0]  # normalised to 2200 MHz


def test_hardware_facts_from_testbed_files(tmp_path):
    camp = tmp_path / "hardware_x"
    attempt = camp / "q_q" / "goodput" / "testbed=a" / "1" / "attempt-1"
    attempt.mkdir(parents=True)
    (camp / "campaign.json").write_text(json.dumps({
        "testbed_files": {"a": "testbed-a.json", "b": "testbed-b.json"},
        "testbeds": {"a": {"nodes": {"srv": {"role": "server"}, "cli": {"role": "client"}}},
                     "b": {"nodes": {"s2": {"role": "server"}}}}}))
    (camp / "testbed-a.json").write_text(json.dumps({"hosts": {
        "srv": {"cpu_model": "EPYC", "cpu_max_mhz": 2800.0}, "cli": {"cpu_max_mhz": 2000.0}}}))
    (camp / "testbed-b.json").write_text(json.dumps({"hosts": {
        "s2": {"cpu_model": "Xeon", "cpu_max_mhz": 3500.0}}}))
    r = rows(campaign="hardware_x", path=str(attempt))
    data = frame([r(100.0, testbed="a"), r(200.0, testbed="b")])
    facts = host_facts(data).set_index("testbed")
    assert facts.loc["a", "server_cpu_model"] == "EPYC"
    assert facts.loc["a", "client_cpu_max_mhz"] == 2000.0
    assert facts.loc["b", "server_cpu_max_mhz"] == 3500.0
    table, _ = hardware(data, n_boot=100)
    got = table.set_index("testbed")
    assert got.loc["b", "median_normalised"] == pytest.approx(200.0 * 2800 / 3500)


def test_offloads_presets_with_cpu():
    r, t = rows(), rows(server="tcp-tls", client="tcp-tls")
    records = [r(900.0, axis_offload="off", axis_gso=True, client_cpu_pct=80.0,
                 server_cpu_pct=95.0),
               r(1100.0, axis_offload="off", axis_gso=True, client_cpu_pct=84.0,
                 server_cpu_pct=97.0),
               r(1500.0, axis_offload="all-on", axis_gso=True, client_cpu_pct=92.0),
               r(1000.0, axis_offload="all-on", axis_gso=False, client_cpu_pct=90.0),
               t(4000.0, axis_offload="all-on", axis_gso=True),
               r(None, "failed", axis_offload="udp-only", axis_gso=True)]
    table, fig = offloads(frame(records), n_boot=200)
    got = table.set_index(["server", "preset"])
    off = got.loc[("q", "off, app GSO on")]
    assert (off["median"], off["client_cpu_pct"], off["server_cpu_pct"]) == (1000.0, 82.0, 96.0)
    assert got.loc[("q", "all-on, app GSO off"), "median"] == 1000.0
    assert pd.isna(got.loc[("q", "all-on, app GSO on"), "server_cpu_pct"])
    udp = got.loc[("q", "udp-only, app GSO on")]
    assert (udp["n"], udp["failures"]) == (0, 1)
    assert got.loc[("tcp-tls", "all-on, app GSO on"), "stack"] == "TCP/TLS"
    assert len(fig.axes) == 2 and len(fig.axes[1].collections) == 2  # client and server CPU
    assert bar_heights(fig.axes[0]) == [1000.0, 1000.0, 1500.0, 4000.0]  # the medians
    cpu = {c.get_label(): sorted(y for _, y in c.get_offsets().tolist())
           for c in fig.axes[1].collections}
    assert cpu == {"client CPU": [82.0, 90.0, 92.0], "server CPU": [96.0]}


def test_pinning_means_and_deviation_from_the_mean():
    r = rows()
    records = [r(100.0, axis_server_cpu="0", axis_client_cpu="0"),
               r(110.0, axis_server_cpu="0", axis_client_cpu="0"),
               r(90.0, axis_server_cpu="0", axis_client_cpu="1"),
               r(None, "failed", axis_server_cpu="0", axis_client_cpu="1"),
               r(120.0, axis_server_cpu="1", axis_client_cpu="0"),
               r(140.0, axis_server_cpu="1", axis_client_cpu="0"),
               r(95.0, axis_server_cpu="1", axis_client_cpu="1"),
               r(85.0, axis_server_cpu="1", axis_client_cpu="1")]
    table, fig = pinning(frame(records))
    got = table.set_index(["server_core", "client_core"])
    # cell means 105, 90, 130, 90; their mean (103.75) is the reference
    assert got["mean"].tolist() == [105.0, 90.0, 130.0, 90.0]
    assert set(got["pair_mean"]) == {103.75}
    assert got["deviation"].tolist() == [1.25, -13.75, 26.25, -13.75]
    assert got.loc[("0", "1"), "failures"] == 1 and got.loc[("0", "1"), "n"] == 1
    assert got.loc[("1", "0"), "std"] == pytest.approx(14.142135623730951)  # sqrt(200)
    assert len(fig.axes) >= 2 and all(len(ax.images) == 1 for ax in fig.axes[:2])
    assert texts(fig).split() == ["105", "90", "130", "90", "+1", "-14", "+26", "-14"]
    # one knobs.pin axis pins both sides alike
    both = frame([r(10.0, axis_pin="2"), r(30.0, axis_pin="3")])
    table, _ = pinning(both)
    assert table[["server_core", "client_core", "deviation"]].values.tolist() == [
        ["2", "2", -10.0], ["3", "3", 10.0]]


def test_pinning_means_of_a_narrow_range_keep_a_narrow_colour_range():
    """Mean goodput 1000 and 1003 per core: the panel's scale spans 5 % of the median, as
    the goodput matrix's does, not 1000 to 1003 over the whole colour map."""
    r = rows()
    table, fig = pinning(frame([r(1000.0, axis_server_cpu="0", axis_client_cpu="0"),
                                r(1003.0, axis_server_cpu="1", axis_client_cpu="0")]))
    assert table["mean"].tolist() == [1000.0, 1003.0]
    means = fig.axes[0].images[0]
    assert means.get_clim() == (pytest.approx(1001.5 * 0.975), pytest.approx(1001.5 * 1.025))
    assert fig.axes[1].images[0].get_clim() == (-1.5, 1.5)  # the deviations: centred on 0


def test_bottlenecks_per_cell():
    r = rows(variant="rmem=1x")
    records = [r(1.0, bottleneck="client_cpu"), r(1.0, bottleneck="client_cpu"),
               r(1.0, bottleneck="receive_buffer_drops"), r(None, "failed"),
               rows(variant="rmem=16x")(2.0, bottleneck="link_rate"),
               rows(variant="rmem=2x")(2.0, bottleneck="link_rate")]
    table, fig = bottlenecks(frame(records))
    assert table["variant"].tolist() == ["rmem=1x", "rmem=2x", "rmem=16x"]  # natural order
    first = table.iloc[0]
    assert (first["attempts"], first["ok"], first["failures"]) == (4, 3, 1)
    assert (first["client_cpu"], first["receive_buffer_drops"]) == (2, 1)
    assert first["most_common"] == "client_cpu" and first["share"] == pytest.approx(2 / 3)
    # stacked shares per row (1x, 2x, 16x): link_rate, receive_buffer_drops, client_cpu,
    # not ok, in that order
    widths = [round(p.get_width(), 6) for p in fig.axes[0].patches]
    assert widths == [0.0, 1.0, 1.0, 0.25, 0.0, 0.0, 0.5, 0.0, 0.0, 0.25, 0.0, 0.0]
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == [
        "q [rmem=1x]", "q [rmem=2x]", "q [rmem=16x]"]


def test_goodput_over_time_from_ifstat(tmp_path):
    camp = tmp_path / "sample"
    shutil.copytree(SAMPLE, camp)
    client = next(camp.glob("*/*/*/attempt-1")) / "client"
    (client / "ifstat.txt").write_text(
        "  Time           veth0\nHH:MM:SS   Kbps in  Kbps out\n"
        "23:59:59   1000000.00  10.00\n00:00:00   2000000.00  10.00\n"
        "00:00:01   500000.00  10.00\n")
    table, fig = goodput_over_time(camp)
    assert table["t_s"].tolist() == [0.0, 1.0, 2.0]  # over midnight
    assert table["rate_mbps"].tolist() == pytest.approx([1024.0, 2048.0, 512.0])  # Kibit/s
    assert set(table["role"]) == {"client"} and set(table["pair"]) == {"quic-go"}
    (line,) = [ln for ln in fig.axes[0].lines if len(ln.get_xdata())]  # the one series
    assert [float(x) for x in line.get_xdata()] == [0.0, 1.0, 2.0]
    assert [float(y) for y in line.get_ydata()] == pytest.approx([1024.0, 2048.0, 512.0])


def test_the_real_sample_through_every_view():
    data = load_results(SAMPLE, cache=False)
    table, fig = interop_heatmap(data, n_boot=100)
    assert table["median"].tolist() == pytest.approx(data["goodput_mbps"].astype(float).tolist())
    assert table["n"].tolist() == [1] and artists(fig) > 0
    table, fig = hardware(data, n_boot=100)
    assert table["testbed"].tolist() == ["local"] and table["cpu_model"].tolist() == ["AMD EPYC"]
    assert table["median_normalised"].isna().all()  # the VM reports no max frequency
    assert "no data for CPU max frequency" in texts(fig)
    table, fig = bottlenecks(data)
    assert table["ok"].tolist() == [1] and table["most_common"].notna().all()
    for view in (buffer_sweep, crypto, offloads, pinning, perf_categories, path_buffer_sweep):
        table, fig = view(data)  # no sweep, no perf, no path in the sample: honest "no data"
        assert table.empty and "no data for" in texts(fig), view.__name__
    table, fig = goodput_over_time(SAMPLE)
    assert table.empty and "no data for" in texts(fig)


@pytest.mark.parametrize("view", [*VIEWS, goodput_over_time], ids=lambda v: v.__name__)
def test_every_view_degrades_on_an_empty_frame(view):
    table, fig = view(pd.DataFrame())
    assert isinstance(table, pd.DataFrame) and table.empty and len(table.columns) > 0
    assert isinstance(fig, Figure) and len(fig.axes) == 1 and artists(fig) == 1
    assert texts(fig).startswith("no data for ")


def test_no_data_messages_cover_every_view():
    assert set(NO_DATA_FOR) == {v.__name__ for v in VIEWS}


@pytest.mark.parametrize("view", VIEWS, ids=lambda v: v.__name__)
def test_every_view_survives_missing_goodput_and_draws(view, tmp_path):
    """Attempts without goodput: no rows (nothing measured is never a 0) and the view's
    "no data" figure, which renders."""
    data = _buffers().drop(columns=["goodput_mbps"])
    table, fig = view(data)
    assert table.empty
    assert list(table.columns) == list(view(pd.DataFrame())[0].columns)  # the same schema
    assert len(fig.axes) == 1 and artists(fig) == 1
    assert texts(fig) == NO_DATA_FOR[view.__name__]
    fig.savefig(tmp_path / "out.png")  # renders without pyplot
    assert (tmp_path / "out.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_analysis_and_report_never_import_the_executor():
    """Notebooks need no SSH: the analysis, its views, the A/B statistics and the report load
    without the executor, paramiko or the node code."""
    import subprocess
    import sys

    code = ("import sys, interop_runner.analysis, interop_runner.analysis.views, "
            "interop_runner.analysis.ab.compare, interop_runner.analysis.importers.qir10g, "
            "interop_runner.report.build; "
            "bad = [m for m in sys.modules if m.startswith(('interop_runner.remote.executor', "
            "'interop_runner.testbed.node', 'interop_runner.remote.lease', 'paramiko'))]; "
            "print(bad); sys.exit(1 if bad else 0)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parent.parent)
    assert res.returncode == 0, res.stdout + res.stderr
