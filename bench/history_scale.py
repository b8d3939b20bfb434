#!/usr/bin/env python3
"""History at scale: ``run.py history ingest`` and ``history check`` over 100 campaigns.

Builds ``--campaigns`` campaign directories with ``bench/make_campaign.py`` (every file made
from REAL captured outputs in ``bench/data/``: 4 pairs, ``--attempts`` attempts each, ~3 %
failed), one a day from 2026-08-01, and marks each ``synthetic: true`` in its campaign.json
(schema 4). Each campaign's goodput levels get a campaign-wide factor ``exp(N(0, 0.03))``
(campaigns scatter more than the attempts within one), and from campaign ``--step-at`` on
lsquic↔lsquic runs ``--step`` slower under a new version, so ``history check`` has one
regression to find (exit 5) among otherwise flat series.

Then, each in a fresh ``run.py`` process, timed from outside: ``history ingest`` of all
campaigns cold (load_results parses every tree and writes its cache), the same again
(everything ``unchanged``), ``history ingest --rebuild`` (parses from the caches), ``history
check --metric all`` and ``history check`` (goodput). Prints JSON.

Usage: .venv/bin/python bench/history_scale.py [--dir /dev/shm/qir-history]
       [--campaigns 100] [--attempts 20] [--keep]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from unittest import mock

import make_campaign
from common import ROOT, machine

from interop_runner.storage.campaign_record import load_campaign_record, write_campaign

FIRST_DAY = datetime(2026, 8, 1, 2, 0, 0, tzinfo=timezone.utc)
CAMPAIGN_NOISE = 0.03
STEP_PAIR = "lsquic"
NEW_VERSION = "v4.3.0"


def levels(index: int, rng: random.Random, step_at: int, step: float
           ) -> dict[str, tuple[str, str, float]]:
    """make_campaign.IMPLS for campaign ``index``: levels times the campaign's factor, the
    step pair slower (and a version newer) from ``step_at`` on."""
    factor = math.exp(rng.gauss(0.0, CAMPAIGN_NOISE))
    impls = {}
    for name, (alpn, version, level) in make_campaign.IMPLS.items():
        if name == STEP_PAIR and index >= step_at:
            version, level = NEW_VERSION, level * (1 - step)
        impls[name] = (alpn, version, level * factor)
    return impls


def build(out: Path, n: int, attempts: int, step_at: int, step: float) -> list[Path]:
    """``n`` synthetic campaigns below ``out``, one a day."""
    rng = random.Random(19)
    dirs = []
    for i in range(n):
        start = FIRST_DAY + timedelta(days=i)
        with mock.patch.object(make_campaign, "CAMPAIGN_START", start), \
                mock.patch.object(make_campaign, "CAMPAIGN_NAME", "history"), \
                mock.patch.object(make_campaign, "IMPLS", levels(i, rng, step_at, step)):
            directory, _ = make_campaign.generate(out, attempts, seed=1000 + i)
        mark_synthetic(directory / "campaign.json")
        dirs.append(directory)
    return dirs


def mark_synthetic(path: Path) -> None:
    """Rewrite a generated campaign.json as today's typed document with ``synthetic: true``."""
    record = load_campaign_record(path).model_copy(update={"synthetic": True})
    write_campaign(path, record, overwrite=True)


def timed(argv: list[str]) -> dict[str, Any]:
    """Run ``run.py ARGV`` in a fresh process: wall time, exit status, last output line."""
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), *argv], capture_output=True,
                          text=True, check=False, cwd=ROOT)
    wall = time.monotonic() - t0
    lines = (proc.stdout.strip() or proc.stderr.strip()).splitlines()
    return {"argv": " ".join(argv[:2]) + (" --rebuild" if "--rebuild" in argv else "")
            + (" --metric all" if "all" in argv else ""),
            "wall_s": round(wall, 2), "exit": proc.returncode,
            "last_line": lines[-1] if lines else "",
            "regressions": [ln for ln in proc.stdout.splitlines() if "REGRESSION" in ln]}


def main(argv: list[str] | None = None) -> int:
    """Build the campaigns, time the commands, print JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=Path("/dev/shm/qir-history"))
    ap.add_argument("--campaigns", type=int, default=100)
    ap.add_argument("--attempts", type=int, default=20, help="per campaign (4 pairs)")
    ap.add_argument("--step-at", type=int, default=70)
    ap.add_argument("--step", type=float, default=0.20)
    ap.add_argument("--keep", action="store_true", help="keep the campaigns and the database")
    args = ap.parse_args(argv)
    shutil.rmtree(args.dir, ignore_errors=True)
    t0 = time.monotonic()
    build(args.dir, args.campaigns, args.attempts, args.step_at, args.step)
    generated = time.monotonic() - t0
    db = str(args.dir / "history.duckdb")
    runs = [timed(["history", "ingest", str(args.dir), "--db", db]),
            timed(["history", "ingest", str(args.dir), "--db", db]),
            timed(["history", "ingest", "--rebuild", "--db", db]),
            timed(["history", "check", "--db", db, "--metric", "all"]),
            timed(["history", "check", "--db", db])]
    print(json.dumps({"machine": machine(), "campaigns": args.campaigns,
                      "attempts_per_campaign": args.attempts,
                      "step": {"pair": STEP_PAIR, "at": args.step_at, "size": args.step},
                      "generate_s": round(generated, 1), "commands": runs}, indent=2))
    if not args.keep:
        shutil.rmtree(args.dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
