"""The flows analysis on a campaign written by the runner itself (tests/data/flows-runner-sample:
a QUIC pair and a kernel TCP flow, both run to their ends, per flow set): each flow's series
at the bottleneck integrates to what its client received, the QUIC-against-TCP view names
the set and condition, and the fairness columns are there."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import dpkt
import pytest

from interop_runner.analysis import load_results
from interop_runner.analysis.frames.flow_series import attempt_flow_series
from interop_runner.analysis.frames.flows import load_flow_results
from interop_runner.analysis.views.flows import flow_quic_vs_tcp_frame, path_conditions
from interop_runner.storage.run_record import RUN_SCHEMA_VERSION, load_run, read_run

SAMPLE = Path(__file__).parent / "data" / "flows-runner-sample"
ATTEMPTS = sorted(p.parent for p in SAMPLE.rglob("run.json"))
UDP_IP_HEADERS = 28  # IPv4 20 + UDP 8


def tcp_headers(attempt: Path, port: int) -> tuple[int, int]:
    """(packets, IP + TCP header bytes) of the data packets leaving the bottleneck from
    ``port`` (TCP), read with dpkt from the out capture."""
    packets = header = 0
    with gzip.open(attempt / "path" / "bottleneck-out.pcap.gz") as f:
        for _, frame in dpkt.pcap.Reader(f):
            ip = dpkt.ethernet.Ethernet(frame).data
            if isinstance(ip, dpkt.ip.IP) and isinstance(ip.data, dpkt.tcp.TCP) \
                    and ip.data.sport == port:
                packets, header = packets + 1, header + ip.hl * 4 + ip.data.off * 4
    return packets, header


def test_the_sample_is_the_runners() -> None:
    assert len(ATTEMPTS) == 2
    for attempt in ATTEMPTS:
        stored = json.loads((attempt / "run.json").read_text())
        record = load_run(attempt / "run.json")  # upgraded on load
        assert stored["schema_version"] == 6 and record.status == "ok"
        assert record.schema_version == RUN_SCHEMA_VERSION and record.host_busy is None
        assert record.flows is not None
        assert [f.verified for f in record.flows] == ["hash", "iperf3"]


@pytest.mark.parametrize("attempt", ATTEMPTS, ids=lambda p: p.parts[-5])
def test_each_flows_series_integrates_to_what_its_client_received(attempt: Path) -> None:
    """The untrimmed series of each flow, integrated over its bins, is the IP bytes of its
    data packets that left the bottleneck. The TCP flow: less its IP and TCP headers
    (counted with dpkt) that is the payload iperf3 received, within 1 % (the rest: the
    iperf3 control connection, which leaves from the same port). The QUIC flow: its UDP
    payloads carry the 6 MB file plus QUIC's own overhead (short headers, AEAD tags, frame
    headers, the HTTP/3 framing, handshake and ACK-only packets), between 0 and 5 %."""
    record = read_run(attempt / "run.json")
    series = attempt_flow_series(attempt, record)
    quic, tcp = record["flows"]
    figures = {s["index"]: s for s in series.attrs["flows"]}
    for flow in (quic, tcp):
        rows = series[series["flow"] == flow["index"]]
        ip_bytes = float((rows["throughput_mbps"] * rows["bin_ms"] / 1e3 * 1e6 / 8).sum())
        assert ip_bytes == pytest.approx(figures[flow["index"]]["ip_bytes_left"], abs=1)
    packets, header = tcp_headers(attempt, tcp["port"])
    assert packets == figures[tcp["index"]]["packets_left"]
    tcp_payload = figures[tcp["index"]]["ip_bytes_left"] - header
    assert tcp_payload == pytest.approx(tcp["bytes_received"], rel=0.01)
    quic_payload = figures[quic["index"]]["ip_bytes_left"] \
        - UDP_IP_HEADERS * figures[quic["index"]]["packets_left"]
    assert 1.0 <= quic_payload / quic["bytes_received"] <= 1.05, quic_payload


def test_quic_against_tcp_names_the_set_and_compares_within_it(tmp_path: Path) -> None:
    copy = tmp_path / SAMPLE.name
    shutil.copytree(SAMPLE, copy)
    flows = load_flow_results(copy)
    assert path_conditions(flows) == []  # only the set of flows varies
    table = flow_quic_vs_tcp_frame(flows)
    assert sorted(table["group"]) == ["quic-go/reno", "quiche/cubic"]
    assert (table["metric"] == "share").all()
    assert (table["n"] == 1).all() and (table["n_tcp"] == 1).all()  # one trial: no test
    assert (table["significance"] == "").all()
    results = load_results(copy)
    assert results["flow_count"].tolist() == [2, 2]
    assert results["jain_index"].between(0.5, 1.0).all()


def test_the_run_summary_names_each_set_of_flows_by_its_flows(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The table that ends a run (and `run.py summary`, and the report's Summary): a row per
    set of flows, labelled ``flows`` / the set's flows (``quic-go-reno+tcp-reno``, its
    directory ``flows_quic-go-reno+tcp-reno``), not by the set's first pair (``quic-go
    quic-go``)."""
    from interop_runner.analysis import summarize
    from interop_runner.cli.main import main
    from interop_runner.report.tables import summary_table

    copy = tmp_path / SAMPLE.name
    shutil.copytree(SAMPLE, copy)
    results = load_results(copy)
    assert results["server"].tolist() == ["quic-go", "quiche"]  # the records' first pair
    table = summarize(results)
    cells = [(s, c) for s, c in zip(table["server"], table["client"])]
    assert cells == [("flows", "quic-go-reno+tcp-reno"), ("flows", "quiche-cubic+tcp-cubic")]
    assert table["attempts"].tolist() == [1, 1]
    report = summary_table(results)
    assert list(zip(report["server"], report["client"])) == cells
    assert main(["summary", str(copy)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"flows-quic-sample_20261126T233359Z: 2 attempt(s) ({copy})"
    assert lines[2].split()[:3] == ["flows", "quic-go-reno+tcp-reno",
                                    "flows=quic-go-quic-go-reno+reno-3MB"]
    assert lines[3].split()[:2] == ["flows", "quiche-cubic+tcp-cubic"]
    assert "quic-go quic-go" not in "\n".join(lines)
