#!/usr/bin/env python3
"""The conformance table of a stored conformance campaign (docs/benchmarks.md,
"Congestion-control conformance"): per QUIC flow and buffer, Conformance and Conformance-T
against the kernel-vs-kernel reference of its congestion control (paper 000's reference),
the translation (test minus reference) with the extent of its plateau, the spread of each
figure over the k-means seeds 0-9, the same-run figures beside it, and the noise floor of
each reference (one half of its runs against the other).

Usage: .venv/bin/python bench/conformance_table.py RESULTS_OR_CAMPAIGN_DIR... [--csv FILE]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from interop_runner.analysis import flow_conformance  # noqa: E402


def _f(value: object, digits: int = 2, sign: bool = False) -> str:
    if value is None or pd.isna(value):  # type: ignore[call-overload]
        return "NA"
    return f"{float(value):+.{digits}f}" if sign else f"{float(value):.{digits}f}"


def _axes(table: pd.DataFrame) -> list[str]:
    """The sweep's axes other than the flow sets (the buffer, the RTT, ...)."""
    return [c for c in table.columns if c.startswith("axis_") and c != "axis_flows"]


def _buffer(row: pd.Series) -> str:
    """The cell's path as its axes say (``1bdp``, or ``10ms, 1bdp``)."""
    return ", ".join(str(row[c]) for c in _axes(row.to_frame().T))


def test_rows(table: pd.DataFrame) -> list[str]:
    """One Markdown row per tested flow and buffer."""
    lines = []
    tested = table.dropna(subset=["label"]).sort_values(["label", *_axes(table)])
    for _, r in tested.iterrows():
        if pd.notna(r["conformance_missing"]):
            lines.append(f"| {r['label']} | {_buffer(r)} | | NA: {r['conformance_missing']} "
                         "| | | | | |")
            continue
        lines.append(
            f"| {r['label']} | {_buffer(r)} | {r['trials_test']}/{r['reference_runs']} "
            f"| {_f(r['conformance'])} ± {_f(r['conformance_spread'])} "
            f"| {_f(r['conformance_t'])} ± {_f(r['conformance_t_spread'])} "
            f"| ({_f(r['delta_throughput'], 1, True)} ± {_f(r['delta_throughput_range'], 1)}, "
            f"{_f(r['delta_delay'], 1, True)} ± {_f(r['delta_delay_range'], 1)}) "
            f"| {r['k_test']}/{r['k_reference']} "
            f"| {_f(r['conformance_same_run'])} | {_f(r['conformance_t_same_run'])} |")
    return lines


def floor_rows(table: pd.DataFrame) -> list[str]:
    """The noise floor per (congestion control, buffer): the reference against itself."""
    lines = []
    keys = ["congestion_control", *_axes(table)]
    floors = table.dropna(subset=["conformance_floor"]).drop_duplicates(keys)
    for _, r in floors.sort_values(keys).iterrows():
        lines.append(f"| kernel {r['congestion_control']} | {_buffer(r)} "
                     f"| {r['trials_test_floor']}/{r['trials_reference_floor']} "
                     f"| {_f(r['conformance_floor'])} ± {_f(r['conformance_spread_floor'])} "
                     f"| {_f(r['conformance_t_floor'])} ± "
                     f"{_f(r['conformance_t_spread_floor'])} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--csv", type=Path, help="also write the whole table to FILE")
    args = parser.parse_args()
    table = flow_conformance(*args.dirs)
    if args.csv:
        table.to_csv(args.csv, index=False)
    print("| flow | buffer | trials test/reference runs | C ± spread | C-T ± spread "
          "| (Δ-tput Mbit/s ± plateau, Δ-delay ms ± plateau) | k test/ref | C same run "
          "| C-T same run |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(test_rows(table)))
    print("\nNoise floor (the kernel-vs-kernel runs of a cell, one half against the other):\n")
    print("| reference | buffer | runs | C ± spread | C-T ± spread |")
    print("|---|---|---|---|---|")
    print("\n".join(floor_rows(table)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
