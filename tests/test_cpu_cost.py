"""CPU cost per byte: cycles from the host facts, the facts it reads, the cpu monitor's
values; on real captured output (tests/data) and on the real sample campaign."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from interop_runner.analysis import load_results, summarize
from interop_runner.analysis.frames.cpu_cost import GIB, cycles_per_byte, frequency_mhz
from interop_runner.parsers.hostfacts import split_sections, summarize_facts

DATA = Path(__file__).parent / "data"
SAMPLE = DATA / "results-sample"
# perf stat -x , -e cycles -- true, as printed on this project's CI VM (no PMU)
VM_LINE = "<not supported>,,cycles,0,100.00,,"


def test_cycles_from_the_frequency_per_side_and_why_not() -> None:
    hosts = {"s1": {"cpu_max_mhz": 3000.0, "cycle_counter": False},
             "c1": {"cpu_max_mhz": None, "cpu_mhz": None}}
    joined = {"server_cpu_s_per_gib": 2.0, "client_cpu_s_per_gib": 4.0,
              "server_node": "s1", "client_node": "c1"}
    got = cycles_per_byte(joined, hosts)
    values = dict(zip(got.segment.names, got.segment.values))
    assert values["server_cpu_mhz"] == 3000.0
    assert values["server_cycles_per_byte"] == pytest.approx(2.0 * 3e9 / GIB)  # 5.59
    assert values["client_cycles_per_byte"] is None and values["client_cpu_mhz"] is None
    assert got.basis == ("server: estimated from the CPU frequency (CPU seconds x MHz); the "
                         "node has no hardware cycle counter; client: NA, no CPU frequency "
                         "in the host facts of node 'c1'")


def test_no_cost_no_cycles_and_no_basis() -> None:
    got = cycles_per_byte({"server_node": "s", "client_node": "c"},
                          {"s": {"cpu_mhz": 2596.1}, "c": {"cpu_mhz": 2596.1}})
    values = dict(zip(got.segment.names, got.segment.values))
    assert values["server_cycles_per_byte"] is None and values["server_cpu_mhz"] == 2596.1
    assert got.basis is None


def test_frequency_prefers_lscpu_max_then_cpuinfo() -> None:
    assert frequency_mhz({"cpu_max_mhz": 3737.9, "cpu_mhz": 2000.0}) == 3737.9
    assert frequency_mhz({"cpu_max_mhz": None, "cpu_mhz": 2596.144}) == 2596.144
    assert frequency_mhz({"cpu_max_mhz": 0, "cpu_mhz": None}) is None
    assert frequency_mhz({}) is None


@pytest.mark.parametrize("line,expected", [
    (VM_LINE, False),
    ("<not counted>,,cycles,0,0.00,,", False),
    ("1234567890,,cycles,1000123,100.00,,", True),
    ("987654,,cycles:u,1000123,100.00,,", True),  # perf as a user
    ("44556677,,cpu_core/cycles/,1000123,100.00,,", True),  # hybrid CPU
    ("", None),
    ("perf: command not found", None),
])
def test_cycle_counter_from_perf_stat(line: str, expected: bool | None) -> None:
    sections = split_sections(f"=== cpu-mhz ===\n2596.144\n=== perf-cycles ===\n{line}\n")
    facts = summarize_facts(sections)
    assert facts["cycle_counter"] is expected and facts["cpu_mhz"] == 2596.144


def test_sample_campaign_cost_columns(tmp_path: Path) -> None:
    """The real sample: server 5 ticks (/proc), client 0.055 s (bash times), 8 MiB."""
    row = load_results(SAMPLE, cache=False).iloc[0]
    assert row["server_cpu_s"] == pytest.approx(0.05)
    assert row["client_cpu_s"] == pytest.approx(0.055)
    assert row["server_cpu_s_per_gib"] == pytest.approx(0.05 / (8388608 / GIB))  # 6.4
    assert row["client_cpu_s_per_gib"] == pytest.approx(0.055 / (8388608 / GIB))  # 7.04
    # its host facts predate the frequency: NA with the reason, never 0
    assert pd.isna(row["server_cycles_per_byte"]) and pd.isna(row["client_cpu_mhz"])
    assert "server: NA, no CPU frequency in the host facts of node 'server'" in \
        row["cycles_basis"]


def test_a_failed_attempt_has_cpu_time_but_no_cost_per_byte(tmp_path: Path) -> None:
    camp = tmp_path / "sample"
    shutil.copytree(SAMPLE, camp)
    (run_file,) = camp.glob("*/*/*/attempt-1/run.json")
    run = json.loads(run_file.read_text())
    run.update(status="failed", reason="blake3 mismatch")
    run_file.write_text(json.dumps(run))
    row = load_results(camp, cache=False).iloc[0]
    assert row["client_cpu_s"] == pytest.approx(0.055)
    assert pd.isna(row["client_cpu_s_per_gib"]) and pd.isna(row["server_cpu_s_per_gib"])
    table = summarize(load_results(camp, cache=False))
    assert pd.isna(table["client_cpu_s_per_gib"].iloc[0])


def test_a_measured_client_without_times_is_na_with_a_reason(tmp_path: Path) -> None:
    camp = tmp_path / "sample"
    shutil.copytree(SAMPLE, camp)
    (run_file,) = camp.glob("*/*/*/attempt-1/run.json")
    run = json.loads(run_file.read_text())
    run["client"].update(cpu_user_s=None, cpu_system_s=None)
    run_file.write_text(json.dumps(run))
    row = load_results(camp, cache=False).iloc[0]
    assert pd.isna(row["client_cpu_s"]) and pd.isna(row["client_cpu_s_per_gib"])
    assert "client.cpu: no CPU times of the client in run.json" in row["monitors_missing"]
