#!/usr/bin/env python3
"""How fast ``bottleneck_packets`` pairs large REAL captures, and ``flow_series`` bins them.

Makes the captures with tests/data/bottleneck/make_captures.py (as root: its own throw-away
namespaces ``qirbn-*``, removed afterwards): one iperf3 UDP flow at ``--udp-rate`` through
``tbf rate --rate limit 50000``, so that the ``in`` capture holds the offered packets and
``out`` the ones the bottleneck let through (by default 300 Mbit/s into 200 Mbit/s for 6 s:
about 150k and 100k packets, plain pcap as a campaign writes them). ``--dir`` times captures
made before (DIR/udp/path/bottleneck-{in,out}.pcap) instead. Each function runs
``--repeat`` times in this process; the JSON gives the best and the median wall time and
the best CPU time (on a machine shared with other work the wall time varies by 2x).

Usage: .venv/bin/python bench/bottleneck_packets.py [--dir /dev/shm/qir-bneck] [--keep]
       [--rate 200mbit] [--udp-rate 300M] [--seconds 6] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from common import ROOT, machine

from interop_runner.analysis.frames.bottleneck import (
    IN_FILE,
    OUT_FILE,
    bottleneck_packets,
    flow_series,
)


def timed(fn: Callable[[], Any], repeat: int) -> tuple[Any, dict[str, float]]:
    """``fn()`` and its best and median wall time and its best CPU time (of this process:
    less disturbed by other load on a shared machine), in s."""
    walls, cpus, out = [], [], None
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        out = fn()
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
    return out, {"wall_best": round(min(walls), 3),
                 "wall_median": round(statistics.median(walls), 3),
                 "cpu_best": round(min(cpus), 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, help="captures made before (DIR/udp/path/...)")
    ap.add_argument("--keep", action="store_true", help="keep the captures made")
    ap.add_argument("--rate", default="200mbit")
    ap.add_argument("--udp-rate", default="300M")
    ap.add_argument("--seconds", default="6")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    made = args.dir is None
    root = Path(tempfile.mkdtemp(prefix="qir-bneck-")) if made else args.dir
    try:
        if made:
            subprocess.run([sys.executable, str(ROOT / "tests/data/bottleneck/make_captures.py"),
                            "--out", str(root), "--only", "udp", "--rate", args.rate,
                            "--udp-rate", args.udp_rate, "--seconds", args.seconds],
                           check=True, stdout=subprocess.DEVNULL)
        attempt = root / "udp"
        packets, pair_times = timed(lambda: bottleneck_packets(attempt), args.repeat)
        series, bin_times = timed(lambda: flow_series(packets), args.repeat)
        records = len(packets) + int((~packets["dropped"]).sum())  # in both files
        tc = json.loads((attempt / "tc.json").read_text())["tc"] if made else None
        result = {
            "machine": machine(),
            "captures": {"in_bytes": (attempt / IN_FILE).stat().st_size,
                         "out_bytes": (attempt / OUT_FILE).stat().st_size,
                         "made": f"udp {args.udp_rate} into tbf {args.rate} for {args.seconds} s"
                         if made else str(args.dir)},
            "packets_in": len(packets), "packets_out": int((~packets["dropped"]).sum()),
            "dropped": int(packets["dropped"].sum()), "tc": tc,
            "unmatched_leaving": packets.attrs["unmatched_leaving"],
            "bottleneck_packets_s": pair_times,
            "us_per_record_wall": round(pair_times["wall_best"] / records * 1e6, 2),
            "flow_series_s": {**bin_times, "rows": len(series)},
            "load_average": os.getloadavg(),
        }
        print(json.dumps(result, indent=1))
    finally:
        if made and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        elif made:
            print(f"captures kept in {root}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
