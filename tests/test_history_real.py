"""`run.py history` on real campaigns of the local testbed (tests/data/history, written by
bench/history_series.py on 2026-11-24; their run.json and campaign.json only).

``step``: 12 quic-go campaigns of 5 repetitions (10 MB) through a tbf on the server node,
``rate: 200mbit`` for campaigns 1-6 and ``150mbit`` from campaign 7 on (-25 % nominal);
``aa``: 12 such campaigns, all at 200 Mbit/s.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from interop_runner.analysis.history.changepoints import change_points, resampled
from interop_runner.analysis.history.db import load_history
from interop_runner.analysis.history.series import points
from interop_runner.cli.main import main

DATA = Path(__file__).parent / "data" / "history"
NOMINAL_STEP = 150 / 200 - 1


def ingest(tmp_path: Path, series: str) -> Path:
    db = tmp_path / f"{series}.duckdb"
    assert main(["history", "ingest", str(DATA / series), "--db", str(db)]) == 0
    return db


def test_the_rate_step_is_one_change_point_at_campaign_7_of_the_right_size(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = ingest(tmp_path, "step")
    capsys.readouterr()
    assert main(["history", "check", "--db", str(db), "--metric", "all"]) == 5
    out = capsys.readouterr().out
    assert "1 series, 1 change point(s), 1 open regression(s)" in out
    assert "REGRESSION" in out and "at hist-step-07_" in out
    assert '"rate":"200mbit"' in out and '"rate":"150mbit"' in out  # the knobs on both sides
    (found,) = change_points(points(load_history(db)))
    assert found.index == 6 and found.regression
    assert found.ci_low <= NOMINAL_STEP <= found.ci_high  # -25 % inside the CI


def test_the_a_a_series_has_no_change_point(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    db = ingest(tmp_path, "aa")
    capsys.readouterr()
    assert main(["history", "check", "--db", str(db), "--metric", "all"]) == 0
    assert "1 series, 0 change point(s), 0 open regression(s)" in capsys.readouterr().out


def test_false_alarms_on_a_a_series_resampled_from_the_real_runs(tmp_path: Path) -> None:
    real = points(load_history(ingest(tmp_path, "aa")))
    rng = np.random.default_rng(11)
    alarms = sum(bool(change_points(resampled(real, rng))) for _ in range(40))
    assert alarms <= 2  # <= 5 % of 40


def test_the_step_survives_resampling_within_its_sides(tmp_path: Path) -> None:
    real = points(load_history(ingest(tmp_path, "step")))
    rng = np.random.default_rng(12)
    hits = 0
    for _ in range(20):
        found = change_points(resampled(real, rng, split=6))
        hits += len(found) == 1 and found[0].index == 6
    assert hits >= 18
