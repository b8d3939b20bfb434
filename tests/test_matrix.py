"""The interop matrix: medians per server x client, failures per cell, the heatmap."""

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

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


# ----------------------------------------------------------------------------- CPU cost

SAMPLE = __import__("pathlib").Path(__file__).parent / "data" / "results-sample"
# per pair: (server, client CPU-s/GiB) of each attempt; None = not measured
COSTS = {
    ("quic-go", "quic-go"): [(1.0, 2.0), (3.0, 4.0), (2.0, 9.0)],
    ("quic-go", "quiche"): [(1.5, None), (2.5, None)],
    ("quiche", "quic-go"): [(None, None)],
    ("quiche", "quiche"): [(4.0, 6.0), (None, 8.0)],
}


def _sample_with_costs(tmp_path, costs=COSTS):
    """The real sample campaign loaded with load_results, one row per (pair, attempt) of
    ``costs``, with the CPU cost columns set to those values (added where the loader lacks
    them, replaced where it measured its own)."""
    import shutil

    from interop_runner.analysis import load_results

    sample = tmp_path / "sample"
    shutil.copytree(SAMPLE, sample, ignore=shutil.ignore_patterns(".cache"))
    (row,) = [r for _, r in load_results(sample).iterrows()]
    rows = []
    for (server, client), attempts in costs.items():
        for server_cost, client_cost in attempts:
            new = row.copy()
            new["server"], new["client"] = server, client
            for side, cost in (("server", server_cost), ("client", client_cost)):
                new[f"{side}_cpu_s_per_gib"] = float("nan") if cost is None else cost
            rows.append(new)
    return pd.DataFrame(rows).reset_index(drop=True)


def test_cost_matrix_medians_per_side_and_total(tmp_path):
    from interop_runner.analysis.theories.matrix import cost_matrix

    frame = _sample_with_costs(tmp_path)
    server, client = cost_matrix(frame, "server"), cost_matrix(frame, "client")
    total = cost_matrix(frame)  # default: server + client per attempt
    assert list(total.index) == ["quic-go", "quiche"] == list(total.columns)
    assert server.loc["quic-go", "quic-go"] == 2.0 and client.loc["quic-go", "quic-go"] == 4.0
    assert total.loc["quic-go", "quic-go"] == 7.0  # medians of 3, 7, 11
    assert server.loc["quic-go", "quiche"] == 2.0 and pd.isna(client.loc["quic-go", "quiche"])
    assert pd.isna(total.loc["quic-go", "quiche"])  # a total needs both sides
    assert pd.isna(server.loc["quiche", "quic-go"])
    assert server.loc["quiche", "quiche"] == 4.0 and client.loc["quiche", "quiche"] == 7.0
    assert total.loc["quiche", "quiche"] == 10.0  # the attempt without a server cost is out


def test_cost_of_failed_attempts_is_not_counted(tmp_path):
    from interop_runner.analysis.theories.matrix import cost_matrix

    frame = _sample_with_costs(tmp_path)
    frame.loc[frame["client_cpu_s_per_gib"] == 9.0, "status"] = "failed"
    assert cost_matrix(frame, "client").loc["quic-go", "quic-go"] == 3.0


def test_cost_heatmap_shows_na_not_zero(tmp_path):
    from interop_runner.analysis.theories.matrix import cost_heatmap

    frame = _sample_with_costs(tmp_path)
    frame.loc[frame["server"] == "quiche", "status"] = "unsupported"
    frame.loc[(frame["server"] == "quiche") & (frame["client"] == "quiche"), "status"] = "ok"
    table, fig = cost_heatmap(frame)
    server_ax, client_ax = [ax for ax in fig.axes if ax.get_title()]
    assert server_ax.get_title() == "CPU-s/GiB of the server"
    cells = {ax.get_title(): sorted(t.get_text() for t in ax.texts)
             for ax in (server_ax, client_ax)}
    assert cells == {"CPU-s/GiB of the server": ["2", "2", "4", "n/s"],
                     "CPU-s/GiB of the client": ["4", "7", "NA", "n/s"]}
    assert "0" not in cells["CPU-s/GiB of the client"]
    # one colour scale for both panels: the cheapest and the dearest cost of either side
    assert server_ax.images[0].get_clim() == client_ax.images[0].get_clim() == (2.0, 7.0)
    row = table.set_index(["server", "client"]).loc[("quic-go", "quiche")]
    assert row["server_cpu_s_per_gib"] == 2.0 and pd.isna(row["client_cpu_s_per_gib"])


def test_cost_heatmap_without_any_cost_draws_nothing(tmp_path):
    from interop_runner.analysis.theories.matrix import cost_heatmap

    frame = _sample_with_costs(tmp_path, {("quic-go", "quic-go"): [(None, None)]})
    table, fig = cost_heatmap(frame)
    assert fig is None and table.empty


def test_goodput_heatmap_colours_are_unchanged_by_the_parameters():
    ax = plot_matrix(_frame())
    assert ax.images[0].get_cmap().name == "viridis"
    assert ax.images[0].colorbar.ax.get_ylabel() == "median goodput [Mbit/s]"


def test_cli_matrix_value_cpu(tmp_path, capsys, monkeypatch):
    import interop_runner.analysis as analysis

    frame = _sample_with_costs(tmp_path)
    monkeypatch.setattr(analysis, "load_results", lambda *paths: frame)
    out = tmp_path / "cpu.png"
    assert main(["matrix", str(tmp_path / "sample"), "--value", "cpu", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    blocks = text.strip().split("\n\n")
    assert "CPU-s/GiB of the server" in blocks[0] and "CPU-s/GiB of the client" in blocks[1]
    assert "server + client" in blocks[2]
    client = blocks[1].splitlines()
    assert client[3].split() == ["quic-go", "4", "NA"]  # server quic-go: clients quic-go, quiche
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_matrix_cpu_heatmap_without_costs_is_one_line(tmp_path, capsys, monkeypatch):
    import interop_runner.analysis as analysis

    frame = _sample_with_costs(tmp_path, {("quic-go", "quic-go"): [(None, None)]})
    monkeypatch.setattr(analysis, "load_results", lambda *paths: frame)
    assert main(["matrix", str(tmp_path / "sample"), "--value", "cpu",
                 "-o", str(tmp_path / "x.png")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: no successful attempt has a measured CPU cost")
    assert len(err.strip().splitlines()) == 1


def _narrow_frame() -> pd.DataFrame:
    """2 x 2 pairs over a 20 Mbit/s path: medians 19.10 to 19.16 Mbit/s, 0.3 % apart."""
    rows = [("a", "a", "ok", 19.10), ("a", "b", "ok", 19.12), ("b", "a", "ok", 19.14),
            ("b", "b", "ok", 19.16)]
    return pd.DataFrame(rows, columns=["server", "client", "status", "goodput_mbps"])


def test_a_narrow_goodput_range_keeps_a_narrow_colour_range():
    """Cells 0.3 % apart are not drawn from one end of the colour map to the other: the scale
    spans 5 % of the median (19.13 +- 2.5 %) and the colour bar prints the spread."""
    ax = plot_matrix(_narrow_frame())
    image = ax.images[0]
    low, high = image.get_clim()
    assert (low, high) == (pytest.approx(19.13 * 0.975), pytest.approx(19.13 * 1.025))
    assert float(image.norm(19.16)) - float(image.norm(19.10)) == pytest.approx(
        0.06 / (0.05 * 19.13))  # 6 % of the map, not all of it
    assert image.colorbar.ax.get_ylabel() == ("median goodput [Mbit/s]\n"
                                              "cells within 0.3 % (19.1-19.16)")
    assert sorted(t.get_text() for t in ax.texts) == ["19"] * 4


def test_a_wide_goodput_range_spans_the_colour_map():
    ax = plot_matrix(_frame())
    assert ax.images[0].get_clim() == (60.0, 200.0)  # the cells' own range


def test_colour_limits_and_the_spread():
    from interop_runner.analysis.theories.matrix import colour_limits, narrow_spread

    assert colour_limits([100.0, float("nan"), 100.0]) == (97.5, 102.5)  # one value: +-2.5 %
    assert colour_limits([10.0, 40.0]) == (10.0, 40.0)
    assert colour_limits([float("nan")]) is None
    assert narrow_spread([10.0, 40.0]) is None and narrow_spread([100.0]) is None
    assert narrow_spread([100.0, 101.0]) == "cells within 1.0 % (100-101)"
