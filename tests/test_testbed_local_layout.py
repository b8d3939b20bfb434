"""The local testbed's layout (pure: no root, nothing runs): names, addresses, paths and the
veth links as data, checked against the static testbed file and the commands ``up`` runs."""

from __future__ import annotations

from pathlib import Path

import yaml

from interop_runner.testbed.local import layout
from interop_runner.testbed.local.layout import (
    DATA,
    DEFAULT_LAYOUT,
    MANAGEMENT,
    Layout,
    LinkEnd,
    NodeSpec,
    VethLink,
    endpoint,
    management_link,
)

SERVER, CLIENT = DEFAULT_LAYOUT.nodes


def test_addresses_come_from_the_benchmarking_range() -> None:
    assert layout.management_addresses(0) == ("198.18.0.1", "198.18.0.2")
    assert layout.management_addresses(1) == ("198.18.0.5", "198.18.0.6")
    assert layout.management_addresses(2) == ("198.18.0.9", "198.18.0.10")
    assert [layout.data_address(i) for i in range(3)] == ["198.19.0.1", "198.19.0.2",
                                                          "198.19.0.3"]


def test_default_nodes() -> None:
    assert (SERVER.name, SERVER.role, SERVER.namespace) == ("server", "server", "qir-server")
    assert (SERVER.host_if, SERVER.host_cidr, SERVER.mgmt_cidr, SERVER.data_cidr) == (
        "qir-mg-s", "198.18.0.1/30", "198.18.0.2/30", "198.19.0.1/24")
    assert (CLIENT.host_if, CLIENT.host_cidr, CLIENT.mgmt_cidr, CLIENT.data_cidr) == (
        "qir-mg-c", "198.18.0.5/30", "198.18.0.6/30", "198.19.0.2/24")
    assert (CLIENT.workdir, CLIENT.tmpdir) == ("/var/tmp/qir/client", "/dev/shm/qir-client")
    assert CLIENT.state_dir == Path("/run/qir-testbed/client")
    assert CLIENT.pid_file == Path("/run/qir-testbed/client/sshd.pid")
    assert SERVER.host_pubkey == Path("/run/qir-testbed/server/ssh_host_ed25519_key.pub")
    assert DEFAULT_LAYOUT.node("client") is CLIENT


def test_testbed_file_describes_the_default_layout() -> None:
    data = yaml.safe_load(layout.TESTBED_FILE.read_text())
    assert data["name"] == layout.TESTBED_NAME
    for node in DEFAULT_LAYOUT.nodes:
        entry = data["nodes"][node.name]
        assert entry["ssh"]["host"] == node.mgmt_ip
        assert entry["ssh"]["key"] == str(DEFAULT_LAYOUT.mgmt_key)
        assert entry["ssh"]["known_hosts"] == str(DEFAULT_LAYOUT.known_hosts)
        assert (entry["interface"], entry["ip"]) == (layout.DATA_IF, node.data_ip)
        assert (entry["workdir"], entry["tmpdir"]) == (node.workdir, node.tmpdir)
        assert entry["docker_host"] == DEFAULT_LAYOUT.docker_host(node.name)


def test_links_are_the_commands_up_runs() -> None:
    """The argv of `ip` creating each pair: the management pairs from the root namespace,
    the data pair with both ends moved into the nodes."""
    assert [link.add_args() for link in DEFAULT_LAYOUT.links] == [
        ["link", "add", "qir-mg-s", "type", "veth", "peer", "name", "mgmt0",
         "netns", "qir-server"],
        ["link", "add", "qir-mg-c", "type", "veth", "peer", "name", "mgmt0",
         "netns", "qir-client"],
        ["link", "add", "data0", "netns", "qir-server", "type", "veth", "peer", "name", "data0",
         "netns", "qir-client"],
    ]
    assert DEFAULT_LAYOUT.root_links == ("qir-mg-s", "qir-mg-c")
    assert DEFAULT_LAYOUT.namespaces == ("qir-server", "qir-client")
    assert [x.purpose for x in DEFAULT_LAYOUT.links_of("server", MANAGEMENT)] == [MANAGEMENT]
    assert DEFAULT_LAYOUT.links_of("client", DATA) == (DEFAULT_LAYOUT.links[2],)


def test_interfaces_in_the_order_up_sets_them_up() -> None:
    assert DEFAULT_LAYOUT.interfaces(SERVER) == [
        (None, "qir-mg-s", "198.18.0.1/30"), ("qir-server", "lo", None),
        ("qir-server", "mgmt0", "198.18.0.2/30"), ("qir-server", "data0", "198.19.0.1/24")]


def test_engine_paths() -> None:
    engine = DEFAULT_LAYOUT.engine(CLIENT)
    assert engine.netns == Path("/run/netns/qir-client")
    assert engine.socket == Path("/run/qir/docker/client.sock")
    assert engine.host == DEFAULT_LAYOUT.docker_host("client") == \
        "unix:///run/qir/docker/client.sock"
    assert engine.exec_root == Path("/run/qir/docker/client/exec")
    assert engine.data_root == Path("/var/lib/qir/docker/client")
    assert engine.log_file == Path("/run/qir-testbed/client/dockerd.log")
    assert (engine.namespace, engine.cgroup_parent) == ("qir-client", "/qir-docker-client")


def test_make_layout_moves_only_the_purged_directories(tmp_path: Path) -> None:
    moved = layout.make_layout(work_root=tmp_path / "qir", scratch_root=tmp_path,
                               docker_data_root=tmp_path / "docker")
    assert moved.nodes[0].workdir == str(tmp_path / "qir" / "server")
    assert moved.nodes[1].tmpdir == str(tmp_path / "qir-client")
    assert moved.engine(moved.nodes[0]).data_root == tmp_path / "docker" / "server"
    assert moved.links == DEFAULT_LAYOUT.links and moved.state_dir == DEFAULT_LAYOUT.state_dir


def test_a_third_node_is_data() -> None:
    """A node between server and client needs no new code: its node and links are data (the
    names and addresses here are made up)."""
    server, client, middle = (endpoint(n, i) for i, n in enumerate(("server", "client",
                                                                     "middle")))

    def toward(node: NodeSpec, ifname: str, cidr: str, end: LinkEnd) -> VethLink:
        return VethLink(DATA, LinkEnd(node.name, node.namespace, ifname, cidr), end)

    to_server = toward(middle, "eth-s", "198.19.1.254/24",
                       LinkEnd("server", server.namespace, "data0", "198.19.1.1/24"))
    to_client = toward(middle, "eth-c", "198.19.2.254/24",
                       LinkEnd("client", client.namespace, "data0", "198.19.2.1/24"))
    three = Layout(nodes=(server, client, middle),
                   links=(*(management_link(n) for n in (server, client, middle)),
                          to_server, to_client))
    assert three.namespaces == ("qir-server", "qir-client", "qir-middle")
    assert three.root_links == ("qir-mg-s", "qir-mg-c", "qir-mg-m")
    assert three.links_of("middle", DATA) == (to_server, to_client)
    assert three.links_of("server", DATA) == (to_server,)
    assert three.interfaces(middle) == [
        (None, "qir-mg-m", "198.18.0.9/30"), ("qir-middle", "lo", None),
        ("qir-middle", "mgmt0", "198.18.0.10/30"), ("qir-middle", "eth-s", "198.19.1.254/24"),
        ("qir-middle", "eth-c", "198.19.2.254/24")]
    assert to_client.add_args() == ["link", "add", "eth-c", "netns", "qir-middle", "type",
                                    "veth", "peer", "name", "data0", "netns", "qir-client"]
