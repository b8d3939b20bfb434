"""Results layout, atomic writes, no overwrites."""

import json
import os
from datetime import datetime, timezone

import pytest

from interop_runner.errors import StoreError
from interop_runner.storage.layout import (
    attempt_dir,
    new_campaign_dir,
    next_attempt,
    unrecorded_attempts,
    write_json_atomic,
)
from interop_runner.storage.run_record import (
    RUN_SCHEMA_VERSION,
    RunRecord,
    Side,
    load_run,
    read_run,
    stored_attempts,
    write_run,
)


def record(rep: int = 1, attempt: int = 1, **kw) -> RunRecord:
    return RunRecord(campaign="c", testcase="goodput", repetition=rep, attempt=attempt,
                     server=Side(implementation="quic-go", version="v0.65.0"),
                     client=Side(implementation="tcp-tls"), **kw)


def test_layout(tmp_path):
    when = datetime(2026, 11, 21, 12, 0, 0, tzinfo=timezone.utc)
    camp = new_campaign_dir(tmp_path, "local", now=when)
    assert camp == tmp_path / "local_20261121T120000Z"
    again = new_campaign_dir(tmp_path, "local", now=when)
    assert again == tmp_path / "local_20261121T120000Z-2"  # never reuses a directory
    d = attempt_dir(camp, "quic-go", "quic-go", "goodput", 3, 1)
    assert d == camp / "quic-go_quic-go" / "goodput" / "3" / "attempt-1"


def test_run_record_roundtrip_and_no_overwrite(tmp_path):
    d = tmp_path / "a"
    rec = record(status="ok", goodput_mbps=1234.5, duration_s=2.0, bytes_received=10,
                 hash_ok=True)
    path = write_run(d, rec)
    data = read_run(path)
    assert data["schema_version"] == RUN_SCHEMA_VERSION
    assert data["status"] == "ok" and data["goodput_mbps"] == 1234.5
    assert data["server"]["version"] == "v0.65.0"
    assert RunRecord.from_dict(data) == rec == load_run(path)
    with pytest.raises(StoreError, match="refusing to overwrite"):
        write_run(d, record(status="failed"))
    assert read_run(path)["status"] == "ok"  # untouched
    assert sorted(os.listdir(d)) == ["run.json"]  # no temp files left behind


def test_unmeasured_values_are_null_not_zero(tmp_path):
    path = write_run(tmp_path, record(status="failed", reason="client exited 1"))
    data = json.loads(path.read_text())
    for key in ("goodput_mbps", "duration_s", "bytes_received", "hash_ok", "start_ns"):
        assert data[key] is None


def test_atomic_write_unserialisable_keeps_previous(tmp_path):
    path = tmp_path / "campaign.json"
    write_json_atomic(path, {"a": 1})
    circular: list = []
    circular.append(circular)
    with pytest.raises(ValueError, match="Circular"):
        write_json_atomic(path, {"a": circular}, overwrite=True)
    assert json.loads(path.read_text()) == {"a": 1}
    write_json_atomic(path, {"a": 2}, overwrite=True)
    assert json.loads(path.read_text()) == {"a": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["campaign.json"]


def test_atomic_write_failure_mid_dump_keeps_previous(tmp_path, monkeypatch):
    path = tmp_path / "campaign.json"
    write_json_atomic(path, {"a": 1})
    real_dump = json.dump

    def broken(obj, fh, **kw):
        fh.write('{"a": ')
        raise OSError("disk full")

    monkeypatch.setattr(json, "dump", broken)
    with pytest.raises(OSError):
        write_json_atomic(path, {"a": 2}, overwrite=True)
    monkeypatch.setattr(json, "dump", real_dump)
    assert json.loads(path.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["campaign.json"]


def test_next_attempt(tmp_path):
    assert next_attempt(tmp_path, "a", "b", "goodput", 1) == 1
    attempt_dir(tmp_path, "a", "b", "goodput", 1, 1).mkdir(parents=True)
    attempt_dir(tmp_path, "a", "b", "goodput", 1, 2).mkdir(parents=True)
    assert next_attempt(tmp_path, "a", "b", "goodput", 1) == 3
    assert next_attempt(tmp_path, "a", "b", "goodput", 2) == 1


def test_unrecorded_attempts_and_stored_attempts(tmp_path):
    rep = attempt_dir(tmp_path, "a", "b", "goodput", 1, 1).parent
    assert unrecorded_attempts(rep) == [] and stored_attempts(rep) == []
    write_run(rep / "attempt-1", record(status="ok"))
    (rep / "attempt-2").mkdir()  # the runner died during attempt 2
    (rep / "attempt-x").mkdir()  # not an attempt
    write_run(rep / "attempt-3", record(attempt=3))
    (rep / "attempt-4").mkdir()
    (rep / "attempt-4" / "run.json").write_text("{torn")  # unreadable: left out
    assert unrecorded_attempts(rep) == [2]
    assert [(n, d["status"]) for n, d in stored_attempts(rep)] == [(1, "ok"), (3, "failed")]
    assert next_attempt(tmp_path, "a", "b", "goodput", 1) == 5


def test_record_refuses_unknown_keys_and_wrong_types():
    with pytest.raises(ValueError, match="stauts"):
        RunRecord.model_validate({**record().to_dict(), "stauts": "ok"})
    with pytest.raises(StoreError, match="not a valid run.json: status"):
        RunRecord.from_dict({**record().to_dict(), "status": "great"})
