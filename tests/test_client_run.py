"""The client wrapper (measure/client_run.py), run by bash on this machine: its timing line,
exit status, start time and duration stop, and what it reads back."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from interop_runner.measure.client_run import (
    STOPPED,
    epoch_ns,
    parse_client_run,
    times_seconds,
    wrapped,
)


def run(tmp_path: Path, command: list[str], **kwargs: object) -> str:
    argv = wrapped(str(tmp_path / "out"), str(tmp_path / "err"), command, **kwargs)
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout


def test_a_client_that_ends_reports_its_span_status_and_pid(tmp_path):
    got = parse_client_run(run(tmp_path, ["sh", "-c", "echo hi; exit 3"]))
    assert got is not None
    assert got.exit_code == 3 and got.pid > 0 and got.end_ns >= got.start_ns
    assert (tmp_path / "out").read_text() == "hi\n"
    assert not got.stopped(None) and not got.stopped(5.0)


def test_a_duration_stops_the_client_with_sigint(tmp_path):
    # the client traps SIGINT and says so: it was stopped, not killed
    script = 'trap "echo stopped; exit 0" INT; while :; do sleep 0.01; done'
    got = parse_client_run(run(tmp_path, ["bash", "-c", script], duration_s=0.3))
    assert got is not None and got.exit_code in STOPPED and got.stopped(0.3)
    assert (tmp_path / "out").read_text() == "stopped\n"


def test_the_client_starts_at_its_start_time(tmp_path):
    at_us = int((time.time() + 0.5) * 1e6)
    got = parse_client_run(run(tmp_path, ["true"], start_us=at_us))
    assert got is not None and got.start_ns >= at_us * 1000


def test_no_outcome_is_none_and_bash_values_read():
    assert parse_client_run("one line\n") is None
    assert epoch_ns("1.500000") == epoch_ns("1,500000") == 1_500_000_000
    assert times_seconds("1m2.500s") == pytest.approx(62.5)
