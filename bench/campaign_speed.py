#!/usr/bin/env python3
"""Campaign speed at the paper's size: how long `run.py run` spends not measuring.

Runs the same campaign twice through the command line (quic-go and tcp-tls, 5 repetitions
each, 8 GiB by default) on the local testbed: the first after removing the server node's
cache of generated files, the second with it. Per campaign it reports:

* ``to_first_transfer_s``: from starting `run.py run` to the first transfer's start (the
  client node's clock; the local testbed's nodes share this host's clock);
* ``non_transfer_per_repetition_s``: (wall time - time to the first transfer - the summed
  transfer times) / repetitions: verification, log fetch, cleanup, the next server's start,
  and the campaign's end (summary table included);
* the transfers and goodputs, for reference.

Usage (root): .venv/bin/python bench/campaign_speed.py [--size 8GiB] [--repetitions 5]
                                                       [--hash blake3|sha256]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import ROOT, machine

from interop_runner.storage.layout import iter_run_files
from interop_runner.storage.run_record import read_run
from interop_runner.testbed import local
from interop_runner.units import positive_size

CACHE = Path(local.SERVER.tmpdir) / "files"


def campaign_file(directory: Path, size: int, repetitions: int, algorithm: str) -> Path:
    """A campaign of quic-go and tcp-tls on the local testbed, no monitors."""
    path = directory / "speed.yml"
    path.write_text(f"""name: speed
testbed: {local.TESTBED_FILE}
file_size: {size}B
repetitions: {repetitions}
verify_hash: {algorithm}
pairs:
  - {{server: quic-go, client: quic-go}}
  - {{server: tcp-tls, client: tcp-tls}}
""")
    return path


def run_once(config: Path, results: Path) -> dict[str, Any]:
    """One `run.py run`, timed from the outside; figures from its stored records."""
    start_ns = time.time_ns()
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "run", str(config),
                           "--results-dir", str(results), "--no-progress"],
                          capture_output=True, text=True, cwd=ROOT)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    # the newest campaign directory (run also writes history.duckdb beside them)
    camp = max((p for p in results.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    records = [read_run(p) for p in iter_run_files(camp)]
    ok = [r for r in records if r["status"] == "ok"]
    first = min(r["start_ns"] for r in ok)
    transfers = sum(r["duration_s"] for r in ok)
    meta = json.loads((camp / "campaign.json").read_text())
    to_first = (first - start_ns) / 1e9
    return {
        "campaign": camp.name, "attempts": len(records), "ok": len(ok),
        "file_reused": meta["file"].get("reused"), "hash": meta["file"]["hash_algorithm"],
        "wall_s": round(wall, 2), "to_first_transfer_s": round(to_first, 2),
        "transfers_s": round(transfers, 2),
        "non_transfer_per_repetition_s": round((wall - to_first - transfers) / len(records), 3),
        "goodput_mbps": {impl: [round(r["goodput_mbps"], 1) for r in ok
                                if r["server"]["implementation"] == impl]
                         for impl in sorted({r["server"]["implementation"] for r in ok})},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="8GiB")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--hash", default="blake3", choices=["blake3", "sha256"])
    args = parser.parse_args()
    size = positive_size(args.size)
    local.up()
    work = Path(tempfile.mkdtemp(prefix="qir-bench-speed-"))
    try:
        config = campaign_file(work, size, args.repetitions, args.hash)
        shutil.rmtree(CACHE, ignore_errors=True)  # the first campaign generates the file
        first = run_once(config, work / "results")
        second = run_once(config, work / "results")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"machine": machine(), "size_bytes": size,
                      "repetitions_per_pair": args.repetitions, "first": first,
                      "second": second}, indent=2))


if __name__ == "__main__":
    main()
