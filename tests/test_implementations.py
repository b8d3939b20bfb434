"""Implementation registry and the environment contract handed to the scripts."""

import os
import subprocess
from pathlib import Path

import pytest

from interop_runner.config.implementations import (
    IMPLEMENTATIONS_DIR,
    ParameterSpec,
    common_alpn,
    load_registry,
)
from interop_runner.config.params import StandardParams
from interop_runner.config.testbed import NodeConfig, SSHConfig
from interop_runner.measure.attempt import Attempt, AttemptPlan
from interop_runner.measure.side import SidePlan
from interop_runner.remote.executor import LocalExecutor
from interop_runner.testbed.node import Node

CONTRACT_SERVER = {"ROLE", "TESTCASE", "IP", "PORT", "ALPN", "WWW", "CERTS", "LOGS",
                   "SSLKEYLOGFILE", "QLOGDIR", "SETUP_DIR"}
CONTRACT_CLIENT = CONTRACT_SERVER - {"WWW"} | {"REQUESTS", "DOWNLOADS"}


def test_registry_has_both_implementations():
    reg = load_registry()
    assert {"quic-go", "tcp-tls"} <= set(reg)
    assert reg["quic-go"].alpns[0] == "h3" and reg["quic-go"].ready == "udp"
    assert reg["tcp-tls"].alpns == ["http/1.1"] and reg["tcp-tls"].ready == "tcp"
    for meta in reg.values():
        assert len(meta.source_hash()) == 64
        if meta.is_image:  # runs as a container: a Dockerfile instead of scripts
            assert meta.image is not None and meta.image.build is not None
            assert (meta.path / meta.image.build / "Dockerfile").is_file()
            assert not any((meta.path / s).exists() for s in ("setup", "run-server"))
            continue
        for script in ("setup", "run-server", "run-client"):
            path = meta.path / script
            assert path.is_file() and os.access(path, os.X_OK), path
        assert len(meta.source_hash()) == 64


def test_common_alpn():
    reg = load_registry()
    assert common_alpn(reg["quic-go"], reg["quic-go"]) == "h3"
    assert common_alpn(reg["tcp-tls"], reg["tcp-tls"]) == "http/1.1"
    assert common_alpn(reg["quic-go"], reg["tcp-tls"]) is None


@pytest.mark.parametrize("spec,value,env", [
    ({"type": "bool"}, False, "0"), ({"type": "bool"}, True, "1"),
    ({"type": "int"}, 7, "7"), ({"type": "bytes"}, "4MiB", "4194304"),
    ({"type": "str", "choices": ["cubic", "reno"]}, "reno", "reno"),
])
def test_parameter_rendering(spec, value, env):
    assert ParameterSpec(**spec).to_env(value) == env


@pytest.mark.parametrize("spec,value", [
    ({"type": "bool"}, "yes"), ({"type": "int"}, True), ({"type": "int"}, "3"),
    ({"type": "str", "choices": ["cubic"]}, "bbr"), ({"type": "bytes"}, "lots"),
])
def test_parameter_rejects(spec, value):
    with pytest.raises(ValueError):
        ParameterSpec(**spec).to_env(value)


def _node(role: str, tmp: Path) -> Node:
    cfg = NodeConfig(role=role, ssh=SSHConfig(host="h"), interface="data0",
                     ip="198.19.0.1" if role == "server" else "198.19.0.2",
                     workdir=f"{tmp}/{role}/work", tmpdir=f"{tmp}/{role}/tmp")
    return Node(role, cfg, LocalExecutor(role), "camp_1")


def test_env_contract(tmp_path):
    reg = load_registry()
    plan = AttemptPlan(
        campaign_id="camp_1", testbed="local", testcase="goodput", repetition=2, attempt=1,
        server=SidePlan("server", reg["quic-go"], "v", params={"force_buffers": False}),
        client=SidePlan("client", reg["quic-go"], "v"),
        alpn="h3", port=4433, file_name="goodput-10.bin", file_size=10, file_digest="0" * 64,
        client_timeout=10, server_ready_timeout=5, keylog=True,
        std_params=StandardParams(cipher="TLS_AES_256_GCM_SHA384", gso=False,
                                  socket_rcvbuf="4MiB"))
    server, client = _node("server", tmp_path), _node("client", tmp_path)
    att = Attempt(plan, server, client, tmp_path / "out")
    senv = att.side_env(server, att.server_logs, plan.server)
    cenv = att.side_env(client, att.client_logs, plan.client)
    assert CONTRACT_SERVER <= set(senv) and CONTRACT_CLIENT <= set(cenv)
    assert senv["ROLE"] == "server" and cenv["ROLE"] == "client"
    assert senv["IP"] == cenv["IP"] == "198.19.0.1"
    assert senv["PARAM_FORCE_BUFFERS"] == "0" and "PARAM_FORCE_BUFFERS" not in cenv
    for env in (senv, cenv):
        assert env["CIPHER"] == "TLS_AES_256_GCM_SHA384" and env["GSO"] == "0"
        assert env["GRO"] == "1" and env["CONGESTION_CONTROL"] == "cubic"
        assert env["SOCKET_RCVBUF"] == str(4 * 2**20) and env["SOCKET_SNDBUF"] == ""
    # quic-go runs NewReno only and cannot set its buffers: both recorded, not hidden
    side = att.record.server
    assert side.effective["congestion_control"] == "reno"
    assert side.effective["cipher"] == "TLS_AES_256_GCM_SHA384"
    assert {u["param"] for u in side.unhonoured} == {"congestion_control", "socket_rcvbuf"}
    assert att.record.params["cipher"] == "TLS_AES_256_GCM_SHA384"
    assert cenv["REQUESTS"] == "https://198.19.0.1:4433/goodput-10.bin"
    assert senv["WWW"] == f"{tmp_path}/server/tmp/camp_1/www"
    assert cenv["DOWNLOADS"] == f"{tmp_path}/client/tmp/camp_1/downloads"
    assert senv["SSLKEYLOGFILE"].endswith("/server/keys.log") and senv["QLOGDIR"] == ""
    assert att.server_logs.startswith(f"{tmp_path}/server/work/runs/camp_1/quic-go_quic-go/"
                                      "goodput/2/attempt-1")
    assert senv["SETUP_DIR"] == f"{tmp_path}/server/work/setup"


def test_scripts_pass_shellcheck():
    scripts = [p for p in IMPLEMENTATIONS_DIR.rglob("*") if p.is_file() and os.access(p, os.X_OK)
               and p.read_bytes().startswith(b"#!/usr/bin/env bash")]
    root = IMPLEMENTATIONS_DIR.parent
    scripts += [p for p in (root / "pos_scripts").glob("*.sh")]
    scripts += [root / "test.sh", root / "quickstart.sh", root / ".ci" / "run"]
    assert len(scripts) >= 6
    for script in scripts:
        text = script.read_text()
        assert "set -euo pipefail" in text, script
    res = subprocess.run(["shellcheck", "-x", *map(str, scripts)], capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stdout


def test_docs_support_table_matches_meta_files():
    from interop_runner.config.implementations import support_table

    doc = (IMPLEMENTATIONS_DIR.parent / "docs" / "implementations.md").read_text()
    assert support_table(load_registry()) in doc


# -- facts for the analysis (receive_window, reno_backoff) -------------------------------------
def test_every_implementation_says_its_receive_window() -> None:
    """The closed-form ceiling needs each stack's window (or why it has none): a stack added
    without one would be NA with "no window known" in every path campaign."""
    from interop_runner.config.implementations import load_registry

    registry = load_registry()
    assert {n for n, m in registry.items() if m.receive_window is None} == set()
    assert registry["quic-go"].receive_window.size == 6 << 20  # type: ignore[union-attr]
    assert registry["aioquic"].receive_window.unbounded  # type: ignore[union-attr]
    assert registry["quic-go"].reno_backoff.keeps == 0.7  # type: ignore[union-attr]
    assert registry["quiche"].reno_backoff is None


@pytest.mark.parametrize("written, message", [
    ({"size": 16777216, "source": "x"}, "16777216 has no unit: give one"),
    ({"size": 16.0, "source": "x"}, "16.0 has no unit: give one"),
    ({"size": "16MiB", "unbounded": True, "source": "x"}, "exactly one of"),
    ({"source": "x"}, "exactly one of"),
    ({"size": "16MiB"}, "say where the window was read"),
    ({"size": "0MiB", "source": "x"}, "larger than 0"),
])
def test_a_receive_window_is_refused_unless_it_is_one_thing_with_its_unit(
        written: dict[str, object], message: str) -> None:
    from interop_runner.config.implementations import ReceiveWindow

    with pytest.raises(ValueError, match=message):
        ReceiveWindow.model_validate(written)


@pytest.mark.parametrize("keeps", [0, 1, 1.5, -0.2])
def test_a_reno_backoff_keeps_a_share(keeps: float) -> None:
    from interop_runner.config.implementations import RenoBackoff

    with pytest.raises(ValueError):
        RenoBackoff.model_validate({"keeps": keeps, "source": "x"})


def test_docs_workload_table_matches_meta_files():
    from interop_runner.config.implementations import workload_table

    doc = (IMPLEMENTATIONS_DIR.parent / "docs" / "implementations.md").read_text()
    assert workload_table(load_registry()) in doc, \
        "docs/implementations.md: the workload table is stale (config.implementations." \
        "workload_table)"
