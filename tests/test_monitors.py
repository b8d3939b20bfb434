"""Monitors on the real namespace testbed, and the bottleneck diagnosis on constructed cases."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from interop_runner.analysis import load_results
from interop_runner.analysis.theories.diagnosis import LINK_SHARE
from interop_runner.measure.monitor_session import NodeMonitors
from interop_runner.monitors import registry
from interop_runner.parsers.sysstat import parse_pidstat
from interop_runner.remote.executor import LocalExecutor
from interop_runner.remote.ssh import SSHExecutor
from interop_runner.testbed.node import ssh_target

from .test_campaign import assert_nodes_clean, campaign, execute

LIGHT = "[ethtool, sysfs, nstat, pidstat, mpstat, tc]"
# columns of the 1 s samplers and the highest value each can have: a transfer shorter than
# the interval may get no sample, then the value is NA and monitors_missing says why
SAMPLED = {"pidstat": {"pidstat_cpu_pct": 100.0 * (os.cpu_count() or 1),
                       "max_thread_cpu_pct": 100.0 * (os.cpu_count() or 1)},
           "mpstat": {"max_core_busy_pct": 100.0, "cores_busy_pct": 100.0}}
_MISSING = re.compile(r"\b(server|client)\.(\w+):")


def missing_monitors(reasons: object) -> set[tuple[str, str]]:
    """(role, monitor) named in a ``monitors_missing`` value."""
    return set() if pd.isna(reasons) else set(_MISSING.findall(str(reasons)))


def assert_sampled(df: pd.DataFrame, monitor: str, every_value: bool = False) -> None:
    """What was recorded for a 1 s sampler: its columns exist; each value is a number in
    range, or NA with ``<role>.<monitor>:`` in monitors_missing. With ``every_value`` (for
    transfers whose length is bounded below) every value must be there and above 0."""
    for role in ("server", "client"):
        for name, high in SAMPLED[monitor].items():
            col = f"{role}_{name}"
            assert col in df.columns, f"{col} missing from the frame"
            for _, row in df.iterrows():
                where = f"{row['server']}->{row['client']} {col}"
                if pd.isna(row[col]):
                    assert not every_value, \
                        f"{where}: no value ({row['monitors_missing']}) in a " \
                        f"{row['duration_s']:.1f} s transfer"
                    assert (role, monitor) in missing_monitors(row["monitors_missing"]), \
                        f"{where} is NA without a reason: {row['monitors_missing']!r}"
                else:
                    assert (0 < row[col] if every_value else 0 <= row[col]) and \
                        row[col] <= high, f"{where} = {row[col]}"


def run_light(tmp_path: Path, body: str, name: str = "light"):
    cfg = campaign(tmp_path, f"name: {name}\nmonitors: {LIGHT}\n{body}", name=f"{name}.yml")
    result = execute(cfg, tmp_path)
    return result, load_results(result.directory)


@pytest.mark.usefixtures("local_testbed")
def test_light_monitors_columns_and_files(tmp_path, local_testbed):
    result, df = run_light(tmp_path, """file_size: 256MiB
repetitions: 1
pairs: [{server: quic-go, client: quic-go}, {server: tcp-tls, client: tcp-tls}]
""")
    assert (df["status"] == "ok").all()
    # nothing missing but what a 1 s sampler may not see in a transfer shorter than 1 s
    # (this transfer is as fast as the machine: its length is not bounded)
    for reasons in df["monitors_missing"]:
        assert {m for _, m in missing_monitors(reasons)} <= set(SAMPLED), reasons
    quic = df[df["server"] == "quic-go"].iloc[0]
    tcp = df[df["server"] == "tcp-tls"].iloc[0]
    size = 256 * 2**20
    assert quic["server_tx_bytes"] >= size and quic["client_rx_bytes"] >= size  # sysfs deltas
    assert quic["client_udp_in_datagrams"] >= size / 1500  # nstat: one datagram per packet
    assert quic["server_udp_out_datagrams"] > 0 and quic["client_udp_out_datagrams"] > 0
    assert tcp["server_tcp_out_segs"] > size / 65536 and tcp["server_udp_in_datagrams"] == 0
    for row in (quic, tcp):
        # CPU time around the process (not sampled): there whatever the speed
        assert 0 < row["server_cpu_pct"] < 250 and 0 < row["client_cpu_pct"] < 250
        assert row["link_rate_mbps"] == 10000  # veth speed from the host facts
        # a fast host fills the 10 Gbit/s veth with tcp-tls: then, and only then, the link
        reached = row["goodput_mbps"] >= LINK_SHARE * row["link_rate_mbps"]
        assert row["bottleneck"] in (("link_rate",) if reached else
                                     ("server_cpu", "client_cpu", "undetermined"))
    # pidstat and mpstat sample once per second: a value, or NA with the reason (that they
    # do see a transfer lasting a few seconds is asserted in test_link_rate_is_diagnosed)
    assert_sampled(df, "pidstat")
    assert_sampled(df, "mpstat")
    attempt = Path(quic["path"])
    for side in ("server", "client"):
        for name in ("ethtool", "sysfs", "nstat", "tc"):
            assert (attempt / side / f"{name}-before.txt").stat().st_size > 0
            assert (attempt / side / f"{name}-after.txt").stat().st_size > 0
        # the samplers ran and left files that parse; mpstat runs at least one interval
        # (MIN_SERIES_S), pidstat follows processes that may end before its first sample
        assert json.loads((attempt / side / "mpstat.txt").read_text())["sysstat"]
        samples = parse_pidstat((attempt / side / "pidstat.txt").read_text())
        if pd.notna(quic[f"{side}_pidstat_cpu_pct"]):  # a value comes from samples
            assert samples and all(s.command for s in samples)
    meta = json.loads((result.directory / "campaign.json").read_text())
    assert meta["monitors"]["client"]["mpstat"] == "ok"
    assert (result.directory / "hosts" / "server" / "ethtool-k.txt").exists()
    assert meta["hosts"]["server"]["nic_driver"] == "veth"
    assert_nodes_clean(local_testbed)


@pytest.mark.usefixtures("local_testbed")
def test_link_rate_is_diagnosed(tmp_path, local_testbed):
    _, node = local_testbed.node("server")
    ssh = SSHExecutor("server", ssh_target(node.ssh))
    ssh.run(["tc", "qdisc", "replace", "dev", node.interface, "root", "tbf", "rate", "150mbit",
             "burst", "64kb", "latency", "50ms"], timeout=10)
    try:
        _, df = run_light(tmp_path, """file_size: 64MiB
repetitions: 2
pairs: [{server: quic-go, client: quic-go}, {server: tcp-tls, client: tcp-tls}]
""", name="tbf")
    finally:
        ssh.run(["tc", "qdisc", "del", "dev", node.interface, "root"], timeout=10)
        ssh.close()
    assert (df["status"] == "ok").all()
    assert (df["link_rate_mbps"] == 150).all() and (df["server_qdisc_rate_mbps"] == 150).all()
    assert (df["goodput_mbps"] < 150).all()
    assert df["bottleneck"].tolist() == ["link_rate"] * 4, df["bottleneck_reason"].tolist()
    # 64 MiB at <= 150 Mbit/s lasts >= 3.5 s on any machine: the 1 s samplers see every
    # transfer, nothing is missing and every sampled column has a value
    assert (df["duration_s"] > 3).all()
    assert df["monitors_missing"].isna().all(), df["monitors_missing"].tolist()
    assert_sampled(df, "pidstat", every_value=True)
    assert_sampled(df, "mpstat", every_value=True)


@pytest.mark.usefixtures("local_testbed")
def test_receive_buffer_drops_are_diagnosed(tmp_path, local_testbed):
    """A 16 KiB receive buffer (quic-go run without CAP_NET_ADMIN, so it cannot force more)."""
    local = LocalExecutor()
    keys = ["net.core.rmem_max", "net.core.rmem_default"]
    old = local.run(["sysctl", "-n", *keys], timeout=10).stdout.split()
    # net.core.rmem_* are global (read-only in child namespaces): set them for the host
    local.run(["sysctl", "-qw", *[f"{k}=16384" for k in keys]], timeout=10)
    try:
        _, df = run_light(tmp_path, """file_size: 128MiB
repetitions: 2
client_params: {quic-go: {force_buffers: false}}
pairs: [{server: quic-go, client: quic-go}]
""", name="rcvbuf")
    finally:
        local.run(["sysctl", "-qw", *[f"{k}={v}" for k, v in zip(keys, old)]], timeout=10)
    assert (df["status"] == "ok").all()
    assert (df["client_udp_rcvbuf_errors"] > 100).all()
    assert df["bottleneck"].tolist() == ["receive_buffer_drops"] * 2
    assert df["bottleneck_reason"].str.startswith("client dropped").all()


@pytest.mark.usefixtures("local_testbed")
def test_run_on_one_shared_core_is_cpu_bound(tmp_path, local_testbed):
    """Server and client pinned to the same core: that core is the limit by construction, so
    every run must say so (left unpinned on 2 shared vCPUs, a noisy VM's load decided whether
    a core reached the threshold, and a CI run saw 1 of 3). Never a wrong label either."""
    _, df = run_light(tmp_path, """file_size: 256MiB
repetitions: 3
server_knobs: {pin: "0"}
client_knobs: {pin: "0"}
pairs: [{server: quic-go, client: quic-go}]
""", name="cpu")
    assert (df["status"] == "ok").all()
    assert (df["client_udp_rcvbuf_errors"] == 0).all()
    reasons = df["bottleneck_reason"].tolist()
    assert df["bottleneck"].isin(["server_cpu", "client_cpu"]).all(), reasons
    busiest = df["server_max_core_busy_pct"]
    assert (busiest >= 90).all(), list(zip(busiest, df["monitors_missing"]))


def test_missing_tool_is_recorded_not_fatal(monkeypatch):
    monkeypatch.setitem(registry.MONITORS, "ethtool", dataclasses.replace(
        registry.MONITORS["ethtool"], tools=("qir-no-such-tool",)))
    mon = NodeMonitors(LocalExecutor("n1"), "n1", "lo", ["ethtool", "nstat", "perfx"])
    status = mon.check()
    assert status["ethtool"] == "missing: qir-no-such-tool not installed on n1"
    assert status["nstat"] == "ok"
    assert status["perfx"] == "missing: not available in this runner version"
    lines = mon.snapshot_lines("before", "/tmp/x", None)
    assert len(lines) == 1 and lines[0].startswith("nstat -asz >")


def test_unparseable_output_is_missing_with_reason(tmp_path):
    data = Path(__file__).parent / "data" / "results-sample"
    camp = tmp_path / "camp"
    # without a cache another test may have left: the files are changed after the copy
    shutil.copytree(data, camp, ignore=shutil.ignore_patterns(".cache"))
    attempt = next(camp.rglob("attempt-1"))
    (attempt / "client" / "nstat-after.txt").write_text("garbage that is not nstat\n")
    (attempt / "server" / "mpstat.txt").unlink()
    df = load_results(camp)
    row = df.iloc[0]
    assert "client.nstat:" in row["monitors_missing"]
    assert "server.mpstat: mpstat.txt missing" in row["monitors_missing"]
    assert pd.isna(row.get("client_udp_in_datagrams"))  # missing, not 0
    assert row["server_udp_out_datagrams"] > 0  # the other side and monitors still load
    assert row["goodput_mbps"] > 0


def test_cache_is_used_and_invalidated(tmp_path):
    camp = tmp_path / "camp"
    shutil.copytree(Path(__file__).parent / "data" / "results-sample", camp,
                    ignore=shutil.ignore_patterns(".cache"))
    first = load_results(camp)
    cache = camp / ".cache" / "attempts.parquet"
    assert cache.exists()
    # the cached frame is what the parser gives
    pd.testing.assert_frame_equal(load_results(camp), first, check_dtype=False)
    # a changed campaign.json (e.g. a resumed campaign) invalidates the cache
    meta = json.loads((camp / "campaign.json").read_text())
    meta["note"] = "touched"
    (camp / "campaign.json").write_text(json.dumps(meta))
    stamp = cache.stat().st_mtime_ns
    load_results(camp)
    assert cache.stat().st_mtime_ns != stamp
    # a read-only tree still loads (no cache written)
    ro = tmp_path / "ro"
    shutil.copytree(Path(__file__).parent / "data" / "results-sample", ro,
                    ignore=shutil.ignore_patterns(".cache"))
    subprocess.run(["chattr", "-R", "+i", str(ro)], check=False, capture_output=True)
    try:
        assert len(load_results(ro)) == 1
    finally:
        subprocess.run(["chattr", "-R", "-i", str(ro)], check=False, capture_output=True)


@pytest.mark.usefixtures("local_testbed")
def test_perf_tcpdump_ifstat_qlog(tmp_path, local_testbed):
    from interop_runner.analysis import (
        load_core_usage,
        load_cpu_series,
        load_interface_rates,
        load_perf_categories,
    )
    from interop_runner.measure.flamegraph import find_flamegraph_tool

    # 96 MiB through a 250 Mbit/s tbf: every transfer lasts >= 3 s however fast the machine,
    # so the 1 s samplers (pidstat, mpstat, ifstat) and perf have samples to assert on
    cfg = campaign(tmp_path, """name: heavy
monitors: [perf, tcpdump, ifstat, qlog, pidstat, mpstat]
monitor_options: {perf: {frequency: 499}, tcpdump: {snaplen: 128}}
file_size: 96MiB
repetitions: 1
pairs: [{server: quic-go, client: quic-go}, {server: tcp-tls, client: tcp-tls}]
server_knobs: {rate: 250mbit}
""", name="heavy.yml")
    result = execute(cfg, tmp_path)
    df = load_results(result.directory)
    assert (df["status"] == "ok").all(), df["reason"].tolist()
    assert (df["duration_s"] > 3).all(), df["duration_s"].tolist()
    quic = df[df["server"] == "quic-go"].iloc[0]
    attempt = Path(quic["path"])
    for side in ("server", "client"):
        files = {p.name for p in (attempt / side).iterdir()}
        assert {"perf.script.zst", "perf-process.folded", "perf-system.folded", "capture.pcap",
                "pcap-summary.json", "ifstat.txt", "qlog.tar.gz"} <= files, files
        assert "keys.log" not in files  # tcpdump does not switch key logs on (keylog: false)
        assert "perf.data" not in files  # converted on the node, not shipped
        shares = [quic[f"{side}_perf_{c}_share"] for c in
                  ("packet_io", "crypto", "connection_management", "io", "uncategorized")]
        assert sum(shares) == pytest.approx(1.0)
        summary = json.loads((attempt / side / "pcap-summary.json").read_text())
        captured = quic[f"{side}_pcap_bytes_in"] + quic[f"{side}_pcap_bytes_out"]
        # tcpdump may lose packets at this rate; then it says so and the summary records it
        assert captured > 96 * 2**20 or summary["kernel_dropped"] + summary["not_captured"] > 0
    try:
        find_flamegraph_tool()
        svg = (attempt / "server" / "flamegraph.svg").read_text()
        assert svg.startswith("<?xml") and "quic-go server" in svg
    except Exception as exc:  # the tool is optional on the management node
        assert "inferno" in str(exc)
    run = json.loads((attempt / "run.json").read_text())
    assert any("segmentation offload" in w for w in run["warnings"])  # veth GSO
    assert run["monitors"]["server"]["perf.event"] in ("cycles", "cpu-clock")
    cats = load_perf_categories(result.directory)
    assert set(cats["category"]) >= {"Packet I/O", "Crypto", "Uncategorized"}
    every = {(impl, role) for impl in ("quic-go", "tcp-tls") for role in ("server", "client")}
    cpu = load_cpu_series(result.directory)
    assert set(zip(cpu["server"], cpu["role"])) == every  # pidstat samples of each side
    assert cpu["cpu_pct"].max() > 0
    cores = load_core_usage(result.directory)
    assert set(zip(cores["server"], cores["role"])) == every  # mpstat samples of each node
    assert cores["busy_pct"].between(0, 100).all()
    rates = load_interface_rates(result.directory)
    assert set(zip(rates["server"], rates["role"])) == every  # ifstat samples of each node
    assert 50 < rates.loc[rates["role"] == "server", "tx_mbps"].max()
    assert_nodes_clean(local_testbed)


def test_bnxt_counters_wide_and_per_queue(tmp_path):
    """Real bnxt ethtool -S snapshots (10G fixtures) in a stored attempt: every counter as a
    column, the per-queue deltas in the long frame."""
    from interop_runner.analysis import load_nic_queues
    from interop_runner.parsers import parse_ethtool_stats

    data = Path(__file__).parent / "data"
    camp = tmp_path / "camp"
    shutil.copytree(data / "results-sample", camp, ignore=shutil.ignore_patterns(".cache"))
    attempt = next(camp.rglob("attempt-1"))
    start = (data / "parsers" / "qir10g-lsquic-server-ethtool-start.txt").read_text()
    stop = (data / "parsers" / "qir10g-lsquic-server-ethtool-stop.txt").read_text()
    (attempt / "server" / "ethtool-before.txt").write_text(start)
    (attempt / "server" / "ethtool-after.txt").write_text(stop)
    row = load_results(camp, cache=False).iloc[0]
    b, a = parse_ethtool_stats(start).per_queue, parse_ethtool_stats(stop).per_queue
    expected = sum(a[q]["rx_ucast_packets"] - b[q]["rx_ucast_packets"] for q in a)
    assert row["server_nic_rx_ucast_packets"] == expected > 0
    queues = load_nic_queues(camp)
    rx = queues[(queues["role"] == "server") & (queues["counter"] == "rx_ucast_packets")]
    assert rx["delta"].sum() == expected and rx["queue"].nunique() == len(a)
