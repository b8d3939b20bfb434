"""The history database (interop_runner/analysis/history/db.py, ingest.py) on real campaign
trees: tests/data/results-sample (a real local-testbed campaign) and campaigns built by
bench/make_campaign.py from real captured outputs."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from interop_runner.analysis import load_results
from interop_runner.analysis.history import (
    CampaignRefused,
    ingest,
    load_campaigns,
    load_history,
    query,
)
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
    import interop_runner.analysis.frames.results as results

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


def test_two_copies_of_one_campaign_in_one_ingest(sample: Path, tmp_path: Path) -> None:
    backup = tmp_path / "backup" / sample.name
    shutil.copytree(sample, backup)
    db = tmp_path / "h.duckdb"
    report = ingest(db, [sample, backup])
    assert [(d.outcome, d.directory, d.duplicate_of) for d in report.done] == [
        ("added", sample, None), ("duplicate", backup, sample)] and report.refused == []
    assert query(db, "SELECT count(*) AS n FROM attempts")["n"].iloc[0] == 1
    assert load_campaigns(db)["directory"].tolist() == [str(sample.resolve())]
    # already stored: the first copy is unchanged, the second still a duplicate
    assert [d.outcome for d in ingest(db, [backup, sample]).done] == ["unchanged", "duplicate"]


def test_a_failed_batch_is_one_line_and_leaves_the_database_usable(sample: Path,
                                                                  tmp_path: Path) -> None:
    from interop_runner.analysis.history.ingest import (
        campaign_rows,
        content_digest,
        read_meta,
        write_rows,
    )

    rows = campaign_rows(sample, read_meta(sample), content_digest(sample))
    con = connect(tmp_path / "h.duckdb")
    try:
        with pytest.raises(UserError) as caught:
            write_rows(con, [rows, rows])  # one campaign twice: its primary key breaks
        message = str(caught.value)
        assert message.startswith(f"{sample.resolve()} (and 1 more campaign(s) of its batch): "
                                  f"not written to the history database: ")
        assert "\n" not in message and f'duplicate key "{sample.name}"' in message
        assert con.execute("SELECT count(*) FROM campaigns").fetchone() == (0,)
        write_rows(con, [rows])  # no transaction left open, no view left registered
        assert con.execute("SELECT count(*) FROM attempts").fetchone() == (1,)
    finally:
        con.close()


def test_a_null_campaign_id_is_the_directory_name(sample: Path, tmp_path: Path) -> None:
    _edit(sample, campaign=None)
    db = tmp_path / "h.duckdb"
    report = ingest(db, [sample])
    assert [(d.campaign, d.outcome) for d in report.done] == [(sample.name, "added")]
    assert load_campaigns(db)["campaign"].tolist() == [sample.name]
    assert load_history(db)["campaign"].tolist() == [sample.name]


def test_rebuild_repairs_another_schema_version(sample: Path, tmp_path: Path) -> None:
    import duckdb

    db = tmp_path / "h.duckdb"
    ingest(db, [sample])
    con = duckdb.connect(str(db))
    con.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    con.execute("ALTER TABLE campaigns ADD COLUMN old_column VARCHAR")
    con.close()
    with pytest.raises(UserError, match="version 0, this runner writes 3; rebuild it"):
        ingest(db, [sample])
    report = ingest(db, [], rebuild=True)  # the campaign it held, read again
    assert [(d.campaign, d.outcome) for d in report.done] == [(sample.name, "added")]
    assert query(db, "SELECT value FROM meta")["value"].tolist() == ["3"]
    assert "old_column" not in load_campaigns(db).columns


def test_a_refused_version_closes_the_connection(sample: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import duckdb

    db = tmp_path / "h.duckdb"
    ingest(db, [sample])
    con = duckdb.connect(str(db))
    con.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
    con.close()
    opened: list[Any] = []
    real = duckdb.connect

    class Recorded:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.con, self.closed = real(*args, **kwargs), False
            opened.append(self)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.con, name)

        def close(self) -> None:
            self.closed = True
            self.con.close()

    monkeypatch.setattr(duckdb, "connect", Recorded)
    with pytest.raises(UserError, match="version 7"):
        connect(db)
    with pytest.raises(UserError, match="version 7"):
        connect(db, read_only=True)
    assert [c.closed for c in opened] == [True, True]


def test_the_content_digest_ignores_only_the_campaigns_own_cache(sample: Path,
                                                                 tmp_path: Path) -> None:
    from interop_runner.analysis.history.ingest import content_digest

    hidden = tmp_path / ".cache" / "results" / sample.name
    shutil.copytree(sample, hidden)
    assert content_digest(hidden) == content_digest(sample)
    run = next(p for p in hidden.rglob("run.json") if ".cache" not in
               p.relative_to(hidden).parts)
    run.write_text(run.read_text().replace('"status"', '"status" ', 1))
    assert content_digest(hidden) != content_digest(sample)
    before = content_digest(sample)
    (sample / ".cache" / "old").mkdir(parents=True)
    (sample / ".cache" / "old" / "run.json").write_text("{}")
    assert content_digest(sample) == before


def test_the_workload_is_part_of_a_series_signature_unless_it_is_the_default() -> None:
    from interop_runner.analysis.history.ingest import signature

    frame = pd.DataFrame({"file_size": [8388608] * 3,
                          "workload": ["download", "upload", "download 4x1"]})
    assert list(signature(frame)) == [
        '{"file_size":8388608}',  # as before workloads: old series keep their ids
        '{"file_size":8388608,"workload":"upload"}',
        '{"file_size":8388608,"workload":"download 4x1"}']
