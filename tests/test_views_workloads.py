"""The workload views (analysis/views/workloads.py) on a frame built here: the cells, the
sending and receiving side's CPU per GiB, and the figures."""

from __future__ import annotations

import pandas as pd
import pytest
from matplotlib.figure import Figure

from interop_runner.analysis.views import (
    direction_frame,
    goodput_vs_streams,
    streams_frame,
    upload_vs_download,
)


def frame() -> pd.DataFrame:
    rows = []
    for direction, goodput, server_cpu, client_cpu in (("download", 100.0, 2.0, 3.0),
                                                        ("upload", 50.0, 5.0, 1.0)):
        for streams in (1, 4):
            for rep in range(3):
                rows.append({"server": "s", "client": "s", "status": "ok",
                             "direction": direction, "streams": streams, "connections": 1,
                             "goodput_mbps": goodput * streams + rep,
                             "server_cpu_s_per_gib": server_cpu,
                             "client_cpu_s_per_gib": client_cpu})
    rows.append({**rows[0], "status": "failed", "goodput_mbps": None})
    return pd.DataFrame(rows)


def test_the_sides_cpu_follows_the_direction():
    table = direction_frame(frame()).set_index("direction")
    # a download's sender is the server, an upload's the client
    assert table.loc["download", "sender_cpu_s_per_gib"] == 2.0
    assert table.loc["download", "receiver_cpu_s_per_gib"] == 3.0
    assert table.loc["upload", "sender_cpu_s_per_gib"] == 1.0
    assert table.loc["upload", "receiver_cpu_s_per_gib"] == 5.0
    assert table.loc["download", "n"] == 6 and table.loc["download", "failures"] == 1


def test_streams_cells_and_their_medians():
    table = streams_frame(frame())
    row = table[(table["direction"] == "upload") & (table["streams"] == 4)].iloc[0]
    assert row["median"] == pytest.approx(201.0) and row["n"] == 3


def test_the_figures_draw_and_missing_data_says_so():
    for view in (upload_vs_download, goodput_vs_streams):
        table, fig = view(frame())
        assert isinstance(fig, Figure) and not table.empty
        table, fig = view(frame().drop(columns=["direction"]))
        assert table.empty and "no data" in fig.axes[0].texts[0].get_text()


def test_one_direction_or_one_stream_count_has_nothing_to_compare():
    downloads = frame()[frame()["direction"] == "download"]
    table, fig = upload_vs_download(downloads)
    assert table.empty and "more than one direction" in fig.axes[0].texts[0].get_text()
    assert not goodput_vs_streams(downloads)[0].empty  # 1 and 4 streams still compare
    one_stream = downloads[downloads["streams"] == 1]
    table, fig = goodput_vs_streams(one_stream)
    assert table.empty and "several streams" in fig.axes[0].texts[0].get_text()


def test_records_without_counts_mixed_with_new_ones_still_group():
    # a record written before workloads holds no streams or connections: object columns
    old = frame().astype({"streams": object, "connections": object})
    old.loc[old.index[:3], ["streams", "connections"]] = None
    table = streams_frame(old)
    assert str(table["streams"].dtype) == "Int64"
    assert set(table["streams"].dropna()) == {1, 4}


def test_records_of_no_direction_have_nothing_to_compare():
    # the predecessor's records: no direction, streams or connections at all
    old = frame().assign(direction=None, streams=None, connections=None)
    table, fig = goodput_vs_streams(old)
    assert table.empty and "several streams" in fig.axes[0].texts[0].get_text()
