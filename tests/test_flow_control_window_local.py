"""The flow-control window takes effect on the namespace testbed (paper 003 section IV.C): over
an emulated 50 ms path, a native client that declares it gets at most 8 x W / RTT (5.24
Mbit/s) at a fixed 32 KiB window, well below what the same pair gets with its own windows, and
a client that cannot set it is recorded as unsupported without running.

The test proves the mechanism with one stack (quic-go); ``bench/flow_control_window.py`` runs
the same campaign and the same checks (:func:`window_problems`) for every native client that
declares the parameter (:data:`STACKS`), and docs/benchmarks.md reports it."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd
import pytest

from interop_runner.analysis.frames.results import load_results
from interop_runner.analysis.theories.ceilings import (
    FLOW_CONTROL_TOLERANCE,
    flow_control_ceiling_mbps,
)

from .conftest import TESTBED_FILE, campaign_dirs, write
from .test_campaign import run_cli

WINDOW, RTT_MS = 32 * 1024, 50.0
CEILING = flow_control_ceiling_mbps(WINDOW, RTT_MS)  # 5.24 Mbit/s
# every native client that declares the parameter (the benchmark's set)
STACKS = ("aioquic", "quic-go", "ngtcp2", "quiche", "quinn", "s2n-quic", "msquic", "lsquic")
TESTED = ("quic-go",)  # the test's: the mechanism is the runner's, the same for every stack
# The pairs' own windows (16 MiB and more, auto-tuned) let them go past this multiple of the
# small window's ceiling: over 7.9 Mbit/s of a 50 Mbit/s path (a CPU-bound client, here at
# most aioquic, stays far above that).
FASTER = 1.5


def window_config(directory: Path, stacks: Sequence[str], size: str = "4MB") -> Path:
    """Each of ``stacks`` against itself and tcp-tls (which cannot set the window) over a
    50 Mbit/s, 50 ms path, at a 32 KiB window and at the stacks' own. 4 MB last about 6 s at
    the small window's ceiling, which the window reaches within a few round trips."""
    pairs = "".join(f"  - {{server: {s}, client: {s}}}\n" for s in stacks)
    return write(directory / "window.yml", f"""testbed: {TESTBED_FILE}
name: window-test
file_size: {size}
repetitions: 1
port: 4475
pairs:
{pairs}  - {{server: tcp-tls, client: tcp-tls}}
path: {{rate: 50mbit, rtt: {RTT_MS:g}ms, buffer: 1bdp, calibrate: warn}}
sweep:
  axes:
    - {{path: params.flow_control_window, values: [{WINDOW}B, null], name: window}}
""")


def run_window_campaign(directory: Path, stacks: Sequence[str]) -> pd.DataFrame:
    """Run :func:`window_config` with ``run.py run``; the campaign's results."""
    cfg = window_config(directory, stacks)
    proc = run_cli("run", str(cfg), "--results-dir", str(directory / "results"),
                   "--no-progress", timeout=300 + 150 * len(stacks))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (camp,) = campaign_dirs(directory / "results")
    return load_results(camp)


def window_problems(df: pd.DataFrame, stacks: Sequence[str]) -> list[str]:
    """What breaks the mechanism in a :func:`window_config` campaign, one line each (empty:
    every check holds for every stack)."""
    problems = []
    windowed = df[df.flow_control_window == WINDOW]
    refused = windowed[windowed.client == "tcp-tls"]
    if list(refused.status) != ["unsupported"] or not refused.reason.str.contains(
            "tcp-tls cannot set flow_control_window as the client").all() \
            or not refused.goodput_mbps.isna().all():
        problems.append(f"tcp-tls at the small window is not 'unsupported', not run: "
                        f"{refused[['status', 'reason', 'goodput_mbps']].to_dict('records')}")
    quic = df[df.client.isin(stacks)]
    for row in quic[quic.status != "ok"].itertuples():
        problems.append(f"{row.client} window {row.flow_control_window}: {row.status} "
                        f"({row.reason})")
    small = windowed[windowed.client.isin(stacks)].set_index("client").goodput_mbps
    own = quic[quic.flow_control_window.isna()].set_index("client").goodput_mbps
    for client in stacks:
        if client not in small or client not in own:
            problems.append(f"{client}: no attempt at both windows")
        elif not small[client] <= CEILING * (1 + FLOW_CONTROL_TOLERANCE):
            problems.append(f"{client}: {small[client]:.2f} Mbit/s at 32 KiB is above "
                            f"8 W / RTT = {CEILING:.2f} Mbit/s")
        elif not own[client] >= FASTER * CEILING:
            problems.append(f"{client}: {own[client]:.2f} Mbit/s with its own window is not "
                            f"{FASTER} x the small window's ceiling")
    # where the path's calibration passed, the ceiling columns say the same
    checked = windowed[windowed.client.isin(stacks) & windowed.ceiling_window_bytes.notna()]
    if not ((checked.ceiling_window_bytes == WINDOW).all()
            and (checked.ceiling_basis == "flow_control").all()
            and not checked.ceiling_exceeded.fillna(False).any()
            and checked.ceiling_flow_control_mbps.sub(CEILING).abs().lt(1e-9).all()):
        problems.append("the ceiling columns do not name the 32 KiB flow-control ceiling: "
                        f"{checked[['client', 'ceiling_basis', 'ceiling_window_bytes']]}")
    return problems


@pytest.mark.usefixtures("local_testbed")
def test_a_small_window_bounds_the_goodput_by_window_over_rtt(tmp_path: Path) -> None:
    df = run_window_campaign(tmp_path, TESTED)
    assert window_problems(df, TESTED) == []
    # the campaign ran what it was asked: one stack at two windows, tcp-tls once
    assert sorted(df[df.client.isin(TESTED)].flow_control_window.fillna(0)) == [0, WINDOW]
