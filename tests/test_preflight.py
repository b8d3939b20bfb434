"""Knobs checked against the nodes' host facts before anything runs (measure/preflight.py):
unit tests on real captured facts, and one run on the local testbed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from interop_runner.config.campaign import CampaignConfig
from interop_runner.config.knobs import format_cpulist, parse_cpulist
from interop_runner.config.loader import load_campaign
from interop_runner.errors import PreflightError
from interop_runner.measure.preflight import check_knobs_on_nodes, knob_problems, pin_problem
from interop_runner.parsers.hostfacts import split_sections, summarize_facts

from .test_campaign import assert_nodes_clean, campaign, run_cli

DATA = Path(__file__).parent / "data" / "hostfacts"
BASE = """name: pre
file_size: 1MiB
repetitions: 1
pairs: [{server: quic-go, client: quic-go}]
"""


@pytest.fixture(scope="module")
def facts() -> dict[str, Any]:
    """The summary of a real local-testbed node: a 2-CPU KVM guest (online CPUs 0,1)."""
    summary = summarize_facts(split_sections((DATA / "veth-kvm-2core.txt").read_text()))
    assert (summary["cores"], summary["online_cpus"]) == (2, "0,1")
    return summary


@pytest.fixture
def config(campaign_file):
    def make(extra: str) -> CampaignConfig:
        cfg, _ = load_campaign(campaign_file(BASE + extra))
        return cfg
    return make


def problems(cfg: CampaignConfig, facts: dict[str, Any]) -> dict[str, list[str]]:
    return {role: knob_problems(cfg, role, role, facts) for role in ("server", "client")}


def test_pin_beyond_the_nodes_cpus_names_node_and_key(config, facts):
    got = problems(config('knobs: {pin: "0-999"}\n'), facts)
    assert got == {role: [f"{role}: knobs.pin: CPUs 2-999 do not exist on this node "
                          "(online CPUs 0-1)"] for role in ("server", "client")}


def test_one_missing_cpu(config, facts):
    got = problems(config('knobs: {pin: "5"}\n'), facts)
    assert got["server"] == ["server: knobs.pin: CPU 5 does not exist on this node "
                             "(online CPUs 0-1)"]
    got = problems(config('client_knobs: {pin: "0,2,7-8"}\n'), facts)
    assert got == {"server": [], "client": [
        "client: client_knobs.pin: CPUs 2,7-8 do not exist on this node (online CPUs 0-1)"]}


def test_cpus_the_node_has_are_fine(config, facts):
    for pin in ("0-1", "0", "1", "0,1"):
        assert problems(config(f'knobs: {{pin: "{pin}"}}\n'), facts) == \
            {"server": [], "client": []}, pin
    assert problems(config(""), facts) == {"server": [], "client": []}  # no pin at all


def test_the_side_key_wins_over_knobs(config, facts):
    got = problems(config('knobs: {pin: "0"}\nserver_knobs: {pin: "3"}\n'), facts)
    assert got == {"server": ["server: server_knobs.pin: CPU 3 does not exist on this node "
                              "(online CPUs 0-1)"], "client": []}
    # a bad shared pin that each side overrides is never used
    got = problems(config('knobs: {pin: "9"}\nserver_knobs: {pin: "1"}\n'
                          'client_knobs: {pin: "0"}\n'), facts)
    assert got == {"server": [], "client": []}


def test_sweep_axis_values_are_checked_and_named(config, facts):
    cfg = config("sweep:\n  axes:\n"
                 '    - {path: server_knobs.pin, values: ["0", "1", "4"], name: core}\n'
                 "    - {path: knobs.rmem, values: [1x, 2x]}\n")
    got = problems(cfg, facts)
    # one line for the bad value, although two variants (rmem 1x and 2x) use it
    assert got == {"server": ["server: sweep.axes[0].values[2] (server_knobs.pin='4'): CPU 4 "
                              "does not exist on this node (online CPUs 0-1)"], "client": []}
    # a shared axis on knobs.pin reaches both nodes
    cfg = config('sweep: {axes: [{path: knobs.pin, values: ["1", "2-3"]}]}\n')
    assert problems(cfg, facts)["client"] == [
        "client: sweep.axes[0].values[1] (knobs.pin='2-3'): CPUs 2-3 do not exist on this node "
        "(online CPUs 0-1)"]


def test_nic_relative_pins_are_resolved_later(config, facts):
    assert problems(config("knobs: {pin: nic-local}\nclient_knobs: {pin: nic-remote}\n"),
                    facts) == {"server": [], "client": []}


def test_facts_without_a_cpu_list(config, facts):
    cfg = config('knobs: {pin: "0-2"}\n')
    # nproc only (older facts): CPUs 0..n-1
    only_nproc = {**facts, "online_cpus": None}
    assert knob_problems(cfg, "srv", "server", only_nproc) == [
        "srv: knobs.pin: CPU 2 does not exist on this node (online CPUs 0-1)"]
    # nothing known about the CPUs: nothing to refuse
    assert knob_problems(cfg, "srv", "server", {**facts, "online_cpus": None,
                                                 "cores": None}) == []
    # a node with a hole in its CPU list
    assert knob_problems(cfg, "srv", "server", {**facts, "online_cpus": "0,2-3"}) == [
        "srv: knobs.pin: CPU 1 does not exist on this node (online CPUs 0,2-3)"]


def test_pin_problem_edges():
    assert pin_problem("3-1", [0, 1, 2, 3]) == "CPU range 3-1 is empty (write it as 1-3)"
    # a huge range is not expanded
    assert pin_problem("0-4294967295", [0, 1]) == \
        "CPUs 2-4294967295 do not exist on this node (online CPUs 0-1)"
    assert pin_problem("0-3,2-5", list(range(4))) == \
        "CPUs 4-5 do not exist on this node (online CPUs 0-3)"
    assert pin_problem("0-3", list(range(8))) is None


def test_all_problems_of_all_nodes_are_one_line(config, facts):
    cfg = config('knobs: {pin: "0-999"}\nclient_knobs: {pin: "5"}\n')
    with pytest.raises(PreflightError) as info:
        check_knobs_on_nodes(cfg, [("srv", "server", facts), ("cli", "client", facts)])
    assert str(info.value) == (
        "srv: knobs.pin: CPUs 2-999 do not exist on this node (online CPUs 0-1); "
        "cli: client_knobs.pin: CPU 5 does not exist on this node (online CPUs 0-1)")
    check_knobs_on_nodes(config('knobs: {pin: "1"}\n'), [("srv", "server", facts)])  # fine


# -- on the local testbed ----------------------------------------------------------------------
@pytest.mark.usefixtures("local_testbed")
def test_run_refuses_a_pin_the_nodes_do_not_have(tmp_path, local_testbed):
    """`pin: "0-999"` on the testbed's nodes (the host's CPUs): one error line naming node and
    key, exit 1, before anything was written (the probe reads the host facts before the
    campaign directory exists) and nothing left on the nodes."""
    online = parse_cpulist(Path("/sys/devices/system/cpu/online").read_text())
    if max(online) >= 999:
        pytest.skip("this host has CPU 999")
    missing = format_cpulist([c for c in range(1000) if c not in online])
    cfg = campaign(tmp_path, BASE + 'knobs: {pin: "0-999"}\n')
    results = tmp_path / "results"
    proc = run_cli("run", str(cfg), "--results-dir", str(results), "--no-progress",
                   timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    problem = (f"knobs.pin: CPUs {missing} do not exist on this node "
               f"(online CPUs {format_cpulist(online)})")
    assert proc.stderr.splitlines() == [f"error: server: {problem}; client: {problem}"]
    assert not results.exists() or not list(results.iterdir())  # nothing written
    assert_nodes_clean(local_testbed)


def test_probe_connects_to_the_endpoints_only(config, facts, monkeypatch):
    """A campaign without a path measures on server and client: a router in the testbed
    file is not probed (nor its lease taken), so such a campaign runs as before."""
    from interop_runner.config.loader import load_testbed
    from interop_runner.measure import preflight

    from .conftest import TESTBED_FILE

    testbed = load_testbed(TESTBED_FILE.parent / "example-router.yml")
    assert testbed.router() is not None
    probed: list[str] = []

    paths_asked: dict[str, Any] = {}

    def probe(testbed: Any, name: str, node_cfg: Any, timeout: float,
              paths: Any = None) -> tuple[list[Any], dict[str, Any]]:
        probed.append(name)
        paths_asked[name] = paths
        return [], facts

    monkeypatch.setattr(preflight, "_probe_node", probe)
    assert preflight.probe_nodes([testbed], config(""), 5.0) == {"example-router": []}
    assert probed == ["server", "client"]
    # a campaign with a path probes the router too, and has it check the path's backend
    probed.clear()
    preflight.probe_nodes([testbed], config("path: {rate: 20mbit, rtt: 10ms}\n"), 5.0)
    assert probed == ["server", "client", "router"]
    assert paths_asked["router"] is not None and paths_asked["server"] is None
