"""The data contract: every column a monitor can produce exists in every load of a campaign
that ran it (NA with a reason where the tool produced nothing), and docs/columns.md lists
exactly the columns the loaders give."""

from __future__ import annotations

import fnmatch
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from interop_runner.analysis import load_results
from interop_runner.analysis.frames.column_docs import column_rows, columns_markdown
from interop_runner.analysis.importers.qir10g import load_qir10g
from interop_runner.monitors import MONITORS, declared_columns

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parent.parent
SAMPLE = DATA / "results-sample"
QIR10G = DATA / "qir10g" / "results"
QIR10G_EXTRAS = ("experiment", "qir_*", "server_node", "client_node", "server_param_*",
                 "client_param_*")


def _patterns() -> list[str]:
    """Documented names as glob patterns (roles and counters expanded to wildcards)."""
    out = []
    for name, *_ in column_rows():
        pattern = name.replace("<server|client>", "*").replace("<counter>", "*")
        out.append(pattern.replace("<name>", "*"))
    return out


def _undocumented(frame: pd.DataFrame, extra: tuple[str, ...] = ()) -> list[str]:
    patterns = _patterns() + list(extra)
    return [c for c in frame.columns if not any(fnmatch.fnmatchcase(c, p) for p in patterns)]


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / SAMPLE.name
    shutil.copytree(SAMPLE, target)
    return target


def test_docs_table_is_current() -> None:
    assert (ROOT / "docs" / "columns.md").read_text() == columns_markdown(), \
        ("docs/columns.md is stale: python -m interop_runner.analysis.frames.column_docs "
         "> docs/columns.md")


def test_every_loaded_column_is_documented() -> None:
    assert _undocumented(load_results(SAMPLE, cache=False)) == []
    assert _undocumented(load_qir10g(QIR10G), QIR10G_EXTRAS) == []


def test_every_monitor_column_of_the_campaign_exists() -> None:
    frame = load_results(SAMPLE, cache=False)
    ran = json.loads((SAMPLE / "campaign.json").read_text())["config"]["monitors"]
    declared = declared_columns(ran)
    assert len(declared) == 2 * (3 + 24 + 9 + 2 + 2 + 2)  # cpu, sysfs, nstat, tc, pidstat, mpstat
    assert [c for c in declared if c not in frame.columns] == []


def test_a_sampler_without_a_sample_leaves_na_and_a_reason() -> None:
    # the sample's transfer took 74 ms: pidstat (1 s interval) saw nothing inside the window
    row = load_results(SAMPLE, cache=False).iloc[0]
    for role in ("server", "client"):
        assert pd.isna(row[f"{role}_pidstat_cpu_pct"])
        assert pd.isna(row[f"{role}_max_thread_cpu_pct"])
        assert f"{role}.pidstat: no sample inside the transfer window" in row["monitors_missing"]


def test_missing_files_keep_the_columns(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    for name in ("pidstat.txt", "mpstat.txt", "nstat-after.txt"):
        for found in root.rglob(name):
            found.unlink()
    frame = load_results(root, cache=False)
    for column in ("client_pidstat_cpu_pct", "server_cores_busy_pct", "client_udp_rcvbuf_errors",
                   "server_tcp_retrans_segs"):
        assert column in frame.columns and frame[column].isna().all(), column
    missing = frame.iloc[0]["monitors_missing"]
    assert "client.pidstat: pidstat.txt missing" in missing
    assert "server.nstat: nstat snapshot files missing" in missing


def test_columns_do_not_depend_on_the_campaign_run(tmp_path: Path) -> None:
    """Two loads of campaigns that ran the same monitors have the same fixed columns, whatever
    the tools happened to produce."""
    full = load_results(SAMPLE, cache=False)
    root = _copy(tmp_path)
    for found in root.rglob("*-after.txt"):
        found.unlink()
    empty = load_results(root, cache=False)
    fixed = [c for c in full.columns if "_nic_" not in c and "_nstat_" not in c]
    assert [c for c in fixed if c not in empty.columns] == []


def test_a_monitor_that_did_not_run_has_no_columns() -> None:
    frame = load_results(SAMPLE, cache=False)
    assert not any(c.startswith(("server_perf_", "client_pcap_")) for c in frame.columns)


@pytest.mark.parametrize("name", sorted(MONITORS))
def test_every_monitor_declares_its_files(name: str) -> None:
    monitor = MONITORS[name]
    assert monitor.files, name
    assert monitor.description
    if monitor.extract is not None:
        assert monitor.columns, name


def test_predecessor_trees_have_the_same_monitor_columns() -> None:
    frame = load_qir10g(QIR10G)
    expected = declared_columns(["ethtool", "nstat", "pidstat", "perf"])
    assert [c for c in expected if c not in frame.columns] == []
