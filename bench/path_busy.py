#!/usr/bin/env python3
"""A path on a busy host: the calibration grid's cells calibrated with a CPU hog on each
core (``--hogs``, default one per core; 0: the idle host), and the bottleneck's departures
captured meanwhile (tcpdump on the router's egress towards the client) for its rate over
10 ms and 1 ms and the gaps between departures while the queue is full (the UDP overload).

``--before`` measures the path as it was before issue 35: a bucket of two packets or 1 ms
(``TIMER_SLACK_MS`` 0) and the delay lines at the default policy (``RT_PRIORITY`` 0).

``--slack-ms`` and ``--rt-priority`` set one of the two alone.

Usage (root, local testbed up): .venv/bin/python bench/path_busy.py [--hogs 2] [--before]
       [--slack-ms MS] [--rt-priority P]
       [--cells 20mbit/20ms/1bdp,100mbit/10ms/1bdp] [--out result.json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import dpkt
from common import machine

from interop_runner.config.loader import load_campaign
from interop_runner.measure import path_check
from interop_runner.testbed import local
from interop_runner.testbed.path import node as path_node
from interop_runner.testbed.path import rules

GRID = [f"{r}/{t}/{b}" for r in ("20mbit", "100mbit") for t in ("10ms", "50ms")
        for b in ("0.5bdp", "1bdp", "5bdp")]
HOG = ["python3", "-c", "while True: pass"]


def start_hogs(n: int) -> list[subprocess.Popen[bytes]]:
    """``n`` busy loops at the default priority, each in its own session."""
    return [subprocess.Popen(HOG, start_new_session=True) for _ in range(n)]


def stop_hogs(hogs: list[subprocess.Popen[bytes]]) -> None:
    """Kill the busy loops (by their own process group) and reap them."""
    for hog in hogs:
        try:
            os.killpg(hog.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        hog.wait()


def read_pcap(path: Path) -> list[tuple[float, int, int]]:
    """(time s, wire bytes, IP protocol; -1: not IPv4) of each record of an Ethernet pcap."""
    out = []
    with path.open("rb") as f:
        for ts, frame in dpkt.pcap.Reader(f):
            eth = dpkt.ethernet.Ethernet(frame)
            proto = eth.data.p if isinstance(eth.data, dpkt.ip.IP) else -1
            out.append((float(ts), _wire_length(eth), proto))
    return out


def _wire_length(eth: dpkt.ethernet.Ethernet) -> int:
    """A frame's length on the wire (the capture keeps 64 bytes of each): the Ethernet
    header plus the IP length."""
    return 14 + eth.data.len if isinstance(eth.data, dpkt.ip.IP) else len(eth)


def windows(packets: list[tuple[float, int, int]], rate_bps: float, bin_s: float
            ) -> dict[str, float] | None:
    """Rate over ``bin_s`` bins as a multiple of ``rate_bps``: 1st, 50th, 99th percentile
    and the highest, over the bins between the first and the last packet."""
    if len(packets) < 100:
        return None
    t0, t1 = packets[0][0], packets[-1][0]
    bins = [0] * (int((t1 - t0) / bin_s) + 1)
    for t, size, _ in packets:
        bins[int((t - t0) / bin_s)] += size
    full = [8 * b / bin_s / rate_bps for b in bins[:-1]]  # the last bin is cut short
    q = statistics.quantiles(full, n=100, method="inclusive")
    return {"p1": round(q[0], 3), "p50": round(q[49], 3), "p99": round(q[98], 3),
            "max": round(max(full), 3)}


def phase(packets: list[tuple[float, int, int]], proto: int) -> list[tuple[float, int, int]]:
    """The packets of one protocol (6 TCP, 17 UDP), without the phase's first 0.5 s and
    last 0.2 s (the flow starting, the queue draining)."""
    mine = [p for p in packets if p[2] == proto]
    if not mine:
        return []
    start, end = mine[0][0] + 0.5, mine[-1][0] - 0.2
    return [p for p in mine if start <= p[0] <= end]


def departures(packets: list[tuple[float, int, int]], rate_bps: float) -> dict[str, Any]:
    """How late the bottleneck sent while its queue was full (the UDP overload): the gaps
    between departures beyond the previous packet's time at the rate, in ms."""
    udp = phase(packets, 17)
    late = [max(0.0, (b[0] - a[0]) - 8 * a[1] / rate_bps) * 1e3 for a, b in zip(udp, udp[1:])]
    if len(late) < 1000:
        return {"packets": len(udp)}
    q = statistics.quantiles(late, n=1000, method="inclusive")
    return {"packets": len(udp), "late_p99_ms": round(q[989], 3),
            "late_p999_ms": round(q[998], 3), "late_max_ms": round(max(late), 3),
            "rate_10ms": windows(udp, rate_bps, 0.01), "rate_1ms": windows(udp, rate_bps, 0.001)}


def calibrate(cell: str, workdir: Path) -> dict[str, Any]:
    """Calibrate one cell (rate/rtt/buffer) with the router's egress captured."""
    rate, rtt, buffer = cell.split("/")
    cfg_file = workdir / "cell.yml"
    cfg_file.write_text(f"name: busy\ntestbed: {local.TESTBED_FILE}\nfile_size: 1MiB\n"
                        f"repetitions: 1\npairs: [{{server: quic-go, client: quic-go}}]\n"
                        f"path: {{rate: {rate}, rtt: {rtt}, buffer: {buffer}}}\n")
    cfg, testbed = load_campaign(cfg_file)
    pcap = workdir / "out.pcap"
    dump = subprocess.Popen(["ip", "netns", "exec", "qir-router", "tcpdump", "-i", "cli0", "-Q",
                             "out", "-s", "64", "-B", "16384", "-n", "--time-stamp-precision",
                             "nano", "-w", str(pcap)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        (check,) = path_check.calibrate_paths(cfg, testbed)
    finally:
        dump.send_signal(signal.SIGTERM)
        _, err = dump.communicate(timeout=30)
    cal = check.entry["calibration"]
    rate_bps = check.entry["resolved"]["rate_bps"]
    packets = read_pcap(pcap)
    dropped = [ln for ln in err.decode().splitlines() if "dropped by kernel" in ln]
    loads = cal["host_load"]["nodes"]
    router = loads.get("router", {})
    return {
        "cell": cell, "ok": cal["ok"],
        "checks": {c["parameter"]: [c["configured"], round(c["measured"], 3),
                                    round(c["tolerance"], 3), c["ok"]] for c in cal["checks"]},
        "rate_method": cal["measured"]["rate_method"], "burst_bytes": rules.tbf_burst(rate_bps),
        "delay_line_sched": check.entry.get("delay_line_sched"),
        "host_busy": cal["host_busy"],
        "router_load": {k: router.get(k) for k in ("load1_after", "runnable_other_before",
                                                   "runnable_other_after", "cpu_busy_share",
                                                   "steal_share", "cpu_pressure_share")},
        "tcp_rate_10ms": windows(phase(packets, 6), rate_bps, 0.01),
        "udp_overload": departures(packets, rate_bps),
        "capture_dropped": dropped[0] if dropped else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hogs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--before", action="store_true",
                        help="the path before issue 35: bucket 2 packets or 1 ms, no RT")
    parser.add_argument("--slack-ms", type=float, help="the bucket's timer slack (ms) instead "
                        "of rules.TIMER_SLACK_MS")
    parser.add_argument("--rt-priority", type=int, help="the delay lines' SCHED_FIFO priority "
                        "instead of node.RT_PRIORITY (0: the default policy)")
    parser.add_argument("--cells", default="20mbit/20ms/1bdp,100mbit/10ms/1bdp",
                        help="rate/rtt/buffer,... or 'grid' (the 12 cells)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.before:
        rules.TIMER_SLACK_MS = 0.0
        path_node.RT_PRIORITY = 0
    if args.slack_ms is not None:
        rules.TIMER_SLACK_MS = args.slack_ms
    if args.rt_priority is not None:
        path_node.RT_PRIORITY = args.rt_priority
    cells = GRID if args.cells == "grid" else args.cells.split(",")
    local.up()
    results = []
    hogs = start_hogs(args.hogs)
    try:
        with tempfile.TemporaryDirectory(prefix="qir-busy-") as tmp:
            for cell in cells:
                results.append(calibrate(cell, Path(tmp)))
                print(json.dumps(results[-1]), flush=True)
    finally:
        stop_hogs(hogs)
    doc = {"machine": machine(), "hogs": args.hogs, "before": args.before,
           "timer_slack_ms": rules.TIMER_SLACK_MS, "rt_priority": path_node.RT_PRIORITY,
           "cells": results}
    text = json.dumps(doc, indent=1)
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
