#!/usr/bin/env python3
"""Campaigns without a path, measured by two trees side by side: the tree before emulated
paths (``--old``, a checkout) and this one, alternating one campaign each, so that drift of
the machine hits both alike (which goes first alternates from round to round). Prints
goodput and CPU cost per GiB per repetition and the medians per tree and pair.

Usage (root): .venv/bin/python bench/no_path_side_by_side.py --old /path/to/old/checkout
    [--rounds 4] [--repetitions 3] [--size 256MiB]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
from common import machine

from interop_runner.analysis.frames.results import load_results

ROOT = Path(__file__).resolve().parent.parent
CONFIG = """name: {name}
testbed: {testbed}
file_size: {size}
repetitions: {reps}
port: 4480
pairs:
  - {{server: quic-go, client: quic-go}}
  - {{server: tcp-tls, client: tcp-tls}}
monitors: [pidstat]
"""


def campaign(tree: Path, name: str, args: argparse.Namespace, work: Path) -> Path:
    """One campaign with ``tree``'s run.py; its directory."""
    cfg = work / f"{name}.yml"
    cfg.write_text(CONFIG.format(name=name, size=args.size, reps=args.repetitions,
                                 testbed=tree / "configs" / "testbeds" / "local.yml"))
    results = work / name
    subprocess.run([sys.executable, str(tree / "run.py"), "run", str(cfg), "--results-dir",
                    str(results), "--no-progress"], cwd=tree, check=True,
                   stdout=subprocess.DEVNULL)
    (camp,) = [p for p in results.iterdir() if (p / "campaign.json").is_file()]
    return camp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--size", default="256MiB")
    args = parser.parse_args()
    frames = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.rounds):
            trees = [("old", args.old), ("new", ROOT)]
            # the order alternates between rounds: a slower second (or first) campaign of
            # each round would otherwise look like a difference of the trees
            for label, tree in trees if i % 2 == 0 else trees[::-1]:
                df = load_results(campaign(tree, f"{label}-{i}", args, Path(tmp)))
                df["tree"], df["round"] = label, i
                frames.append(df)
    df = pd.concat(frames, ignore_index=True)
    cols = ["tree", "round", "server", "repetition", "goodput_mbps", "server_cpu_s_per_gib",
            "client_cpu_s_per_gib"]
    print(machine())
    print(df[cols].sort_values(["server", "round", "repetition", "tree"]).to_string(index=False))
    print(df.groupby(["server", "tree"])[cols[4:]].median().round(2).to_string())


if __name__ == "__main__":
    main()
