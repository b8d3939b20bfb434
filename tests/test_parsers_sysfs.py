"""sysfs interface statistics parser."""

from pathlib import Path

import pytest

from interop_runner.parsers import ParseError, counter_delta, parse_sysfs_stats

DATA = Path(__file__).parent / "data" / "parsers"


def test_veth_real():
    s = parse_sysfs_stats((DATA / "sysfs-veth.txt").read_text())
    assert len(s) == 24
    assert s["tx_bytes"] == 4968670
    assert s["rx_bytes"] == 5980
    assert s["rx_nohandler"] == 0
    peer = parse_sysfs_stats((DATA / "sysfs-veth-peer.txt").read_text())
    assert peer["rx_bytes"] == 136034288 and peer["rx_packets"] == 46422


def test_virtio_real():
    s = parse_sysfs_stats((DATA / "sysfs-virtio.txt").read_text())
    assert s["rx_bytes"] == 379758474


def test_delta_and_odd_lines():
    before = parse_sysfs_stats("/sys/class/net/eth0/statistics/rx_bytes:100\n"
                               "/sys/class/net/eth0/statistics/tx_bytes:50\n")
    after = parse_sysfs_stats("/sys/class/net/eth0/statistics/rx_bytes:160\n"
                              "/sys/class/net/eth0/statistics/tx_bytes:10\n"
                              "grep: something odd\n")
    assert counter_delta(before, after) == {"rx_bytes": 60}


@pytest.mark.parametrize("text", ["", "  \n", "123\n",
                                  "grep: /sys/class/net/x/statistics/: No such file or directory"])
def test_errors(text):
    with pytest.raises(ParseError):
        parse_sysfs_stats(text)
