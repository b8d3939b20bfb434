#!/usr/bin/env python3
"""Shipped campaigns measured by two trees side by side: an older tree (``--old``, a
checkout) and this one, alternating one campaign each, so that drift of the machine hits
both alike (which goes first alternates from round to round). Prints goodput and CPU cost
per GiB per repetition and the medians per tree, scenario and cell: a change that must leave
the numbers as they were shows it here.

The scenarios are one table (:data:`SCENARIOS`): a shipped config and the ``--set``
overrides that make it small enough to run a few rounds (the same in both trees).

Usage (root): .venv/bin/python bench/side_by_side.py --old /path/to/old/checkout
    [--scenarios pairs,path,flows,containers,conformance] [--rounds 4]
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
# scenario -> (shipped config, overrides); the old `no_path_side_by_side` is "pairs"
SCENARIOS: dict[str, tuple[str, list[str]]] = {
    "pairs": ("configs/local.yml", ["file_size=256MiB", "repetitions=3"]),
    "path": ("configs/path-loss.yml", ["repetitions=3"]),
    "flows": ("configs/flows-quic-tcp.yml", [
        "repetitions=2", "duration=10s",
        "sweep.axes=[{name: flows, path: flows, values: [[{server: quic-go, client: quic-go, "
        "congestion_control: reno}, {tcp: reno}]]}]"]),
    "containers": ("configs/interop.yml", [
        "servers=[quic-go]", "clients=[quic-go-qir]", "repetitions=3",
        "monitors=[pidstat]"]),
    "conformance": ("configs/conformance.yml", [
        "repetitions=2", "duration=20s",
        "sweep.axes=[{name: flows, path: flows, values: [[{server: quic-go, client: quic-go, "
        "congestion_control: reno}, {tcp: reno}]]}]"]),
}
COLUMNS = ["goodput_mbps", "server_cpu_s_per_gib", "client_cpu_s_per_gib"]


def campaign(tree: Path, scenario: str, name: str, work: Path) -> Path:
    """One campaign of ``scenario`` with ``tree``'s run.py and config; its directory."""
    config, overrides = SCENARIOS[scenario]
    results = work / name
    sets = [a for o in [f"name={name}", f"testbed={tree / 'configs/testbeds/local.yml'}",
                        *overrides] for a in ("--set", o)]
    subprocess.run([sys.executable, str(tree / "run.py"), "run", str(tree / config), *sets,
                    "--results-dir", str(results), "--no-progress", "--no-history"],
                   cwd=tree, check=True, stdout=subprocess.DEVNULL)
    (camp,) = [p for p in results.iterdir() if (p / "campaign.json").is_file()]
    return camp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, required=True)
    parser.add_argument("--scenarios", default="pairs",
                        help=f"comma-separated, of: {', '.join(SCENARIOS)}")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    scenarios = args.scenarios.split(",")
    unknown = sorted(set(scenarios) - set(SCENARIOS))
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(unknown)} (known: {', '.join(SCENARIOS)})")
    frames = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.rounds):
            trees = [("old", args.old), ("new", ROOT)]
            for scenario in scenarios:
                # the order alternates between rounds: a slower second (or first) campaign
                # of each round would otherwise look like a difference of the trees
                for label, tree in trees if i % 2 == 0 else trees[::-1]:
                    df = load_results(campaign(tree, scenario, f"{scenario}-{label}-{i}",
                                               Path(tmp)))
                    df["tree"], df["round"], df["scenario"] = label, i, scenario
                    frames.append(df)
    df = pd.concat(frames, ignore_index=True)
    df["cell"] = df["cell_server"] + " -> " + df["cell_client"]
    cols = ["scenario", "cell", "tree", "round", "repetition", "status", *COLUMNS]
    print(machine())
    print(df[cols].sort_values(["scenario", "cell", "round", "repetition", "tree"])
          .to_string(index=False))
    print(df[df["status"] == "ok"].groupby(["scenario", "cell", "tree"])[COLUMNS].median()
          .round(2).to_string())


if __name__ == "__main__":
    main()
