#!/usr/bin/env python3
"""The flow-control window on every native client that declares it (docs/benchmarks.md,
issue 28; moved here from tests/test_flow_control_window_local.py, issue 34).

The test's campaign and checks (tests/test_flow_control_window_local.py: ``window_config``,
``window_problems``) for every stack of its ``STACKS``, or those named: each against itself
over a 50 Mbit/s, 50 ms path at a fixed 32 KiB window (ceiling 8 W / RTT = 5.24 Mbit/s) and at
its own, and tcp-tls, which cannot set it. Prints one row per stack (goodput at both windows,
their ratio to the ceiling) and every check that fails; exits 1 when one does.

Usage (root): .venv/bin/python bench/flow_control_window.py [STACK ...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from common import machine  # also puts the checkout on sys.path

from tests import test_flow_control_window_local as t  # the test's campaign and checks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stacks", nargs="*", default=list(t.STACKS), metavar="STACK")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="qir-bench-window-") as tmp:
        df = t.run_window_campaign(Path(tmp), args.stacks)
    quic = df[df.client.isin(args.stacks)]
    table = quic.pivot_table(index="client", columns=quic.flow_control_window.fillna(0),
                             values="goodput_mbps")
    table.columns = ["own window (Mbit/s)" if c == 0 else "32 KiB (Mbit/s)"
                     for c in table.columns]
    table["32 KiB / ceiling"] = table["32 KiB (Mbit/s)"] / t.CEILING
    print(machine())
    print(f"ceiling 8 W / RTT = {t.CEILING:.2f} Mbit/s")
    print(table.round(3).to_string())
    problems = t.window_problems(df, args.stacks)
    for line in problems:
        print(f"FAIL {line}")
    print("all checks hold" if not problems else f"{len(problems)} check(s) failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
