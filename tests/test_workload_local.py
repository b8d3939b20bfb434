"""Workloads on the local testbed, through ``run.py run``: an upload is hashed on the server
node where it landed, several connections each move and verify a file of their own, and a
workload a harness lacks is recorded as unsupported with its reason; nothing stays behind."""

from __future__ import annotations

import pytest

from interop_runner.storage.layout import iter_run_files
from interop_runner.storage.run_record import read_run

from .conftest import campaign_dirs
from .test_campaign import assert_nodes_clean, campaign, run_cli

SIZE = 4 * 2**20


def records(results) -> dict[str, dict]:
    """The campaign's records by variant id."""
    [directory] = campaign_dirs(results)
    return {(rec := read_run(p))["variant"]: rec for p in iter_run_files(directory)}


@pytest.mark.usefixtures("local_testbed")
def test_uploads_and_connections_are_verified_where_they_land(tmp_path, local_testbed):
    cfg = campaign(tmp_path, f"""name: workloads
file_size: {SIZE}B
repetitions: 1
pairs: [{{server: tcp-tls, client: tcp-tls}}]
monitors: []
sweep:
  axes:
    - {{path: workload.kind, values: [download, upload, bidirectional]}}
    - {{path: workload.connections, values: [1, 3]}}
""")
    proc = run_cli("run", str(cfg), "--results-dir", str(tmp_path / "results"), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    recs = records(tmp_path / "results")
    up = recs["kind=upload,connections=1"]
    assert up["status"] == "ok", up["reason"]
    [t] = up["transfers"]
    assert (t["direction"], t["node"], t["bytes"], t["verified"]) == ("upload", "server", SIZE,
                                                                     "hash")
    assert t["digest"] == up["digest_expected"] and up["goodput_down_mbps"] is None
    assert up["goodput_up_mbps"] == up["goodput_mbps"] > 0
    many = recs["kind=upload,connections=3"]
    assert many["status"] == "ok", many["reason"]
    assert [(x["connection"], x["verified"]) for x in many["transfers"]] == [
        (0, "hash"), (1, "hash"), (2, "hash")]
    assert many["bytes_received"] == 3 * SIZE
    assert len({x["name"] for x in many["transfers"]}) == 3
    down = recs["kind=download,connections=3"]
    assert down["status"] == "ok", down["reason"]
    assert {x["node"] for x in down["transfers"]} == {"client"}
    # tcp-tls runs HTTP/1.1: no bidirectional workload, said before anything runs
    both = recs["kind=bidirectional,connections=1"]
    assert both["status"] == "unsupported"
    assert both["reason"].startswith("tcp-tls does not run bidirectional workloads")
    assert_nodes_clean(local_testbed)


@pytest.mark.usefixtures("local_testbed")
def test_a_duration_stops_the_client_and_what_landed_is_a_verified_prefix(tmp_path,
                                                                         local_testbed):
    size = 2**30  # far more than moves in a second here
    cfg = campaign(tmp_path, f"""name: durations
file_size: {size}B
repetitions: 1
pairs: [{{server: quic-go, client: quic-go}}]
monitors: [pidstat]
workload: {{duration: 1s}}
sweep:
  axes:
    - {{path: workload.kind, values: [download, upload]}}
""")
    proc = run_cli("run", str(cfg), "--results-dir", str(tmp_path / "results"), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    for kind, node in (("download", "client"), ("upload", "server")):
        rec = records(tmp_path / "results")[f"kind={kind}"]
        assert rec["status"] == "ok", rec["reason"]
        assert rec["stopped_at_duration"] and rec["workload"]["duration_s"] == 1.0
        [t] = rec["transfers"]
        assert (t["verified"], t["node"]) == ("prefix", node)
        assert 0 < t["bytes"] < size and rec["bytes_received"] == t["bytes"]
        assert rec["goodput_mbps"] == pytest.approx(t["bytes"] * 8 / rec["duration_s"] / 1e6)
    assert_nodes_clean(local_testbed)
