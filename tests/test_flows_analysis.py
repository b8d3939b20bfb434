"""Competing flows' analysis (analysis/frames/flow_series.py, fairness.py, flows.py) on a real
campaign: tests/data/flows-sample (three kernel TCP flows through a tbf bottleneck, both
sides of its queue captured; tests/data/flows-sample/README.md). The QUIC-vs-TCP test
DERIVES a frame from the sample's flows (its relabelling is stated there): the sample has
no QUIC flow."""

import gzip
import json
import math
import os
import shutil
from pathlib import Path

import dpkt
import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from interop_runner.analysis import (
    fairness_summary,
    flow_share_summary,
    load_flow_results,
    load_flows,
    load_results,
    quic_vs_tcp,
)
from interop_runner.analysis.frames.flow_series import (
    FLOW_SERIES_COLUMNS,
    SERIES_FILE,
    SeriesOptions,
    attempt_flow_series,
    bin_width_ms,
    cached_flow_series,
    flow_packets,
)
from interop_runner.analysis.frames.flows import (
    FLOW_RESULT_COLUMNS,
    WELCH_COLUMNS,
    hedges_g,
    significance,
)
from interop_runner.analysis.running.campaign_cache import CampaignCache
from interop_runner.analysis.theories.fairness import (
    FAIRNESS_COLUMNS,
    jain_index,
    series_fairness,
    sliding_jain,
)
from interop_runner.storage.run_record import read_run

DATA = Path(__file__).parent / "data"
SAMPLE = DATA / "flows-sample"
PATH_SAMPLE = DATA / "path-sample"  # one pair over a path: no flows
ATTEMPTS = sorted(p.parent for p in SAMPLE.rglob("run.json"))
CAPTURED = [a for a in ATTEMPTS if (a / "path" / "bottleneck-in.pcap.gz").is_file()]
UNCAPTURED = [a for a in ATTEMPTS if a not in CAPTURED]
PORTS = (5201, 5202, 5203)


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    """A writable copy of the sample (the loaders write their caches below it)."""
    target = tmp_path / SAMPLE.name
    shutil.copytree(SAMPLE, target)
    return target


@pytest.fixture(scope="module")
def flow_results(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    target = tmp_path_factory.mktemp("flows") / SAMPLE.name
    shutil.copytree(SAMPLE, target)
    return load_flow_results(target)


def header_bytes(attempt: Path) -> dict[int, tuple[int, int]]:
    """Per server port: (packets, IP + TCP header bytes) of the data packets leaving the
    bottleneck, read with dpkt from the out capture (independent of the analysis)."""
    out: dict[int, list[int]] = {p: [0, 0] for p in PORTS}
    with gzip.open(attempt / "path" / "bottleneck-out.pcap.gz") as f:
        for _, frame in dpkt.pcap.Reader(f):
            ip = dpkt.ethernet.Ethernet(frame).data
            if isinstance(ip, dpkt.ip.IP) and isinstance(ip.data, dpkt.tcp.TCP) \
                    and ip.data.sport in out:
                out[ip.data.sport][0] += 1
                out[ip.data.sport][1] += ip.hl * 4 + ip.data.off * 4
    return {p: (n, h) for p, (n, h) in out.items()}


# ----------------------------------------------------------------------------- the series

def test_the_sample_is_what_its_readme_says() -> None:
    assert len(ATTEMPTS) == 6 and len(CAPTURED) == 5
    assert UNCAPTURED[0].parts[-3:] == ("rate=20mbit", "3", "attempt-1")
    record = read_run(ATTEMPTS[0] / "run.json")
    assert [f["label"] for f in record["flows"]] == ["tcp/cubic", "tcp/bbr", "tcp/reno"]
    assert [f["port"] for f in record["flows"]] == list(PORTS)


@pytest.mark.parametrize("attempt", CAPTURED, ids=lambda p: "/".join(p.parts[-3:-1]))
def test_series_integrate_to_the_bytes_each_client_received(attempt: Path) -> None:
    """The key check: the untrimmed series of each flow, integrated over its bins, is the IP
    bytes of its data packets that left the bottleneck; less their IP and TCP headers
    (counted packet by packet from the capture with dpkt: 52 bytes a data packet, 20 IP +
    20 TCP + 12 timestamps) it is the payload the client received, within 1 % of
    ``bytes_received`` (what is left over: the iperf3 control connection's few hundred
    payload bytes, which leave the server from the same port)."""
    record = read_run(attempt / "run.json")
    series = attempt_flow_series(attempt, record)
    headers = header_bytes(attempt)
    for flow, summary in zip(record["flows"], series.attrs["flows"]):
        rows = series[series["flow"] == flow["index"]]
        ip_bytes = float((rows["throughput_mbps"] * rows["bin_ms"] / 1e3 * 1e6 / 8).sum())
        assert ip_bytes == pytest.approx(summary["ip_bytes_left"], abs=1)
        packets, header = headers[flow["port"]]
        assert packets == summary["packets_left"]
        payload = ip_bytes - header
        assert payload == pytest.approx(flow["bytes_received"], rel=0.01)
        assert 0 <= payload - flow["bytes_received"] < 1000  # the control connection


def test_series_columns_bins_and_time_grid() -> None:
    series = attempt_flow_series(CAPTURED[0])
    assert list(series.columns) == list(FLOW_SERIES_COLUMNS)
    assert dict(series.dtypes.astype(str)) == FLOW_SERIES_COLUMNS
    assert set(series["bin_ms"]) == {500.0}  # the sample's RTT is unknown (no delay)
    for _, rows in series.groupby("flow"):
        steps = np.diff(rows["t_s"].astype(float).to_numpy())
        assert np.allclose(steps, 0.5)  # every bin from the flow's first to its last
    assert series["t_s"].min() == 0  # the first data packet of any flow
    assert series.attrs["origin_ns"] > 1.7e18
    # at most the bottleneck's rate in any bin (20 Mbit/s, IP bytes)
    assert series["throughput_mbps"].max() <= 20.5


def test_the_trim_drops_the_first_and_last_tenth_of_each_flow() -> None:
    series = attempt_flow_series(CAPTURED[0])
    untrimmed = attempt_flow_series(CAPTURED[0], options=SeriesOptions(trim_start=0,
                                                                       trim_end=0))
    for flow, rows in series.groupby("flow"):
        active = untrimmed[untrimmed["flow"] == flow]
        first, last = active["t_s"].min(), active["t_s"].max() + 0.5
        span = last - first
        kept = rows[~rows["trimmed"].astype(bool)]
        assert kept["t_s"].min() >= first + 0.1 * span - 0.5  # bins of 0.5 s
        assert kept["t_s"].max() + 0.5 <= last - 0.1 * span + 1e-9
        assert len(kept) < (~active["trimmed"].astype(bool)).sum()
    summary = {s["index"]: s for s in series.attrs["flows"]}
    kept = series[~series["trimmed"].astype(bool)]
    means = kept.groupby("flow")["throughput_mbps"].mean()
    for flow, mean in means.items():
        assert summary[flow]["mean_throughput_mbps"] == pytest.approx(float(mean))
    assert series.attrs["trim_start"] == 0.1 and series.attrs["trim_end"] == 0.1


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="bin_ms"):
        SeriesOptions(bin_ms=0)
    with pytest.raises(ValueError, match="below 1"):
        SeriesOptions(trim_start=0.5, trim_end=0.5)
    series = attempt_flow_series(CAPTURED[0], options=SeriesOptions(bin_ms=250))
    assert set(series["bin_ms"]) == {250.0}


def test_bin_width_from_the_base_rtt() -> None:
    def record(rtt: object) -> dict[str, object]:
        return {"path": {"resolved": {"rtt_ms": rtt}}}

    assert bin_width_ms(record(50.0)) == 500.0  # 10 base RTTs
    assert bin_width_ms(record(20.0)) == 200.0
    assert bin_width_ms(record(0.05)) == 100.0  # at least 100 ms
    assert bin_width_ms(record(None)) == 500.0  # unknown
    assert bin_width_ms({"path": None}) == 500.0
    assert bin_width_ms(record(20.0), bin_ms=40) == 40.0


def test_only_the_data_direction_of_the_flows_counts() -> None:
    """Packets are the flow's when they leave its server port over its transport (a pair
    flow's: UDP, or TCP for a stack over TCP such as tcp-tls; a kernel TCP flow's: TCP); the
    reverse direction, another transport and other ports are not."""
    flows = [{"index": 0, "kind": "quic", "port": 4433}, {"index": 1, "kind": "tcp",
                                                          "port": 5201},
             {"index": 2, "kind": "quic", "port": 4434}]
    names = ["udp 198.19.1.1:4433>198.19.2.1:50123",  # flow 0's data
             "udp 198.19.2.1:50123>198.19.1.1:4433",  # its reverse direction
             "tcp [fd00::1]:5201>[fd00::2]:40000",  # flow 1, IPv6
             "udp 198.19.1.1:5201>198.19.2.1:40000",  # flow 1's port over UDP
             "tcp 198.19.1.1:4434>198.19.2.1:50124",  # flow 2: a pair over TCP (tcp-tls)
             "icmp 198.19.1.1>198.19.2.1"]
    packets = pd.DataFrame({"flow": pd.array(names, dtype="string"), "size_bytes": 1})
    picked = flow_packets(packets, flows)
    assert list(picked.index) == [0, 2, 4] and list(picked["flow"]) == ["0", "1", "2"]


# ----------------------------------------------------------------------------- the cache

def test_the_series_is_cached_beside_the_record(sample: Path) -> None:
    attempt = next(a for a in sample.rglob("attempt-1") if (a / "path").is_dir()
                   and any((a / "path").iterdir()))
    cache = attempt / SERIES_FILE
    series, reason = cached_flow_series(attempt)
    assert reason is None and cache.is_file()
    written = cache.stat().st_mtime_ns
    again, _ = cached_flow_series(attempt)
    assert cache.stat().st_mtime_ns == written  # read, not rewritten
    assert again is not None
    pd.testing.assert_frame_equal(again, series)
    assert again.attrs == json.loads(json.dumps(series.attrs))
    # the cache is keyed by its sources' bytes: a capture only touched (a copied tree)
    # keeps it; the same packets compressed otherwise are other bytes: made again, rewritten
    capture = attempt / "path" / "bottleneck-out.pcap.gz"
    os.utime(capture, ns=(written + 10**9, written + 10**9))
    cached_flow_series(attempt)
    assert cache.stat().st_mtime_ns == written
    packed = capture.read_bytes()
    capture.write_bytes(gzip.compress(gzip.decompress(packed), compresslevel=1, mtime=0))
    assert capture.read_bytes() != packed
    remade, _ = cached_flow_series(attempt)
    assert cache.stat().st_mtime_ns > written
    assert remade is not None
    pd.testing.assert_frame_equal(remade, series)
    # other options: made each time, the cache untouched
    before = cache.stat().st_mtime_ns
    other, _ = cached_flow_series(attempt, options=SeriesOptions(bin_ms=250))
    assert other is not None and set(other["bin_ms"]) == {250.0}
    assert cache.stat().st_mtime_ns == before


def test_an_attempt_archived_without_its_captures_keeps_its_series(sample: Path) -> None:
    """The captures removed after the cache was written (an archived campaign keeps
    run.json and flows.parquet): the cache is the series, whatever the files' times; a
    record of other bytes than it was made from, or no cache, is no series, and the reason
    says the captures are not in this copy (its record says they were recorded)."""
    attempt = CAPTURED[0]
    copy = sample / attempt.relative_to(SAMPLE)
    series, _ = cached_flow_series(copy)
    assert series is not None
    shutil.rmtree(copy / "path")
    archived, reason = cached_flow_series(copy)
    assert reason is None and archived is not None
    pd.testing.assert_frame_equal(archived, series)
    later = (copy / SERIES_FILE).stat().st_mtime_ns + 10**9
    os.utime(copy / "run.json", ns=(later, later))  # newer than the cache: still its source
    touched, reason = cached_flow_series(copy)
    assert reason is None and touched is not None
    pd.testing.assert_frame_equal(touched, series)
    record = copy / "run.json"
    record.write_bytes(record.read_bytes() + b"\n")
    stale, reason = cached_flow_series(copy)
    assert stale is None
    assert reason == ("bottleneck captures not in this copy of the results "
                      "(path.record_packets was on) and flows.parquet not made from these "
                      "bytes of run.json")
    (copy / SERIES_FILE).unlink()
    gone, reason = cached_flow_series(copy)
    assert gone is None and str(reason).endswith("was on) and no flows.parquet")


def test_no_captures_is_a_reason_not_zeros(sample: Path) -> None:
    attempt = sample / UNCAPTURED[0].relative_to(SAMPLE)
    series, reason = cached_flow_series(attempt)
    assert series is None and "no bottleneck captures" in str(reason)
    assert not (attempt / SERIES_FILE).exists()
    series, reason = cached_flow_series(PATH_SAMPLE / "quic-go_quic-go/goodput/1/attempt-1")
    assert series is None and reason == "no flows in the record"


def test_the_campaign_cache_writes_the_series_as_records_are_added(sample: Path) -> None:
    cache = CampaignCache(sample)
    for attempt in sample.rglob("attempt-1"):
        cache.add(attempt / "run.json")
    series = sorted(sample.rglob(SERIES_FILE))
    assert len(series) == len(CAPTURED)


# ----------------------------------------------------------------------------- fairness

def test_jain_index() -> None:
    assert jain_index([5, 5, 5]) == pytest.approx(1.0)
    assert jain_index([9, 0, 0]) == pytest.approx(1 / 3)
    assert jain_index([1, 3]) == pytest.approx(16 / 20)
    assert jain_index([2, None, float("nan"), 2]) == pytest.approx(1.0)
    assert math.isnan(jain_index([])) and math.isnan(jain_index([0, 0]))


def test_sliding_windows() -> None:
    series = attempt_flow_series(CAPTURED[0])
    windows = sliding_jain(series, window_s=1.0)
    assert len(windows) and (windows["flows"] >= 2).all()
    assert ((windows["jain_index"] >= 1 / 3 - 1e-9) & (windows["jain_index"] <= 1)).all()
    assert np.allclose(np.diff(windows["t_s"]), 0.5)  # sliding by one bin
    longer = sliding_jain(series, window_s=3.0)
    assert len(longer) < len(windows)
    values = series_fairness(series, window_s=1.0)
    assert values["jain_index_sliding_min"] <= values["jain_index_sliding_median"]
    assert values["fairness_missing"] is None
    none = series_fairness(series, window_s=60.0)
    assert math.isnan(none["jain_index_sliding_min"])
    assert "no sliding window of 60 s" in none["fairness_missing"]


def test_fairness_columns_of_the_results_frame(sample: Path) -> None:
    frame = load_results(sample)
    for column, (dtype, _, _) in FAIRNESS_COLUMNS.items():
        assert str(frame[column].dtype) == dtype
    assert (frame["flow_count"] == 3).all()
    captured = frame[frame["fairness_basis"] == "series"]
    assert len(captured) == len(CAPTURED)
    flows = load_flow_results(sample)
    for row in captured.itertuples():
        means = flows.loc[flows["path"] == row.path, "mean_throughput_mbps"]
        assert row.jain_index == pytest.approx(jain_index(means))
        assert 1 / 3 <= row.jain_index <= 1
    goodput = frame[frame["fairness_basis"] == "goodput"].iloc[0]
    record = read_run(Path(goodput["path"]) / "run.json")
    assert goodput["jain_index"] == pytest.approx(
        jain_index(f["goodput_mbps"] for f in record["flows"]))
    assert pd.isna(goodput["jain_index_sliding_min"])
    assert "no bottleneck captures" in goodput["fairness_missing"]
    # the sample's 20 Mbit/s attempts: bbr is done before a 5 s window holds two flows
    fast = captured[captured["variant"] == "rate=20mbit"]
    assert fast["jain_index_sliding_min"].isna().all()
    assert fast["fairness_missing"].str.contains("no sliding window of 5 s").all()
    slow = captured[captured["variant"] == "rate=10mbit"]
    assert slow["jain_index_sliding_min"].notna().all()


def test_fairness_columns_exist_without_flows() -> None:
    frame = load_results(PATH_SAMPLE, cache=False)
    for column in FAIRNESS_COLUMNS:
        assert column in frame.columns and frame[column].isna().all()


# ----------------------------------------------------------------------------- loaders

def test_load_flows(sample: Path) -> None:
    frame = load_flows(sample)
    assert list(frame.columns[:9]) == ["campaign", "flow_set", "variant", "axis_rate",
                                       "repetition", "attempt", "path", "flow", "label"]
    assert set(frame["flow_set"]) == {"cubic-bbr-reno"} and set(frame["kind"]) == {"tcp"}
    missing = frame[frame["series_missing"].notna()]
    assert len(missing) == 3  # one row per flow of the attempt without captures
    assert missing[["t_s", "throughput_mbps", "drops"]].isna().all().all()
    assert "path.record_packets off" in missing["series_missing"].iloc[0]
    assert frame.loc[frame["series_missing"].isna(), "t_s"].notna().all()


def test_load_flow_results(flow_results: pd.DataFrame) -> None:
    assert list(flow_results.columns[-len(FLOW_RESULT_COLUMNS):]) == list(FLOW_RESULT_COLUMNS)
    assert len(flow_results) == 18
    shares = flow_results.groupby("path")["share"].sum()
    assert np.allclose(shares.astype(float), 1.0)
    series = flow_results[flow_results["share_basis"] == "series"]
    goodput = flow_results[flow_results["share_basis"] == "goodput"]
    assert len(series) == 15 and len(goodput) == 3
    assert series["mean_throughput_mbps"].notna().all()
    assert series["queue_delay_p95_ms"].between(0, 100).all()
    assert goodput["mean_throughput_mbps"].isna().all()
    assert (goodput["series_missing"].str.contains("no bottleneck captures")).all()
    assert (flow_results["bytes_received"] == 5 << 20).all()
    record = read_run(Path(goodput["path"].iloc[0]) / "run.json")
    assert list(goodput["goodput_mbps"]) == [f["goodput_mbps"] for f in record["flows"]]
    assert float(goodput["share"].iloc[0]) == pytest.approx(
        record["flows"][0]["goodput_mbps"] / sum(f["goodput_mbps"] for f in record["flows"]))
    # BBR takes the largest share in its trimmed window in every captured attempt (what
    # the sample measured: the flows start 0.5 s apart, bbr second)
    top = series.loc[series.groupby("path")["share"].idxmax(), "label"]
    assert set(top) == {"tcp/bbr"}


def test_the_loaders_without_flows(tmp_path: Path) -> None:
    target = tmp_path / PATH_SAMPLE.name  # a copy: the loaders write their caches
    shutil.copytree(PATH_SAMPLE, target, ignore=shutil.ignore_patterns(".cache"))
    assert load_flows(target).empty
    assert load_flow_results(target).empty
    assert quic_vs_tcp(load_flow_results(target)).empty


# ----------------------------------------------------------------------------- summaries

def test_share_summary_with_intervals(flow_results: pd.DataFrame) -> None:
    table = flow_share_summary(flow_results)
    assert len(table) == 6  # two rates x three labels
    assert (table["n"] == 3).all()
    slow = table[table["variant"] == "rate=10mbit"].set_index("label")
    assert (slow["share_basis"] == "series").all()
    assert set(table.loc[table["variant"] == "rate=20mbit", "share_basis"]) == {"mixed"}
    for row in table.itertuples():
        values = flow_results.loc[(flow_results["variant"] == row.variant)
                                  & (flow_results["label"] == row.label), "share"]
        values = values.astype(float).to_numpy()
        low, high = scipy_stats.t.interval(0.95, len(values) - 1, loc=values.mean(),
                                           scale=scipy_stats.sem(values))
        assert row.mean == pytest.approx(values.mean())
        assert (row.mean_ci_low, row.mean_ci_high) == pytest.approx((low, high))


def test_a_campaign_without_a_sweep_has_its_intervals(flow_results: pd.DataFrame) -> None:
    """No sweep: the variant is missing, and the cell must still find its interval."""
    one = flow_results[flow_results["variant"] == "rate=10mbit"].assign(variant=pd.NA)
    table = flow_share_summary(one).set_index("label")
    assert len(table) == 3 and table["mean_ci_low"].notna().all(), table
    assert (table["share_basis"] == "series").all()


def test_fairness_summary(sample: Path) -> None:
    frame = load_results(sample)
    table = fairness_summary(frame)
    assert list(table["variant"]) == ["rate=10mbit", "rate=20mbit"]
    assert (table["n"] == 3).all() and (table["flow_set"] == "cubic-bbr-reno").all()
    assert (table["mean_ci_low"] <= table["mean"]).all()
    assert (table["mean"] <= table["mean_ci_high"]).all()
    assert fairness_summary(load_results(PATH_SAMPLE, cache=False)).empty


# ----------------------------------------------------------------------------- QUIC vs TCP

def derived_quic(flow_results: pd.DataFrame) -> pd.DataFrame:
    """DERIVED, not measured: the sample's bbr flows relabelled as a QUIC implementation
    ("quic-x/bbr", kind quic), so the test has QUIC and TCP flows in one cell."""
    bbr = flow_results["label"] == "tcp/bbr"
    out = flow_results.copy()
    out.loc[bbr, "kind"] = "quic"
    out.loc[bbr, "label"] = "quic-x/bbr"
    return out


def test_quic_against_tcp_with_welch(flow_results: pd.DataFrame) -> None:
    frame = derived_quic(flow_results)
    table = quic_vs_tcp(frame)
    assert list(table.columns) == ["flow_set", "variant", *WELCH_COLUMNS]
    assert list(table["variant"]) == ["rate=10mbit", "rate=20mbit"]
    for row in table.itertuples():
        cell = frame[frame["variant"] == row.variant]
        quic = cell.loc[cell["kind"] == "quic", "share"].astype(float).to_numpy()
        tcp = cell.loc[cell["kind"] == "tcp", "share"].astype(float).to_numpy()
        expected = scipy_stats.ttest_ind(quic, tcp, equal_var=False)
        assert (row.n, row.n_tcp) == (3, 6)
        assert row.p_value == pytest.approx(expected.pvalue)
        assert row.t_statistic == pytest.approx(expected.statistic)
        assert row.difference == pytest.approx(quic.mean() - tcp.mean())
        assert row.hedges_g > 0  # bbr takes more than cubic and reno
        assert row.significance == significance(row.p_value)
    # measured: with captures bbr's share stands out (10 Mbit/s); at 20 Mbit/s one attempt's
    # shares are of goodput (no captures), near equal for flows of one size: weaker
    slow = table.set_index("variant").loc["rate=10mbit"]
    assert slow["p_value"] < 0.001 and slow["significance"] == "***"
    goodput = quic_vs_tcp(frame, metric="goodput_mbps")
    assert (goodput["metric"] == "goodput_mbps").all()


def test_hedges_g_and_marks() -> None:
    a, b = np.array([2.0, 4.0, 6.0]), np.array([1.0, 2.0, 3.0])
    pooled = math.sqrt((2 * 4.0 + 2 * 1.0) / 4)
    assert hedges_g(a, b) == pytest.approx((4 - 2) / pooled * (1 - 3 / (4 * 6 - 9)))
    assert math.isnan(hedges_g(a[:1], b)) and math.isnan(hedges_g(b * 0, b * 0))
    assert [significance(p) for p in (0.0005, 0.005, 0.02, 0.2, math.nan)] == \
        ["***", "**", "*", "n.s.", ""]


def test_flows_without_a_packet_at_the_bottleneck() -> None:
    """A record whose ports no packet left from: an empty series and a reason, no zeros."""
    record = read_run(CAPTURED[0] / "run.json")
    for flow in record["flows"]:
        flow["port"] = 9999
    series = attempt_flow_series(CAPTURED[0], record)
    assert series.empty and list(series.columns) == list(FLOW_SERIES_COLUMNS)
    assert series.attrs["flows"] == [] and series.attrs["origin_ns"] is None
    values = series_fairness(series)
    assert math.isnan(values["jain_index"])
    assert values["fairness_missing"].startswith("no data packet of the flows")
