"""Pure parts of the local testbed's modules (no root, no command run): link checks on
``ip -j`` output, the status table, sshd and containerd configuration, mount tables, argv
flags and the known_hosts file."""

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
    scratch,
    sshd,
)
from interop_runner.testbed.local.host import Host
from interop_runner.testbed.local.layout import DATA, MANAGEMENT, Layout, endpoint
from interop_runner.testbed.local.status import NodeStatus, TestbedStatus

SERVER, CLIENT = DEFAULT_LAYOUT.nodes


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
               "qir-mg-c": veth("qir-mg-c", 11, 2, "198.18.0.5/30")},
        "qir-server": {"lo": lo, "mgmt0": veth("mgmt0", 2, 10, "198.18.0.2/30"),
                       "data0": veth("data0", 3, 3, "198.19.0.1/24")},
        "qir-client": {"lo": lo, "mgmt0": veth("mgmt0", 2, 11, "198.18.0.6/30"),
                       "data0": veth("data0", 3, 3, "198.19.0.2/24")},
    })


def test_link_checks_follow_the_layout() -> None:
    seen = healthy_links()
    for node in ("server", "client"):
        assert seen.links_ok(DEFAULT_LAYOUT, node, MANAGEMENT)
        assert seen.links_ok(DEFAULT_LAYOUT, node, DATA)
    assert seen.lo_up(SERVER)
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
        engine=engines.EngineStatus(engines.RUNNING, 43, ""))
    fields.update(changes)
    return NodeStatus(**fields)


def test_status_problems_and_table() -> None:
    good = TestbedStatus({"client": node_status()}, True, Path("/run/qir-testbed"))
    assert good.healthy and good.problems() == []
    assert good.render().splitlines() == [
        "local testbed: healthy (keys in /run/qir-testbed: ok)",
        "  node    namespace   netns  lo  mgmt           data           sshd    ssh  docker",
        "  client  qir-client  ok     ok  ok 198.18.0.6  ok 198.19.0.2  pid 42  ok   pid 43"]
    bad = TestbedStatus({"client": node_status(
        data_link_up=False, sshd_running=False,
        engine=engines.EngineStatus(engines.NOT_RUNNING, None, "dockerd not running"))},
        False, Path("/run/qir-testbed"))
    assert bad.problems() == ["keys missing in /run/qir-testbed",
                              "client: data link (data0 198.19.0.2) not up",
                              "client: sshd not running",
                              "client: docker engine not running (dockerd not running)"]
    assert "pid 42?" in bad.render() and "NOT healthy" in bad.render()
    without = TestbedStatus({"client": node_status(
        engine=engines.EngineStatus(engines.UNAVAILABLE, None, "dockerd not installed"))},
        True, Path("/run/qir-testbed"))
    assert without.healthy
    assert without.render().splitlines()[-1] == "  containers: unavailable (dockerd not installed)"


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
