"""ifstat 1.1 parser."""

from datetime import date, datetime, timezone
from pathlib import Path

import pytest

from interop_runner.parsers import IfstatSample, ParseError, parse_ifstat

DATA = Path(__file__).parent / "data" / "parsers"


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_runner_flags_real():
    s = parse_ifstat(read("ifstat-nt-b.txt"))
    assert [x.time_of_day for x in s] == ["12:01:22", "12:01:23", "12:01:24"]
    assert s[1] == IfstatSample("12:01:23", None, "qpt0", 4.60, 48825.88)
    # The traffic went through tbf rate 50mbit: ifstat's "Kbps" is 1024 bit/s.
    assert s[2].tx_bit_s == pytest.approx(50e6, rel=1e-4)
    assert s[2].rx_bit_s == pytest.approx(4.61 * 1024)


def test_epoch_with_date():
    s = parse_ifstat(read("ifstat-nt-b.txt"), date=date(2026, 11, 21))
    assert s[0].timestamp == datetime(2026, 11, 21, 12, 1, 22, tzinfo=timezone.utc).timestamp()


def test_two_interfaces_and_plain():
    s = parse_ifstat(read("ifstat-two-ifaces.txt"))
    assert [(x.time_of_day, x.iface) for x in s] == [
        ("12:01:26", "qpt0"), ("12:01:26", "lo"), ("12:01:27", "qpt0"), ("12:01:27", "lo")]
    assert s[2].rx_kibit_s == 0.66
    (p,) = parse_ifstat(read("ifstat-plain.txt"))
    assert (p.time_of_day, p.iface, p.rx_kibit_s) == (None, "qpt0", 0.0)


def test_kbytes_na_repeated_header_and_truncation():
    text = ("       eth0       \n KB/s in  KB/s out\n    1.50      n/a\n"
            "       eth0       \n KB/s in  KB/s out\n    2.00      3.00\n    4.0")
    s = parse_ifstat(text)
    assert [(x.rx_kibit_s, x.tx_kibit_s) for x in s] == [(12.0, None), (16.0, 24.0)]


def test_midnight():
    text = ("  Time           eth0\nHH:MM:SS   Kbps in  Kbps out\n"
            "23:59:59      1.00      1.00\n00:00:00      2.00      2.00\n")
    a, b = parse_ifstat(text, date=date(2026, 11, 21))
    assert b.timestamp is not None and a.timestamp is not None
    assert b.timestamp - a.timestamp == 1.0


@pytest.mark.parametrize("text", [
    "",
    "ifstat: no interfaces to monitor!\n",
    "  Time           eth0\nHH:MM:SS   Mbps in  Mbps out\n",
    "  Time           eth0\nHH:MM:SS   Kbps in  Kbps out\n12:00:00 1.0\n12:00:01 1.0 2.0\n",
])
def test_errors(text):
    with pytest.raises(ParseError):
        parse_ifstat(text)
