"""``run.py history`` (interop_runner/cli/history.py) end to end on campaigns built by
bench/history_scale.py from real captured outputs, and notebooks/history.ipynb."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from interop_runner.cli.history import auto_ingest
from interop_runner.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "tests" / "data" / "results-sample"
sys.path.insert(0, str(ROOT / "bench"))


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 daily campaigns (4 pairs x 6 repetitions), lsquic<->lsquic 25 % slower under
    v4.3.0 from the 7th on; returns the results directory."""
    import history_scale

    out = tmp_path_factory.mktemp("history") / "results"
    history_scale.build(out, 12, 24, step_at=6, step=0.25)
    return out


def test_ingest_then_check_exits_5_on_the_open_regression(
        history: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.duckdb"
    assert main(["history", "ingest", str(history), "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert out.count("    added  history_2026") == 12
    assert out.endswith("12 campaign(s) written, 0 unchanged, 0 refused\n")
    assert main(["history", "ingest", str(history), "--db", str(db)]) == 0
    assert "0 campaign(s) written, 12 unchanged" in capsys.readouterr().out
    assert main(["history", "check", "--db", str(db)]) == 5
    lines = capsys.readouterr().out.splitlines()
    regressions = [line for line in lines if "REGRESSION" in line]
    assert len(regressions) == 1
    assert "lsquic->lsquic" in regressions[0] and "(open:" in regressions[0]
    assert "at history_20260807T020000Z (2026-08-07), v4.2.0 -> v4.3.0" in regressions[0]
    assert "(6/6 campaigns)" in regressions[0]
    assert lines[-1] == "4 series, 1 change point(s), 1 open regression(s)"
    # the change opened 6 campaigns ago: not "recent" within the newest 3
    assert main(["history", "check", "--db", str(db), "--recent", "3"]) == 0
    assert main(["history", "check", "--db", str(db), "--server", "quiche"]) == 0


def test_show_lists_series_and_prints_one_with_a_plot(
        history: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.duckdb"
    main(["history", "ingest", str(history), "--db", str(db)])
    capsys.readouterr()
    assert main(["history", "show", "--db", str(db)]) == 0
    listing = capsys.readouterr().out
    assert "4 series" in listing and "tcp-tls" in listing
    plot = tmp_path / "s.png"
    assert main(["history", "show", "--db", str(db), "--server", "lsquic", "--plot",
                 str(plot)]) == 0
    out = capsys.readouterr().out
    assert out.count("history_2026") == 12 and plot.stat().st_size > 10_000
    assert main(["history", "show", "--db", str(db), "--server", "lsquic", "--by",
                 "version"]) == 0
    by_version = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in by_version[2:]] == [["v4.2.0", "6"], ["v4.3.0", "6"]]


def test_refused_campaigns_are_one_error_line_each_and_exit_1(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    campaign = tmp_path / "results" / "c"
    shutil.copytree(SAMPLE, campaign)
    meta = json.loads((campaign / "campaign.json").read_text())
    (campaign / "campaign.json").write_text(json.dumps({**meta, "status": "running"}))
    assert main(["history", "ingest", str(campaign)]) == 1
    captured = capsys.readouterr()
    assert captured.err == (f"error: {campaign}: partial: status 'running', not "
                            f"'finished'\n")
    assert (tmp_path / "results" / "history.duckdb").is_file()  # next to the campaign
    assert auto_ingest(campaign).startswith("warning: history not updated (")
    assert main(["history", "check", "--db", str(tmp_path / "none.duckdb")]) == 1
    assert "no history database" in capsys.readouterr().err


def test_auto_ingest_writes_next_to_the_campaign(tmp_path: Path) -> None:
    campaign = tmp_path / "results" / "sample_20261121T121934Z"
    shutil.copytree(SAMPLE, campaign)
    assert auto_ingest(campaign) == f"history: {tmp_path / 'results' / 'history.duckdb'}"


def test_help_texts_name_the_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["history", "check", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "Exit 5 when, for some series and metric, the newest significant change point is " \
           "a regression" in text
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "--no-history" in capsys.readouterr().out


def test_notebook_runs_on_a_database(history: Path, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import nbclient
    import nbformat

    from .test_notebooks import ensure_kernelspec

    db = tmp_path / "h.duckdb"
    main(["history", "ingest", str(history), "--db", str(db)])
    ensure_kernelspec()
    monkeypatch.setenv("QIR_HISTORY_DB", str(db))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(ROOT / "notebooks" / "history.ipynb", as_version=4)
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=600,
                            resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    streams = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", [])
                      if o.get("output_type") == "stream")
    assert "4 series, 1 change point(s), 1 open regression(s)" in streams
    images = [o for c in nb.cells for o in c.get("outputs", [])
              if "image/png" in o.get("data", {})]
    assert len(images) == 1


def test_ingest_results_glob_skips_the_database_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    shutil.copytree(SAMPLE, results / "sample_20261121T121934Z")
    shutil.copytree(SAMPLE, tmp_path / "backup" / "sample_20261121T121934Z")
    assert main(["history", "ingest", str(results)]) == 0
    capsys.readouterr()
    matched = sorted(str(p) for p in results.glob("*"))  # what `results/*` expands to
    assert str(results / "history.duckdb") in matched
    assert main(["history", "ingest", *matched]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert f"  skipped  {results / 'history.duckdb'}  (a database file, not a campaign)" \
        in captured.out.splitlines()
    assert captured.out.endswith("0 campaign(s) written, 1 unchanged, 0 refused\n")
    # a copy of the same campaign in one ingest: a duplicate, skipped, not a crash
    copy = tmp_path / "backup" / "sample_20261121T121934Z"
    assert main(["history", "ingest", str(results), str(copy)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == (f"duplicate  sample_20261121T121934Z  ({copy}: the same campaign as "
                        f"{results / 'sample_20261121T121934Z'}, skipped)")
    assert lines[2].endswith("0 campaign(s) written, 1 unchanged, 1 duplicate(s) skipped, "
                             "0 refused")
    # other files are still refused
    (results / "notes.txt").write_text("x")
    assert main(["history", "ingest", str(results / "notes.txt"), str(results)]) == 1
    assert capsys.readouterr().err == (f"error: {results / 'notes.txt'}: not a campaign or "
                                       f"results directory (no campaign.json in it or below "
                                       f"it)\n")


def test_ingest_of_a_missing_directory_names_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nonexistent"
    assert main(["history", "ingest", str(missing)]) == 1
    assert capsys.readouterr().err == (f"error: history ingest: {missing}: no such "
                                       f"directory\n")
    assert not missing.exists()


def test_show_of_an_unmeasured_metric_and_plot_of_several_series(
        history: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.duckdb"
    main(["history", "ingest", str(history), "--db", str(db)])
    capsys.readouterr()
    assert main(["history", "show", "--db", str(db), "--server", "lsquic", "--metric",
                 "server_cycles_per_byte"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0].startswith("series ")
    assert lines[1] == "not measured (NA) for this series: server_cycles_per_byte"
    plot = tmp_path / "all.png"
    assert main(["history", "show", "--db", str(db), "--plot", str(plot)]) == 0
    captured = capsys.readouterr()
    assert captured.err == ("warning: --plot draws one series and 4 match: no figure "
                            "written; pick one with --series ID\n")
    assert "4 series" in captured.out and not plot.exists()


def test_check_of_cpu_cost_says_costlier(history: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    import duckdb

    from interop_runner.analysis.history import ChangePointSettings, check, load_history
    from interop_runner.analysis.history.series import METRIC_GROUPS

    db = tmp_path / "h.duckdb"
    main(["history", "ingest", str(history), "--db", str(db)])
    capsys.readouterr()
    con = duckdb.connect(str(db))  # a cost that rises where the goodput falls
    con.execute("UPDATE attempts SET server_cpu_s_per_gib = 8000 / goodput_mbps "
                "WHERE goodput_mbps > 0")
    con.close()
    changes = check(load_history(db), METRIC_GROUPS["all"], ChangePointSettings())
    assert sorted(zip(changes["metric"], changes["verdict"], changes["regression"])) == [
        ("goodput_mbps", "slower", True), ("server_cpu_s_per_gib", "costlier", True)]
    cost = changes[changes["metric"] == "server_cpu_s_per_gib"]
    assert cost["rel_change"].iloc[0] > 0.25
    assert main(["history", "check", "--db", str(db), "--metric", "cpu"]) == 5
    lines = capsys.readouterr().out.splitlines()
    assert "lsquic->lsquic goodput server_cpu_s_per_gib: REGRESSION (open:" in lines[0]
    assert lines[-1] == "4 series, 1 change point(s), 1 open regression(s)"


def test_usage_errors_exit_2_out_of_range_values_exit_1(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["history", "check", "--metric", "latency"])
    assert caught.value.code == 2 and "invalid choice: 'latency'" in capsys.readouterr().err
    assert main(["history", "check", "--alpha", "2", "--db", str(tmp_path / "h.duckdb")]) == 1
    assert capsys.readouterr().err.startswith("error: history check: --alpha must be in")
