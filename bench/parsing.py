#!/usr/bin/env python3
"""Parsing speed: load a 1,000-attempt campaign with the light monitor set (every counter),
cold (no cache) and from the Parquet cache; report time and peak memory.

The predecessor's parser loads 4,430 repetitions in 5.2 s on this kind of machine (about
1.17 s per 1,000 attempts) extracting 6 ethtool and 6 netstat fields per side.
Usage: .venv/bin/python bench/parsing.py [--attempts 1000] [--repeat 3] [--dir /dev/shm/qir-parse]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import ROOT, machine

from interop_runner.analysis import load_results

PREDECESSOR_S_PER_1000 = 5.2 / 4430 * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=Path("/dev/shm/qir-parse"))
    args = parser.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "make_campaign.py"),
                          str(args.dir), "--attempts", str(args.attempts)],
                         check=True, capture_output=True, text=True).stdout
    campaign = Path(out.splitlines()[0].strip())
    try:
        cold = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            frame = load_results(campaign, cache=False)
            cold.append(time.perf_counter() - t0)
        load_results(campaign)  # writes the cache
        cached = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            cached_frame = load_results(campaign)
            cached.append(time.perf_counter() - t0)
        assert cached_frame.shape == frame.shape
        peak_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        peak_children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    finally:
        shutil.rmtree(args.dir, ignore_errors=True)
    cold_s = statistics.median(cold)
    print(json.dumps({
        "machine": machine(), "attempts": len(frame), "columns": frame.shape[1],
        "monitor_columns": sum(c.startswith(("server_", "client_")) for c in frame.columns),
        "cold_s": [round(x, 3) for x in cold], "cold_median_s": round(cold_s, 3),
        "cold_s_per_1000": round(cold_s / len(frame) * 1000, 3),
        "predecessor_s_per_1000": round(PREDECESSOR_S_PER_1000, 3),
        "speedup_vs_predecessor": round(PREDECESSOR_S_PER_1000 / (cold_s / len(frame) * 1000), 2),
        "cached_s": [round(x, 3) for x in cached], "cached_median_s":
            round(statistics.median(cached), 3),
        "peak_rss_mib": {"main": round(peak_self, 1), "largest_worker": round(peak_children, 1)},
    }, indent=2))


if __name__ == "__main__":
    main()
