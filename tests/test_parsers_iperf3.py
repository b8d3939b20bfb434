"""``iperf3 -J`` (iperf 3.12) parser, on real output over a 20 Mbit/s path
(tests/data/path/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from interop_runner.parsers.common import ParseError
from interop_runner.parsers.iperf3 import IperfResult, parse_iperf3

DATA = Path(__file__).parent / "data" / "path"


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_tcp_reverse() -> None:
    """One TCP flow server -> client (-R, BBR, 1 s omitted): the client's receiver summary."""
    res = parse_iperf3(read("iperf3-tcp-reverse.json"))
    assert res == IperfResult(protocol="TCP", received_bps=19128237.807961915, seconds=3.999967,
                              mss=1448, congestion="bbr", lost_packets=None, packets=None,
                              received_bytes=9564040)
    # at the wire (IP, TCP with timestamps, Ethernet: 66 bytes per 1448) it is the tbf's rate
    assert res.received_bps * (1448 + 66) / 1448 == pytest.approx(20e6, rel=0.002)


def test_udp_reverse_receiver_not_sender() -> None:
    """A UDP overload at 26 Mbit/s through 20 Mbit/s: the rate is what arrived (end.sum_received),
    not what was sent (end.sum: 26 Mbit/s)."""
    res = parse_iperf3(read("iperf3-udp-reverse.json"))
    data = json.loads(read("iperf3-udp-reverse.json"))["end"]
    assert data["sum"]["bits_per_second"] == pytest.approx(26e6, rel=0.001)
    assert res == IperfResult(protocol="UDP", received_bps=19425882.352941178, seconds=3.000075,
                              mss=None, congestion=None, lost_packets=1682, packets=6757,
                              received_bytes=7284888)
    assert res.received_bps * (1448 + 42) / 1448 == pytest.approx(20e6, rel=0.003)


def test_udp_with_loss() -> None:
    """10 Mbit/s over a path that loses 5 %: the delay line dropped 136 of its 2637 packets
    (the UDP datagrams and the test's control connection), iperf3 counted 135."""
    res = parse_iperf3(read("iperf3-udp-loss.json"))
    assert (res.protocol, res.lost_packets, res.packets) == ("UDP", 135, 2622)
    assert res.received_bps == pytest.approx(9.572e6, rel=1e-3)
    assert 0.03 < res.lost_packets / res.packets < 0.07


def test_udp_without_receiver_summary_falls_back_to_sum() -> None:
    """Older iperf3 versions have only end.sum for UDP."""
    data = json.loads(read("iperf3-udp-loss.json"))
    del data["end"]["sum_received"]
    res = parse_iperf3(json.dumps(data))
    assert res.received_bps == data["end"]["sum"]["bits_per_second"]
    assert res.lost_packets == 135


@pytest.mark.parametrize("name, reason", [
    ("iperf3-refused.json", "iperf3: unable to connect to server: Connection refused"),
    # the server's sendmsg failed (EPERM from an iptables DROP in its OUTPUT chain)
    ("iperf3-udp-eperm.json", "iperf3: control socket has closed unexpectedly"),
])
def test_error_reports(name: str, reason: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_iperf3(read(name))
    assert info.value.reason == reason


def test_not_iperf3_output() -> None:
    with pytest.raises(ParseError, match="iperf3: not JSON: iperf3: error - unable to conn"):
        parse_iperf3("iperf3: error - unable to connect to server: Connection refused\n")
    with pytest.raises(ParseError, match="not a JSON object"):
        parse_iperf3("[1, 2]")
    tcp = json.loads(read("iperf3-tcp-reverse.json"))
    del tcp["end"]["sum_received"]
    with pytest.raises(ParseError, match=r"no receiver summary \(end.sum_received\)"):
        parse_iperf3(json.dumps(tcp))
    with pytest.raises(ParseError, match="no receiver summary"):
        parse_iperf3("{}")
