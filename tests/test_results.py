"""load_results on damaged trees: a broken record stays a row with its reason, a monitor file
that is missing becomes a reason in monitors_missing, never an exception or a zero."""

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from interop_runner.analysis import load_results
from interop_runner.analysis.frames import frame
from interop_runner.analysis.frames.frame import Chunk, NumericRows, Segment, pooled_chunks
from interop_runner.storage.run_record import RUN_SCHEMA_VERSION

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
    # the file is the row's path (it moves with a copied tree's cache), not in the reason
    assert row["reason"] == (f"unreadable run.json: run.json schema version 99 is newer "
                             f"than this runner reads ({RUN_SCHEMA_VERSION}); update the runner")
    assert row["path"] == str(run.parent)


# --- the pieces of the loader (analysis/frames/frame.py) ---

def test_numeric_rows_follow_dict_semantics():
    """Columns in order of first appearance; a later value of a name wins; a None of an
    incomplete segment is no value at all (no column, nothing overwritten)."""
    rows = NumericRows()
    rows.add([Segment(("a", "b"), [1.0, 2.0], True), Segment(("b", "c"), [None, 3.0], False)])
    rows.add([Segment(("d",), [None], True), Segment(("a",), [5.0], True)])
    rows.add([Segment(("e", "a"), [None, 7.0], False), Segment(("a", "b"), [8.0, 9.0], True)])
    names, matrix = rows.build(["z", "a"])
    assert names == ["a", "b", "c", "d", "z"]
    expected = [[1.0, 2.0, 3.0, None, None], [5.0, None, None, None, None],
                [8.0, 9.0, None, None, None]]
    assert matrix.tolist() == [[v if v is not None else pytest.approx(float("nan"), nan_ok=True)
                                for v in row] for row in expected]


def _chunk_or_fail(items: list[int], size: int) -> Chunk:
    if 13 in items:
        raise ValueError("record 13 is bad")
    return [(i,) for i in items], ["x"], np.full((len(items), size), float(len(items)))


@pytest.mark.parametrize("size", [1, 3_000_000])  # a matrix too large for the shared memory
def test_parts_parsed_in_children_come_back_in_order(monkeypatch, size):
    monkeypatch.setattr(frame, "PARALLEL_MIN", 2)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    items = [0, 1, 2, 3, 4]
    rows, names, matrix = pooled_chunks(
        lambda part, n: ([(i,) for i in part], [f"c{j}" for j in range(n)],
                         np.full((len(part), n), float(part[0]))), items, size)
    assert rows == [(0,), (2,), (4,), (1,), (3,)]  # the parts one after the other
    assert len(names) == size and matrix[:, 0].tolist() == [0.0, 0.0, 0.0, 1.0, 1.0]


def test_an_error_in_a_child_is_raised_here(monkeypatch):
    monkeypatch.setattr(frame, "PARALLEL_MIN", 2)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    with pytest.raises(ValueError, match="record 13 is bad"):
        pooled_chunks(_chunk_or_fail, [12, 13, 14, 15], 1)


def test_a_counter_that_went_backwards_has_no_value(tmp_path):
    """Only attempt, a NIC counter lower after than before (a driver reset): no column for
    it (as no attempt reported it), the others load."""
    root = copy_sample(tmp_path)
    (run,) = list(root.rglob("run.json"))
    after = run.parent / "server" / "ethtool-after.txt"
    after.write_text(after.read_text().replace("peer_ifindex: 3", "peer_ifindex: 2"))
    df = load_results(root, cache=False)
    assert "server_nic_peer_ifindex" not in df.columns
    assert df.iloc[0]["client_nic_peer_ifindex"] == 0
    assert df.iloc[0]["server_nic_rx_xdp_packets"] == 0


def test_the_host_load_columns_come_from_the_record(tmp_path: Path) -> None:
    """run.json 7's host_load (tests/data/schema/run-v7.json: the client and the router had
    other work runnable) in the frame; older records have the columns <NA>."""
    attempt = tmp_path / "c" / "quic-go_quic-go" / "goodput" / "1" / "attempt-1"
    attempt.mkdir(parents=True)
    shutil.copy(Path(__file__).parent / "data" / "schema" / "run-v7.json", attempt / "run.json")
    row = load_results(tmp_path / "c", cache=False).iloc[0]
    assert bool(row["host_busy"]) is True
    assert row["host_busy_reasons"] == (
        "client: 2 other tasks runnable after the attempt on 2 cores; "
        "router: 2 other tasks runnable before the attempt on 2 cores")
    assert row["host_load1_max"] == pytest.approx(2.05)
    assert row["host_steal_share_max"] == 0.0
    old = tmp_path / "o" / "quic-go_quic-go" / "goodput" / "1" / "attempt-1"
    old.mkdir(parents=True)
    shutil.copy(Path(__file__).parent / "data" / "schema" / "run-v6.json", old / "run.json")
    row = load_results(tmp_path / "o", cache=False).iloc[0]
    assert all(pd.isna(row[c]) for c in ("host_busy", "host_busy_reasons", "host_load1_max",
                                          "host_steal_share_max"))
