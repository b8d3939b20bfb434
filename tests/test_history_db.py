"""The history database (interop_runner/analysis/history/db.py, ingest.py) on real campaign
trees: tests/data/results-sample (a real local-testbed campaign) and campaigns built by
bench/make_campaign.py from real captured outputs."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest

from interop_runner.analysis import load_results
from interop_runner.analysis.history import CampaignRefused, ingest, load_campaigns, \
    load_history, query
from interop_runner.analysis.history.db import CPU_COST_COLUMNS, connect
from interop_runner.errors import UserError

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "tests" / "data" / "results-sample"
sys.path.insert(0, str(ROOT / "bench"))


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    target = tmp_path / "results" / "sample_20261121T121934Z"
    shutil.copytree(SAMPLE, target, ignore=shutil.ignore_patterns(".cache"))
    return target


@pytest.fixture
def generated(tmp_path: Path) -> Path:
    """A 12-attempt campaign from bench/make_campaign.py (real captured outputs)."""
    import make_campaign

    directory, _ = make_campaign.generate(tmp_path / "gen", 12, seed=3)
    return directory


def test_ingest_stores_the_loader_values_and_the_campaign(sample: Path, tmp_path: Path
                                                          ) -> None:
    db = tmp_path / "h.duckdb"
    report = ingest(db, [sample])
    assert [(d.campaign, d.outcome, d.attempts) for d in report.done] == [
        ("sample_20261121T121934Z", "added", 1)] and report.refused == []
    row = load_history(db).iloc[0]
    expected = load_results(sample).iloc[0]
    for column in ("server", "client", "testcase", "status", "goodput_mbps", "duration_s",
                   "bytes_received", "server_version", "cell_server"):
        assert row[column] == expected[column], column
    assert pd.Timestamp(row["started_at"]) == expected["started_at"]
    assert row["signature"] == '{"file_size":8388608}' and not row["synthetic"]
    campaign = load_campaigns(db).iloc[0]
    meta = json.loads((sample / "campaign.json").read_text())
    assert campaign["versions"] == "quic-go v0.65.0" and campaign["testbed"] == "local"
    assert campaign["planned_runs"] == campaign["runs"] == campaign["ok_attempts"] == 1
    assert campaign["runner_commit"] == meta["runner"]["commit"]
    assert len(campaign["hosts_digest"]) == 16 and len(campaign["content_digest"]) == 64
    impls = json.loads(campaign["implementations"])
    assert {(i["role"], i["source_hash"]) for i in impls} == {
        (k.split(":")[0], v["source_hash"]) for k, v in meta["implementations"].items()}


def test_the_same_campaign_twice_changes_nothing(sample: Path, tmp_path: Path) -> None:
    db = tmp_path / "h.duckdb"
    ingest(db, [sample])
    before = query(db, "SELECT * FROM campaigns")
    again = ingest(db, [sample, sample.parent])  # the results directory names it again
    assert [d.outcome for d in again.done] == ["unchanged"]
    assert query(db, "SELECT count(*) AS n FROM attempts")["n"].iloc[0] == 1
    pd.testing.assert_frame_equal(query(db, "SELECT * FROM campaigns"), before)


def test_changed_contents_replace_the_campaign(generated: Path, tmp_path: Path) -> None:
    db = tmp_path / "h.duckdb"
    ingest(db, [generated])
    run = next(generated.rglob("run.json"))
    data = json.loads(run.read_text())
    data["reason"] = "edited"
    run.write_text(json.dumps(data))
    assert [d.outcome for d in ingest(db, [generated]).done] == ["replaced"]
    assert query(db, "SELECT count(*) AS n FROM attempts")["n"].iloc[0] == 12


def test_cpu_cost_columns_missing_from_the_frame_are_null(
        sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import interop_runner.analysis.results as results

    real = results.load_results
    monkeypatch.setattr(results, "load_results",
                        lambda *a, **k: real(*a, **k).drop(columns=list(CPU_COST_COLUMNS),
                                                           errors="ignore"))
    db = tmp_path / "h.duckdb"
    ingest(db, [sample])
    nulls = query(db, "SELECT " + ", ".join(f"{c} IS NULL AS {c}" for c in CPU_COST_COLUMNS)
                  + " FROM attempts")
    assert nulls.iloc[0].tolist() == [True] * 4


def _edit(directory: Path, **changes: object) -> None:
    path = directory / "campaign.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


@pytest.mark.parametrize("change, reason", [
    ({"status": "running"}, "partial: status 'running', not 'finished'"),
    ({"status": "interrupted"}, "partial: status 'interrupted', not 'finished'"),
    ({"planned_runs": 3}, "partial: 1 of 3 planned run(s) stored"),
])
def test_a_partial_campaign_is_refused_with_one_line(sample: Path, tmp_path: Path,
                                                     change: dict[str, object],
                                                     reason: str) -> None:
    _edit(sample, **change)
    report = ingest(tmp_path / "h.duckdb", [sample])
    assert report.done == [] and report.refused == [f"{sample}: {reason}"]


def test_a_corrupt_campaign_is_refused_with_one_line(sample: Path, generated: Path,
                                                     tmp_path: Path) -> None:
    (sample / "campaign.json").write_text("{torn")
    next(generated.rglob("run.json")).write_text("{torn")
    report = ingest(tmp_path / "h.duckdb", [sample, generated])
    assert report.refused[0].startswith(f"{sample}: corrupt: campaign.json unreadable (")
    assert report.refused[1] == f"{generated}: corrupt: 1 unreadable run.json record(s)"
    assert all("\n" not in line for line in report.refused) and report.done == []


def test_rebuild_reads_every_known_campaign_again(sample: Path, generated: Path,
                                                  tmp_path: Path) -> None:
    db = tmp_path / "h.duckdb"
    ingest(db, [sample, generated])
    before = query(db, "SELECT campaign, goodput_mbps FROM attempts ORDER BY path")
    report = ingest(db, [], rebuild=True)
    assert sorted(d.outcome for d in report.done) == ["added", "added"]
    pd.testing.assert_frame_equal(
        query(db, "SELECT campaign, goodput_mbps FROM attempts ORDER BY path"), before)


def test_a_synthetic_campaign_is_marked(generated: Path, tmp_path: Path) -> None:
    import history_scale

    history_scale.mark_synthetic(generated / "campaign.json")
    db = tmp_path / "h.duckdb"
    ingest(db, [generated])
    assert bool(load_campaigns(db)["synthetic"].iloc[0])
    assert load_history(db, include_synthetic=False).empty
    assert len(load_history(db)) == 12


def test_read_only_open_of_a_missing_or_foreign_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no history database"):
        connect(tmp_path / "none.duckdb", read_only=True)
    (tmp_path / "x.duckdb").write_text("not a database")
    with pytest.raises(UserError, match="cannot open the history database"):
        connect(tmp_path / "x.duckdb")
    assert issubclass(CampaignRefused, UserError)
