"""A path that holds on a busy host (issue 35 §4, docs/paths.md "A busy host"): the
calibration grid's 20 and 100 Mbit/s cells with a CPU hog on each core pass the strict
calibration, the delay lines run at SCHED_FIFO, and the attempt's record says the hosts
were busy. The figures (every cell of the grid, before and after, idle and busy, the
bucket's effect on short-timescale rate) are bench/path_busy.py's (docs/benchmarks.md)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from interop_runner.analysis.frames.results import load_results
from interop_runner.storage.layout import iter_run_files
from interop_runner.storage.run_record import read_run

from .conftest import campaign_dirs
from .test_campaign import run_cli
from .test_path_local import path_config

HOG = ["python3", "-c", "while True: pass"]


@pytest.fixture
def hogs() -> Iterator[int]:
    """A busy loop per core, at the default priority, killed at the end."""
    procs = [subprocess.Popen(HOG, start_new_session=True)
             for _ in range(len(os.sched_getaffinity(0)))]
    try:
        yield len(procs)
    finally:
        for proc in procs:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.usefixtures("local_testbed")
@pytest.mark.parametrize("cell", ["20mbit/20ms", "100mbit/10ms"])
def test_the_path_holds_its_calibration_with_every_core_busy(
        cell: str, hogs: int, tmp_path: Path) -> None:
    rate, rtt = cell.split("/")
    cfg = path_config(tmp_path, "busy", f"{{rate: {rate}, rtt: {rtt}, buffer: 1bdp, "
                      "calibrate: strict}", size="4MiB")
    proc = run_cli("run", str(cfg), "--results-dir", str(tmp_path / "results"), "--no-progress")
    assert proc.returncode == 0, proc.stderr  # strict: a missed calibration stops it
    (camp,) = campaign_dirs(tmp_path / "results")
    (entry,) = json.loads((camp / "campaign.json").read_text())["paths"].values()
    cal = entry["calibration"]
    assert cal["ok"], cal["checks"]
    assert {c["parameter"] for c in cal["checks"]} >= {"rtt", "rate", "queue"}
    assert cal["host_busy"] is True  # the hogs were seen, and the path held anyway
    # a plain router path has one delay line, the reverse direction's (the base delay)
    lines = entry["delay_line_sched"]
    assert lines and {s["sched"] for s in lines.values()} == {"fifo"}, lines
    (run,) = [read_run(p) for p in iter_run_files(camp)]
    assert run["status"] == "ok" and run["host_busy"] is True
    nodes = run["host_load"]["nodes"]
    assert set(nodes) == {"server", "client", "router", "management"}
    assert all(n["cores"] == hogs and n["busy"] for n in nodes.values())
    assert [s["sched_error"] for s in run["path"]["delay_line_sched"].values()] == [None]
    row = load_results(camp).iloc[0]
    assert bool(row["host_busy"]) and "other tasks runnable" in row["host_busy_reasons"]
    assert row["host_load1_max"] > 0
