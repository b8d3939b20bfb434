"""Monitors: tools that run on the nodes around the transfer and leave raw output in LOGS.

Two kinds:

* snapshots run just before and just after the transfer (``<name>-before.txt`` /
  ``<name>-after.txt``): NIC counters, kernel counters, qdisc statistics;
* series run in the background during the transfer (``<name>.txt``): per-core and per-process
  CPU, per-second interface rates.

Every monitor names the tools it needs; a tool missing on a node makes that monitor "missing"
for the node (recorded with the reason in run.json), never a failed run. Parsing the raw files
is the job of :mod:`interop_runner.parsers` and :mod:`interop_runner.analysis`.
"""

from interop_runner.monitors.specs import LIGHT_SET, MONITOR_SPECS, MonitorSpec, SeriesCommand, SnapshotCommand

__all__ = ["LIGHT_SET", "MONITOR_SPECS", "MonitorSpec", "SeriesCommand", "SnapshotCommand"]
