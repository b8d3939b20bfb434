"""tc -s qdisc parser."""

from pathlib import Path

import pytest

from interop_runner.parsers import ParseError, QdiscStats, parse_tc_qdisc
from interop_runner.parsers.tc import tc_rate_bit_s, tc_size_bytes

DATA = Path(__file__).parent / "data" / "parsers"


def load(name: str) -> list[QdiscStats]:
    return parse_tc_qdisc((DATA / name).read_text())


def test_tbf():
    (q,) = load("tc-tbf.txt")
    assert q == QdiscStats(entity="qdisc", kind="tbf", handle="8006:", parent="root",
                           rate_bit_s=100e6, sent_bytes=621000, sent_packets=500, dropped=0,
                           overlimits=1364, requeues=0, backlog_bytes=0, backlog_packets=0)


def test_tbf_busy_with_drops_and_backlog():
    (q,) = load("tc-tbf-busy.txt")
    assert (q.rate_bit_s, q.dropped, q.overlimits) == (10e6, 401, 46214)
    assert (q.backlog_bytes, q.backlog_packets) == (6056, 4)
    assert (q.sent_bytes, q.sent_packets) == (45436008, 30382)


def test_defaults_and_children():
    (noq,) = load("tc-noqueue.txt")
    assert (noq.kind, noq.handle, noq.parent, noq.rate_bit_s) == ("noqueue", "0:", "root", None)
    noq2, clsact = load("tc-noqueue-clsact.txt")
    assert (clsact.kind, clsact.handle, clsact.parent) == ("clsact", "ffff:", "ffff:fff1")
    (pf,) = load("tc-pfifo_fast.txt")
    assert (pf.kind, pf.sent_packets) == ("pfifo_fast", 300)
    mq, q2, q1 = load("tc-mq.txt")
    assert (mq.kind, q2.parent, q1.parent) == ("mq", "8008:2", "8008:1")
    assert mq.sent_bytes == q2.sent_bytes + q1.sent_bytes


def test_htb_qdisc_and_class():
    root, leaf = load("tc-htb.txt")
    assert (root.kind, root.handle, root.rate_bit_s) == ("htb", "1:", None)
    assert (leaf.kind, leaf.parent, leaf.sent_packets) == ("pfifo", "1:10", 200)
    (cls,) = load("tc-htb-class.txt")
    assert (cls.entity, cls.kind, cls.handle, cls.parent) == ("class", "htb", "1:10", "root")
    assert (cls.rate_bit_s, cls.ceil_bit_s) == (1e9, 1.5e9)


def test_fq_codel_handwritten():
    mq, a, b = load("tc-mq-fq_codel-handwritten.txt")
    assert (a.kind, a.parent, a.dropped, a.requeues) == ("fq_codel", ":2", 3, 6)
    assert mq.requeues == 12 and mq.sent_packets == a.sent_packets + b.sent_packets


def test_all_devices_and_estimator_lines():
    text = ("qdisc noqueue 0: dev lo root refcnt 2 \n"
            " Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n"
            " rate 0bit 0pps backlog 0b 0p requeues 0\n"
            "qdisc tbf 1: dev eth0 root refcnt 2 rate 1Gbit burst 125000b lat 1ms \n"
            " Sent 10 bytes 1 pkt (dropped 0, overlimits 0 requeues 0) \n"
            " backlog 32Kb 22p requeues 0\n")
    lo, eth = parse_tc_qdisc(text)
    assert lo.dev == "lo" and lo.rate_bit_s is None and lo.backlog_bytes == 0
    assert eth.dev == "eth0" and eth.rate_bit_s == 1e9 and eth.backlog_bytes == 32768


def test_units():
    assert tc_rate_bit_s("100Mbit") == 100e6
    assert tc_rate_bit_s("800bit") == 800.0
    assert tc_rate_bit_s("10Mibit") == 10 * 2**20
    assert tc_rate_bit_s("12500Kbps") == 100e6
    assert tc_rate_bit_s("fast") is None
    assert tc_size_bytes("1514b") == 1514
    assert tc_size_bytes("2Mb") == 2 * 2**20
    assert tc_size_bytes("x") is None


@pytest.mark.parametrize("text", ["", "\n", 'Cannot find device "nope"\n'])
def test_errors(text):
    with pytest.raises(ParseError):
        parse_tc_qdisc(text)
