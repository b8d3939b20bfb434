"""The Docker Engine of each node: one dockerd and its own containerd inside the node's
network namespace. This module says how they run and whether they do; ``engine_start.py``
and ``engine_stop.py`` start and stop them.

Per node ``<n>`` (``server``, ``client``; :class:`~.layout.EngineLayout`)::

    socket      /run/qir/docker/<n>.sock         (the node's docker_host)
    run dir     /run/qir/docker/<n>/             daemon.json, containerd.toml, pid files
    exec-root   /run/qir/docker/<n>/exec/        containerd's socket and state in exec/containerd
    data-root   /var/lib/qir/docker/<n>/         images (the cache): kept by down, not by --purge
    logs        <node state dir>/dockerd.log, containerd.log
    cgroups     /qir-docker-<n>/<container> in every hierarchy (cgroupfs driver)

dockerd and its containerd are started with ``nsenter --net=/run/netns/<ns>``: they join only
the node's network namespace. ``ip netns exec`` would also give them a private mount namespace
with a /sys of the node, in which the cgroup hierarchies are not mounted. The engine never
creates docker0 and never touches iptables, routes or sysctls of the node (``--bridge=none
--iptables=false --ip6tables=false --ip-masq=false --ip-forward=false``); containers see the
node's interfaces with ``--network host``. The host's own engine (``/var/run/docker.sock``,
``/var/lib/docker``) is never used or touched.

Processes are ours when their pid file, command line and network namespace say so (never by
name alone): other engines on this machine stay untouched.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from interop_runner.testbed.local import processes
from interop_runner.testbed.local.host import Host
from interop_runner.testbed.local.layout import EngineLayout

ENGINE_CMD_TIMEOUT_S = 30.0
CGROUP_ROOT = Path("/sys/fs/cgroup")
# Storage drivers in order of preference; a data root keeps the one it was created with.
DRIVERS = ("overlay2", "vfs")

RUNNING, NOT_RUNNING, UNAVAILABLE = "running", "not running", "unavailable"


@dataclass(frozen=True)
class EngineStatus:
    """Observed state of one node's engine."""

    state: str  # RUNNING, NOT_RUNNING or UNAVAILABLE
    pid: int | None  # our dockerd (alive, ours), whatever its namespace
    detail: str  # why it is not running or unavailable ("" when running)

    @property
    def running(self) -> bool:
        """dockerd and containerd are ours, in the node's namespace, and the API answers."""
        return self.state == RUNNING


# --------------------------------------------------------------------------------------------
# Which processes are the engine's
# --------------------------------------------------------------------------------------------
def in_netns(pid: int, engine: EngineLayout) -> bool:
    """The process lives in the node's network namespace."""
    ident = processes.netns_ident(engine.netns)
    return ident is not None and processes.pid_netns_ident(pid) == ident


def is_dockerd(pid: int, engine: EngineLayout) -> bool:
    """The process is a dockerd with this engine's exec-root."""
    return (processes.pid_alive(pid) and processes.comm_of(pid) == "dockerd"
            and processes.flag_value(processes.argv_of(pid), "--exec-root")
            == str(engine.exec_root))


def is_containerd(pid: int, engine: EngineLayout) -> bool:
    """The process is a containerd with this engine's configuration."""
    return (processes.pid_alive(pid) and processes.comm_of(pid) == "containerd"
            and processes.flag_value(processes.argv_of(pid), "--config")
            == str(engine.containerd_config))


def is_shim(pid: int, engine: EngineLayout) -> bool:
    """The process is a containerd shim of this engine's containerd."""
    argv = processes.argv_of(pid)
    return (bool(argv) and os.path.basename(argv[0]).startswith("containerd-shim")
            and processes.flag_value(argv, "-address") == str(engine.containerd_socket)
            and processes.pid_alive(pid))


def is_launching(pid: int, engine: EngineLayout) -> bool:
    """Any stage of our launch (setsid, sh, nsenter, the daemon) of this engine's daemons."""
    argv = processes.argv_of(pid)
    return processes.pid_alive(pid) and (
        processes.flag_value(argv, "--exec-root") == str(engine.exec_root)
        or processes.flag_value(argv, "--config") == str(engine.containerd_config))


def launching_pids(engine: EngineLayout) -> list[int]:
    """Processes of a launch of this engine's daemons (the daemons themselves included)."""
    return processes.scan(lambda pid: is_launching(pid, engine))


def dockerd_pids(engine: EngineLayout) -> list[int]:
    """Every live dockerd of this engine (normally one)."""
    return processes.scan(lambda pid: is_dockerd(pid, engine))


def shim_pids(engine: EngineLayout) -> list[int]:
    """The engine's containerd shims."""
    return processes.scan(lambda pid: is_shim(pid, engine))


def dockerd_pid(engine: EngineLayout) -> int | None:
    """PID of the node's dockerd according to its pid file (None if not alive or not ours)."""
    pid = processes.pidfile_pid(engine.pidfile)
    return pid if pid is not None and is_dockerd(pid, engine) else None


def containerd_pid(engine: EngineLayout) -> int | None:
    """PID of the node's containerd according to its pid file (None if not alive/ours)."""
    pid = processes.pidfile_pid(engine.containerd_pidfile)
    return pid if pid is not None and is_containerd(pid, engine) else None


def cgroup_dirs(engine: EngineLayout) -> list[Path]:
    """The engine's parent cgroup and everything below, in every hierarchy (parents first)."""
    rel = engine.cgroup_parent.strip("/")
    try:
        tops = [CGROUP_ROOT] + sorted(d for d in CGROUP_ROOT.iterdir()
                                      if d.is_dir() and not d.is_symlink())
    except OSError:
        return []
    found: list[Path] = []
    for top in tops:
        base = top / rel
        if base.is_dir():
            found += [Path(dirpath) for dirpath, _, _ in os.walk(base)]
    return found


def cgroup_pids(engine: EngineLayout) -> list[int]:
    """Live processes in the engine's cgroups (the containers')."""
    pids: set[int] = set()
    for cgroup in cgroup_dirs(engine):
        try:
            pids.update(int(p) for p in (cgroup / "cgroup.procs").read_text().split())
        except (OSError, ValueError):
            continue
    return sorted(p for p in pids if processes.pid_alive(p))


def engine_pids(engine: EngineLayout) -> list[int]:
    """Every live process of this engine: dockerd, containerd, shims, container processes."""
    pids = set(launching_pids(engine) + shim_pids(engine) + cgroup_pids(engine))
    for pid in (dockerd_pid(engine), containerd_pid(engine)):
        if pid is not None:
            pids.add(pid)
    return sorted(pids)


# --------------------------------------------------------------------------------------------
# Status
# --------------------------------------------------------------------------------------------
def ping(engine: EngineLayout, timeout: float = 1.0) -> bool:
    """True when the engine's API answers ``GET /_ping`` with 200 OK (no command run)."""
    return ping_socket(engine.socket, timeout)


def ping_socket(path: Path, timeout: float = 1.0) -> bool:
    """True when a Docker API socket answers ``GET /_ping`` with 200 OK."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(str(path))
            sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            data = b""
            while len(data) < 4096:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return False
    head, _, body = data.partition(b"\r\n\r\n")
    return head.split(b"\r\n", 1)[0].split()[1:2] == [b"200"] and body.strip() == b"OK"


def status(host: Host, engine: EngineLayout) -> EngineStatus:
    """Inspect one engine without changing anything (pid files, /proc, one ``_ping``)."""
    reason = host.engines_unavailable()
    if reason is not None:
        return EngineStatus(UNAVAILABLE, None, reason)
    pid = dockerd_pid(engine)
    if pid is None:
        return EngineStatus(NOT_RUNNING, None, "dockerd not running")
    if not in_netns(pid, engine):
        return EngineStatus(NOT_RUNNING, pid, "dockerd not in the node's network namespace")
    cpid = containerd_pid(engine)
    if cpid is None or not in_netns(cpid, engine):
        return EngineStatus(NOT_RUNNING, pid, "containerd not running in the node")
    if not ping(engine):
        return EngineStatus(NOT_RUNNING, pid, f"{engine.socket} does not answer")
    return EngineStatus(RUNNING, pid, "")


def existing_driver(data_root: Path) -> str | None:
    """The storage driver a data root was created with (None: a fresh data root)."""
    return next((d for d in DRIVERS if (data_root / d).is_dir()), None)


def is_current(host: Host, engine: EngineLayout) -> bool:
    """The running daemons were started exactly as ``up`` would start them now."""
    driver = existing_driver(engine.data_root)
    dpid, cpid = dockerd_pid(engine), containerd_pid(engine)
    if driver is None or dpid is None or cpid is None:
        return False
    try:
        config_ok = engine.containerd_config.read_text() == containerd_config_text(engine)
    except OSError:
        return False
    return (config_ok and processes.argv_of(dpid) == dockerd_argv(host, engine, driver)
            and processes.argv_of(cpid) == containerd_argv(host, engine))


# --------------------------------------------------------------------------------------------
# How the daemons run
# --------------------------------------------------------------------------------------------
def containerd_config_text(engine: EngineLayout) -> str:
    """containerd's configuration: what dockerd gives the containerd it manages itself."""
    data = engine.data_root / "containerd" / "daemon"
    state = engine.exec_root / "containerd" / "daemon"
    return "\n".join([
        f"# qir local testbed: containerd of node {engine.node}; written by up()",
        "version = 2",
        f"root = {json.dumps(str(data))}",
        f"state = {json.dumps(str(state))}",
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]',
        "[grpc]",
        f"  address = {json.dumps(str(engine.containerd_socket))}",
        "[debug]",
        '  level = "info"',
    ]) + "\n"


def containerd_argv(host: Host, engine: EngineLayout) -> list[str]:
    """How the node's containerd runs (inside the namespace)."""
    return [host.engine_tool("containerd"), "--config", str(engine.containerd_config)]


def dockerd_argv(host: Host, engine: EngineLayout, driver: str) -> list[str]:
    """How the node's dockerd runs (inside the namespace)."""
    return [
        host.engine_tool("dockerd"),
        "--config-file", str(engine.daemon_config),
        # Our own containerd, never dockerd's choice: dockerd uses /run/containerd's whenever
        # that socket exists (Debian's containerd.service); its shims and so every
        # host-network container would then live in the host's network namespace.
        "--containerd", str(engine.containerd_socket),
        "--containerd-namespace", engine.namespace,
        "--containerd-plugins-namespace", f"{engine.namespace}-plugins",
        "--data-root", str(engine.data_root),
        "--exec-root", str(engine.exec_root),
        "--pidfile", str(engine.pidfile),
        "--host", engine.host,
        "--storage-driver", driver,
        "--exec-opt", "native.cgroupdriver=cgroupfs",
        "--cgroup-parent", engine.cgroup_parent,
        # No docker0, no iptables rules, no routes; without --ip-forward=false dockerd sets
        # net.ipv4.ip_forward=1 in the node even with --bridge=none.
        "--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-masq=false",
        "--ip-forward=false",
    ]


def log_tail(path: Path) -> str:
    """The last non-empty line of a daemon's log (at most 300 characters; "" when none)."""
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""
