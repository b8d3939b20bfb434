#!/usr/bin/env python3
"""Monitor overhead: goodput with a monitor set / goodput with no monitors, same pair, median
of N runs each (target >= 0.98 for the light set: ethtool, sysfs, nstat, pidstat, mpstat).
perf and tcpdump are measured too (no target: debugging tools in the paper).

Modes run interleaved (one 1-repetition campaign per mode in turn) so drift hits all alike.
Usage (root): .venv/bin/python bench/monitor_overhead.py [--runs 7] [--size 536870912]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from common import Campaign, CampaignConfig, load_testbed, local, machine

from interop_runner.monitors import LIGHT_SET

MODES: dict[str, list[str]] = {
    "none": [],
    "light": list(LIGHT_SET),
    "perf": ["perf"],
    "tcpdump": ["tcpdump"],
}


def one_run(monitors: list[str], size: int, out: Path) -> float:
    """Goodput (Mbit/s) of one quic-go <-> quic-go attempt with the given monitors."""
    testbed = load_testbed(local.TESTBED_FILE)
    cfg = CampaignConfig(name="overhead", testbed=str(local.TESTBED_FILE), file_size=size,
                         repetitions=1, monitors=monitors,
                         pairs=[{"server": "quic-go", "client": "quic-go"}])
    (record,) = Campaign(cfg, testbed, out).execute().records
    assert record.status == "ok", record.reason
    assert record.goodput_mbps is not None
    return record.goodput_mbps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--size", type=int, default=512 * 2**20)
    parser.add_argument("--modes", default=",".join(MODES))
    args = parser.parse_args()
    modes = args.modes.split(",")
    local.up()
    out = Path(tempfile.mkdtemp(prefix="qir-bench-monitors-"))
    one_run([], 10_000_000, out)  # warm-up: builds, caches
    goodput: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(args.runs):
        for mode in modes:
            goodput[mode].append(one_run(MODES[mode], args.size, out))
    base = statistics.median(goodput["none"])
    print(json.dumps({
        "machine": machine(), "size_bytes": args.size, "runs": args.runs,
        "median_mbps": {m: round(statistics.median(v), 1) for m, v in goodput.items()},
        "ratio_to_none": {m: round(statistics.median(v) / base, 4) for m, v in goodput.items()},
        "goodput_mbps": {m: [round(x, 1) for x in v] for m, v in goodput.items()},
        "target_light": 0.98,
    }, indent=2))


if __name__ == "__main__":
    main()
