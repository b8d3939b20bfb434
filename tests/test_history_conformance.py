"""Conformance series in the history database (analysis/history: db.py schema 3, ingest.py,
series.py, changepoints.py; ``run.py history check --metric conformance``).

The ingested campaign is the runner's real sample tests/data/flows-runner-sample; its
campaign.json plans 4 runs and stores the 2 with flow sets, so the copy here is DERIVED with
``planned_runs`` 2 (else ingest refuses it as partial). The series for the change points are
DERIVED from the sample's real conformance rows: campaigns whose figure is the real one plus
small deterministic noise, with a step where the test says. The sample ran no
kernel-vs-kernel set: its figures against paper 000's reference are NULL, the series are of
the same-run figures (``*_same_run``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from interop_runner.analysis import flow_conformance
from interop_runner.analysis.history import ChangePointSettings, check, ingest, query
from interop_runner.analysis.history.db import load_conformance
from interop_runner.analysis.history.series import conformance_series_rows
from interop_runner.cli.main import main
from interop_runner.errors import UserError

DATA = Path(__file__).parent / "data" / "flows-runner-sample"


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """DERIVED: a copy of the sample with ``planned_runs`` 2 (the runs it stores)."""
    target = Path(shutil.copytree(DATA, tmp_path_factory.mktemp("hc") / "sample",
                                  ignore=shutil.ignore_patterns(".cache")))
    meta = json.loads((target / "campaign.json").read_text())
    (target / "campaign.json").write_text(json.dumps({**meta, "planned_runs": 2}))
    return target


@pytest.fixture(scope="module")
def db(sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("db") / "h.duckdb"
    report = ingest(path, [sample])
    assert not report.refused
    return path


def test_ingest_keeps_the_conformance_of_each_flow(db: Path, sample: Path) -> None:
    stored = load_conformance(db).set_index("label")
    figures = flow_conformance(sample).set_index("label")
    assert sorted(stored.index) == ["quic-go/reno", "quiche/cubic"]
    for column in ("conformance", "conformance_t", "delta_throughput", "delta_delay"):
        for name in (column, f"{column}_same_run"):
            assert stored[name].to_numpy() == pytest.approx(
                figures.loc[stored.index, name].to_numpy(dtype=float), nan_ok=True)
        assert stored[column].isna().all() and stored[f"{column}_same_run"].notna().all()
    assert stored["conformance_missing"].str.startswith("no kernel-vs-kernel runs").all()
    assert stored["kernel"].str.startswith("6.18.44-fc-v657").all()
    assert not stored["reference_kernel_mismatch"].any()
    assert stored.loc["quic-go/reno", "stack"] == "quic-go"
    assert stored.loc["quic-go/reno", "reference_label"] == "tcp/reno"
    assert stored["server_version"].notna().all()
    assert json.loads(stored.loc["quiche/cubic", "signature"])["flow_set"] == \
        "quiche-cubic+tcp-cubic"


def test_a_version_1_database_is_upgraded_by_ingest(db: Path, tmp_path: Path) -> None:
    """The database above taken back to version 1 (no conformance table): reading it says
    how to upgrade it; an ingest upgrades it and fills the table from the directories."""
    import duckdb

    old = Path(shutil.copy(db, tmp_path / "old.duckdb"))
    con = duckdb.connect(str(old))
    con.execute("DROP TABLE conformance")
    con.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(UserError, match="version 1, this runner reads 3; `history ingest`"):
        load_conformance(old)
    ingest(old, [])
    assert query(old, "SELECT value FROM meta")["value"].tolist() == ["3"]
    assert sorted(load_conformance(old)["label"]) == ["quic-go/reno", "quiche/cubic"]


def stepped(db: Path, metric: str, step: float, campaigns: int = 12) -> pd.DataFrame:
    """DERIVED: the real quic-go/reno row as ``campaigns`` campaigns, its ``metric`` the
    real value + noise of +-0.01 (+-0.1 for an offset), plus ``step`` from the middle on."""
    real = load_conformance(db)
    row = real[real["label"] == "quic-go/reno"].iloc[0]
    noise = 0.1 if metric.startswith("delta") else 0.01
    times = pd.date_range("2026-11-01", periods=campaigns, freq="D", tz="UTC")
    rows = []
    for i, time in enumerate(times):
        value = row[metric] + noise * np.sin(1.7 * i) + (step if i >= campaigns // 2 else 0)
        rows.append({**row.to_dict(), "campaign": f"c{i:02d}", "campaign_started_at": time,
                     metric: value})
    return conformance_series_rows(pd.DataFrame(rows))


def test_a_version_2_database_gets_the_new_columns_and_figures(db: Path,
                                                               tmp_path: Path) -> None:
    """Version 2 kept the same-run figures under the names that now mean the figures against
    the kernel-vs-kernel runs: an ingest adds version 3's columns and refills the table."""
    import duckdb

    from interop_runner.analysis.history.db import CONFORMANCE_COLUMNS_3

    old = Path(shutil.copy(db, tmp_path / "v2.duckdb"))
    con = duckdb.connect(str(old))
    for column in CONFORMANCE_COLUMNS_3:
        con.execute(f'ALTER TABLE conformance DROP COLUMN "{column}"')
    con.execute("UPDATE conformance SET conformance = 0.5")  # version 2's meaning
    con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    con.close()
    ingest(old, [])
    assert query(old, "SELECT value FROM meta")["value"].tolist() == ["3"]
    stored = load_conformance(old)
    assert stored["conformance"].isna().all() and stored["conformance_same_run"].notna().all()


def test_a_drop_of_conformance_is_an_open_regression(db: Path) -> None:
    changes = check(stepped(db, "conformance_same_run", -0.3), ["conformance_same_run"])
    assert len(changes) == 1
    change = changes.iloc[0]
    assert change["verdict"] == "worse" and change["regression"] and change["newest"]
    assert change["campaign"] == "c06" and change["rel_change"] == pytest.approx(-0.3, abs=0.03)
    assert change["server"] == "quic-go" and change["client"] == "tcp/reno"
    assert change["testcase"] == "conformance"


def test_a_steady_conformance_has_no_change_point(db: Path) -> None:
    assert check(stepped(db, "conformance_same_run", 0.0),
                 ["conformance_same_run", "conformance_t_same_run"]).empty


def test_an_offset_moving_away_from_the_kernel_is_a_regression(db: Path) -> None:
    """quic-go/reno sends +1.4 Mbit/s more than the kernel's Reno in the sample; 4 more
    is farther from the kernel, 1 less is closer."""
    metric = "delta_throughput_same_run"
    farther = check(stepped(db, metric, 4.0), [metric]).iloc[0]
    assert farther["verdict"] == "farther" and farther["regression"]
    closer = check(stepped(db, metric, -1.0), [metric]).iloc[0]
    assert closer["verdict"] == "closer" and not closer["regression"]


def test_a_small_step_counts_from_the_threshold(db: Path) -> None:
    frame = stepped(db, "conformance_same_run", -0.06)
    assert check(frame, ["conformance_same_run"]).empty  # below the default 0.1
    found = check(frame, ["conformance_same_run"],
                  ChangePointSettings(conformance_min_effect=0.05))
    assert found["verdict"].tolist() == ["worse"]


def test_history_check_reads_the_conformance_series(db: Path,
                                                    capsys: pytest.CaptureFixture[str]
                                                    ) -> None:
    assert main(["history", "check", "--db", str(db), "--metric", "conformance"]) == 0
    assert capsys.readouterr().out.strip().endswith(
        "2 series, 0 change point(s), 0 open regression(s)")
    assert main(["history", "check", "--db", str(db), "--metric", "all",
                 "--server", "quiche"]) == 0
    assert "2 series" in capsys.readouterr().out  # quiche's attempts and its conformance


def test_history_show_prints_a_conformance_series(db: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """`history show --metric conformance` (or another figure) lists and prints the
    conformance series as it does the attempts' series."""
    from interop_runner.analysis.history.series import CONFORMANCE_METRICS
    from interop_runner.cli import history

    assert history.CONFORMANCE_METRICS == CONFORMANCE_METRICS  # the parser's copy
    assert main(["history", "show", "--db", str(db), "--metric", "conformance"]) == 0
    assert "2 series; pick one" in capsys.readouterr().out
    assert main(["history", "show", "--db", str(db), "--metric", "delta_throughput_same_run",
                 "--server", "quiche"]) == 0
    heading, columns, point = capsys.readouterr().out.strip().splitlines()
    assert heading.startswith("series ") and "quiche -> tcp/cubic conformance" in heading
    assert "in Mbit/s" in heading and columns.split()[:4] == ["campaign", "time", "n", "median"]
    assert point.split()[3] == "6.66"  # the sample's quiche/cubic offset, +6.7 Mbit/s
