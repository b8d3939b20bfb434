"""Attempts of several flows on the real namespace testbed (measure/flows.py,
measure/flow_plan.py): implementation pairs and kernel TCP reference flows side by side through
the router's bottleneck, each on its own port, stopped at their durations and verified as far
as they got; a flow that cannot run or fails fails the attempt with its reason; nothing is
left running."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from interop_runner.storage.layout import iter_run_files
from interop_runner.storage.run_record import load_run, read_run

from .conftest import TESTBED_FILE, campaign_dirs, write
from .test_campaign import assert_nodes_clean, run_cli
from .test_containers_local import our_containers, qir_cgroups

PATH = "{rate: 20mbit, rtt: 10ms, buffer: 1bdp, calibrate: off, record_packets: true}"


def flows_config(tmp_path: Path, name: str, flows: str, extra: str = "") -> Path:
    return write(tmp_path / f"{name}.yml", f"""testbed: {TESTBED_FILE}
name: {name}
file_size: 40MB
repetitions: 1
port: 4480
monitors: [nstat, mpstat]
path: {PATH}
flows: {flows}
{extra}""")


def run_flows(tmp_path: Path, cfg: Path, expect: int = 0) -> tuple[Path, dict]:
    proc = run_cli("run", str(cfg), "--results-dir", str(tmp_path / "results"), "--no-progress")
    assert proc.returncode == expect, proc.stderr
    (camp,) = campaign_dirs(tmp_path / "results")
    (run_json,) = iter_run_files(camp)
    return run_json.parent, read_run(run_json)


@pytest.mark.usefixtures("local_testbed")
def test_a_pair_and_two_tcp_references_share_the_bottleneck(tmp_path, local_testbed):
    cfg = flows_config(tmp_path, "three", "[{server: quic-go, client: quic-go, "
                       "congestion_control: reno}, {tcp: reno, start: 1s}, "
                       "{tcp: cubic, size: 2MB}]", "duration: 4s")
    attempt, record = run_flows(tmp_path, cfg)
    assert record["status"] == "ok", record["reason"]
    quic, reno, sized = record["flows"]
    assert [f["port"] for f in record["flows"]] == [4480, 4481, 4482]
    assert [f["label"] for f in record["flows"]] == ["quic-go/reno", "tcp/reno", "tcp/cubic"]
    # stopped at 4 s: what quic-go's client wrote is the served file's prefix
    assert quic["stopped_at_duration"] and quic["verified"] == "prefix"
    assert quic["bytes_received"] > 100_000 and quic["bytes_received"] % (4 << 20) != 0
    assert reno["verified"] == "iperf3" and reno["bytes_received"] > 100_000
    # iperf3 -n sends whole 128 KiB blocks: at least the size, less than a block more
    assert 2_000_000 <= sized["bytes_received"] < 2_000_000 + 131072
    assert not sized["stopped_at_duration"]
    # the schedule: the reno flow started 1 s after the others, each ran about its duration
    assert (reno["start_ns"] - quic["start_ns"]) / 1e9 == pytest.approx(1.0, abs=0.2)
    assert (quic["end_ns"] - quic["start_ns"]) / 1e9 == pytest.approx(4.0, abs=0.3)
    # all of them crossed the one bottleneck: no more than its rate together
    total = sum(f["bytes_received"] for f in record["flows"]) * 8
    assert total / ((max(f["end_ns"] for f in record["flows"])
                     - min(f["start_ns"] for f in record["flows"])) / 1e9) < 20e6
    assert record["bytes_received"] == sum(f["bytes_received"] for f in record["flows"])
    assert (attempt / "flow-0" / "client" / "client.stderr.log").is_file()
    # the kernel TCP flow is the pair tcp-tcp: its logs where every pair flow keeps them
    assert (attempt / "flow-1" / "client" / "client.stdout.log").is_file()
    assert "receiver_tcp_congestion" in (attempt / "flow-1" / "client" / "client.stdout.log"
                                       ).read_text()
    assert (attempt / "path" / "bottleneck-out.pcap").is_file()
    assert load_run(attempt / "run.json").flows is not None  # the typed model reads it back
    assert_nodes_clean(local_testbed)


@pytest.mark.usefixtures("local_testbed")
def test_a_complete_download_is_verified_by_its_hash(tmp_path, local_testbed):
    cfg = flows_config(tmp_path, "whole", "[{server: quic-go, client: quic-go, "
                       "congestion_control: reno}, {tcp: reno, duration: 2s}]")
    _, record = run_flows(tmp_path, cfg)
    quic = record["flows"][0]
    assert record["status"] == "ok", record["reason"]
    assert quic["verified"] == "hash" and quic["bytes_received"] == 40_000_000
    assert not quic["stopped_at_duration"]


@pytest.mark.usefixtures("local_testbed")
def test_a_congestion_control_a_stack_lacks_is_unsupported(tmp_path, local_testbed):
    cfg = flows_config(tmp_path, "nocubic", "[{tcp: cubic}, {server: quic-go, "
                       "client: quic-go, congestion_control: cubic}]", "duration: 2s")
    _, record = run_flows(tmp_path, cfg, expect=4)  # no attempt was ok
    assert record["status"] == "unsupported"
    tcp, quic = record["flows"]
    assert quic["status"] == "unsupported" and "offers no cubic" in quic["reason"]
    assert tcp["status"] == "failed" and tcp["reason"] == "not run: flow quic-go/cubic cannot run"
    assert record["reason"].startswith("flow quic-go/cubic: quic-go (server) offers no cubic")
    assert_nodes_clean(local_testbed)


@pytest.mark.usefixtures("local_testbed")
def test_a_failing_flow_fails_the_attempt_and_nothing_stays(tmp_path, local_testbed):
    """Port 4481 taken on the server node: the second flow's iperf3 cannot listen; the first
    flow's server, already started, is stopped with the attempt."""
    holder = subprocess.Popen(["ip", "netns", "exec", "qir-server", "python3", "-c",
                               "import socket,time; s=socket.socket(); s.setsockopt("
                               "socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
                               "s.bind(('0.0.0.0', 4481)); s.listen(); time.sleep(120)"])
    try:
        cfg = flows_config(tmp_path, "busy", "[{server: quic-go, client: quic-go, "
                           "congestion_control: reno}, {tcp: reno}]", "duration: 2s")
        _, record = run_flows(tmp_path, cfg, expect=4)
    finally:
        holder.kill()
        holder.wait()
    assert record["status"] == "failed"
    assert record["reason"].startswith("flow tcp/reno: port 4481 is already in use on server")
    assert record["flows"][0]["status"] == "failed"  # its server started, never measured
    assert record["flows"][0]["reason"] == "not run: flow tcp/reno did not start"
    assert_nodes_clean(local_testbed)


@pytest.mark.usefixtures("local_testbed")
def test_container_images_are_flows_on_their_own_ports(tmp_path, local_testbed):
    """An image pair and a native server with an image client: each container on its flow's
    port, the clients started at their times and stopped at the duration, verified as far as
    they got; no container, cgroup or process stays."""
    cfg = flows_config(tmp_path, "images", "[{server: quic-go-qir, client: quic-go-qir, "
                       "congestion_control: reno}, {server: quic-go, client: quic-go-qir, "
                       "congestion_control: reno, start: 1s}]",
                       "duration: 4s\ntimeouts: {setup: 3000s}")
    attempt, record = run_flows(tmp_path, cfg)
    assert record["status"] == "ok", record["reason"]
    images, mixed = record["flows"]
    for flow in (images, mixed):
        assert flow["stopped_at_duration"] and flow["verified"] == "prefix", flow
        assert flow["bytes_received"] > 100_000 and flow["client_cpu_s"] > 0
        # the engine's times on the client node: the duration, give or take the stop
        assert (flow["end_ns"] - flow["start_ns"]) / 1e9 == pytest.approx(4.0, abs=1.0)
    assert (mixed["start_ns"] - images["start_ns"]) / 1e9 == pytest.approx(1.0, abs=0.5)
    # the attempt's sides are its first flow's: both containers, the server on port 4480
    assert record["server"]["container"]["image"].startswith("qir/quic-go-qir:")
    assert record["client"]["container"]["image"].startswith("qir/quic-go-qir:")
    assert "]:4480 serving" in (attempt / "flow-0" / "server" / "server.stderr.log").read_text()
    assert our_containers() == [] and qir_cgroups() == []
    assert_nodes_clean(local_testbed)


def test_the_frozen_flows_record_loads() -> None:
    record = load_run(Path(__file__).parent / "data" / "schema" / "run-v6.json")
    assert record.flows is not None and [f.kind for f in record.flows] == ["quic", "tcp"]
    assert json.loads(record.model_dump_json())["flows"][1]["verified"] == "iperf3"


@pytest.mark.usefixtures("local_testbed")
def test_upload_flows_send_through_the_bottleneck_on_the_way_to_the_server(tmp_path,
                                                                          local_testbed):
    """A QUIC flow uploading on two streams beside a kernel TCP upload: the clients send,
    the bottleneck sits on the way to the server, each stream's file is hashed where it
    landed (the server node) as a prefix of its source, iperf3 ran without -R, and the
    per-flow series follow the packets to the servers' ports."""
    from interop_runner.analysis import load_flow_results

    cfg = flows_config(tmp_path, "up", "[{server: quic-go, client: quic-go, workload: "
                       "{kind: upload, streams: 2}}, {tcp: cubic, start: 1s, workload: "
                       "{kind: upload}}]", "duration: 4s")
    attempt, record = run_flows(tmp_path, cfg)
    assert record["status"] == "ok", record["reason"]
    quic, tcp = record["flows"]
    assert [f["label"] for f in record["flows"]] == ["quic-go/reno/upload-2x1",
                                                     "tcp/cubic/upload"]
    assert (quic["workload"]["kind"], quic["workload"]["streams"]) == ("upload", 2)
    assert [(t["direction"], t["node"], t["verified"]) for t in quic["transfers"]] == \
        [("upload", "server", "prefix")] * 2
    assert quic["bytes_received"] == sum(t["bytes"] for t in quic["transfers"]) > 100_000
    assert tcp["verified"] == "iperf3" and tcp["bytes_received"] > 100_000
    report = json.loads((attempt / "flow-1" / "client" / "client.stdout.log").read_text())
    assert report["start"]["test_start"]["reverse"] == 0  # the client sent
    assert record["path"]["key"].endswith("-upload")  # the path of the upload direction
    flows = load_flow_results(tmp_path / "results")
    assert list(flows["direction"]) == ["upload", "upload"]
    assert flows["mean_throughput_mbps"].notna().all(), flows["series_missing"].tolist()
    # each no more than the bottleneck lets through (its packets' IP bytes), and together,
    # by the payload the servers got over the time any flow ran, no more either
    assert (flows["mean_throughput_mbps"] < 20.5).all()
    total = sum(f["bytes_received"] for f in record["flows"]) * 8
    assert total / ((max(f["end_ns"] for f in record["flows"])
                     - min(f["start_ns"] for f in record["flows"])) / 1e9) < 20e6
    assert_nodes_clean(local_testbed)
