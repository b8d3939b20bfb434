"""Integration tests of the local testbed's per-node Docker Engines (real namespaces, dockerd).

Each node's dockerd and containerd run inside the node's network namespace; a host-network
container sees exactly the node's interfaces; ``down`` leaves no process or mount of the
engines and keeps the image cache unless ``--purge``; the engine changes nothing of the node's
network (routes, links, sysctls, iptables); the host's own engine is never touched. The image is
made here, offline: Debian's static busybox in a tar, ``docker import``ed.
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import tarfile
from pathlib import Path
from typing import Iterator

import pytest

from interop_runner.remote.executor import LocalExecutor
from interop_runner.testbed import local
from interop_runner.testbed.local import DEFAULT_LAYOUT as LAYOUT
from interop_runner.testbed.local import (
    ROUTER,
    LocalTestbed,
    NodeSpec,
    engine_start,
    engine_stop,
    engines,
    processes,
)

from .conftest import wait_until

# The module brings the shared namespace testbed up and down itself (its own fixture, not
# local_testbed): not for `pytest -m "not testbed"`, which must not touch it.
pytestmark = pytest.mark.testbed

if os.geteuid() != 0:
    pytest.skip("docker testbed tests need root", allow_module_level=True)
_missing = [name for name, _pkg in local.REQUIRED_TOOLS if local.find_tool(name) is None]
if _missing:
    pytest.skip(f"docker testbed tests need {', '.join(_missing)}", allow_module_level=True)
HOST = local.TESTBED.host
if HOST.engines_unavailable() is not None:
    pytest.skip(f"docker testbed tests: {HOST.engines_unavailable()}", allow_module_level=True)
BUSYBOX = Path("/bin/busybox")
if not BUSYBOX.is_file():
    pytest.skip("docker testbed tests need busybox-static (pos_scripts/install.sh)",
                allow_module_level=True)

LOCAL = LocalExecutor("test")
NODES = LAYOUT.engine_nodes  # server and client: the router has no engine
IMAGE = "qir-test/busybox:1"
APPLETS = ("sh", "cat", "ip", "ls", "sleep")
HOST_SOCKET = Path("/var/run/docker.sock")


def run(*argv: str, timeout: float = 60, check: bool = True) -> str:
    return LOCAL.run(list(argv), timeout=timeout, check=check).stdout


def docker(node: NodeSpec, *args: str, timeout: float = 120) -> str:
    return run("docker", "-H", local.docker_host(node.name), *args, timeout=timeout)


def host_engine() -> dict[str, bool]:
    """What the host's own engine looks like (its socket answering, its pid file, its root)."""
    return {"socket": HOST_SOCKET.exists(), "answers": engines.ping_socket(HOST_SOCKET),
            "pidfile": Path("/var/run/docker.pid").exists(),
            "data_root": Path("/var/lib/docker").exists()}


def our_processes() -> list[str]:
    """Live processes whose command line names the engines' run or data roots."""
    roots = (str(LAYOUT.docker_run_root), str(LAYOUT.docker_data_root))
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if any(root in cmd for root in roots) and processes.pid_alive(int(entry)):
            found.append(f"{entry}: {cmd.strip()}")
    return found


def our_mounts(*extra: Path) -> list[str]:
    roots = [str(LAYOUT.docker_run_root), str(LAYOUT.docker_data_root), *map(str, extra)]
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [p for p in points if any(p == r or p.startswith(r + "/") for r in roots)]


def busybox_tar(path: Path) -> Path:
    """A root file system of busybox and a few applet links (no network needed)."""
    with tarfile.open(path, "w") as tar:
        tar.add(BUSYBOX, arcname="bin/busybox")
        for applet in APPLETS:
            info = tarfile.TarInfo(f"bin/{applet}")
            info.type, info.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(info, io.BytesIO(b""))
    return path


def ensure_image(node: NodeSpec, tar: Path) -> None:
    res = LOCAL.run(["docker", "-H", local.docker_host(node.name), "image", "inspect", IMAGE],
                    timeout=30, check=False)
    if not res.ok:
        docker(node, "import", "--change", "ENV PATH=/bin", str(tar), IMAGE)


def link_names(lines: str) -> set[str]:
    """Interface names of ``ip -o link`` output (``2: data0@if3: <...``)."""
    return {line.split(":")[1].strip().split("@")[0] for line in lines.splitlines() if line}


def node_network(node: NodeSpec) -> dict[str, str]:
    """The node's network state an engine could change: routes, links, addresses, network
    sysctls, packet filter rules."""
    def ns(*argv: str) -> str:
        return run("ip", "netns", "exec", node.namespace, *argv)

    sysctls = [line for line in ns("sysctl", "-a", "--pattern", r"^net\.").splitlines()
               if "conntrack_count" not in line]
    state = {
        "routes": ns("ip", "route", "show", "table", "all"),
        "routes6": ns("ip", "-6", "route", "show", "table", "all"),
        "links": "\n".join(sorted(link_names(ns("ip", "-o", "link")))),
        "addrs": ns("ip", "-o", "addr"),
        "sysctl": "\n".join(sorted(sysctls)),
    }
    for tool in ("iptables-save", "ip6tables-save"):
        if shutil.which(tool):
            state[tool] = "\n".join(ln for ln in ns(tool).splitlines() if not ln.startswith("#"))
    return state


def root_network() -> dict[str, str]:
    return {"routes": run("ip", "route", "show", "table", "all"),
            "links": "\n".join(sorted(link_names(run("ip", "-o", "link")))),
            "ip_forward": run("sysctl", "net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding")}


# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def host_before() -> dict[str, bool]:
    """The host engine's state before this module brought anything up."""
    return host_engine()


@pytest.fixture(scope="module")
def testbed(host_before: dict[str, bool]) -> Iterator[None]:
    """Up for the module; afterwards back as it was (up again, or down)."""
    was_up = local.status().healthy
    local.up()
    yield
    if was_up:
        local.up()
    else:
        local.down()


@pytest.fixture
def up(testbed: None) -> local.TestbedStatus:
    """The testbed up (a test before may have taken it down)."""
    return local.up()


@pytest.fixture(scope="module")
def image_tar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return busybox_tar(tmp_path_factory.mktemp("busybox") / "busybox.tar")


# --------------------------------------------------------------------------------------------
def test_engine_runs_in_each_node(up: local.TestbedStatus,
                                  host_before: dict[str, bool]) -> None:
    for node in NODES:
        engine = up.nodes[node.name].engine
        assert engine.running, (node.name, engine)
        netns = os.stat(f"/run/netns/{node.namespace}")
        daemons = LAYOUT.engine(node)
        for pid in (engines.dockerd_pid(daemons), engines.containerd_pid(daemons)):
            assert pid is not None
            ns = os.stat(f"/proc/{pid}/ns/net")
            assert (ns.st_dev, ns.st_ino) == (netns.st_dev, netns.st_ino), (node.name, pid)
        assert engine.pid == engines.dockerd_pid(daemons)
        assert local.docker_host(node.name) == f"unix:///run/qir/docker/{node.name}.sock"
        assert Path(f"/run/qir/docker/{node.name}.sock").is_socket()
        assert docker(node, "version", "--format", "{{.Server.Version}}").strip()
        info = docker(node, "info", "--format", "{{.Driver}} {{.CgroupDriver}} {{.DockerRootDir}}")
        driver, cgroups, root = info.split()
        assert driver in ("overlay2", "vfs") and cgroups == "cgroupfs"
        assert root == str(LAYOUT.docker_data_root / node.name)
    # The two engines are distinct, and the host's own engine is as it was.
    assert len({up.nodes[n.name].engine.pid for n in NODES}) == 2
    assert host_engine() == host_before
    # The router has none: no socket, no run directory, and the table says so.
    assert up.nodes[ROUTER.name].engine is None
    assert not LAYOUT.engine(ROUTER).socket.exists() and not LAYOUT.engine(ROUTER).run_dir.exists()
    assert up.render().splitlines()[-1].split()[-1] == "none"
    assert "docker" in up.render().splitlines()[1]


def test_up_keeps_a_healthy_engine_and_restarts_a_dead_one(up: local.TestbedStatus) -> None:
    pids = {n.name: up.nodes[n.name].engine.pid for n in NODES}
    again = local.up()
    assert {n.name: again.nodes[n.name].engine.pid for n in NODES} == pids

    victim = pids["client"]
    assert victim is not None
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: not processes.pid_alive(victim), timeout=10, what=f"dockerd {victim} gone")
    broken = local.status()
    assert not broken.healthy
    assert broken.nodes["client"].engine.state == engines.NOT_RUNNING
    assert "client: docker engine not running" in "; ".join(broken.problems())

    fixed = local.up()
    assert fixed.healthy, fixed.render()
    assert fixed.nodes["server"].engine.pid == pids["server"]
    new = fixed.nodes["client"].engine.pid
    assert new not in (None, victim)
    assert docker(local.CLIENT, "version", "--format", "{{.Server.Version}}").strip()


def test_host_network_container_sees_the_node_interfaces(up: local.TestbedStatus,
                                                         image_tar: Path) -> None:
    root_links = link_names(run("ip", "-o", "link"))
    for node in NODES:
        ensure_image(node, image_tar)
        expected = link_names(run("ip", "-n", node.namespace, "-o", "link"))
        assert expected == {"lo", "mgmt0", "data0", "path0"}
        seen = docker(node, "run", "--rm", "--network", "host", IMAGE, "ip", "-o", "link")
        assert link_names(seen) == expected, node.name
        dev = docker(node, "run", "--rm", "--network", "host", IMAGE, "cat", "/proc/net/dev")
        assert {ln.split(":")[0].strip() for ln in dev.splitlines()[2:]} == expected
        assert not (root_links - {"lo"}) & link_names(seen)  # not the host's namespace
    assert docker(local.SERVER, "ps", "-aq") == ""  # --rm: nothing left


def test_engine_changes_nothing_of_the_node_network(up: local.TestbedStatus,
                                                   image_tar: Path) -> None:
    for node in NODES:  # the node as it is without an engine ...
        engine_stop.stop(HOST, LAYOUT.engine(node))
        # A new namespace inherits the host's forwarding (1 here): 0 shows a change to 1.
        run("ip", "netns", "exec", node.namespace, "sysctl", "-qw", "net.ipv4.ip_forward=0")
    before = {n.name: node_network(n) for n in NODES}
    local.up()  # ... and after an engine, containers and the engine's part of down
    for node in NODES:
        ensure_image(node, image_tar)
        docker(node, "run", "-d", "--network", "host", IMAGE, "sleep", "300")
        docker(node, "run", "-d", "--network", "none", IMAGE, "sleep", "300")
        assert not any(ln.startswith("docker0") for ln in
                       run("ip", "-n", node.namespace, "-o", "link").splitlines())
        engine_stop.stop(HOST, LAYOUT.engine(node))
    assert {n.name: node_network(n) for n in NODES} == before

    # The host side over a whole cycle, from a testbed that is down.
    local.down()
    root_before = root_network()
    local.up()
    for node in NODES:
        docker(node, "run", "-d", "--network", "host", IMAGE, "sleep", "300")
    local.down()
    assert root_network() == root_before


def test_down_leaves_nothing_and_purge_removes_the_cache(
        up: local.TestbedStatus, image_tar: Path, tmp_path: Path,
        host_before: dict[str, bool]) -> None:
    # A data root of the test's own, so that --purge does not empty the real image cache; the
    # engines restart on it (up() sees them started with another data root).
    data_root = tmp_path / "docker"
    testbed = LocalTestbed(local.make_layout(docker_data_root=data_root))
    st = testbed.up()
    assert st.healthy, st.render()
    for node in NODES:
        assert engines.is_current(testbed.host, testbed.layout.engine(node))
        ensure_image(node, image_tar)
        docker(node, "run", "-d", "--network", "host", IMAGE, "sleep", "300")
        docker(node, "run", "-d", "--network", "none", IMAGE, "sleep", "300")
    pids = {n.name: engines.engine_pids(testbed.layout.engine(n)) for n in NODES}
    for name, found in pids.items():  # dockerd, containerd, two shims, two sleeps
        assert len(found) >= 6, (name, found)
    assert our_mounts(data_root)

    testbed.down()
    for found in pids.values():
        for pid in found:
            assert not processes.pid_alive(pid), pid
    assert our_processes() == []
    assert our_mounts(data_root) == []
    assert not LAYOUT.docker_run_root.exists()
    assert all((data_root / n.name / "overlay2").is_dir() or (data_root / n.name / "vfs").is_dir()
               for n in NODES)  # the cache survives down
    assert host_engine() == host_before
    st = testbed.status()
    assert all(st.nodes[n.name].engine.state == engines.NOT_RUNNING for n in NODES)
    assert st.nodes[ROUTER.name].engine is None

    testbed.up()  # the image is still there after down + up
    for node in NODES:
        assert docker(node, "image", "inspect", "--format", "{{.Id}}", IMAGE).startswith("sha256:")
        assert docker(node, "ps", "-aq") == ""  # containers are not kept

    # --purge also removes node directories: point them at the test's own.
    LocalTestbed(local.make_layout(work_root=tmp_path / "qir", scratch_root=tmp_path / "shm",
                                   docker_data_root=data_root)).down(purge=True)
    assert not data_root.exists()
    assert our_processes() == [] and our_mounts(data_root) == []
    assert host_engine() == host_before


def test_without_docker_up_works_and_status_says_unavailable(
        testbed: None, monkeypatch: pytest.MonkeyPatch) -> None:
    local.down()
    real = HOST.find_engine_tool
    monkeypatch.setattr(HOST, "find_engine_tool", lambda n: None if n == "dockerd" else real(n))
    st = local.up()
    assert st.healthy, st.render()
    assert all(st.nodes[n.name].engine.state == engines.UNAVAILABLE for n in NODES)
    lines = [ln for ln in st.render().splitlines() if "unavailable" in ln]
    assert lines == ["  containers: unavailable (dockerd not installed (install docker.io, "
                     "see pos_scripts/install.sh))"]
    assert our_processes() == []
    assert not LAYOUT.docker_run_root.exists()
    monkeypatch.undo()
    st = local.up()  # installed again: the engines start
    assert st.healthy and all(st.nodes[n.name].engine.running for n in NODES), st.render()


def test_down_after_the_engine_crashed(up: local.TestbedStatus, image_tar: Path) -> None:
    """dockerd and containerd killed with containers running: down still finds the shims and
    the containers (by command line and cgroup) and the mounts they left."""
    node = local.CLIENT
    ensure_image(node, image_tar)
    docker(node, "run", "-d", "--network", "host", IMAGE, "sleep", "300")
    docker(node, "run", "-d", "--network", "none", IMAGE, "sleep", "300")  # not in the node's ns
    pids = engines.engine_pids(LAYOUT.engine(node))
    daemons = [engines.dockerd_pid(LAYOUT.engine(node)),
               engines.containerd_pid(LAYOUT.engine(node))]
    for pid in daemons:
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not any(processes.pid_alive(p) for p in daemons if p), timeout=10,
               what="dockerd and containerd gone")
    left = [p for p in pids if processes.pid_alive(p)]
    assert len(left) >= 4, left  # two shims, two sleeps: orphans now
    assert our_mounts()  # overlays, the engine's netns mount
    local.down()
    assert not any(processes.pid_alive(p) for p in pids)
    assert our_processes() == [] and our_mounts() == []


def test_storage_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """overlay2 where an overlay mounts on the data root's file system (ext4 and tmpfs here),
    else vfs; a data root keeps the driver it has."""
    engine = local.make_layout(docker_data_root=tmp_path).engine(local.SERVER)
    engine.data_root.mkdir()
    assert engine_start.storage_driver(HOST, engine) == "overlay2"
    assert list(engine.data_root.iterdir()) == [] and our_mounts(tmp_path) == []  # probe gone
    monkeypatch.setattr(engine_start, "_overlay_works", lambda host, directory: False)
    assert engine_start.storage_driver(HOST, engine) == "vfs"
    (engine.data_root / "overlay2").mkdir()
    assert engine_start.storage_driver(HOST, engine) == "overlay2"
