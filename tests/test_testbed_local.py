"""Integration tests of the embedded local testbed: real namespaces, veths and sshd.

The module brings the testbed up once (module fixture), exercises it over SSH exactly as the
runner does, breaks it in several ways and checks that ``up()`` repairs it, and finally checks
that ``down()`` leaves nothing behind. The testbed is down when the module ends.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from interop_runner.errors import ConnectError, TestbedError
from interop_runner.remote.executor import LocalExecutor
from interop_runner.remote.ssh import SSHExecutor, SSHTarget
from interop_runner.testbed import local
from interop_runner.testbed.local import (
    CLIENT,
    NODES,
    ROUTER,
    SERVER,
    LocalTestbed,
    NodeSpec,
    engine_start,
    engine_stop,
    engines,
    host,
    keys,
    links,
    processes,
    routes,
    scratch,
    sshd,
)
from interop_runner.testbed.local import DEFAULT_LAYOUT as LAYOUT

# The module brings the shared namespace testbed up and down itself (its own fixture, not
# local_testbed): not for `pytest -m "not testbed"`, which must not touch it.
pytestmark = pytest.mark.testbed

if os.geteuid() != 0:
    pytest.skip("local testbed tests need root (network namespaces, sshd)",
                allow_module_level=True)
_missing = [name for name, _pkg in local.REQUIRED_TOOLS if local.find_tool(name) is None]
if _missing:
    pytest.skip(f"local testbed tests need {', '.join(_missing)} "
                "(openssh-server, iproute2, openssh-client)", allow_module_level=True)

LOCAL = LocalExecutor("test")
Connect = Callable[..., SSHExecutor]


@pytest.fixture(scope="module")
def testbed() -> Iterator[local.TestbedStatus]:
    """The testbed, up for the whole module; torn down at its end.

    If it was already up when the module started (another module's session fixture uses it),
    it is brought up again instead, so later tests in the session still find it.
    """
    was_up = local.status().healthy
    status = local.up()
    yield status
    if was_up:
        local.up()
    else:
        local.down()


@pytest.fixture
def connect(testbed: local.TestbedStatus) -> Iterator[Connect]:
    """Open SSH executors to nodes (closed after the test)."""
    opened: list[SSHExecutor] = []

    def _connect(node: NodeSpec, known_hosts: str | None = None,
                 key: str | None = None) -> SSHExecutor:
        target = SSHTarget(node.mgmt_ip, local.SSH_PORT, local.SSH_USER,
                           key or str(LAYOUT.mgmt_key), known_hosts or str(LAYOUT.known_hosts),
                           connect_timeout=5.0)
        ex = SSHExecutor(node.name, target)
        opened.append(ex)
        return ex

    yield _connect
    for ex in opened:
        ex.close()


def _ping_argv(target: str) -> list[str]:
    """One ICMP echo with 1 s timeout: iputils ping if installed, else perl's Net::Ping."""
    if shutil.which("ping"):
        return ["ping", "-n", "-c1", "-W1", target]
    if LOCAL.run(["perl", "-MNet::Ping", "-e", "1"], timeout=10, check=False).ok:
        return ["perl", "-MNet::Ping", "-e",
                'exit(Net::Ping->new("icmp", 1)->ping($ARGV[0]) ? 0 : 1)', target]
    pytest.skip("neither ping nor perl Net::Ping available for an ICMP check")


def _our_sshd_pids() -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            comm = Path(f"/proc/{entry}/comm").read_text().strip()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if comm == "sshd" and str(LAYOUT.state_dir).encode() in cmdline:
            pids.append(int(entry))
    return pids


def _wait_dead(pid: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while processes.pid_alive(pid):
        assert time.monotonic() < deadline, f"pid {pid} did not die"
        time.sleep(0.01)  # poll interval (bounded by the deadline above)


# --------------------------------------------------------------------------------------------
def test_refuses_without_root_or_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(TestbedError) as exc:
        local.up()
    assert str(exc.value) == "local testbed: must run as root"
    monkeypatch.undo()

    monkeypatch.setattr(shutil, "which", lambda *a, **k: None)
    monkeypatch.setattr(host, "SBIN_DIRS", ())
    with pytest.raises(TestbedError) as exc:
        local.up()
    assert str(exc.value) == ("local testbed: missing tool 'sshd' "
                              "(install openssh-server, see pos_scripts/install.sh)")
    monkeypatch.undo()

    real = host.find_tool
    monkeypatch.setattr(host, "find_tool", lambda n: None if n == "ssh-keygen" else real(n))
    with pytest.raises(TestbedError) as exc:
        local.up()
    assert str(exc.value) == ("local testbed: missing tool 'ssh-keygen' "
                              "(install openssh-client, see pos_scripts/install.sh)")


def test_up_is_healthy(testbed: local.TestbedStatus) -> None:
    st = local.status()
    assert st.healthy, st.render()
    assert st.problems() == []
    for node in NODES:
        ns = st.nodes[node.name]
        assert (ns.namespace_exists, ns.lo_up, ns.mgmt_link_up, ns.data_link_up,
                ns.path_link_up, ns.sshd_running, ns.ssh_reachable) == (True,) * 7
        assert ns.routing == ()
        assert ns.sshd_pid == int(node.pid_file.read_text())
    assert st.nodes["router"].engine is None  # the router has no engine, and is healthy
    text = st.render()
    assert text.splitlines()[0].startswith("local testbed: healthy")
    assert "qir-server" in text and "qir-client" in text and "qir-router" in text

    # State files: modes for StrictModes, known_hosts from the generated host keys.
    assert LAYOUT.state_dir.stat().st_mode & 0o777 == 0o700
    for path in (LAYOUT.mgmt_key, LAYOUT.authorized_keys, LAYOUT.known_hosts,
                 SERVER.host_key, CLIENT.sshd_config):
        assert path.stat().st_mode & 0o777 == 0o600, path
    expected = [f"{n.mgmt_ip} {' '.join(n.host_pubkey.read_text().split()[:2])}" for n in NODES]
    assert LAYOUT.known_hosts.read_text().splitlines() == expected
    assert expected[0].startswith("198.18.0.2 ssh-ed25519 AAAA")
    assert (LAYOUT.authorized_keys.read_text().split()[:2]
            == LAYOUT.mgmt_pubkey.read_text().split()[:2])
    conf = SERVER.sshd_config.read_text().splitlines()
    for line in ("ListenAddress 198.18.0.2", "PasswordAuthentication no", "UsePAM no",
                 f"AuthorizedKeysFile {LAYOUT.authorized_keys}", "UseDNS no",
                 "PermitRootLogin prohibit-password", "Subsystem sftp internal-sftp"):
        assert line in conf


def test_testbed_file_matches_constants() -> None:
    yaml = pytest.importorskip("yaml")
    data = yaml.safe_load(local.TESTBED_FILE.read_text())
    assert data["name"] == local.TESTBED_NAME and data["local"] is True
    assert set(data["nodes"]) == {node.name for node in NODES}
    for node in NODES:
        entry = data["nodes"][node.name]
        assert entry["role"] == node.role
        assert entry["ssh"] == {"host": node.mgmt_ip, "port": 22, "user": "root",
                                "key": str(LAYOUT.mgmt_key),
                                "known_hosts": str(LAYOUT.known_hosts)}
        assert (entry["workdir"], entry["tmpdir"]) == (node.workdir, node.tmpdir)
        if node.engine:  # an endpoint (the router's interfaces: test_testbed_local_layout)
            assert (entry["interface"], entry["ip"]) == (local.DATA_IF, node.data_ip)
            assert entry["docker_host"] == local.docker_host(node.name)


@pytest.mark.parametrize("node", NODES, ids=lambda n: n.name)
def test_ssh_runs_in_node_namespace(connect: Connect, node: NodeSpec) -> None:
    ex = connect(node)
    own = [(ifname, cidr) for ns, ifname, cidr in LAYOUT.interfaces(node)
           if ns == node.namespace and cidr is not None]
    for ifname, cidr in own:  # mgmt0, and data0 and path0 or the router's srv0 and cli0
        fields = ex.run(["ip", "-4", "-br", "addr", "show", ifname],
                        timeout=10).stdout.split()
        assert fields[0].split("@")[0] == ifname
        assert fields[1] == "UP"
        assert fields[2:] == [cidr]
    assert ex.run(["ip", "netns", "identify"], timeout=10).stdout.strip() == node.namespace
    devs = {line.split(":")[0].strip()
            for line in ex.run(["cat", "/proc/self/net/dev"], timeout=10).stdout.splitlines()[2:]}
    assert devs == {"lo", *(ifname for ifname, _ in own)}
    assert devs >= ({"data0", "path0"} if node.engine else {"srv0", "cli0"})
    # SFTP (internal-sftp subsystem) works too.
    ex.write_text(f"/dev/shm/qir-test-{node.name}", node.namespace)
    assert ex.read_text(f"/dev/shm/qir-test-{node.name}") == node.namespace
    ex.run(["rm", "-f", f"/dev/shm/qir-test-{node.name}"], timeout=10)


@pytest.mark.parametrize("node", NODES, ids=lambda n: n.name)
def test_node_scratch_is_its_own_tmpfs_shared_with_the_node(connect: Connect,
                                                             node: NodeSpec) -> None:
    """The node's tmpdir is a tmpfs of its own (huge pages where the kernel has them), seen
    by the node over SSH as the same file system the management host sees."""
    host = [ln.split() for ln in Path("/proc/self/mounts").read_text().splitlines()]
    (entry,) = [f for f in host if f[1] == node.tmpdir]
    assert entry[2] == "tmpfs" and "mode=755" in entry[3].split(",")
    if Path("/sys/kernel/mm/transparent_hugepage").is_dir():
        assert scratch.SCRATCH_HUGE in entry[3].split(",")
    ex = connect(node)
    seen = ex.run(["sh", "-c", 'grep -F " $0 tmpfs " /proc/self/mounts', node.tmpdir],
                  timeout=10).stdout.split()
    assert seen[1:4] == entry[1:4]
    marker = Path(node.tmpdir, "qir-scratch-test")
    marker.write_text(node.name)
    try:
        assert ex.read_text(str(marker)) == node.name
    finally:
        marker.unlink()


def test_data_link_crosses_between_nodes(connect: Connect) -> None:
    server, client = connect(SERVER), connect(CLIENT)
    res = server.run(_ping_argv(CLIENT.data_ip), timeout=10, check=False)
    assert res.ok, res.stderr
    assert client.run(_ping_argv(SERVER.data_ip), timeout=10, check=False).ok
    # The reply came from the client's data0: the server learned that interface's MAC.
    client_mac = client.run(["cat", "/sys/class/net/data0/address"], timeout=10).stdout.strip()
    neigh = server.run(["ip", "neigh", "show", CLIENT.data_ip, "dev", "data0"],
                       timeout=10).stdout.split()
    assert neigh[neigh.index("lladdr") + 1] == client_mac
    # Negative control: an address nobody owns does not answer, so the check can fail.
    assert not server.run(_ping_argv("198.19.0.3"), timeout=10, check=False).ok
    # The data network is not reachable from the root namespace (management only).
    route = LOCAL.run(["ip", "route", "get", CLIENT.data_ip], timeout=10).stdout
    assert "qir-mg" not in route


def test_host_key_checking(connect: Connect, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(ConnectError, match="not in"):
        connect(SERVER, known_hosts=str(empty))
    wrong = tmp_path / "wrong_known_hosts"  # the client's key claimed for the server
    wrong.write_text(f"{SERVER.mgmt_ip} {' '.join(CLIENT.host_pubkey.read_text().split()[:2])}\n")
    with pytest.raises(ConnectError):
        connect(SERVER, known_hosts=str(wrong))
    # And a key that is not authorised is refused.
    other = tmp_path / "other_key"
    LOCAL.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], timeout=10)
    with pytest.raises(ConnectError):
        connect(SERVER, key=str(other))
    assert connect(SERVER).run(["true"], timeout=10).ok


def test_up_is_cheap_when_already_up(testbed: local.TestbedStatus,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """On a healthy testbed up() only inspects: the `ip addr show` calls of status(), the
    endpoints' routes, the router's forwarding and offloads, and no repair step; the engines
    are checked without running a command (pid files, /proc and one `_ping` on each socket).
    What it runs is asserted, not how long it takes."""
    before = local.status()
    pids = {n.name: before.nodes[n.name].sshd_pid for n in NODES}
    engine_pids = {n.name: before.nodes[n.name].engine.pid for n in LAYOUT.engine_nodes}
    local.up()  # warm
    ran: list[list[str]] = []
    testbed_host = local.TESTBED.host
    real_run = testbed_host.run

    def spy(argv: list[str], **kwargs: Any) -> Any:
        ran.append([str(a) for a in argv])
        return real_run(argv, **kwargs)

    def forbidden(name: str) -> Callable[..., None]:
        def step(*args: object, **kwargs: object) -> None:
            raise AssertionError(f"up() on a healthy testbed ran {name}")
        return step

    monkeypatch.setattr(testbed_host, "run", spy)
    steps = [(sshd, "check_root_account"), (keys, "ensure_state"),
             (links, "ensure_namespaces"), (links, "ensure_links"), (sshd, "ensure_sshd"),
             (sshd, "wait_for_ssh"), (sshd, "stop_sshd"), (local.TESTBED, "_repair"),
             (local.TESTBED, "_ensure_engines"), (engine_start, "ensure"), (routes, "ensure"),
             (engine_start, "start"), (engine_stop, "stop"), (engine_start, "wait_ready")]
    for owner, name in steps:
        monkeypatch.setattr(owner, name, forbidden(name))
    st = local.up()
    monkeypatch.undo()
    assert st.healthy
    ip, ethtool = testbed_host.tool("ip"), testbed_host.tool("ethtool")
    ethtool_k = 'for i; do "$0" -k "$i" || exit; done'
    assert ran == [[ip, "-j", "-d", "addr", "show"],
                   *([ip, "-n", n.namespace, "-j", "-d", "addr", "show"] for n in NODES),
                   [ip, "-n", "qir-server", "-j", "route", "show"],
                   [ip, "netns", "exec", "qir-server", "sh", "-c", ethtool_k, ethtool, "path0"],
                   [ip, "-n", "qir-client", "-j", "route", "show"],
                   [ip, "netns", "exec", "qir-client", "sh", "-c", ethtool_k, ethtool, "path0"],
                   [ip, "-n", "qir-router", "-j", "-4", "netconf", "show"],
                   [ip, "netns", "exec", "qir-router", "sh", "-c", ethtool_k, ethtool,
                    "srv0", "cli0"]], ran
    assert {n.name: st.nodes[n.name].sshd_pid for n in NODES} == pids  # nothing restarted
    assert all(st.nodes[n.name].engine.state != engines.NOT_RUNNING
               for n in LAYOUT.engine_nodes)
    assert {n.name: st.nodes[n.name].engine.pid for n in LAYOUT.engine_nodes} == engine_pids


def test_up_repairs_link_and_sshd(connect: Connect) -> None:
    before = local.status()
    LOCAL.run(["ip", "link", "delete", CLIENT.host_if], timeout=10)
    server_pid = before.nodes["server"].sshd_pid
    assert server_pid is not None
    os.kill(server_pid, signal.SIGKILL)
    _wait_dead(server_pid)

    broken = local.status()
    assert not broken.healthy
    assert not broken.nodes["client"].mgmt_link_up
    assert not broken.nodes["client"].ssh_reachable
    assert broken.nodes["client"].data_link_up
    assert not broken.nodes["server"].sshd_running
    assert not broken.nodes["server"].ssh_reachable
    assert "client: management link" in "; ".join(broken.problems())

    fixed = local.up()
    assert fixed.healthy, fixed.render()
    assert fixed.nodes["server"].sshd_pid not in (None, server_pid)
    # The client's sshd survived (its listening socket comes back with the address).
    assert fixed.nodes["client"].sshd_pid == before.nodes["client"].sshd_pid
    for node in NODES:
        assert connect(node).run(["ip", "netns", "identify"], timeout=10).stdout.strip() \
            == node.namespace


def test_up_repairs_namespace_keys_and_address(connect: Connect) -> None:
    before = local.status()
    old_client_pid = before.nodes["client"].sshd_pid
    assert old_client_pid is not None
    old_client_ns = processes.pid_netns_ident(old_client_pid)
    # A session with a background process in the client namespace, to be orphaned below.
    client = connect(CLIENT)
    bg = client.start(["sleep", "300"], stdout="/dev/shm/qir-test-orphan.out",  # the scenario
                      stderr="/dev/shm/qir-test-orphan.err")
    assert client.alive(bg)
    old_server_hostkey = SERVER.host_pubkey.read_text()
    old_mgmt_key = LAYOUT.mgmt_pubkey.read_text()
    # Namespace deleted under a running sshd (which keeps the old namespace alive), both keys
    # deleted, a wrong address on the server's data0.
    LOCAL.run(["ip", "netns", "delete", CLIENT.namespace], timeout=10)
    LAYOUT.mgmt_key.unlink()
    SERVER.host_key.unlink()
    LOCAL.run(["ip", "-n", SERVER.namespace, "addr", "flush", "dev", "data0"], timeout=10)
    LOCAL.run(["ip", "-n", SERVER.namespace, "addr", "add", "198.19.0.99/24", "dev", "data0"],
              timeout=10)
    broken = local.status()
    assert not broken.healthy
    assert not broken.keys_present
    assert not broken.nodes["client"].namespace_exists
    assert not broken.nodes["client"].sshd_running
    assert not broken.nodes["server"].data_link_up

    assert old_client_ns is not None and processes.netns_members(old_client_ns)

    fixed = local.up()
    assert fixed.healthy, fixed.render()
    _wait_dead(old_client_pid)  # the orphaned sshd was stopped ...
    _wait_dead(bg.pgid)  # ... and so was everything else in its orphaned namespace
    assert processes.netns_members(old_client_ns) == []
    for name in ("out", "err", "out.exit"):
        Path(f"/dev/shm/qir-test-orphan.{name}").unlink(missing_ok=True)
    assert fixed.nodes["client"].sshd_pid != old_client_pid
    assert SERVER.host_pubkey.read_text() != old_server_hostkey
    assert LAYOUT.mgmt_pubkey.read_text() != old_mgmt_key
    assert sorted(_our_sshd_pids()) == sorted(n.sshd_pid for n in fixed.nodes.values())
    server = connect(SERVER)  # new host key in known_hosts, new management key authorised
    assert server.run(["ip", "-4", "-br", "addr", "show", "data0"],
                      timeout=10).stdout.split()[2:] == [SERVER.data_cidr]
    assert server.run(_ping_argv(CLIENT.data_ip), timeout=10, check=False).ok


def _rx_packets(ex: SSHExecutor, ifname: str) -> int:
    return int(ex.run(["cat", f"/sys/class/net/{ifname}/statistics/rx_packets"],
                      timeout=10).stdout)


def test_router_forwards_between_the_endpoints(connect: Connect) -> None:
    """The router is a node of its own (its sshd over its management link, no engine) that
    forwards: each endpoint's path address is reached through it, one hop away, while the
    direct data0 link stays as it was."""
    router, server, client = connect(ROUTER), connect(SERVER), connect(CLIENT)
    assert router.run(["ip", "netns", "identify"], timeout=10).stdout.strip() == "qir-router"
    assert router.run(["cat", "/proc/sys/net/ipv4/ip_forward"], timeout=10).stdout.strip() == "1"
    for ifname in ("srv0", "cli0"):
        features = router.run(["ethtool", "-k", ifname], timeout=10).stdout
        for name in ("tcp-segmentation-offload", "generic-segmentation-offload",
                     "generic-receive-offload", "tx-udp-segmentation"):
            assert f"\n{name}: off" in features, (ifname, name)
    assert not Path(LAYOUT.engine(ROUTER).socket).exists()  # no engine was started for it

    server_path, client_path = (LAYOUT.addresses(n, "path")[0] for n in ("server", "client"))
    assert "via 198.19.1.254 dev path0" in server.run(
        ["ip", "route", "get", client_path], timeout=10).stdout
    assert "via 198.19.2.254 dev path0" in client.run(
        ["ip", "route", "get", server_path], timeout=10).stdout
    direct = server.run(["ip", "route", "get", CLIENT.data_ip], timeout=10).stdout
    assert "dev data0" in direct and " via " not in direct

    before = _rx_packets(router, "srv0"), _rx_packets(router, "cli0")
    res = server.run(_ping_argv(client_path), timeout=10, check=False)
    assert res.ok, res.stderr
    if "ttl=" in res.stdout:
        assert "ttl=63" in res.stdout  # one router on the way
    assert client.run(_ping_argv(server_path), timeout=10, check=False).ok
    after = _rx_packets(router, "srv0"), _rx_packets(router, "cli0")
    assert after[0] > before[0] and after[1] > before[1]  # the echoes crossed the router


def test_up_repairs_the_routers_forwarding_routes_and_namespace(connect: Connect) -> None:
    """Forwarding off, a route gone, an offload back on: the testbed is unhealthy, says why,
    and up() repairs it; so it does when the router's namespace is deleted."""
    ns_router = ["ip", "netns", "exec", ROUTER.namespace]
    LOCAL.run([*ns_router, "sysctl", "-qw", "net.ipv4.ip_forward=0"], timeout=10)
    LOCAL.run(["ip", "-n", SERVER.namespace, "route", "del", "198.19.2.0/24"], timeout=10)
    LOCAL.run([*ns_router, "ethtool", "-K", "cli0", "gso", "on"], timeout=10)
    broken = local.status()
    assert not broken.healthy
    assert broken.nodes["router"].routing == ("IPv4 forwarding off (net.ipv4.ip_forward)",
                                              "offloads on at cli0 (gso)")
    assert broken.nodes["server"].routing == (
        "route 198.19.2.0/24 via 198.19.1.254 dev path0 missing",)
    assert broken.nodes["client"].routing == ()
    assert "router: IPv4 forwarding off" in "; ".join(broken.problems())
    assert not connect(SERVER).run(_ping_argv("198.19.2.1"), timeout=10, check=False).ok

    fixed = local.up()
    assert fixed.healthy, fixed.render()
    assert connect(SERVER).run(_ping_argv("198.19.2.1"), timeout=10, check=False).ok

    old_pid = fixed.nodes["router"].sshd_pid
    assert old_pid is not None
    LOCAL.run(["ip", "netns", "delete", ROUTER.namespace], timeout=10)
    broken = local.status()
    assert not broken.nodes["router"].namespace_exists
    assert not broken.nodes["server"].path_link_up  # its path0 went with the router's srv0
    assert broken.nodes["server"].data_link_up  # the direct link did not
    fixed = local.up()
    assert fixed.healthy, fixed.render()
    _wait_dead(old_pid)  # the router's orphaned sshd was stopped
    assert connect(ROUTER).run(["ip", "netns", "identify"], timeout=10).stdout.strip() \
        == ROUTER.namespace
    assert connect(CLIENT).run(_ping_argv("198.19.1.1"), timeout=10, check=False).ok


def test_restore_covers_the_router(testbed: local.TestbedStatus) -> None:
    """`testbed restore` takes the router's lease and replays its restore journal, as it
    does the endpoints'."""
    from interop_runner.config.loader import load_testbed
    from interop_runner.testbed.leftovers import restore_testbed

    marker = Path(ROUTER.tmpdir) / "qir-restore-test"
    journal = Path(ROUTER.workdir) / "restore.sh"
    journal.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    marker.write_text("changed by a killed run")
    journal.write_text(f"rm -f {marker}\n")  # what undoes it, journaled before the change
    try:
        done = restore_testbed(load_testbed(local.TESTBED_FILE))
        assert "router" in done and done["router"].failed == []
        assert not marker.exists() and not journal.exists()
        assert "router" not in restore_testbed(load_testbed(local.TESTBED_FILE))
    finally:
        marker.unlink(missing_ok=True)
        journal.unlink(missing_ok=True)


def test_down_removes_everything(testbed: local.TestbedStatus, tmp_path: Path) -> None:
    # An SSH session with a background process inside a namespace must not survive down().
    with SSHExecutor("client", SSHTarget(CLIENT.mgmt_ip, 22, "root", str(LAYOUT.mgmt_key),
                                         str(LAYOUT.known_hosts))) as ex:
        bg = ex.start(["sleep", "300"], stdout="/dev/shm/qir-test-sleep.out",  # the scenario
                      stderr="/dev/shm/qir-test-sleep.err")
        assert ex.alive(bg)
    sleep_pids = [int(p) for p in
                  LOCAL.run(["ip", "netns", "pids", CLIENT.namespace], timeout=10).stdout.split()]
    assert bg.pgid in sleep_pids

    # Purge only touches the nodes' directories and the engines' data roots (the image cache;
    # tests/test_testbed_docker.py checks it): the same testbed with those in a temporary tree.
    layout = local.make_layout(work_root=tmp_path / "qir", scratch_root=tmp_path / "shm",
                               docker_data_root=tmp_path / "docker")
    nodes = layout.nodes
    for n in nodes:
        Path(n.workdir).mkdir(parents=True)
        Path(n.tmpdir).mkdir(parents=True)
        (Path(n.tmpdir) / "file").write_text("x")

    sshd_pids = _our_sshd_pids()
    assert len(sshd_pids) == 3  # server, client, router
    LocalTestbed(layout).down(purge=True)

    assert ROUTER.namespace in LAYOUT.namespaces and ROUTER.host_if in LAYOUT.root_links
    assert not any(ns in LOCAL.run(["ip", "netns", "list"], timeout=10).stdout
                   for ns in LAYOUT.namespaces)
    assert not any(LAYOUT.netns_path(ns).exists() for ns in LAYOUT.namespaces)
    links = LOCAL.run(["ip", "-br", "link", "show"], timeout=10).stdout
    assert "qir-" not in links
    for pid in sshd_pids + sleep_pids:
        assert not processes.pid_alive(pid), pid
    assert _our_sshd_pids() == []
    assert not LAYOUT.state_dir.exists()
    assert not (tmp_path / "qir").exists()
    assert not any(Path(n.tmpdir).exists() for n in nodes)
    for name in ("out", "err", "out.exit"):
        Path(f"/dev/shm/qir-test-sleep.{name}").unlink(missing_ok=True)

    st = local.status()
    assert not st.healthy
    assert not st.keys_present
    for ns in st.nodes.values():
        assert not (ns.namespace_exists or ns.mgmt_link_up or ns.sshd_running
                    or ns.ssh_reachable)
        assert ns.routing  # no routes, no forwarding
        assert not (ns.data_link_up if ns.data_ip else ns.path_link_up)
    assert "NOT healthy" in st.render()
    local.down()  # down on a down testbed is fine
    # so is a purge; of the temporary tree: the real one holds every node's builds and the
    # engines' image caches, which the rest of the suite (and the next run) would pay again
    LocalTestbed(layout).down(purge=True)


def test_up_from_scratch_after_down() -> None:
    local.down()
    assert not local.status().healthy
    st = local.up()  # waits for both sshd by polling (bounded by SSH_WAIT_S), no fixed sleep
    assert st.healthy, st.render()
    assert all(ns.ssh_reachable and ns.sshd_running for ns in st.nodes.values())
    assert sorted(_our_sshd_pids()) == sorted(ns.sshd_pid for ns in st.nodes.values())
    local.down()
    assert not LAYOUT.state_dir.exists()
