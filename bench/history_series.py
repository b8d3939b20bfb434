#!/usr/bin/env python3
"""Real campaign series for the history's change-point detection (issue 19's must-show).

Runs, through the command line on the local testbed, two series of small quic-go campaigns
(one pair, ``--repetitions`` each, default monitors):

* ``step``: the server node's egress is limited by the ``rate`` knob to ``--rate`` for
  campaigns 1 .. k-1 and to ``--rate-after`` from campaign k on: a known drop in goodput;
* ``aa``: the same number of campaigns, all at ``--rate`` (no change).

Each campaign is a directory of its own under ``OUT/step`` and ``OUT/aa``; ``run.py history``
(or :mod:`interop_runner.analysis.history`) reads them as any other campaigns. Prints the
campaign directories and each campaign's median goodput.

Usage (root): .venv/bin/python bench/history_series.py OUT [--campaigns 12] [--step-at 7]
              [--rate 200mbit] [--rate-after 150mbit] [--repetitions 5] [--size 10MB]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

from common import ROOT

from interop_runner.storage.layout import iter_run_files
from interop_runner.storage.run_record import read_run
from interop_runner.testbed import local


def campaign_file(directory: Path, name: str, rate: str, args: argparse.Namespace) -> Path:
    """One small quic-go campaign whose server egress is limited to ``rate``."""
    path = directory / f"{name}.yml"
    path.write_text(f"""name: {name}
testbed: {local.TESTBED_FILE}
file_size: {args.size}
repetitions: {args.repetitions}
pairs:
  - {{server: quic-go, client: quic-go}}
server_knobs: {{rate: {rate}}}
""")
    return path


def run_campaign(config: Path, results: Path) -> Path:
    """``run.py run`` one campaign; its directory."""
    before = set(results.iterdir()) if results.exists() else set()
    subprocess.run([sys.executable, str(ROOT / "run.py"), "run", str(config), "--results-dir",
                    str(results), "--no-progress"], check=True, cwd=ROOT,
                   stdout=subprocess.DEVNULL)
    (new,) = [p for p in results.iterdir() if p not in before and p.is_dir()]
    return new


def median_goodput(campaign: Path) -> float:
    """Median goodput (Mbit/s) of the campaign's ok attempts."""
    values = [d["goodput_mbps"] for d in map(read_run, iter_run_files(campaign))
              if d["status"] == "ok"]
    return statistics.median(values)


def main() -> None:
    """Run both series and print each campaign's median goodput."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--campaigns", type=int, default=12)
    parser.add_argument("--step-at", type=int, default=7, help="first campaign at --rate-after")
    parser.add_argument("--rate", default="200mbit")
    parser.add_argument("--rate-after", default="150mbit")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--size", default="10MB")
    args = parser.parse_args()
    configs = args.out / "configs"
    configs.mkdir(parents=True, exist_ok=True)
    for series in ("step", "aa"):
        for i in range(1, args.campaigns + 1):
            stepped = series == "step" and i >= args.step_at
            rate = args.rate_after if stepped else args.rate
            name = f"hist-{series}-{i:02d}"
            camp = run_campaign(campaign_file(configs, name, rate, args), args.out / series)
            print(f"{series} {i:2d} {rate:>8} {median_goodput(camp):8.1f} Mbit/s {camp.name}",
                  flush=True)


if __name__ == "__main__":
    main()
