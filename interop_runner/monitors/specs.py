"""What each monitor runs. Pure data: argv lists built from the node's data interface."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

# S_TIME_FORMAT=ISO makes sysstat print ISO dates; TZ=UTC makes its clock times UTC, which is
# what the parsers assume (mpstat JSON has only a clock, no epoch).
SYSSTAT_ENV = {"S_TIME_FORMAT": "ISO", "LC_ALL": "C", "TZ": "UTC"}


@dataclass(frozen=True)
class SnapshotCommand:
    """A command whose output is saved before and after the transfer."""

    file: str
    argv: tuple[str, ...]


@dataclass(frozen=True)
class SeriesCommand:
    """A background command sampling during the transfer (stopped with ``stop_signal``)."""

    file: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    stop_signal: str = "INT"


@dataclass(frozen=True)
class MonitorSpec:
    """One monitor: the tools it needs and the commands it runs on a node."""

    name: str
    tools: tuple[str, ...]
    snapshots: Callable[[str], list[SnapshotCommand]] = lambda iface: []
    series: Callable[[str], list[SeriesCommand]] = lambda iface: []
    description: str = ""


MONITOR_SPECS: dict[str, MonitorSpec] = {
    spec.name: spec for spec in (
        MonitorSpec(
            "ethtool", ("ethtool",),
            snapshots=lambda iface: [SnapshotCommand("ethtool", ("ethtool", "-S", iface))],
            description="NIC driver counters (ethtool -S), totals and per queue"),
        MonitorSpec(
            "sysfs", ("grep",),
            snapshots=lambda iface: [SnapshotCommand(
                "sysfs", ("grep", "-r", ".", f"/sys/class/net/{iface}/statistics/"))],
            description="kernel interface counters from /sys/class/net/<if>/statistics"),
        MonitorSpec(
            "nstat", ("nstat",),
            snapshots=lambda iface: [SnapshotCommand("nstat", ("nstat", "-asz"))],
            description="kernel SNMP counters (UDP/TCP/IP) of the node's network namespace"),
        MonitorSpec(
            "tc", ("tc",),
            snapshots=lambda iface: [SnapshotCommand(
                "tc", ("tc", "-s", "qdisc", "show", "dev", iface))],
            description="queueing discipline statistics of the data interface"),
        MonitorSpec(
            "mpstat", ("mpstat",),
            series=lambda iface: [SeriesCommand(
                "mpstat", ("mpstat", "-P", "ALL", "-o", "JSON", "1"), SYSSTAT_ENV)],
            description="per-core CPU utilisation, 1 s interval"),
        MonitorSpec(
            "pidstat", ("pidstat", "pgrep"),
            description="CPU/memory/context switches of the server and client processes and "
                        "their threads, 1 s interval"),
        MonitorSpec(
            "ifstat", ("ifstat",),
            series=lambda iface: [SeriesCommand(
                "ifstat", ("ifstat", "-i", iface, "-n", "-t", "-b", "1"),
                {"LC_ALL": "C", "TZ": "UTC"}, "TERM")],
            description="per-second receive/transmit rate of the data interface (ifstat's "
                        "Kbps = 1024 bit/s)"),
        MonitorSpec(
            "qlog", (),
            description="qlog files of implementations that support QLOGDIR (compressed)"),
        MonitorSpec(
            "perf", ("perf", "zstd"),
            description="system-wide CPU profile (perf record -a -g), folded stacks, categories "
                        "and a flame graph"),
        MonitorSpec(
            "handshake", ("tcpdump",),
            description="the QUIC long-header packets, whole, captured on the client; their "
                        "Initial packets are decrypted to record the cipher suites offered "
                        "and chosen (a few KiB per run)"),
        MonitorSpec(
            "tcpdump", ("tcpdump",),
            description="packet capture of the measurement port (snap length configurable) with "
                        "the TLS key log beside it, and a pcap summary"),
    )
}

# The light set: cheap counters and samplers, suitable for every measurement.
LIGHT_SET = ("ethtool", "sysfs", "nstat", "pidstat", "mpstat")


def pidstat_argv(pids: str) -> tuple[str, ...]:
    """pidstat over the given comma-separated PIDs and their threads, one line per sample."""
    return ("pidstat", "-h", "-H", "-u", "-r", "-w", "-t", "-p", pids, "1")
