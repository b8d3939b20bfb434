"""Implementations as container images on the real namespace testbed (each node's own engine).

A QIR-style image (quic-go-qir: QIR's endpoint layout with its own run_endpoint.sh, QIR's
route-changing /setup.sh and the wait for the simulator) downloads from a native server and
serves a native client with verified hashes; the nodes' routes, offloads and sysctls are the
same afterwards; no container, cgroup or process is left.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from interop_runner.config.loader import load_testbed
from interop_runner.remote.docker_engine import LABEL_WORKDIR, Engine
from interop_runner.remote.executor import LocalExecutor

from .conftest import TESTBED_FILE, wait_until
from .test_campaign import assert_nodes_clean, campaign, execute

SIZE = 10 * 2**20
NAMESPACES = ("qir-server", "qir-client")


def node_network_state() -> dict[str, str]:
    """What an image's set-up script would change, per node: routes, links and addresses,
    offloads of the data interface, and the namespace's network sysctls."""
    ex = LocalExecutor("t")
    state = {}
    for ns in NAMESPACES:
        def run(*argv: str) -> str:
            return ex.run(["ip", "netns", "exec", ns, *argv], timeout=30).stdout

        state[ns] = "\n".join([
            run("ip", "route", "show", "table", "all"), run("ip", "-6", "route", "show"),
            run("ip", "-o", "addr"), run("ip", "-o", "link"), run("ethtool", "-k", "data0"),
            run("sysctl", "net.ipv4.ip_forward", "net.ipv4.conf.all.rp_filter",
                "net.ipv6.conf.all.forwarding", "net.ipv4.conf.data0.rp_filter"),
        ])
    return state


def engines() -> list[Engine]:
    """The engines of server and client (the router has none: it runs no containers)."""
    testbed = load_testbed(TESTBED_FILE)
    return [Engine(name, LocalExecutor(name), node.docker_host)
            for name, node in testbed.endpoint_nodes()]


def our_containers() -> list[str]:
    """Containers of the testbed's node directories on their engines, running or not."""
    testbed = load_testbed(TESTBED_FILE)
    out = []
    for engine, (_, node) in zip(engines(), testbed.endpoint_nodes()):
        out += [c["Id"] for c in engine.labelled({LABEL_WORKDIR: node.workdir})]
    return out


def qir_cgroups() -> list[str]:
    return [str(p) for p in Path("/sys/fs/cgroup").glob("*/qir")] + \
        [str(p) for p in Path("/sys/fs/cgroup").glob("qir")]


@pytest.fixture(scope="module")
def image_campaign(tmp_path_factory, local_testbed):
    tmp = tmp_path_factory.mktemp("containers")
    # A testbed brought up just now may still run IPv6 duplicate address detection on its
    # links (addresses "tentative", their routes not yet there): the kernel's change, not an
    # image's. Take the state once it has settled.
    wait_until(lambda: "tentative" not in "".join(node_network_state().values()), timeout=30,
               what="IPv6 link-local addresses of both nodes out of duplicate address detection")
    before = node_network_state()
    cfg = campaign(tmp, f"""name: containers
file_size: {SIZE}B
repetitions: 1
port: 4450
monitors: [pidstat, perf, handshake]
timeouts: {{setup: 3000s, client: 120s}}
pairs:
  - {{server: quic-go, client: quic-go-qir}}
  - {{server: quic-go-qir, client: quic-go}}
  - {{server: quic-go-qir, client: quic-go-qir}}
""")
    result = execute(cfg, tmp)
    return result, before, local_testbed


def test_qir_image_downloads_from_and_serves_native_peers(image_campaign):
    result, _, _ = image_campaign
    by_pair = {(r.server.implementation, r.client.implementation): r for r in result.records}
    assert set(by_pair) == {("quic-go", "quic-go-qir"), ("quic-go-qir", "quic-go"),
                            ("quic-go-qir", "quic-go-qir")}
    for pair, rec in by_pair.items():
        assert rec.status == "ok", f"{pair}: {rec.status} {rec.reason}"
        assert rec.hash_ok and rec.bytes_received == SIZE
        assert rec.goodput_mbps and rec.goodput_mbps > 1
    # a native side has no container; an image side says which image and that its
    # simulator set-up was prevented
    rec = by_pair[("quic-go", "quic-go-qir")]
    assert rec.server.container is None
    assert rec.client.container and rec.client.container["network_setup"] == "prevented"
    assert rec.client.container["network"] == "host"
    assert by_pair[("quic-go-qir", "quic-go")].server.container["image"].startswith(
        "qir/quic-go-qir:")


def test_image_side_is_timed_and_accounted_on_its_node(image_campaign):
    result, _, _ = image_campaign
    rec = next(r for r in result.records if r.client.implementation == "quic-go-qir"
               and r.server.implementation == "quic-go")
    assert rec.start_ns and rec.end_ns and 0 < rec.duration_s < 120
    # every process the container ran, from its cgroup: a 10 MiB QUIC download costs CPU
    assert rec.client.cpu_user_s is not None and rec.client.cpu_system_s is not None
    assert rec.client.cpu_user_s + rec.client.cpu_system_s > 0.01
    side = result.directory / "quic-go_quic-go-qir/goodput/1/attempt-1/client"
    assert (side / "qir-network-setup.txt").read_text().strip() == "prevented"
    assert "network set-up (/setup.sh) was prevented" in (side / "client.stderr.log").read_text()
    assert (side / "pids.txt").read_text().split(), "perf's process filter recorded no PIDs"


def test_server_container_processes_are_monitored(image_campaign):
    result, _, _ = image_campaign
    side = result.directory / "quic-go-qir_quic-go/goodput/1/attempt-1/server"
    before = (side / "proc-before.txt").read_text().splitlines()
    assert len(before) >= 2, "no process of the server container in the CPU snapshot"
    assert any("(quic-go-server)" in line for line in before[1:])  # the harness, by PID
    assert (side / "pidstat.txt").exists()


def test_handshake_is_captured_on_an_image_servers_port(image_campaign):
    """The capture follows the pair's server port (443 for an image), not the campaign's."""
    result, _, _ = image_campaign
    rec = next(r for r in result.records if r.server.implementation == "quic-go-qir"
               and r.client.implementation == "quic-go")
    assert rec.handshake is not None
    assert rec.alpn in rec.handshake["alpn_offered"]


def test_versions_name_the_image(image_campaign):
    result, _, _ = image_campaign
    doc = json.loads((result.directory / "campaign.json").read_text())
    entry = doc["implementations"]["client:quic-go-qir"]
    assert "(image sha256:" in entry["version"], entry


def test_node_network_unchanged_and_nothing_left(image_campaign):
    _, before, testbed = image_campaign
    assert node_network_state() == before
    assert our_containers() == []
    assert qir_cgroups() == []
    assert_nodes_clean(testbed)


# -- nginx with HTTP/3 (Debian trixie's nginx in an image) ---------------------------------------
NGINX_CLIENTS = ("quic-go", "quiche", "ngtcp2", "quinn")


@pytest.fixture(scope="module")
def nginx_campaign(tmp_path_factory, local_testbed):
    tmp = tmp_path_factory.mktemp("nginx")
    pairs = "".join(f"  - {{server: nginx-h3, client: {c}}}\n" for c in NGINX_CLIENTS)
    cfg = campaign(tmp, f"""name: nginx
file_size: {SIZE}B
repetitions: 1
monitors: [handshake]
timeouts: {{setup: 3000s, client: 120s}}
pairs:
{pairs}  - {{server: quic-go, client: nginx-h3}}
""")
    return execute(cfg, tmp)


def test_nginx_serves_the_goodput_testcase_to_native_clients(nginx_campaign):
    by_client = {r.client.implementation: r for r in nginx_campaign.records
                 if r.server.implementation == "nginx-h3"}
    assert set(by_client) == set(NGINX_CLIENTS)
    for client, rec in by_client.items():
        assert rec.status == "ok", f"nginx-h3 -> {client}: {rec.status} {rec.reason}"
        assert rec.hash_ok and rec.bytes_received == SIZE and rec.alpn == "h3"
        assert rec.server.container and rec.server.container["image"].startswith("qir/nginx-h3:")
        # the handshake monitor saw nginx's side of it on the image's port 443
        assert rec.handshake is not None and "h3" in rec.handshake["alpn_offered"]


def test_curl_downloads_from_a_native_server(nginx_campaign):
    (rec,) = [r for r in nginx_campaign.records if r.client.implementation == "nginx-h3"]
    assert rec.status == "ok", f"{rec.status} {rec.reason}"
    assert rec.hash_ok and rec.bytes_received == SIZE and rec.alpn == "h3"
    assert rec.client.container and rec.client.container["network_setup"] == "prevented"


def test_nginx_campaign_leaves_nothing(nginx_campaign, local_testbed):
    assert our_containers() == [] and qir_cgroups() == []
    assert_nodes_clean(local_testbed)
