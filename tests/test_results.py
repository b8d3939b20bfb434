"""load_results on damaged trees: a broken record stays a row with its reason, a monitor file
that is missing becomes a reason in monitors_missing, never an exception or a zero."""

import json
import shutil
from pathlib import Path

import pandas as pd

from interop_runner.analysis import load_results

SAMPLE = Path(__file__).parent / "data" / "results-sample"


def copy_sample(tmp_path: Path) -> Path:
    dest = tmp_path / "sample"
    shutil.copytree(SAMPLE, dest, ignore=shutil.ignore_patterns(".cache"))
    return dest


def test_unreadable_run_json_is_a_row_with_the_reason(tmp_path):
    root = copy_sample(tmp_path)
    (run,) = list(root.rglob("run.json"))
    good = load_results(root, cache=False)
    run.write_text('{"campaign": "x", "status": "ok", ')  # cut short, as by a full disk
    df = load_results(root, cache=False)
    assert len(df) == len(good) == 1
    row = df.iloc[0]
    assert pd.isna(row["status"]) and pd.isna(row["goodput_mbps"])
    assert row["reason"].startswith("unreadable run.json: ")
    assert row["repetition"] == good.iloc[0]["repetition"]
    assert row["attempt"] == good.iloc[0]["attempt"]
    assert row["path"] == str(run.parent)


def test_missing_perf_output_is_a_reason_not_a_silent_gap(tmp_path):
    root = copy_sample(tmp_path)
    (run,) = list(root.rglob("run.json"))
    data = json.loads(run.read_text())
    data.setdefault("monitors", {}).setdefault("server", {})["perf"] = "ok"
    run.write_text(json.dumps(data))
    df = load_results(root, cache=False)
    assert "server.perf: perf-process.folded missing" in df.iloc[0]["monitors_missing"]
    # the monitor ran, so its columns exist (and, with nothing measured, are NA)
    perf_cols = [c for c in df.columns if c.startswith(("server_perf_", "client_perf_"))]
    assert len(perf_cols) == 10
    assert df[perf_cols].isna().all().all()


def test_a_newer_run_json_is_a_row_with_one_line_reason(tmp_path):
    root = copy_sample(tmp_path)
    (run,) = list(root.rglob("run.json"))
    data = json.loads(run.read_text())
    data["schema_version"] = 99
    run.write_text(json.dumps(data))
    row = load_results(root, cache=False).iloc[0]
    assert pd.isna(row["goodput_mbps"])
    assert row["reason"] == (f"unreadable run.json: {run}: run.json schema version 99 is newer "
                             "than this runner reads (3); update the runner")
