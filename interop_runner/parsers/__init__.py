"""Parsers: pure functions from monitor tool output (text) to typed records.

No I/O: every function takes the text the caller read. Output a parser does not understand
raises :class:`ParseError` (the caller records the monitor as missing with its ``reason``).
Counters a tool does not print are absent from the result, never 0.
"""

from interop_runner.parsers.common import ParseError, counter_delta
from interop_runner.parsers.ethtool import (
                                            EthtoolStats,
                                            ethtool_delta,
                                            ethtool_totals_delta,
                                            ethtool_totals_deltas,
                                            parse_ethtool_stats,
)
from interop_runner.parsers.ifstat import IfstatSample, parse_ifstat
from interop_runner.parsers.netstat import nstat_delta, nstat_deltas, parse_netstat_s, parse_nstat
from interop_runner.parsers.proc import ProcTimes, cpu_pct, cpu_seconds, parse_proc_times
from interop_runner.parsers.snapshots import Deltas
from interop_runner.parsers.sysfs import parse_sysfs_stats, sysfs_deltas
from interop_runner.parsers.sysstat import (
                                            MpstatSample,
                                            PidstatSample,
                                            mean_cpu_pct,
                                            parse_mpstat_json,
                                            parse_pidstat,
                                            pidstat_cpu_summary,
)
from interop_runner.parsers.tc import QdiscStats, parse_tc_qdisc

__all__ = [
    "ParseError",
    "counter_delta",
    "Deltas",
    "EthtoolStats",
    "parse_ethtool_stats",
    "ethtool_delta",
    "ethtool_totals_delta",
    "ethtool_totals_deltas",
    "nstat_delta",
    "nstat_deltas",
    "parse_sysfs_stats",
    "sysfs_deltas",
    "parse_nstat",
    "parse_netstat_s",
    "PidstatSample",
    "parse_pidstat",
    "mean_cpu_pct",
    "pidstat_cpu_summary",
    "MpstatSample",
    "parse_mpstat_json",
    "QdiscStats",
    "parse_tc_qdisc",
    "IfstatSample",
    "parse_ifstat",
    "ProcTimes",
    "parse_proc_times",
    "cpu_pct",
    "cpu_seconds",
]
