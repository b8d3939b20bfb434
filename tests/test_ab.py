"""A/B campaigns on the real namespace testbed: two quic-go releases as variants (own builds,
own recorded versions), paired order, adaptive rounds, and `run.py compare` on the result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from interop_runner.storage.layout import iter_run_files
from interop_runner.storage.run_record import read_run

from .conftest import TESTBED_FILE, campaign_dirs
from .test_campaign import assert_nodes_clean, run_cli

OLD, NEW = "quic-go@v0.64.0", "quic-go"


def write_config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "ab.yml"
    path.write_text(f"testbed: {TESTBED_FILE}\n" + body)
    return path


@pytest.mark.usefixtures("local_testbed")
def test_two_releases_alternate_with_own_builds_and_versions(tmp_path, local_testbed):
    cfg = write_config(tmp_path, f"""name: ab
file_size: 4MiB
repetitions: 2
port: 4470
pairs: [{{server: quic-go, client: quic-go}}]
sweep:
  order: paired
  seed: 5
  axes: [{{path: impl.quic-go, values: [{OLD}, {NEW}], name: version}}]
  adaptive: {{max_repetitions: 3, min_effect: 0.02}}
""")
    proc = run_cli("run", str(cfg), "--results-dir", str(tmp_path / "r"), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    (camp,) = campaign_dirs(tmp_path / "r")
    records = sorted((read_run(p) for p in iter_run_files(camp)), key=lambda r: r["start_ns"])
    # 2 planned rounds + 1 adaptive round (2 samples per arm cannot decide), both arms each
    assert len(records) == 6 and all(r["status"] == "ok" and r["hash_ok"] for r in records)
    for rec in records:
        arm = rec["axes"]["version"]
        assert rec["server"]["implementation"] == rec["client"]["implementation"] == arm
        assert rec["cell"] == {"server": "quic-go", "client": "quic-go"}
        want = "v0.64.0" if arm == OLD else "v0.65.0"
        assert rec["server"]["version"] == rec["client"]["version"] == want
    # paired order: each repetition's two arms back to back
    for a, b in zip(records[::2], records[1::2]):
        assert a["repetition"] == b["repetition"]
        assert {a["axes"]["version"], b["axes"]["version"]} == {OLD, NEW}
    meta = json.loads((camp / "campaign.json").read_text())
    assert meta["adaptive_rounds"] == [{"repetition": 3, "cells": ["quic-go_quic-go"]}]
    entry = meta["implementations"][f"server:{OLD}"]
    assert entry["variant"] == {"base": "quic-go", "version": "v0.64.0"}
    assert entry["version"] == "v0.64.0"
    # its own build cache next to the shared one
    server_workdir = Path(local_testbed.nodes["server"].workdir)
    assert (server_workdir / "setup-variants" / OLD / "quic-go" / "bin" / "server").is_file()
    assert (server_workdir / "setup" / "quic-go" / "bin" / "server").is_file()

    res = run_cli("compare", str(camp), "--variants", OLD, NEW, "--column", "axis_version",
                  "--format", "json")
    assert res.returncode in (0, 5), res.stderr
    cells = json.loads(res.stdout)["cells"]
    assert len(cells) == 1 and cells[0]["n_a"] == 3 and cells[0]["n_b"] == 3
    assert cells[0]["verdict"] == "inconclusive"  # 3 per side: below min_samples
    assert_nodes_clean(local_testbed)


@pytest.mark.usefixtures("local_testbed")
def test_a_slower_arm_is_reported_slower_and_gates(tmp_path, local_testbed):
    """B gets a 150 Mbit/s tbf cap on the server's egress (the download direction): compare
    must say `slower`, CI below zero, and exit 5 (the CI gate)."""
    cfg = write_config(tmp_path, """name: slow-b
file_size: 8MiB
repetitions: 6
port: 4471
pairs: [{server: quic-go, client: quic-go}]
sweep:
  order: paired
  seed: 9
  axes: [{path: server_knobs.rate, values: [null, 150mbit], name: cap}]
""")
    proc = run_cli("run", str(cfg), "--results-dir", str(tmp_path / "r"), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    (camp,) = campaign_dirs(tmp_path / "r")
    ids = sorted({read_run(p)["variant"] for p in iter_run_files(camp)})
    assert ids == ["cap=150mbit", "cap=None"]
    res = run_cli("compare", str(camp), "--variants", "cap=None", "cap=150mbit",
                  "--column", "variant", "--format", "json")
    assert res.returncode == 5, res.stdout + res.stderr
    (cell,) = json.loads(res.stdout)["cells"]
    assert cell["verdict"] == "slower" and cell["n_a"] == cell["n_b"] == 6
    assert cell["ci_high"] < 0 and cell["rel_diff"] < -0.3
    md = run_cli("compare", str(camp), "--variants", "cap=None", "cap=150mbit",
                 "--column", "variant", "--format", "markdown")
    assert md.returncode == 5 and "slower" in md.stdout and md.stdout.lstrip().startswith("#")
    # the report has an A/B section: the same verdict, and its forest plot
    from interop_runner.report.build import build_report

    report = build_report([camp], tmp_path / "report")
    (section,) = report.campaigns
    (ab,) = [f for f in section.figures if f.view.name == "ab"]
    assert list(ab.data["verdict"]) == ["slower"] and ab.data["ci_high"].iloc[0] < 0
    assert any(p.suffix == ".png" and p.stat().st_size > 5000 for p in ab.files)
    assert "A/B comparison" in report.html_file.read_text()
    assert_nodes_clean(local_testbed)
