"""The interop matrix: medians per server x client, failures per cell, the heatmap."""

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402

from interop_runner.analysis import goodput_matrix, plot_matrix, status_matrix  # noqa: E402
from interop_runner.cli.main import main  # noqa: E402


def _frame() -> pd.DataFrame:
    rows = [
        ("a", "a", "ok", 100.0), ("a", "a", "ok", 300.0), ("a", "a", "ok", 200.0),
        ("a", "b", "ok", 50.0), ("a", "b", "failed", None), ("a", "b", "ok", 70.0),
        ("b", "a", "unsupported", None), ("b", "a", "unsupported", None),
        ("b", "b", "failed", None), ("b", "b", "timeout", None), ("b", "b", "failed", None),
    ]
    return pd.DataFrame(rows, columns=["server", "client", "status", "goodput_mbps"])


def test_goodput_matrix_medians_of_ok_attempts():
    m = goodput_matrix(_frame())
    assert list(m.index) == ["a", "b"] and list(m.columns) == ["a", "b"]
    assert m.loc["a", "a"] == 200.0 and m.loc["a", "b"] == 60.0
    assert pd.isna(m.loc["b", "a"]) and pd.isna(m.loc["b", "b"])


def test_status_matrix_names_failures():
    s = status_matrix(_frame())
    assert s.loc["a", "a"] == "200.0"
    assert s.loc["a", "b"] == "60.0 (failed 1/3)"
    assert s.loc["b", "a"] == "unsupported"
    assert s.loc["b", "b"] == "failed 2/3"


def test_missing_pair_is_a_dash():
    frame = _frame()
    frame = frame[~((frame.server == "b") & (frame.client == "a"))]
    assert status_matrix(frame).loc["b", "a"] == "-"


def test_heatmap_has_one_label_per_cell(tmp_path):
    ax = plot_matrix(_frame())
    texts = sorted(t.get_text() for t in ax.texts)
    assert texts == ["200", "60", "failed", "n/s"]
    out = tmp_path / "m.png"
    ax.figure.savefig(out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_matrix_on_stored_results(tmp_path, capsys):
    import shutil

    # a copy: loading writes a cache next to the results, never into the source tree
    sample = tmp_path / "sample"
    shutil.copytree(__import__("pathlib").Path(__file__).parent / "data" / "results-sample",
                    sample, ignore=shutil.ignore_patterns(".cache"))
    out = tmp_path / "heat.png"
    assert main(["matrix", str(sample), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "rows: server, columns: client" in text and "quic-go" in text
    assert out.stat().st_size > 1000
