#!/usr/bin/env python3
"""Orchestration overhead: wall time of a 20-repetition campaign of 10 MB downloads minus the
summed transfer times, per repetition (target <= 0.5 s on the local testbed).

Usage (root): .venv/bin/python bench/overhead.py [--repetitions 20] [--size 10000000]
"""

from __future__ import annotations

import argparse
import json
import time

from common import machine, run_campaign


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=20)
    parser.add_argument("--size", type=int, default=10_000_000, help="bytes (10 MB)")
    parser.add_argument("--pair", default="quic-go:quic-go", help="server:client")
    args = parser.parse_args()
    server, client = args.pair.split(":")
    run_campaign("warmup", args.size, 1, server, client)  # builds/caches, first SSH keys
    t0 = time.monotonic()
    result = run_campaign("overhead", args.size, args.repetitions, server, client)
    wall = time.monotonic() - t0
    ok = [r for r in result.records if r.status == "ok"]
    transfer = sum(r.duration_s or 0.0 for r in ok)
    per_rep = (wall - transfer) / args.repetitions
    report = {
        "machine": machine(), "pair": args.pair, "repetitions": args.repetitions,
        "size_bytes": args.size, "ok": len(ok), "wall_s": round(wall, 3),
        "transfer_s": round(transfer, 3), "overhead_per_repetition_s": round(per_rep, 3),
        "target_s": 0.5,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
