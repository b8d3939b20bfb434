"""The emulated path's columns of the results frame (analysis/frames/path_columns.py):
<NA> without a path, the values of a real attempt over one (tests/data/path/sample-run.json),
and the counters of a real delay line."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from interop_runner.analysis.frames.frame import COLUMNS
from interop_runner.analysis.frames.path_columns import PATH_COLUMNS, path_values
from interop_runner.analysis.frames.results import parse_attempt
from interop_runner.testbed.path.counters import attempt_counters

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "path"


def sample() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / "sample-run.json").read_text())
    return data


def test_no_path_all_na() -> None:
    for record in ({}, {"path": None}, {"goodput_mbps": 900.0}):
        row = path_values(record, 900.0)
        assert list(row) == list(PATH_COLUMNS)
        assert all(value is None for value in row.values())


def test_sample_attempt() -> None:
    """quic-go, 10 MiB over 20 Mbit/s, 20 ms, 1 BDP on the server's egress (local-b)."""
    record = sample()
    row = path_values(record, record["goodput_mbps"])
    assert list(row) == list(PATH_COLUMNS)
    assert row == {
        "path_key": "path-e332eb1128b4", "path_backend": "nfqueue",
        "path_placement": "server-egress", "path_rate_mbps": 20.0, "path_rtt_ms": 20.0,
        "path_buffer_bytes": 50_000, "path_buffer_bdp": pytest.approx(1.0), "path_loss": 0.0,
        "path_jitter": 0.0, "path_links": 1, "path_calibration_ok": True,
        "path_cal_rtt_ms": 20.2, "path_cal_rate_mbps": pytest.approx(19.80091144984366),
        "path_cal_queue_ms": pytest.approx(18.6), "path_cal_loss": None,
        "goodput_fraction": pytest.approx(18.68538217613238 / 20),
        "bottleneck_sent_bytes": 11_060_016, "bottleneck_sent_packets": 7914,
        "bottleneck_drops": 125, "bottleneck_overlimits": 14_525,
        "bottleneck_backlog_peak_bytes": None,  # recorded before the qdisc sampler existed
        "path_loss_drops": None,
        # its reverse delay line ran, but the record has no stats of it (delay_lines: {})
        "delayline_received": None, "delayline_delivered": None, "delayline_dropped": None,
        "delayline_reordered": None, "delayline_cpu_s": None,
    }
    # the bottleneck sent about the file: 10 MiB plus headers and retransmissions
    assert 10 * 2**20 < row["bottleneck_sent_bytes"] < 1.1 * 10 * 2**20


def test_delay_line_counters() -> None:
    """A server-egress path whose data delay line dropped the 5 % loss, and a reverse line:
    the data line's counts, the CPU of both."""
    def stats(direction: str, moment: str) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads((DATA / f"delayline-{direction}-{moment}.json")
                                            .read_text())
        return loaded
    before = {"delay_lines": {"data": stats("data", "before"),
                              "reverse": stats("reverse", "before")}}
    after = {"delay_lines": {"data": stats("data", "after"), "reverse": stats("reverse", "after")}}
    record = sample()
    record["path"]["counters"] = attempt_counters(before, after, None)
    row = path_values(record, 10.0)
    assert (row["delayline_received"], row["delayline_delivered"], row["delayline_dropped"],
            row["delayline_reordered"]) == (2637, 2501, 136, 0)
    data_cpu = 0.056013 - 0.002054
    reverse_cpu = (0.049176 + 0.275152) - (0.025211 + 0.119905)
    assert row["delayline_cpu_s"] == pytest.approx(data_cpu + reverse_cpu)
    assert row["bottleneck_sent_bytes"] is None  # no bottleneck qdisc in these counters
    assert row["goodput_fraction"] == pytest.approx(0.5)


def test_two_links_and_no_calibration() -> None:
    record = copy.deepcopy(sample())
    link = {"rate_bps": 20_000_000, "delay_ms": 10.0, "jitter": 0.1, "loss": 0.0,
            "buffer_bytes": 50_000}
    record["path"]["resolved"].update(rate_bps=40_000_000, buffer_bytes=None,
                                      links=[link, {**link, "delay_ms": 30.0}])
    record["path"]["calibration"] = None
    row = path_values(record, 30.0)
    assert (row["path_links"], row["path_rate_mbps"], row["path_buffer_bytes"]) == (2, 40.0, None)
    assert row["path_buffer_bdp"] is None
    assert row["path_calibration_ok"] is None and row["path_cal_rtt_ms"] is None
    assert row["goodput_fraction"] == pytest.approx(0.75)
    assert path_values(record, None)["goodput_fraction"] is None  # a failed attempt


def test_a_split_ratio_limits_the_rate_of_two_links() -> None:
    """3:1 over two 10 Mbit/s links: the first link fills at 10 / 0.75 = 13.3 Mbit/s; flows
    pinned to a link bypass the split and the links carry their sum."""
    record = copy.deepcopy(sample())
    link = {"rate_bps": 10_000_000, "delay_ms": 20.0, "jitter": 0.0, "loss": 0.0,
            "buffer_bytes": 50_000}
    record["path"]["resolved"].update(rate_bps=20_000_000, links=[link, dict(link)])
    record["path"]["config"] = {"split": {"batch": 10, "ratio": "3:1"}}
    assert path_values(record, 12.7)["path_rate_mbps"] == pytest.approx(13.333, abs=1e-3)
    assert path_values(record, 12.7)["goodput_fraction"] == pytest.approx(0.9525)
    record["path"]["config"]["split"]["ratio"] = "1:1"
    assert path_values(record, 19.0)["path_rate_mbps"] == pytest.approx(20.0)
    record["path"]["config"]["split"]["ratio"] = "1:9"
    record["flows"] = [{"link": "both"}, {"link": "0"}, {"link": "1"}]
    assert path_values(record, 19.0)["path_rate_mbps"] == pytest.approx(20.0)


def test_columns_in_the_frame_and_typed() -> None:
    for name, (dtype, unit, meaning) in PATH_COLUMNS.items():
        assert COLUMNS[name] == dtype and meaning
        pd.Series([None], dtype=dtype)  # a dtype pandas knows
    assert PATH_COLUMNS["path_rate_mbps"][1] == "Mbit/s (SI)"


def test_load_of_the_sample_attempt(tmp_path: Path) -> None:
    """The loader's base row carries the path columns of a real record."""
    attempt = tmp_path / "quic-go_quic-go" / "goodput" / "1" / "attempt-1"
    attempt.mkdir(parents=True)
    (attempt / "run.json").write_text((DATA / "sample-run.json").read_text())
    row = parse_attempt(attempt / "run.json").base
    assert (row["path_key"], row["path_buffer_bytes"], row["bottleneck_drops"]) == (
        "path-e332eb1128b4", 50_000, 125)
    assert row["goodput_fraction"] == pytest.approx(18.68538217613238 / 20)


def test_documented() -> None:
    """docs/paths.md has a table row for every path column, with its unit."""
    doc = (ROOT / "docs" / "paths.md").read_text()
    for name, (_, unit, _) in PATH_COLUMNS.items():
        line = next((x for x in doc.splitlines() if x.startswith(f"| `{name}` |")), None)
        assert line is not None, name
        assert unit in line, (name, unit)
