"""Counter snapshots taken before and after the transfer: ethtool, sysfs, nstat, tc.

Each yields deltas (after - before) of the counters over the attempt.
"""

from __future__ import annotations

import numpy as np

from interop_runner.monitors.base import Column, Monitor, SideInput, SnapshotCommand, ValueBlock
from interop_runner.parsers import (
    Deltas,
    ParseError,
    counter_delta,
    ethtool_totals_deltas,
    nstat_deltas,
    parse_netstat_s,
    parse_tc_qdisc,
    sysfs_deltas,
)
from interop_runner.parsers.snapshots import NamesMemo

# nstat counters that get a friendly column name (the rest keep their nstat name).
NSTAT_NAMES = {
    "UdpInDatagrams": "udp_in_datagrams",
    "UdpOutDatagrams": "udp_out_datagrams",
    "UdpRcvbufErrors": "udp_rcvbuf_errors",
    "UdpSndbufErrors": "udp_sndbuf_errors",
    "UdpInErrors": "udp_in_errors",
    "UdpNoPorts": "udp_no_ports",
    "TcpRetransSegs": "tcp_retrans_segs",
    "TcpOutSegs": "tcp_out_segs",
    "TcpInSegs": "tcp_in_segs",
}
# /sys/class/net/<if>/statistics/* (Documentation/ABI/testing/sysfs-class-net-statistics)
SYSFS_COUNTERS = (
    "rx_bytes", "rx_packets", "rx_errors", "rx_dropped", "rx_missed_errors", "rx_over_errors",
    "rx_crc_errors", "rx_frame_errors", "rx_fifo_errors", "rx_length_errors", "rx_nohandler",
    "rx_compressed", "multicast", "tx_bytes", "tx_packets", "tx_errors", "tx_dropped",
    "tx_aborted_errors", "tx_carrier_errors", "tx_fifo_errors", "tx_heartbeat_errors",
    "tx_window_errors", "tx_compressed", "collisions",
)

# counter name -> column name without role (the same few hundred names recur in every attempt)
_NSTAT_COLUMN_NAMES: dict[str, str] = {}


def snapshot_pair(inp: SideInput, file: str) -> tuple[str, str]:
    """The before/after snapshot texts of ``file``; ParseError when one is missing."""
    first, second = inp.snapshot_names
    before, after = inp.files.text(f"{file}-{first}.txt"), inp.files.text(f"{file}-{second}.txt")
    if before is None or after is None:
        if (first, second) == ("before", "after"):
            raise ParseError(f"{file} snapshot files missing")
        raise ParseError(f"{file}-{first}/{second}.txt missing")
    return before, after


def _block(deltas: Deltas, names: tuple[str, ...]) -> ValueBlock:
    """The deltas under column names; as float64 (the frame's type) when complete, set
    where they moved: most counters do not move, and converting a long list costs."""
    if not deltas.complete:
        return ValueBlock(names, deltas.values, False)
    if deltas.moved is None:
        return ValueBlock(names, np.array(deltas.values, dtype=np.float64), True)
    vector = np.zeros(len(names))
    if deltas.moved:
        vector[deltas.moved] = np.array([deltas.values[i] for i in deltas.moved],
                                        dtype=np.float64)
    return ValueBlock(names, vector, True)


_NIC_COLUMNS = NamesMemo(lambda counters: tuple("nic_" + c for c in counters))


def _ethtool(inp: SideInput) -> ValueBlock:
    deltas = ethtool_totals_deltas(*snapshot_pair(inp, "ethtool"))
    return _block(deltas, _NIC_COLUMNS(deltas.names))


def _sysfs(inp: SideInput) -> ValueBlock:
    deltas = sysfs_deltas(*snapshot_pair(inp, "sysfs"))
    return _block(deltas, deltas.names)


def nstat_column(counter: str) -> str:
    """The column (without role) of a kernel SNMP counter."""
    name = _NSTAT_COLUMN_NAMES.get(counter)
    if name is None:
        name = _NSTAT_COLUMN_NAMES[counter] = NSTAT_NAMES.get(counter, "nstat_" + counter)
    return name


_NSTAT_COLUMNS = NamesMemo(lambda counters: tuple(map(nstat_column, counters)))


def _nstat(inp: SideInput) -> ValueBlock:
    if inp.counter_format == "netstat-s":
        before, after = snapshot_pair(inp, "netstat")
        deltas = Deltas.of(counter_delta(parse_netstat_s(before), parse_netstat_s(after)))
    else:
        deltas = nstat_deltas(*snapshot_pair(inp, "nstat"))
    return _block(deltas, _NSTAT_COLUMNS(deltas.names))


def _tc(inp: SideInput) -> dict[str, float]:
    first, second = snapshot_pair(inp, "tc")
    before, after = parse_tc_qdisc(first), parse_tc_qdisc(second)
    out: dict[str, float] = {}
    rates = [q.rate_bit_s for q in after if q.rate_bit_s]
    if rates:
        out["qdisc_rate_mbps"] = min(rates) / 1e6
    drops_before = sum(q.dropped or 0 for q in before if q.entity == "qdisc")
    drops_after = sum(q.dropped or 0 for q in after if q.entity == "qdisc")
    if drops_after >= drops_before:
        out["qdisc_dropped"] = drops_after - drops_before
    return out


ETHTOOL = Monitor(
    "ethtool", ("ethtool",),
    "NIC driver counters (ethtool -S), totals and per queue",
    files=("ethtool-before.txt", "ethtool-after.txt"),
    columns=(Column("nic_<counter>", "count (delta)", "ethtool -S",
                    "every driver counter's total over the attempt (per-queue counters summed "
                    "into totals; names are the driver's)", family=True),),
    snapshots=lambda iface: [SnapshotCommand("ethtool", ("ethtool", "-S", iface))],
    extract=_ethtool)

SYSFS = Monitor(
    "sysfs", ("grep",),
    "kernel interface counters from /sys/class/net/<if>/statistics",
    files=("sysfs-before.txt", "sysfs-after.txt"),
    columns=tuple(Column(name, "bytes (delta)" if name.endswith("bytes") else "count (delta)",
                         f"/sys/class/net/<if>/statistics/{name}") for name in SYSFS_COUNTERS),
    snapshots=lambda iface: [SnapshotCommand(
        "sysfs", ("grep", "-r", ".", f"/sys/class/net/{iface}/statistics/"))],
    extract=_sysfs)

NSTAT = Monitor(
    "nstat", ("nstat",),
    "kernel SNMP counters (UDP/TCP/IP) of the node's network namespace",
    files=("nstat-before.txt", "nstat-after.txt"),
    columns=(*(Column(name, "count (delta)", f"nstat -asz {counter}")
               for counter, name in NSTAT_NAMES.items()),
             Column("nstat_<counter>", "count (delta)", "nstat -asz",
                    "every other kernel SNMP counter under its nstat name", family=True)),
    snapshots=lambda iface: [SnapshotCommand("nstat", ("nstat", "-asz"))],
    extract=_nstat)

TC = Monitor(
    "tc", ("tc",),
    "queueing discipline statistics of the data interface",
    files=("tc-before.txt", "tc-after.txt"),
    columns=(Column("qdisc_rate_mbps", "Mbit/s", "tc -s qdisc",
                    "lowest rate limit of the interface's qdiscs (tbf/netem), after the run"),
             Column("qdisc_dropped", "packets (delta)", "tc -s qdisc",
                    "packets the qdiscs dropped during the attempt")),
    snapshots=lambda iface: [SnapshotCommand("tc", ("tc", "-s", "qdisc", "show", "dev", iface))],
    extract=_tc)
