"""The local testbed's layout (pure: no root, nothing runs): names, addresses, paths, the
veth links, routes and the router's forwarding as data, checked against the static testbed
file and the commands ``up`` runs."""

from __future__ import annotations

from pathlib import Path

import yaml

from interop_runner.config.loader import load_testbed
from interop_runner.testbed.local import layout
from interop_runner.testbed.local.layout import (
    DATA,
    DEFAULT_LAYOUT,
    MANAGEMENT,
    PATH,
    Forwarding,
    Layout,
    LinkEnd,
    NodeSpec,
    Route,
    VethLink,
    endpoint,
    management_link,
)

SERVER, CLIENT, ROUTER = DEFAULT_LAYOUT.nodes


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
    assert set(data["nodes"]) == {n.name for n in DEFAULT_LAYOUT.nodes}
    for node in DEFAULT_LAYOUT.nodes:
        entry = data["nodes"][node.name]
        assert entry["role"] == node.role
        assert entry["ssh"]["host"] == node.mgmt_ip
        assert entry["ssh"]["key"] == str(DEFAULT_LAYOUT.mgmt_key)
        assert entry["ssh"]["known_hosts"] == str(DEFAULT_LAYOUT.known_hosts)
        assert (entry["workdir"], entry["tmpdir"]) == (node.workdir, node.tmpdir)
        if node.engine:
            assert entry["docker_host"] == DEFAULT_LAYOUT.docker_host(node.name)
        else:
            assert "docker_host" not in entry
        if node.data_ip is not None:  # an endpoint: the direct link, and its path end
            assert (entry["interface"], entry["ip"]) == (layout.DATA_IF, node.data_ip)
            assert entry["via_router"] == {"interface": layout.PATH_IF,
                                           "ip": DEFAULT_LAYOUT.addresses(node.name, PATH)[0]}
    # the router: `interface`/`ip` towards the client, server_interface towards the server
    router = data["nodes"]["router"]
    assert (router["interface"], router["ip"], router["server_interface"]) == (
        layout.ROUTER_CLIENT_IF, layout.ROUTER_CLIENT_IP, layout.ROUTER_SERVER_IF)
    assert load_testbed(layout.TESTBED_FILE).router() is not None  # and it validates


def test_links_are_the_commands_up_runs() -> None:
    """The argv of `ip` creating each pair: the management pairs from the root namespace,
    the data pair and the path through the router with both ends moved into the nodes."""
    assert [link.add_args() for link in DEFAULT_LAYOUT.links] == [
        ["link", "add", "qir-mg-s", "type", "veth", "peer", "name", "mgmt0",
         "netns", "qir-server"],
        ["link", "add", "qir-mg-c", "type", "veth", "peer", "name", "mgmt0",
         "netns", "qir-client"],
        ["link", "add", "qir-mg-r", "type", "veth", "peer", "name", "mgmt0",
         "netns", "qir-router"],
        ["link", "add", "data0", "netns", "qir-server", "type", "veth", "peer", "name", "data0",
         "netns", "qir-client"],
        ["link", "add", "path0", "netns", "qir-server", "type", "veth", "peer", "name", "srv0",
         "netns", "qir-router"],
        ["link", "add", "cli0", "netns", "qir-router", "type", "veth", "peer", "name", "path0",
         "netns", "qir-client"],
    ]
    assert DEFAULT_LAYOUT.root_links == ("qir-mg-s", "qir-mg-c", "qir-mg-r")
    assert DEFAULT_LAYOUT.namespaces == ("qir-server", "qir-client", "qir-router")
    assert [x.purpose for x in DEFAULT_LAYOUT.links_of("server", MANAGEMENT)] == [MANAGEMENT]
    # the direct data link stays as it was: data0 <-> data0, 198.19.0.1 / .2
    assert DEFAULT_LAYOUT.links_of("client", DATA) == (DEFAULT_LAYOUT.links[3],)
    assert [(e.ifname, e.cidr) for e in DEFAULT_LAYOUT.links[3].ends] == [
        ("data0", "198.19.0.1/24"), ("data0", "198.19.0.2/24")]
    assert DEFAULT_LAYOUT.links_of("router", DATA) == ()


def test_interfaces_in_the_order_up_sets_them_up() -> None:
    assert DEFAULT_LAYOUT.interfaces(SERVER) == [
        (None, "qir-mg-s", "198.18.0.1/30"), ("qir-server", "lo", None),
        ("qir-server", "mgmt0", "198.18.0.2/30"), ("qir-server", "data0", "198.19.0.1/24"),
        ("qir-server", "path0", "198.19.1.1/24")]
    assert DEFAULT_LAYOUT.interfaces(ROUTER) == [
        (None, "qir-mg-r", "198.18.0.9/30"), ("qir-router", "lo", None),
        ("qir-router", "mgmt0", "198.18.0.10/30"), ("qir-router", "srv0", "198.19.1.254/24"),
        ("qir-router", "cli0", "198.19.2.254/24")]


def test_router_node() -> None:
    """The third node: management /30 index 2, its own sshd and directories, no data link
    and no Docker Engine."""
    assert (ROUTER.name, ROUTER.role, ROUTER.namespace, ROUTER.host_if) == (
        "router", "router", "qir-router", "qir-mg-r")
    assert (ROUTER.host_cidr, ROUTER.mgmt_cidr) == ("198.18.0.9/30", "198.18.0.10/30")
    assert (ROUTER.workdir, ROUTER.tmpdir) == ("/var/tmp/qir/router", "/dev/shm/qir-router")
    assert ROUTER.sshd_config == Path("/run/qir-testbed/router/sshd_config")
    assert ROUTER.data_ip is None and not ROUTER.engine
    assert SERVER.engine and CLIENT.engine
    assert DEFAULT_LAYOUT.engine_nodes == (SERVER, CLIENT)
    assert DEFAULT_LAYOUT.addresses("router", PATH) == ("198.19.1.254", "198.19.2.254")
    assert DEFAULT_LAYOUT.addresses("client", PATH) == ("198.19.2.1",)
    assert DEFAULT_LAYOUT.addresses("router", DATA) == ()


def test_routes_and_forwarding_are_data() -> None:
    """Each endpoint reaches the other side of the router through its path0; the router
    forwards with the offloads off on both its interfaces; the endpoints segment before
    their path0 (the virtual wire carries MTU-sized packets, as a real one)."""
    assert DEFAULT_LAYOUT.routes == (
        Route("server", "198.19.2.0/24", "198.19.1.254", "path0"),
        Route("client", "198.19.1.0/24", "198.19.2.254", "path0"))
    assert DEFAULT_LAYOUT.routes_of("server")[0].replace_args() == [
        "route", "replace", "198.19.2.0/24", "via", "198.19.1.254", "dev", "path0"]
    assert str(DEFAULT_LAYOUT.routes_of("client")[0]) == "198.19.1.0/24 via 198.19.2.254 dev path0"
    assert DEFAULT_LAYOUT.routes_of("router") == ()
    assert DEFAULT_LAYOUT.forwarding == (
        Forwarding("router", ("srv0", "cli0"), ("tso", "gso", "gro", "tx-udp-segmentation")),
        Forwarding("server", ("path0",), ("tso", "tx-udp-segmentation"), forward=False),
        Forwarding("client", ("path0",), ("tso", "tx-udp-segmentation"), forward=False))
    assert DEFAULT_LAYOUT.forwarding_of("router") is DEFAULT_LAYOUT.forwarding[0]
    assert not DEFAULT_LAYOUT.forwarding_of("server").forward
    # every gateway is the router's address on the link the route leaves through
    for route in DEFAULT_LAYOUT.routes:
        (link,) = [x for x in DEFAULT_LAYOUT.links_of(route.node, PATH)]
        ends = {e.owner: e for e in link.ends}
        assert ends[route.node].ifname == route.dev
        assert ends["router"].cidr.split("/")[0] == route.via


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
    assert moved.nodes[2].workdir == str(tmp_path / "qir" / "router")
    assert moved.engine(moved.nodes[0]).data_root == tmp_path / "docker" / "server"
    assert moved.links == DEFAULT_LAYOUT.links and moved.state_dir == DEFAULT_LAYOUT.state_dir
    assert (moved.routes, moved.forwarding) == (DEFAULT_LAYOUT.routes, DEFAULT_LAYOUT.forwarding)


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
