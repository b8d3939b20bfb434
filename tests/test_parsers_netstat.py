"""nstat -asz and netstat -s parsers."""

from pathlib import Path

import pytest

from interop_runner.parsers import ParseError, counter_delta, parse_netstat_s, parse_nstat

DATA = Path(__file__).parent / "data" / "parsers"


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_nstat_real():
    n = parse_nstat(read("nstat-ptest.txt"))
    assert len(n) == 394
    assert n["TcpRetransSegs"] == 910
    assert n["TcpExtTCPLostRetransmit"] == 6
    assert n["UdpSndbufErrors"] == 2967
    assert n["IpExtOutOctets"] == 116230792
    assert n["UdpInCsumErrors"] == 0
    assert "#kernel" not in n


def test_nstat_slow_path_and_errors():
    assert parse_nstat("#kernel\nUdpInDatagrams 12 0.0\nweird line\nUdpNoPorts 3\n") == {
        "UdpInDatagrams": 12, "UdpNoPorts": 3}
    for bad in ("", "#kernel\n", "Udp: 12 packets received\n"):
        with pytest.raises(ParseError):
            parse_nstat(bad)


@pytest.mark.parametrize("netstat,nstat", [
    ("netstat-s-ptest.txt", "nstat-ptest.txt"),
    ("netstat-s-ptest2.txt", "nstat-ptest2.txt"),
    ("netstat-s-root.txt", "nstat-root.txt"),
])
def test_netstat_names_and_values_match_nstat(netstat, nstat):
    """Captured back to back: every field netstat -s shows has nstat's name and value."""
    ns = parse_netstat_s(read(netstat))
    n = parse_nstat(read(nstat))
    assert ns and {k: n.get(k) for k in ns} == ns
    lines_with_numbers = [
        line for line in read(netstat).splitlines()
        if any(w.isdecimal() for w in line.replace(":", " ").split())
        and "Forwarding" not in line and "connections established" not in line
    ]
    assert len(ns) == len(lines_with_numbers)


def test_netstat_required_fields():
    sender = parse_netstat_s(read("netstat-s-ptest.txt"))
    assert sender["UdpOutDatagrams"] == 6033
    assert sender["UdpSndbufErrors"] == 2967
    assert sender["UdpRcvbufErrors"] == 0
    assert sender["UdpInErrors"] == 0
    assert sender["TcpActiveOpens"] == 8
    assert sender["TcpInSegs"] == 12501
    assert sender["TcpOutSegs"] == 71652
    assert sender["TcpRetransSegs"] == 910
    assert sender["TcpInErrs"] == 0
    assert sender["TcpExtTCPLostRetransmit"] == 6
    assert sender["TcpExtTCPFastRetrans"] == 655
    assert sender["TcpExtTW"] == 6
    assert sender["IpExtInOctets"] == 678924
    assert sender["IcmpInDestUnreachs"] == 21
    assert "TcpExtTCPTimeouts" not in sender  # 0, so netstat does not print it
    assert "IpForwarding" not in sender and "TcpCurrEstab" not in sender
    receiver = parse_netstat_s(read("netstat-s-ptest2.txt"))
    assert receiver["UdpNoPorts"] == 6033
    assert receiver["TcpPassiveOpens"] == 6
    assert receiver["TcpOutRsts"] == 2
    assert receiver["IcmpOutDestUnreachs"] == 21
    assert parse_netstat_s(read("netstat-s-root.txt"))["TcpExtTCPTimeouts"] == 2


def test_netstat_prose_variants():
    text = ("Udp:\n    5 packets received\n    InCsumErrors: 3\n"
            "TcpExt:\n    7 other TCP timeouts\n    4 retransmits lost\n"
            "    Quick ack mode was activated 9 times\n    a line nobody knows 12\n"
            "Ip6:\n    9 total packets received\n    Ip6InOctets: 600\n"
            "Icmp6:\n    ICMP input histogram:\n        ICMP output histogram:\n"
            "        router solicits: 4\n        Icmp6OutType133: 4\n"
            "Udp6:\n    2 packets sent\n")
    assert parse_netstat_s(text) == {
        "UdpInDatagrams": 5, "UdpInCsumErrors": 3, "TcpExtTCPTimeouts": 7,
        "TcpExtTCPLostRetransmit": 4, "TcpExtDelayedACKLost": 9, "Ip6InReceives": 9,
        "Ip6InOctets": 600, "Icmp6OutRouterSolicits": 4, "Icmp6OutType133": 4,
        "Udp6OutDatagrams": 2}


def test_qir10g_lsquic_server():
    start = parse_netstat_s(read("qir10g-lsquic-server-netstat-start.txt"))
    stop = parse_netstat_s(read("qir10g-lsquic-server-netstat-stop.txt"))
    assert start == {
        "IcmpMsgInType3": 88, "IcmpMsgOutType3": 80, "UdpInDatagrams": 264106,
        "UdpNoPorts": 80, "UdpInErrors": 0, "UdpOutDatagrams": 59874044,
        "UdpRcvbufErrors": 0, "UdpSndbufErrors": 1309, "UdpIgnoredMulti": 101,
        "IpExtInMcastPkts": 15, "IpExtOutMcastPkts": 10, "IpExtInBcastPkts": 101,
        "IpExtInOctets": 212876401, "IpExtOutOctets": 89788949923, "IpExtInMcastOctets": 783,
        "IpExtOutMcastOctets": 478, "IpExtInBcastOctets": 19954, "IpExtInNoECTPkts": 410312}
    d = counter_delta(start, stop)
    assert d["UdpOutDatagrams"] == 65860986 - 59874044
    assert d["UdpSndbufErrors"] == 0
    assert d["IpExtOutOctets"] == 98766762162 - 89788949923


def test_qir10g_tcp_server():
    start = parse_netstat_s(read("qir10g-tcp-server-netstat-start.txt"))
    stop = parse_netstat_s(read("qir10g-tcp-server-netstat-stop.txt"))
    assert start["UdpInDatagrams"] == 223
    assert start["IpExtOutOctets"] == 68937357325
    assert "TcpOutSegs" not in start  # that netstat run printed no Tcp section
    assert counter_delta(start, stop)["IpExtOutOctets"] > 8 * 2**30


@pytest.mark.parametrize("text", ["", "\n\n", "hello world\n", "Udp:\n"])
def test_netstat_errors(text):
    with pytest.raises(ParseError):
        parse_netstat_s(text)
