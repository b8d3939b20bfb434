"""Pure parts of the local testbed's modules (no root, no command run): link checks on
``ip -j`` output, route and forwarding checks, the status table, sshd and containerd
configuration, mount tables, argv flags and the known_hosts file."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from interop_runner.testbed.local import (
    DEFAULT_LAYOUT,
    engines,
    keys,
    links,
    processes,
    routes,
    scratch,
    sshd,
)
from interop_runner.testbed.local.host import Host
from interop_runner.testbed.local.layout import DATA, MANAGEMENT, PATH, Layout, endpoint
from interop_runner.testbed.local.status import NodeStatus, TestbedStatus

SERVER, CLIENT, ROUTER = DEFAULT_LAYOUT.nodes


def veth(ifname: str, index: int, peer: int, cidr: str | None, up: bool = True) -> Any:
    """One link as ``ip -j -d addr show`` prints it."""
    addr = [] if cidr is None else [{"family": "inet", "local": cidr.split("/")[0],
                                      "prefixlen": int(cidr.split("/")[1])}]
    return {"ifname": ifname, "ifindex": index, "link_index": peer,
            "flags": ["BROADCAST", "UP", "LOWER_UP"] if up else ["BROADCAST"],
            "linkinfo": {"info_kind": "veth"}, "addr_info": addr}


def healthy_links() -> links.SeenLinks:
    lo = {"ifname": "lo", "ifindex": 1, "flags": ["LOOPBACK", "UP", "LOWER_UP"]}
    return links.SeenLinks({
        None: {"qir-mg-s": veth("qir-mg-s", 10, 2, "198.18.0.1/30"),
               "qir-mg-c": veth("qir-mg-c", 11, 2, "198.18.0.5/30"),
               "qir-mg-r": veth("qir-mg-r", 12, 2, "198.18.0.9/30")},
        "qir-server": {"lo": lo, "mgmt0": veth("mgmt0", 2, 10, "198.18.0.2/30"),
                       "data0": veth("data0", 3, 3, "198.19.0.1/24"),
                       "path0": veth("path0", 4, 3, "198.19.1.1/24")},
        "qir-client": {"lo": lo, "mgmt0": veth("mgmt0", 2, 11, "198.18.0.6/30"),
                       "data0": veth("data0", 3, 3, "198.19.0.2/24"),
                       "path0": veth("path0", 4, 4, "198.19.2.1/24")},
        "qir-router": {"lo": lo, "mgmt0": veth("mgmt0", 2, 12, "198.18.0.10/30"),
                       "srv0": veth("srv0", 3, 4, "198.19.1.254/24"),
                       "cli0": veth("cli0", 4, 4, "198.19.2.254/24")},
    })


def test_link_checks_follow_the_layout() -> None:
    seen = healthy_links()
    for node in ("server", "client", "router"):
        assert seen.links_ok(DEFAULT_LAYOUT, node, MANAGEMENT)
        assert seen.links_ok(DEFAULT_LAYOUT, node, DATA)
        assert seen.links_ok(DEFAULT_LAYOUT, node, PATH)
    assert seen.lo_up(SERVER) and seen.lo_up(ROUTER)
    # A missing router end fails the path of the router and of the endpoint it pairs with,
    # not the other side's (nor the direct data link).
    del seen.by_ns["qir-router"]["cli0"]
    assert not seen.links_ok(DEFAULT_LAYOUT, "router", PATH)
    assert not seen.links_ok(DEFAULT_LAYOUT, "client", PATH)
    assert seen.links_ok(DEFAULT_LAYOUT, "server", PATH)
    assert seen.links_ok(DEFAULT_LAYOUT, "client", DATA)
    seen = healthy_links()
    # A wrong address on the server's data0 fails the server's data link, not the client's
    # (each node answers for its own ends).
    seen.by_ns["qir-server"]["data0"] = veth("data0", 3, 3, "198.19.0.99/24")
    assert not seen.links_ok(DEFAULT_LAYOUT, "server", DATA)
    assert seen.links_ok(DEFAULT_LAYOUT, "client", DATA)
    # A missing root end fails that node's management link only.
    del seen.by_ns[None]["qir-mg-c"]
    assert not seen.links_ok(DEFAULT_LAYOUT, "client", MANAGEMENT)
    assert seen.links_ok(DEFAULT_LAYOUT, "server", MANAGEMENT)


def test_paired_and_addressed() -> None:
    a, b = veth("a", 5, 6, "10.0.0.1/24"), veth("b", 6, 5, None)
    assert links.paired(a, b) and not links.paired(a, veth("c", 7, 5, None))
    assert not links.paired(a, None)
    assert links.addressed(a, "10.0.0.1/24") and not links.addressed(a, "10.0.0.2/24")
    assert not links.addressed(veth("a", 5, 6, "10.0.0.1/24", up=False), "10.0.0.1/24")
    assert links.v4_addresses(b) == set()


def node_status(**changes: Any) -> NodeStatus:
    fields: dict[str, Any] = dict(
        name="client", namespace="qir-client", mgmt_ip="198.18.0.6", data_ip="198.19.0.2",
        namespace_exists=True, lo_up=True, mgmt_link_up=True, data_link_up=True,
        sshd_pid=42, sshd_running=True, ssh_reachable=True,
        engine=engines.EngineStatus(engines.RUNNING, 43, ""), path_ips=("198.19.2.1",))
    fields.update(changes)
    return NodeStatus(**fields)


def router_status(**changes: Any) -> NodeStatus:
    fields: dict[str, Any] = dict(
        name="router", namespace="qir-router", mgmt_ip="198.18.0.10", data_ip=None,
        engine=None, path_ips=("198.19.1.254", "198.19.2.254"), sshd_pid=44)
    fields.update(changes)
    return node_status(**fields)


def test_status_problems_and_table() -> None:
    good = TestbedStatus({"client": node_status(), "router": router_status()}, True,
                         Path("/run/qir-testbed"))
    assert good.healthy and good.problems() == []
    assert good.render().splitlines() == [
        "local testbed: healthy (keys in /run/qir-testbed: ok)",
        "  node    namespace   netns  lo  mgmt            data           path"
        "                          routing  sshd    ssh  docker",
        "  client  qir-client  ok     ok  ok 198.18.0.6   ok 198.19.0.2  ok 198.19.2.1"
        "                 ok       pid 42  ok   pid 43",
        "  router  qir-router  ok     ok  ok 198.18.0.10  n/a            ok 198.19.1.254,"
        "198.19.2.254  ok       pid 44  ok   none"]
    bad = TestbedStatus({"client": node_status(
        data_link_up=False, sshd_running=False, path_link_up=False,
        routing=("route 198.19.1.0/24 via 198.19.2.254 dev path0 missing",),
        engine=engines.EngineStatus(engines.NOT_RUNNING, None, "dockerd not running"))},
        False, Path("/run/qir-testbed"))
    assert bad.problems() == ["keys missing in /run/qir-testbed",
                              "client: data link (data0 198.19.0.2) not up",
                              "client: path link (198.19.2.1) not up",
                              "client: route 198.19.1.0/24 via 198.19.2.254 dev path0 missing",
                              "client: sshd not running",
                              "client: docker engine not running (dockerd not running)"]
    assert "pid 42?" in bad.render() and "NOT healthy" in bad.render()
    without = TestbedStatus({"client": node_status(
        engine=engines.EngineStatus(engines.UNAVAILABLE, None, "dockerd not installed")),
        "router": router_status()}, True, Path("/run/qir-testbed"))
    assert without.healthy
    assert without.render().splitlines()[-1] == "  containers: unavailable (dockerd not installed)"
    # a router has no engine: that is not a problem, its forwarding is
    router = router_status(routing=("IPv4 forwarding off (net.ipv4.ip_forward)",))
    assert not router.healthy
    assert router.problems() == ["router: IPv4 forwarding off (net.ipv4.ip_forward)"]
    assert router.row()[7] == "--" and router.row()[-1] == "none"


ETHTOOL_K = """Features for {name}:
rx-checksumming: on
tx-checksumming: on
tcp-segmentation-offload: {tso}
\ttx-tcp-segmentation: {tso}
generic-segmentation-offload: {gso}
generic-receive-offload: {gro}
large-receive-offload: off [fixed]
"""


def healthy_routing() -> routes.SeenRouting:
    return routes.SeenRouting(
        routes={"qir-server": [{"dst": "198.19.1.0/24", "dev": "path0", "protocol": "kernel"},
                               {"dst": "198.19.2.0/24", "gateway": "198.19.1.254",
                                "dev": "path0", "flags": []}],
                "qir-client": [{"dst": "198.19.1.0/24", "gateway": "198.19.2.254",
                                "dev": "path0", "flags": []}]},
        forwarding={"qir-router": True},
        offloads_on={"qir-router": {"srv0": set(), "cli0": set()},
                     "qir-server": {"path0": set()}, "qir-client": {"path0": set()}})


def test_routing_problems_follow_the_layout() -> None:
    seen = healthy_routing()
    assert [routes.problems(DEFAULT_LAYOUT, seen, n) for n in DEFAULT_LAYOUT.nodes] == [[]] * 3
    seen.routes["qir-server"].pop()  # only the connected route is left
    seen.routes["qir-client"][0]["gateway"] = "198.19.2.99"  # a wrong gateway
    seen.forwarding["qir-router"] = False
    seen.offloads_on["qir-router"]["cli0"] = {"gso", "tso"}
    seen.offloads_on["qir-server"]["path0"] = {"tx-udp-segmentation"}
    assert routes.problems(DEFAULT_LAYOUT, seen, SERVER) == [
        "route 198.19.2.0/24 via 198.19.1.254 dev path0 missing",
        "offloads on at path0 (tx-udp-segmentation)"]
    assert routes.problems(DEFAULT_LAYOUT, seen, CLIENT) == [
        "route 198.19.1.0/24 via 198.19.2.254 dev path0 missing"]
    assert routes.problems(DEFAULT_LAYOUT, seen, ROUTER) == [
        "IPv4 forwarding off (net.ipv4.ip_forward)", "offloads on at cli0 (tso gso)"]
    # nothing seen (the namespace is missing): everything is a problem
    assert len(routes.problems(DEFAULT_LAYOUT, routes.SeenRouting(), ROUTER)) == 3


class FakeHost(Host):
    """Answers the commands of ``routes`` from canned output and records what it ran."""

    def __init__(self, answers: dict[str, str]) -> None:
        super().__init__()
        self.answers, self.ran = answers, []
        self.tool_paths = {"ip": "ip", "sysctl": "sysctl", "ethtool": "ethtool"}

    def run(self, argv: Any, **kwargs: Any) -> Any:
        from interop_runner.remote.executor import Result

        argv = list(argv)
        self.ran.append(argv)
        key = next((k for k in self.answers if k in " ".join(argv)), None)
        return Result("fake", tuple(argv), 0, self.answers.get(key, "") if key else "", "", 0.0)


def test_routing_observe_and_ensure_run_only_what_is_missing() -> None:
    """observe parses `ip -j route`, `ip -j netconf` and `ethtool -k`; ensure then runs the
    commands for what is missing, and nothing else."""
    host = FakeHost({
        "qir-server -j route show": '[{"dst": "198.19.2.0/24", "gateway": "198.19.1.254", '
                                    '"dev": "path0"}]',
        "qir-client -j route show": "[]",
        "netconf show": '[{"family": "inet", "interface": "all", "forwarding": false}]',
        "qir-router sh -c": ETHTOOL_K.format(name="srv0", tso="off", gso="off", gro="off")
                      + ETHTOOL_K.format(name="cli0", tso="on", gso="on", gro="off"),
        "qir-server sh -c": ETHTOOL_K.format(name="path0", tso="off", gso="on", gro="on"),
        "qir-client sh -c": ETHTOOL_K.format(name="path0", tso="off", gso="on", gro="on"),
    })
    seen = routes.observe(host, DEFAULT_LAYOUT, {n.name: True for n in DEFAULT_LAYOUT.nodes})
    assert seen.forwarding == {"qir-router": False}
    assert seen.offloads_on == {"qir-router": {"srv0": set(), "cli0": {"tso", "gso"}},
                                "qir-server": {"path0": set()}, "qir-client": {"path0": set()}}
    host.ran.clear()
    routes.ensure(host, DEFAULT_LAYOUT)
    changes = [argv for argv in host.ran if "show" not in argv and "sh" not in argv]
    assert changes == [
        ["ip", "-n", "qir-client", "route", "replace", "198.19.1.0/24", "via", "198.19.2.254",
         "dev", "path0"],
        ["ip", "netns", "exec", "qir-router", "sysctl", "-qw", "net.ipv4.ip_forward=1"],
        ["ip", "netns", "exec", "qir-router", "ethtool", "-K", "cli0", "tso", "off", "gso",
         "off"],
    ]
    # a namespace that does not exist is not asked
    host.ran.clear()
    routes.observe(host, DEFAULT_LAYOUT, {"server": True, "client": False, "router": False})
    assert host.ran[0] == ["ip", "-n", "qir-server", "-j", "route", "show"]
    assert [argv[3] for argv in host.ran[1:]] == ["qir-server"]  # its path0's offloads


def test_sshd_config(monkeypatch: pytest.MonkeyPatch) -> None:
    host = Host()
    host.sshd_version = (9, 2)  # known: `sshd -V` is not run
    monkeypatch.setattr(host, "run", None)
    text = sshd.sshd_config_text(host, DEFAULT_LAYOUT, SERVER).splitlines()
    assert text[1:3] == ["ListenAddress 198.18.0.2", "Port 22"]
    assert "AuthorizedKeysFile /run/qir-testbed/authorized_keys" in text
    assert "PidFile /run/qir-testbed/server/sshd.pid" in text
    assert "PerSourcePenalties no" not in text
    host.sshd_version = (9, 8)
    assert sshd.sshd_config_text(host, DEFAULT_LAYOUT, SERVER).endswith("PerSourcePenalties no\n")


def test_cgroup_mount_script() -> None:
    mounts = ("sysfs /sys sysfs rw,nosuid 0 0\n"
              "tmpfs /sys/fs/cgroup tmpfs ro,nosuid,nodev,mode=755 0 0\n"
              "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,nosuid,nsdelegate 0 0\n"
              "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,relatime,cpu,cpuacct 0 0\n"
              "cgroup /sys/fs/cgroup/systemd cgroup rw,xattr,name=systemd 0 0\n")
    assert sshd.cgroup_mount_script(mounts).split("; ") == [
        "mkdir -p /sys/fs/cgroup", "mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup",
        "mkdir -p /sys/fs/cgroup/unified",
        "mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup/unified",
        "mkdir -p /sys/fs/cgroup/cpu,cpuacct",
        "mount -t cgroup -o cpu,cpuacct cgroup /sys/fs/cgroup/cpu,cpuacct",
        "mkdir -p /sys/fs/cgroup/systemd",
        "mount -t cgroup -o xattr,name=systemd cgroup /sys/fs/cgroup/systemd", ""]


def test_tmpfs_at() -> None:
    table = ("tmpfs /dev/shm tmpfs rw,nosuid 0 0\n"
             "qir-server /dev/shm/qir-server tmpfs rw,relatime,size=100k,huge=always 0 0\n")
    assert scratch.tmpfs_at("/dev/shm/qir-server", table) == "rw,relatime,size=100k,huge=always"
    assert scratch.tmpfs_at("/dev/shm/qir-client", table) is None


def test_flag_value() -> None:
    argv = ["dockerd", "--exec-root", "/run/x", "--data-root=/var/y", "--flag"]
    assert processes.flag_value(argv, "--exec-root") == "/run/x"
    assert processes.flag_value(argv, "--data-root") == "/var/y"
    assert processes.flag_value(argv, "--flag") is None
    assert processes.flag_value(argv, "--config") is None


def test_known_hosts_and_authorized_keys(tmp_path: Path) -> None:
    nodes = tuple(endpoint(n, i) for i, n in enumerate(("server", "client")))
    layout = Layout(nodes=tuple(replace(n, state_dir=tmp_path / n.name) for n in nodes),
                    links=(), state_dir=tmp_path)
    for i, node in enumerate(layout.nodes):
        node.state_dir.mkdir()
        node.host_pubkey.write_text(f"ssh-ed25519 KEY{i} qir-testbed-{node.name}\n")
    layout.mgmt_pubkey.write_text("ssh-ed25519 MGMT somebody@somewhere\n")
    assert keys.expected_known_hosts(layout) == ("198.18.0.2 ssh-ed25519 KEY0\n"
                                                 "198.18.0.6 ssh-ed25519 KEY1\n")
    assert keys.expected_authorized_keys(layout) == "ssh-ed25519 MGMT qir-testbed-management\n"
    assert not keys.keys_present(layout) and not keys.keys_current(layout)


def test_containerd_config() -> None:
    text = engines.containerd_config_text(DEFAULT_LAYOUT.engine(CLIENT))
    assert 'root = "/var/lib/qir/docker/client/containerd/daemon"' in text
    assert 'address = "/run/qir/docker/client/exec/containerd/containerd.sock"' in text
