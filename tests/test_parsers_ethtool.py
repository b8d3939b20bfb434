"""ethtool -S parser: bnxt fixtures from the 10G hosts, real veth/virtio/ifb, other drivers."""

import subprocess
import sys
from pathlib import Path

import pytest

from interop_runner.parsers import EthtoolStats, ParseError, ethtool_delta, parse_ethtool_stats

from .conftest import ROOT

DATA = Path(__file__).parent / "data" / "parsers"


def load(name: str) -> EthtoolStats:
    return parse_ethtool_stats((DATA / name).read_text())


def test_bnxt_global_and_per_queue():
    s = load("qir10g-lsquic-server-ethtool-start.txt")
    assert sorted(s.per_queue) == list(range(8))
    assert all(len(q) == 24 for q in s.per_queue.values())
    assert len(s.totals) == 202 + 24
    assert s.totals["tx_bytes"] == 90863226579
    assert s.totals["rx_pause_frames"] == 24092
    assert s.per_queue[2]["rx_ucast_packets"] == 68201
    assert s.per_queue[7]["tx_ucast_packets"] == 0
    # awk -F': ' '/\]: tx_ucast_packets/ {s+=$3}' -> 59873950 (= the MAC's tx_ucast_frames)
    assert s.totals["tx_ucast_packets"] == 59873950 == s.totals["tx_ucast_frames"]
    assert s.totals["tx_ucast_bytes"] == 90623709741
    assert not any(k.startswith("queue_sum.") for k in s.totals)


def test_bnxt_delta():
    before = load("qir10g-lsquic-server-ethtool-start.txt")
    after = load("qir10g-lsquic-server-ethtool-stop.txt")
    d = ethtool_delta(before, after)
    assert d.totals["tx_bytes"] == 99948728285 - 90863226579
    assert d.totals["tx_ucast_bytes"] == 99685263111 - 90623709741
    assert d.per_queue[2]["rx_ucast_packets"] == 94600 - 68201
    assert d.totals["rx_discards"] == 0


def test_virtio_new_style_keeps_driver_totals():
    s = load("ethtool-virtio.txt")
    assert s.totals["rx_kicks"] == 2072
    assert s.totals["queue_sum.rx_kicks"] == 2072
    assert s.totals["tx_tx_timeouts"] == 0 and s.totals["queue_sum.tx_tx_timeouts"] == 0
    assert s.per_queue == {0: {
        "rx_drops": 0, "rx_xdp_packets": 0, "rx_xdp_tx": 0, "rx_xdp_redirects": 0,
        "rx_xdp_drops": 0, "rx_kicks": 2072, "tx_xdp_tx": 0, "tx_xdp_tx_drops": 0,
        "tx_kicks": 6405, "tx_tx_timeouts": 0}}


def test_veth_real():
    s = load("ethtool-veth.txt")
    assert s.totals["peer_ifindex"] == 2
    assert sorted(s.per_queue) == [0, 1]
    assert s.per_queue[1]["rx_xdp_packets"] == 0
    assert s.per_queue[1]["tx_xdp_xmit_errors"] == 0
    assert s.totals["rx_xdp_tx_errors"] == 0
    assert "rx_queue_0_xdp_packets" not in s.totals


def test_ifb_real():
    s = load("ethtool-ifb.txt")
    assert s.totals == {"rx_packets": 0, "rx_bytes": 0, "tx_packets": 0, "tx_bytes": 0}


def test_mlx5_style():
    s = load("ethtool-mlx5-handwritten.txt")
    assert s.totals["rx_packets"] == 1500 and s.totals["queue_sum.rx_packets"] == 1500
    assert s.totals["tx_stopped"] == 2
    assert s.totals["ch_events"] == 71
    assert s.totals["rx_prio0_bytes"] == 2106008
    assert s.per_queue[1] == {"ch_events": 31, "ch_poll": 35, "rx_packets": 500,
                              "rx_bytes": 700000, "rx_xdp_drop": 0, "tx_packets": 300,
                              "tx_bytes": 24000, "tx_stopped": 2}


def test_ice_style():
    s = load("ethtool-ice-handwritten.txt")
    assert s.totals["tx_packets"] == 1000
    assert s.totals["rx_bytes"] == 3000000 and s.totals["queue_sum.rx_bytes"] == 3000000
    assert s.totals["port.rx_dropped"] == 3
    assert s.totals["tx_priority_0_xon.nic"] == 0
    assert s.per_queue[0]["rx_packets"] == 1200


def test_i40e_style():
    s = load("ethtool-i40e-handwritten.txt")
    assert s.per_queue[1] == {"tx_packets": 400, "tx_bytes": 40000, "rx_packets": 900,
                              "rx_bytes": 1350000}
    assert s.totals["queue_sum.rx_packets"] == 2000
    assert s.totals["veb.rx_bytes"] == 0


def test_old_virtio_style():
    s = load("ethtool-virtio-old-handwritten.txt")
    assert s.totals["rx_packets"] == 5000
    assert s.totals["tx_kicks"] == 2400
    assert "queue_sum.rx_packets" not in s.totals


def test_other_prefixes_and_non_integers():
    text = ("NIC statistics:\n"
            "     fw_version: 1.2.3 (abc)\n"
            "     link: up\n"
            "     0: rx_ucast_pkts: 5\n"
            "     1: rx_ucast_pkts: 6\n"
            "     queue_0_tx_cnt: 7\n"
            "     rxq0_pktnum_rcd: 3\n"
            "     txq1_pktnum_rcd: 4\n"
            "     rx_64b_frames: 9\r\n")
    s = parse_ethtool_stats(text)
    assert s.totals == {"rx_64b_frames": 9, "rx_ucast_pkts": 11, "tx_cnt": 7,
                        "rx_pktnum_rcd": 3, "tx_pktnum_rcd": 4}
    assert s.per_queue[0] == {"rx_ucast_pkts": 5, "tx_cnt": 7, "rx_pktnum_rcd": 3}


@pytest.mark.parametrize("text,reason", [
    ("", "empty"),
    ("   \n", "empty"),
    ("no stats available\n", "no stats available"),
    ("NIC statistics:\n", "NIC statistics"),
    ("Cannot get stats strings information: Operation not supported\n", "Cannot get"),
])
def test_errors(text, reason):
    with pytest.raises(ParseError) as exc:
        parse_ethtool_stats(text)
    assert reason in exc.value.reason


def test_captured_error_output():
    with pytest.raises(ParseError, match="no stats available"):
        load("ethtool-lo-err.txt")


def test_bnxt_snapshot_values():
    """A whole bare-metal bnxt snapshot (its speed is a benchmark: bench/parsing.py)."""
    stats = parse_ethtool_stats((DATA / "qir10g-lsquic-server-ethtool-start.txt").read_text())
    assert len(stats.totals) == 226 and len(stats.per_queue) == 8
    assert stats.totals["rx_64b_frames"] == 24114
    assert stats.per_queue[2]["rx_ucast_packets"] == 68201


def test_parsers_never_import_the_executor():
    code = ("import sys, interop_runner.parsers; "
            "sys.exit('interop_runner.remote.executor' in sys.modules "
            "or 'interop_runner.remote.ssh' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0
