#!/usr/bin/env python3
"""Container overhead: the same quic-go build natively and as the quic-go-qir image (host
networking), in one campaign whose repetitions interleave the two pairs; ratio of median
goodput image/native (target >= 0.98).

Both sides get 8 MiB socket buffer limits (knob ``rmem``/``wmem``), so quic-go reaches its
7 MiB buffers without CAP_NET_ADMIN, which no container of the runner has.

Usage (root): .venv/bin/python bench/container_overhead.py [--repetitions 7] [--size 1GiB]
    [--seed 16]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from common import machine

from interop_runner.config.campaign import CampaignConfig
from interop_runner.config.loader import load_testbed
from interop_runner.measure.campaign import Campaign
from interop_runner.testbed import local
from interop_runner.units import parse_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=7)
    parser.add_argument("--size", default="1GiB")
    parser.add_argument("--seed", type=int, default=16)
    args = parser.parse_args()
    local.up()
    testbed = load_testbed(local.TESTBED_FILE)
    cfg = CampaignConfig(
        name="container-overhead", testbed=str(local.TESTBED_FILE),
        file_size=parse_size(args.size), repetitions=args.repetitions,
        pairs=[{"server": "quic-go", "client": "quic-go"}],
        sweep={"axes": [{"path": "impl.quic-go", "values": ["quic-go", "quic-go-qir"],
                         "name": "build"}], "order": "paired", "seed": args.seed},
        knobs={"rmem": "8MiB", "wmem": "8MiB"}, timeouts={"client": 600, "setup": 3000})
    out = Path(tempfile.mkdtemp(prefix="qir-bench-container-"))
    result = Campaign(cfg, testbed, out).execute()
    goodput: dict[str, list[float]] = {"quic-go": [], "quic-go-qir": []}
    order = []
    for rec in result.records:
        order.append(rec.server.implementation)
        if rec.status == "ok" and rec.goodput_mbps:
            goodput[rec.server.implementation].append(rec.goodput_mbps)
    native, image = (statistics.median(goodput[k]) for k in ("quic-go", "quic-go-qir"))
    print(f"machine: {machine()}")
    print(f"results: {result.directory}")
    print(f"order: {' '.join('N' if o == 'quic-go' else 'I' for o in order)}")
    for name, values in goodput.items():
        print(f"{name:12} n={len(values)} median {statistics.median(values):8.1f} Mbit/s  "
              f"runs: {', '.join(f'{v:.0f}' for v in values)}")
    print(f"ratio image/native of the medians: {image / native:.3f}")


if __name__ == "__main__":
    main()
