#!/usr/bin/env python3
"""Capacity of the delay line (docs/benchmarks.md, issue 26).

One iperf3 CUBIC flow (8 s after 2 s left out) through a router namespace with a tbf at RATE
(limit 1.25 BDP) and 50 ms of base RTT: the delay on both directions (25 ms each, so every
data packet passes the delay line, as with jitter), on the reverse direction only (50 ms: the
placement of a path without jitter), or no delay line. One JSON row per (placement, rate):
goodput, its share of the rate at the wire (x 1514/1448), idle and loaded RTT, and the delay
line's CPU seconds per second and per 100 Mbit/s. Uses the throw-away namespaces of
tests/test_delayline.py, never the testbed.

Usage (root): .venv/bin/python bench/delayline_capacity.py [RATES_MBIT] [PLACEMENTS]
    defaults: 100,200,400,600,800,1000 none,both,reverse
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests import test_delayline as t  # noqa: E402 - the namespaces and build of the tests

SECONDS, OMIT = 8, 2


def pings(net: t.Net, count: int, interval: float) -> list[float]:
    out = subprocess.run(net.argv(net.a, "ping", "-n", "-c", str(count), "-i", str(interval),
                                  t.B_IP), capture_output=True, text=True).stdout
    return [float(x) for x in re.findall(r"time=([\d.]+) ms", out)]


def start_line(router: t.Router, place: str) -> t.DelayLine | None:
    if place == "both":
        return router.start("--delay", "25", rules=(t.R_A_IF, t.R_B_IF))
    if place == "reverse":
        return router.start("--delay", "50", rules=(t.R_B_IF,))
    return None


def one(net: t.Net, binary: Path, tmp: Path, place: str, rate: int) -> dict[str, Any]:
    router = t.Router(net, binary, tmp)
    try:
        line = start_line(router, place)
        bdp = int(rate * 1e6 * 0.05 / 8)
        router.tbf(t.R_B_IF, rate, max(int(1.25 * bdp), 200_000))
        idle = pings(net, 20, 0.02)
        server = net.popen(net.b, "iperf3", "-s", "-1", "-B", t.B_IP, "-p", "5201")
        time.sleep(0.3)  # iperf3 -s binds; the client retries its connect anyway
        s0 = line.stats() if line else None
        pinger = net.popen(net.a, "ping", "-n", "-c", str(int((SECONDS + OMIT) / 0.1) - 5),
                           "-i", "0.1", t.B_IP)
        out = subprocess.run(net.argv(net.a, "iperf3", "-c", t.B_IP, "-p", "5201", "-C",
                                      "cubic", "-t", str(SECONDS), "-O", str(OMIT), "-J"),
                             capture_output=True, text=True).stdout
        s1 = line.stats() if line else None
        loaded = [float(x) for x in re.findall(r"time=([\d.]+) ms",
                                               pinger.communicate(timeout=30)[0])]
        server.wait(timeout=10)
        goodput = json.loads(out)["end"]["sum_received"]["bits_per_second"]
        wire = goodput * 1514 / 1448
        row: dict[str, Any] = {
            "place": place, "rate_mbit": rate, "goodput_mbit": round(goodput / 1e6, 1),
            "share": round(wire / (rate * 1e6), 3), "idle_rtt_ms": statistics.median(idle),
            "loaded_rtt_min_ms": min(loaded, default=None)}
        if line is not None and s0 is not None and s1 is not None:
            wall = s1["wall_s"] - s0["wall_s"]
            cpu = (s1["cpu_user_s"] + s1["cpu_sys_s"] - s0["cpu_user_s"] - s0["cpu_sys_s"]) / wall
            row.update(cpu_s_per_s=round(cpu, 3), cpu_per_100mbit=round(cpu / (wire / 1e8), 4),
                       late_mean_us=s1["late_mean_us"], enobufs=s1["nfq_enobufs"])
            line.stop()
        return row
    finally:
        router.close()


def main() -> None:
    rates = [int(x) for x in (sys.argv[1] if len(sys.argv) > 1
                              else "100,200,400,600,800,1000").split(",")]
    places = (sys.argv[2] if len(sys.argv) > 2 else "none,both,reverse").split(",")
    net = t.make_net(f"{t.PREFIX}{os.getpid()}-")
    tmp = Path(tempfile.mkdtemp(prefix="qir-dl-capacity-"))
    binary = t.build(tmp)
    try:
        for place in places:
            for rate in rates:
                print(json.dumps(one(net, binary, tmp, place, rate)), flush=True)
    finally:
        for end in "arb":
            t.remove_namespace(net.a[:-1] + end)


if __name__ == "__main__":
    main()
