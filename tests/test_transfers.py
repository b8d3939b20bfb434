"""The check of each landed file (measure/transfers.py): pure parts."""

from __future__ import annotations

from pathlib import Path

from interop_runner.config.workload import Transfer, Workload
from interop_runner.measure.transfers import (
    Files,
    check,
    check_prefixes,
    failure,
    hash_landed,
    receiver,
    sender,
    settle,
)

from .test_node_local import local_pair, needs_tools

SIZE = 1000


DATA = Path(__file__).parent / "data" / "path"


def files(workload: Workload) -> Files:
    return Files(workload, "d.bin", "u.bin", SIZE, "/s/www", "/c/www", "/c/dl", "/s/up")


def test_sources_and_landing_places_follow_the_direction():
    f = files(Workload(kind="bidirectional", streams=2))
    down, up = f.of("download"), f.of("upload")
    assert f.source("download") == "/s/www/d.bin" and f.source("upload") == "/c/www/u.bin"
    assert [f.landed(t) for t in down] == ["/c/dl/d-1of2.bin", "/c/dl/d-2of2.bin"]
    assert [f.landed(t) for t in up] == ["/s/up/u-1of2.bin", "/s/up/u-2of2.bin"]
    assert f.links("upload") == ["u-1of2.bin", "u-2of2.bin"]
    assert files(Workload()).links("download") == []
    assert (sender("upload"), receiver("upload")) == ("client", "server")


def test_a_transfer_is_verified_only_with_its_size_and_digest():
    t = Transfer("upload", 0, 0, "u.bin")
    ok = check(t, (SIZE, "ab"), SIZE, "ab", "blake3")
    assert (ok.verified, ok.node, ok.reason) == ("hash", "server", None)
    short = check(t, (10, "cd"), SIZE, "ab", "blake3")
    assert short.verified is None and short.reason == "size mismatch: expected 1000 bytes, got 10"
    wrong = check(t, (SIZE, "cd"), SIZE, "ab", "sha256")
    assert wrong.reason == "sha256 mismatch: expected ab, got cd"
    gone = check(t, None, SIZE, "ab", "blake3")
    assert gone.reason == "client exited 0 but u.bin is missing on the server node"
    assert check(Transfer("download", 0, 0, "d.bin"), None, SIZE, "ab", "blake3").reason == \
        "client exited 0 but d.bin is missing"


def test_failure_names_the_first_failed_of_several():
    good = check(Transfer("download", 0, 0, "a"), (SIZE, "x"), SIZE, "x", "blake3")
    bad = check(Transfer("download", 1, 0, "b"), (1, "x"), SIZE, "x", "blake3")
    assert failure([good]) is None
    assert failure([bad]) == "size mismatch: expected 1000 bytes, got 1"
    assert failure([good, bad]) == ("1 of 2 transfers failed; first download b (connection 1, "
                                    "stream 0): size mismatch: expected 1000 bytes, got 1")


# -- on a node (the local executor: real sh, stat, head and b3sum) ---------------------------
@needs_tools
def test_landed_files_are_hashed_and_stopped_ones_checked_as_prefixes(tmp_path):
    node, _ = local_pair(tmp_path / "nodes")
    source = tmp_path / "source.bin"
    source.write_bytes(bytes(range(256)) * 64)  # 16 KiB
    good, bad = tmp_path / "good.bin", tmp_path / "bad.bin"
    good.write_bytes(source.read_bytes()[:5000])
    bad.write_bytes(b"x" + source.read_bytes()[1:5000])
    paths = [str(good), str(bad), str(tmp_path / "gone.bin")]
    settle(node, paths)
    landed = hash_landed(node, paths, "blake3", 60)
    assert landed[0] is not None and landed[0][0] == 5000 and landed[2] is None
    batch = [Transfer("upload", 0, i, n) for i, n in enumerate(("good.bin", "bad.bin", "gone"))]
    recs = check_prefixes(node, str(source), batch, landed, 16384, "blake3", 60)
    assert [(r.verified, r.bytes) for r in recs] == [("prefix", 5000), (None, 5000), (None, None)]
    assert recs[1].reason == "the 5000 bytes of bad.bin differ from its source's first 5000"
    assert recs[2].reason == "stopped at its duration with no gone"
    node.close()


def test_a_kernel_tcp_flow_is_counted_by_its_iperf3_report() -> None:
    """Real iperf3 output (-R, BBR): its receiver's bytes; another congestion control than
    asked, or no report, is a failure with its reason, never a count."""
    from interop_runner.measure.transfers import iperf_received

    report = (DATA / "iperf3-tcp-reverse.json").read_text()
    assert iperf_received(report, "", "bbr", stopped=False) == (9564040, "")
    assert iperf_received(report, "", "cubic", stopped=False) == (
        None, "iperf3's sender used bbr, not cubic")
    got, reason = iperf_received("iperf3: error - unable to connect", "", "bbr", stopped=False)
    assert got is None and reason.startswith("iperf3 printed no result: iperf3: not JSON")


def test_a_kernel_tcp_flow_stopped_at_its_duration_counts_what_its_receiver_got() -> None:
    """Real reports of clients stopped by SIGINT at the flow's duration: a download's client
    (the receiver, -R, reno) counts what it got by then; an upload's client (the sender) has no
    receiver count, so the server's report is read. Only a flow stopped at its duration may
    end so: otherwise the interrupt is a failure."""
    from interop_runner.measure.transfers import iperf_received

    download = (DATA / "iperf3-tcp-reverse-interrupted.json").read_text()
    assert iperf_received(download, "", "reno", stopped=True) == (5215696, "")
    got, reason = iperf_received(download, "", "reno", stopped=False)
    assert got is None
    assert reason == "iperf3 printed no result: iperf3: interrupt - the client has terminated"
    upload_server = (DATA / "iperf3-tcp-server-interrupted.json").read_text()
    upload_client = (DATA / "iperf3-tcp-sender-interrupted.json").read_text()
    assert iperf_received(upload_client, upload_server, "bbr", stopped=True) == (0, "")
    assert iperf_received(upload_server, upload_client, "bbr", stopped=True) == (25034752, "")
