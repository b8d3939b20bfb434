"""Closed-form goodput ceilings (analysis.theories.ceilings, docs/closed-form.md): the formulas
against values computed by hand, the columns of the real path sample (tests/data/path-sample: one
quic-go attempt over a calibrated 20 Mbit/s, 20 ms path without loss), and of records DERIVED
from it in each test: copies of its run.json with the fields the test names changed by hand
(loss, RTT, goodput, calibration, client ...), so that every ceiling's value is known. They
were not measured."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import pytest

from interop_runner.analysis import load_results
from interop_runner.analysis.theories.ceilings import (
    CEILING_COLUMNS,
    ceiling_values,
    flow_control_ceiling_mbps,
    link_ceiling_mbps,
    loss_tolerance,
    mathis_ceiling_mbps,
    mathis_payload,
    payload_bytes,
    receive_windows,
    receiver_window,
    reno_backoff,
    reno_backoffs,
)
from interop_runner.analysis.theories.diagnosis import diagnose

DATA = Path(__file__).parent / "data"
PATH_SAMPLE = DATA / "path-sample"
SAMPLE = DATA / "results-sample"  # over the direct link
RUN = "quic-go_quic-go/goodput/1/attempt-1/run.json"
MiB = 1 << 20
# the sample's bottleneck counters (run.json path.counters.bottleneck)
SENT_BYTES, SENT_PACKETS = 11060016, 7914
PACKET = SENT_BYTES / SENT_PACKETS  # 1397.525... bytes on the wire
PAYLOAD = PACKET - 70  # 14 Ethernet + 20 IPv4 + 8 UDP + 6 short header + 16 tag + 6 STREAM
LINK = 20.0 * PAYLOAD / PACKET  # 18.998... Mbit/s
GOODPUT = 18.68538217613238  # run.json goodput_mbps


# ----------------------------------------------------------------------------- the formulas

def test_payload_of_a_full_packet() -> None:
    assert payload_bytes(1514) == 1444  # 1500 MTU + 14 - 70
    assert payload_bytes(1514, "tcp") == 1448  # the MSS with timestamps
    # TCP/TLS: 1448 x 16384 / (16384 + 22)
    assert payload_bytes(1514, "tcp-tls") == pytest.approx(1446.0582713641352)


def test_link_ceiling_by_hand() -> None:
    # 20 Mbit/s x 1444 / 1514 = 28880 / 1514
    assert link_ceiling_mbps(20.0, 1444, 1514) == pytest.approx(19.075297225891678)


def test_mathis_by_hand() -> None:
    # 8 x 1444 B / 50 ms = 0.23104 Mbit/s per packet and RTT, x sqrt(3 / 0.002) = 38.7298
    assert mathis_ceiling_mbps(1444, 50.0, 0.001) == pytest.approx(8.948140723077616)
    # 003's own case: 1252-byte packets, 100 ms, 0.1 %
    assert mathis_ceiling_mbps(1252, 100.0, 0.001) == pytest.approx(3.8791801195613487)
    # four times the loss halves it; twice the RTT halves it
    assert mathis_ceiling_mbps(1444, 50.0, 0.004) == pytest.approx(8.948140723077616 / 2)
    assert mathis_ceiling_mbps(1444, 100.0, 0.001) == pytest.approx(8.948140723077616 / 2)


def test_mathis_payload_scales_by_the_largest_over_the_mean_datagram() -> None:
    assert mathis_payload(1444, 1514, 1500) == 1444  # full packets: Mathis as it is
    # mean datagram 1397.5 - 42 = 1355.5 bytes, the largest 1472: x sqrt(1472 / 1355.5)
    assert mathis_payload(PAYLOAD, PACKET, 1500) == pytest.approx(
        PAYLOAD * math.sqrt(1472 / (PACKET - 42)))
    assert mathis_payload(1000, 1100, 1500, "tcp") == 1000  # TCP counts segments


def test_flow_control_by_hand() -> None:
    # 8 x 6 MiB / 20 ms = 50331648 bit / 20000 µs
    assert flow_control_ceiling_mbps(6 * MiB, 20.0) == pytest.approx(2516.5824)
    assert flow_control_ceiling_mbps(65000, 100.0) == pytest.approx(5.2)  # 003: 65 kB, 100 ms


def test_loss_tolerance() -> None:
    # 100000 packets at 0.1 %: 100 losses expected, 78 or fewer once in a hundred
    assert loss_tolerance(100000, 0.001) == pytest.approx(
        1.31 / math.sqrt(1.5) * math.sqrt(100 / 78) - 1)
    assert loss_tolerance(1000, 0.001) is None  # one loss expected: no bound
    assert loss_tolerance(10 ** 6, 0.001) < loss_tolerance(10 ** 5, 0.001)  # more, tighter


def test_receiver_windows() -> None:
    assert receiver_window("quic-go", "v0.65.0") == (6 * MiB, None)
    assert receiver_window("quic-go@v0.64.0", "v0.64.0") == (6 * MiB, None)
    assert receiver_window("quiche", "0.30.0") == (32 * MiB, None)
    assert receiver_window("quinn", "anything") == (16 * MiB, None)  # set by the harness
    size, why = receiver_window("quic-go", "v0.65.0+source-abc")
    assert size is None and "v0.65.0+source-abc's default window not read" in why
    for name, reason in (("aioquic", "without bound"), ("picoquic", "without bound"),
                         ("tcp-tls", "TCP"), ("lsquic-bun", "Bun"), ("mystack", "no window")):
        size, why = receiver_window(name, "1")
        assert size is None and reason in why, (name, why)
    assert all(w.size is None or w.size >= 6 * MiB for w in receive_windows().values())


# ------------------------------------------------------------------------ the real sample

def test_columns_of_the_real_sample() -> None:
    row = load_results(PATH_SAMPLE, cache=False).iloc[0]
    assert row["ceiling_packet_bytes"] == pytest.approx(PACKET)
    assert row["ceiling_payload_bytes"] == pytest.approx(PAYLOAD)
    assert row["ceiling_link_mbps"] == pytest.approx(LINK)
    assert row["ceiling_link_mbps"] == pytest.approx(18.998229297317472)
    assert pd.isna(row["ceiling_loss_mbps"])
    assert row["ceiling_window_bytes"] == 6 * MiB  # the quic-go client
    assert row["ceiling_flow_control_mbps"] == pytest.approx(2516.5824)  # 6 MiB per 20 ms
    assert (row["ceiling_mbps"], row["ceiling_basis"]) == (pytest.approx(LINK), "link")
    assert row["ceiling_ratio"] == pytest.approx(GOODPUT / LINK)  # 0.9835
    assert not row["ceiling_exceeded"] and pd.isna(row["ceiling_exceeded_by"])
    assert row["ceiling_missing"] == "loss: no random loss on the path"
    assert row["bottleneck"] == "path_rate"


def test_every_ceiling_column_is_typed_and_na_over_the_direct_link() -> None:
    frame = load_results(SAMPLE, cache=False)
    for name, (dtype, _, _) in CEILING_COLUMNS.items():
        assert str(frame[name].dtype) == dtype, name
    values = frame[[c for c in CEILING_COLUMNS if c != "ceiling_missing"]]
    assert values.isna().all().all()  # NA, never 0
    assert set(frame["ceiling_missing"]) == {"no emulated path in the record (the direct link)"}


# -------------------------------------------------------------------- derived records

def sample_record() -> dict[str, Any]:
    record: dict[str, Any] = json.loads((PATH_SAMPLE / RUN).read_text())
    return record


def derived(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """The sample's ceiling columns after ``change`` edited a copy of its record."""
    record = sample_record()
    change(record)
    return ceiling_values(record)


def lossy(loss: float, rtt_ms: float, cc: str = "reno") -> Callable[[dict[str, Any]], None]:
    def change(record: dict[str, Any]) -> None:
        record["path"]["resolved"].update(loss=loss, rtt_ms=rtt_ms)
        record["server"]["effective"]["congestion_control"] = cc
        record["file_size"] = 100_000_000
    return change


def test_the_sample_record_as_it_is() -> None:
    row = ceiling_values(sample_record())
    assert row["ceiling_link_mbps"] == pytest.approx(LINK)
    assert row["ceiling_exceeded"] is False


def test_a_reno_that_keeps_more_of_its_window_gets_more() -> None:
    # b = 0.7: sqrt((1 + 0.7) / (2 x 0.3 x p)) against sqrt(3 / (2 p)): x sqrt(2.8333 / 1.5)
    assert mathis_ceiling_mbps(1444, 50.0, 0.001, 0.7) == pytest.approx(8.948140723077616
                                                                       * 1.3743685418725533)
    assert mathis_ceiling_mbps(1444, 50.0, 0.001, 0.5) == mathis_ceiling_mbps(1444, 50.0, 0.001)
    assert reno_backoff("quic-go") == reno_backoff("quic-go@v0.64.0") == 0.7
    assert reno_backoff("quiche") == reno_backoff(None) == 0.5
    assert "renoBeta = 0.7" in reno_backoffs()["quic-go"].source


def test_loss_limited_reno() -> None:
    """The sample's sender is quic-go, whose Reno keeps 0.7 of its window after a loss;
    another stack's is Reno's 1/2."""
    row = derived(lossy(0.001, 50.0))
    expected = mathis_ceiling_mbps(PAYLOAD * math.sqrt(1472 / (PACKET - 42)), 50.0, 0.001,
                                   0.7)
    assert row["ceiling_loss_mbps"] == pytest.approx(expected)
    assert row["ceiling_loss_mbps"] == pytest.approx(8.5725 * 1.3743685, abs=1e-3)
    halving = derived(lambda r: (lossy(0.001, 50.0)(r), r["server"].update(
        implementation="quiche")))
    assert halving["ceiling_loss_mbps"] == pytest.approx(8.5725, abs=1e-4)  # below 19.0
    assert (row["ceiling_mbps"], row["ceiling_basis"]) == (pytest.approx(expected), "loss")
    assert row["ceiling_ratio"] == pytest.approx(GOODPUT / expected)
    # 18.7 Mbit/s where Reno gets 8.6 at most, beyond any chance of the losses: flagged
    assert row["ceiling_exceeded"] is True
    assert row["ceiling_exceeded_by"].startswith("goodput 18.69 Mbit/s > loss ceiling 11.78")
    assert row["ceiling_missing"] is None


def test_the_link_binds_where_mathis_is_higher() -> None:
    row = derived(lossy(0.0002, 10.0))  # Mathis: about 96 Mbit/s
    assert row["ceiling_loss_mbps"] > 90
    assert row["ceiling_basis"] == "link" and row["ceiling_mbps"] == pytest.approx(LINK)
    assert row["ceiling_exceeded"] is False


@pytest.mark.parametrize("cc", ["cubic", "bbr", "library default"])
def test_no_mathis_without_reno(cc: str) -> None:
    row = derived(lossy(0.001, 50.0, cc))
    assert pd.isna(row["ceiling_loss_mbps"]) and row["ceiling_basis"] == "link"
    assert row["ceiling_missing"] == f"loss: the server (the sender) ran {cc}, not reno"


def test_a_run_above_the_link_ceiling_is_flagged_and_labelled() -> None:
    def faster(record: dict[str, Any]) -> None:
        record["goodput_mbps"] = LINK * 1.03  # beyond the 2 % tolerance
    row = derived(faster)
    assert row["ceiling_exceeded"] is True
    assert row["ceiling_exceeded_by"] == (f"goodput {LINK * 1.03:.2f} Mbit/s > link ceiling "
                                          f"{LINK:.2f} Mbit/s + 2.0%")
    label, reason = diagnose({"status": "ok", "goodput_mbps": LINK * 1.03,
                              "path_rate_mbps": 20.0, **row})
    assert (label, reason) == ("above_ceiling", row["ceiling_exceeded_by"])


def test_within_the_tolerance_is_not_flagged() -> None:
    def slightly(record: dict[str, Any]) -> None:
        record["goodput_mbps"] = LINK * 1.015
    row = derived(slightly)
    assert row["ceiling_exceeded"] is False and row["ceiling_ratio"] == pytest.approx(1.015)


def test_a_calibration_above_the_rate_widens_the_tolerance() -> None:
    def fast_path(record: dict[str, Any]) -> None:
        record["path"]["calibration"]["rate_wire_bps"] = 21_000_000  # 5 % above 20 Mbit/s
        record["goodput_mbps"] = LINK * 1.04
    assert derived(fast_path)["ceiling_exceeded"] is False

    def faster_still(record: dict[str, Any]) -> None:
        fast_path(record)
        record["goodput_mbps"] = LINK * 1.06
    assert "+ 5.0%" in derived(faster_still)["ceiling_exceeded_by"]


def test_the_mtu_without_bottleneck_counters() -> None:
    def no_counters(record: dict[str, Any]) -> None:
        record["path"]["counters"] = {}
    row = derived(no_counters)
    assert row["ceiling_packet_bytes"] == 1514  # hosts' MTU 1500 + Ethernet
    assert row["ceiling_link_mbps"] == pytest.approx(19.075297225891678)


@pytest.mark.parametrize("calibration, reason", [
    (None, "the path was not calibrated (calibrate: off)"),
    ({"ok": False, "rtt_ms": 30.0}, "the path's calibration failed (calibrate: warn)"),
])
def test_no_ceiling_without_a_passed_calibration(calibration: Any, reason: str) -> None:
    def change(record: dict[str, Any]) -> None:
        record["path"]["calibration"] = calibration
        record["goodput_mbps"] = 100.0  # far above the link: still no flag
    row = derived(change)
    assert all(row[c] is None for c in CEILING_COLUMNS if c != "ceiling_missing")
    assert row["ceiling_missing"].startswith(reason)


def test_a_trace_has_no_link_ceiling() -> None:
    def trace(record: dict[str, Any]) -> None:
        record["path"]["resolved"]["trace"] = "/traces/lte.down"
    row = derived(trace)
    assert row["ceiling_link_mbps"] is None
    assert row["ceiling_basis"] == "flow_control"
    assert "link: the rate follows a trace" in row["ceiling_missing"]


def test_an_unbounded_or_unknown_window_is_na_with_its_reason() -> None:
    def aioquic(record: dict[str, Any]) -> None:
        record["client"].update(implementation="aioquic", version="1.7.2")
    row = derived(aioquic)
    assert row["ceiling_window_bytes"] is None and row["ceiling_flow_control_mbps"] is None
    assert "flow_control: aioquic grants credit without bound" in row["ceiling_missing"]


def test_competing_flows_keep_only_the_link_ceiling() -> None:
    def flows(record: dict[str, Any]) -> None:
        record["path"]["resolved"]["loss"] = 0.001
        record["flows"] = [{"kind": "quic"}, {"kind": "tcp"}]
    row = derived(flows)
    # a TCP flow among them: the TCP overhead (66 bytes), the fewer header bytes
    assert row["ceiling_payload_bytes"] == pytest.approx(PACKET - 66)
    assert row["ceiling_loss_mbps"] is None and row["ceiling_flow_control_mbps"] is None
    assert row["ceiling_missing"] == ("loss: 2 competing flows (the formula is per flow); "
                                      "flow_control: 2 competing flows (a window per flow)")


def test_a_flagged_attempt_through_load_results(tmp_path: Path) -> None:
    campaign = tmp_path / PATH_SAMPLE.name
    shutil.copytree(PATH_SAMPLE, campaign)
    record = sample_record()
    record["goodput_mbps"] = 25.0  # above 20 Mbit/s of path: impossible
    (campaign / RUN).write_text(json.dumps(record))
    row = load_results(campaign, cache=False).iloc[0]
    assert bool(row["ceiling_exceeded"]) and row["bottleneck"] == "above_ceiling"
    assert row["bottleneck_reason"] == row["ceiling_exceeded_by"]
    assert row["ceiling_ratio"] == pytest.approx(25.0 / LINK)


def test_an_uploads_window_and_sender_are_the_other_sides() -> None:
    """In an upload the server receives: its stack's window bounds the flow, the client's
    congestion control sends."""
    def upload(record: dict[str, Any]) -> None:
        record["workload"] = {"kind": "upload", "size_bytes": record["file_size"],
                              "streams": 1, "connections": 1}
        record["server"]["implementation"], record["server"]["version"] = "quiche", "0.30.0"
        record["client"]["effective"]["congestion_control"] = "bbr"
    row = derived(upload)
    assert row["ceiling_window_bytes"] == 32 * MiB  # quiche's, the server's
    assert derived(lambda r: r["server"].update(implementation="quiche", version="0.30.0"))[
        "ceiling_window_bytes"] == 6 * MiB  # a download: still the quic-go client's
