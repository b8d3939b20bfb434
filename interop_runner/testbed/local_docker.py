"""The Docker Engines of the local testbed: one per node, inside the node's network namespace.

Per node ``<n>`` (``server``, ``client``)::

    socket      /run/qir/docker/<n>.sock         (docker_host(n); the node's docker_host)
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
import re
import shutil
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from interop_runner.errors import ExecutorError, TestbedError
from interop_runner.remote.executor import LocalExecutor, Result

RUN_ROOT = Path("/run/qir/docker")
DATA_ROOT = Path("/var/lib/qir/docker")

WAIT_S = 60.0  # how long up() waits for an engine to answer (a fresh data root takes longest)
DOCKERD_GRACE_S = 15.0  # TERM -> KILL for dockerd (it stops its containers first)
STOP_GRACE_S = 2.0  # TERM -> KILL for containerd, shims and container processes
CMD_TIMEOUT_S = 30.0
RM_TIMEOUT_S = 120.0

# Tools an engine needs, with the Debian package that provides each.
TOOLS: tuple[tuple[str, str], ...] = (
    ("dockerd", "docker.io"), ("docker", "docker.io"), ("containerd", "containerd"),
    ("runc", "runc"), ("nsenter", "util-linux"), ("setsid", "util-linux"),
    ("mount", "mount"), ("umount", "mount"),
)
# dockerd finds runc, the shims and docker-init through PATH, whatever the caller's PATH is.
ENGINE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_SBIN_DIRS = ("/usr/local/sbin", "/usr/sbin", "/sbin")
_CGROUP_ROOT = Path("/sys/fs/cgroup")
# Storage drivers in order of preference; a data root keeps the one it was created with.
_DRIVERS = ("overlay2", "vfs")

RUNNING, NOT_RUNNING, UNAVAILABLE = "running", "not running", "unavailable"


@dataclass(frozen=True)
class Engine:
    """Where one node's engine lives; paths are derived from the module's roots at use."""

    node: str  # node name: server, client
    netns: Path  # /run/netns/<namespace>
    log_dir: Path  # the node's state directory

    @property
    def run_dir(self) -> Path:
        """Configuration and pid files (removed by :func:`stop`)."""
        return RUN_ROOT / self.node

    @property
    def exec_root(self) -> Path:
        """dockerd's ``--exec-root``; our containerd keeps its socket and state below it."""
        return self.run_dir / "exec"

    @property
    def data_root(self) -> Path:
        """dockerd's ``--data-root``: the persistent image cache."""
        return DATA_ROOT / self.node

    @property
    def socket(self) -> Path:
        """The engine's API socket."""
        return RUN_ROOT / f"{self.node}.sock"

    @property
    def host(self) -> str:
        """The engine's address for ``docker -H``."""
        return f"unix://{self.socket}"

    @property
    def pidfile(self) -> Path:
        """dockerd's ``--pidfile``."""
        return self.run_dir / "dockerd.pid"

    @property
    def containerd_pidfile(self) -> Path:
        """Written by the launcher of containerd (containerd has no pid file of its own)."""
        return self.run_dir / "containerd.pid"

    @property
    def containerd_socket(self) -> Path:
        """containerd's gRPC socket (dockerd ``--containerd``, the shims' ``-address``)."""
        return self.exec_root / "containerd" / "containerd.sock"

    @property
    def containerd_config(self) -> Path:
        """containerd's configuration file."""
        return self.run_dir / "containerd.toml"

    @property
    def daemon_config(self) -> Path:
        """dockerd's ``--config-file`` (empty: never /etc/docker/daemon.json)."""
        return self.run_dir / "daemon.json"

    @property
    def log_file(self) -> Path:
        """dockerd's log (its stdout and stderr)."""
        return self.log_dir / "dockerd.log"

    @property
    def containerd_log(self) -> Path:
        """containerd's log."""
        return self.log_dir / "containerd.log"

    @property
    def namespace(self) -> str:
        """containerd namespace of the engine's containers."""
        return f"qir-{self.node}"

    @property
    def cgroup_parent(self) -> str:
        """Parent cgroup of containers started without one of their own."""
        return f"/qir-docker-{self.node}"


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


def docker_host(node: str) -> str:
    """The ``docker_host`` of a local-testbed node (``unix:///run/qir/docker/<node>.sock``)."""
    return f"unix://{RUN_ROOT / node}.sock"


# --------------------------------------------------------------------------------------------
# Commands and processes
# --------------------------------------------------------------------------------------------
_executor = LocalExecutor("testbed")


def _run(argv: Sequence[str], *, check: bool = True, timeout: float = CMD_TIMEOUT_S,
         env: dict[str, str] | None = None) -> Result:
    try:
        return _executor.run(list(argv), timeout=timeout, check=check, env=env)
    except ExecutorError as exc:
        raise TestbedError(f"local testbed: {exc}") from None


def _find(name: str) -> str | None:
    path = os.pathsep.join([os.environ.get("PATH", ""), *_SBIN_DIRS])
    found = shutil.which(name, path=path)
    return os.path.abspath(found) if found else None


def _tool(name: str) -> str:
    path = _find(name)
    if path is None:
        raise TestbedError(f"local testbed: missing tool {name!r} "
                           f"(install {dict(TOOLS)[name]}, see pos_scripts/install.sh)")
    return path


def unavailable_reason() -> str | None:
    """Why this machine cannot run the engines (missing tools and their packages), or None."""
    missing = [(name, pkg) for name, pkg in TOOLS if _find(name) is None]
    if not missing:
        return None
    packages = sorted({pkg for _, pkg in missing})
    return (f"{', '.join(name for name, _ in missing)} not installed (install "
            f"{' '.join(packages)}, see pos_scripts/install.sh)")


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def _argv(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0")[:-1]]


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _flag(argv: Sequence[str], name: str) -> str | None:
    """The value of ``name VALUE`` or ``name=VALUE`` in an argv (None if absent)."""
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg[len(name) + 1:]
    return None


def _ns_ident(path: Path | str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _in_netns(pid: int, engine: Engine) -> bool:
    ident = _ns_ident(engine.netns)
    return ident is not None and _ns_ident(f"/proc/{pid}/ns/net") == ident


def _pidfile_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _is_dockerd(pid: int, engine: Engine) -> bool:
    return (_alive(pid) and _comm(pid) == "dockerd"
            and _flag(_argv(pid), "--exec-root") == str(engine.exec_root))


def _is_containerd(pid: int, engine: Engine) -> bool:
    return (_alive(pid) and _comm(pid) == "containerd"
            and _flag(_argv(pid), "--config") == str(engine.containerd_config))


def _is_shim(pid: int, engine: Engine) -> bool:
    argv = _argv(pid)
    return (bool(argv) and os.path.basename(argv[0]).startswith("containerd-shim")
            and _flag(argv, "-address") == str(engine.containerd_socket) and _alive(pid))


def _is_launching(pid: int, engine: Engine) -> bool:
    """Any stage of our launch (setsid, sh, nsenter, the daemon) of this engine's daemons."""
    argv = _argv(pid)
    return _alive(pid) and (_flag(argv, "--exec-root") == str(engine.exec_root)
                            or _flag(argv, "--config") == str(engine.containerd_config))


def _scan(match: Callable[[int, Engine], bool], engine: Engine) -> list[int]:
    me = os.getpid()
    return [int(e) for e in os.listdir("/proc")
            if e.isdigit() and int(e) != me and match(int(e), engine)]


def dockerd_pid(engine: Engine) -> int | None:
    """PID of the node's dockerd according to its pid file (None if not alive or not ours)."""
    pid = _pidfile_pid(engine.pidfile)
    return pid if pid is not None and _is_dockerd(pid, engine) else None


def containerd_pid(engine: Engine) -> int | None:
    """PID of the node's containerd according to its pid file (None if not alive/ours)."""
    pid = _pidfile_pid(engine.containerd_pidfile)
    return pid if pid is not None and _is_containerd(pid, engine) else None


def _cgroup_dirs(engine: Engine) -> list[Path]:
    """The engine's parent cgroup and everything below, in every hierarchy (parents first)."""
    rel = engine.cgroup_parent.strip("/")
    try:
        tops = [_CGROUP_ROOT] + sorted(d for d in _CGROUP_ROOT.iterdir()
                                       if d.is_dir() and not d.is_symlink())
    except OSError:
        return []
    found: list[Path] = []
    for top in tops:
        base = top / rel
        if base.is_dir():
            found += [Path(dirpath) for dirpath, _, _ in os.walk(base)]
    return found


def _cgroup_pids(engine: Engine) -> list[int]:
    pids: set[int] = set()
    for cgroup in _cgroup_dirs(engine):
        try:
            pids.update(int(p) for p in (cgroup / "cgroup.procs").read_text().split())
        except (OSError, ValueError):
            continue
    return sorted(p for p in pids if _alive(p))


def engine_pids(engine: Engine) -> list[int]:
    """Every live process of this engine: dockerd, containerd, shims, container processes."""
    pids = set(_scan(_is_launching, engine) + _scan(_is_shim, engine) + _cgroup_pids(engine))
    for pid in (dockerd_pid(engine), containerd_pid(engine)):
        if pid is not None:
            pids.add(pid)
    return sorted(pids)


def _terminate(pids: Sequence[int], grace: float) -> None:
    """SIGTERM, then SIGKILL for those still alive after ``grace``; wait until all are gone."""
    pending = [p for p in set(pids) if p > 1 and p != os.getpid()]
    for sig, wait_s in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        for pid in pending:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait_s
        while pending and time.monotonic() < deadline:
            pending = [p for p in pending if _alive(p)]
            if pending:
                time.sleep(0.01)
        if not pending:
            return
    raise TestbedError(f"local testbed: processes {sorted(pending)} survived SIGKILL")


# --------------------------------------------------------------------------------------------
# Status
# --------------------------------------------------------------------------------------------
def ping(engine: Engine, timeout: float = 1.0) -> bool:
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


def status(engine: Engine) -> EngineStatus:
    """Inspect one engine without changing anything (pid files, /proc, one ``_ping``)."""
    reason = unavailable_reason()
    if reason is not None:
        return EngineStatus(UNAVAILABLE, None, reason)
    pid = dockerd_pid(engine)
    if pid is None:
        return EngineStatus(NOT_RUNNING, None, "dockerd not running")
    if not _in_netns(pid, engine):
        return EngineStatus(NOT_RUNNING, pid, "dockerd not in the node's network namespace")
    cpid = containerd_pid(engine)
    if cpid is None or not _in_netns(cpid, engine):
        return EngineStatus(NOT_RUNNING, pid, "containerd not running in the node")
    if not ping(engine):
        return EngineStatus(NOT_RUNNING, pid, f"{engine.socket} does not answer")
    return EngineStatus(RUNNING, pid, "")


def is_current(engine: Engine) -> bool:
    """The running daemons were started exactly as :func:`ensure` would start them now."""
    driver = _existing_driver(engine.data_root)
    dpid, cpid = dockerd_pid(engine), containerd_pid(engine)
    if driver is None or dpid is None or cpid is None:
        return False
    try:
        config_ok = engine.containerd_config.read_text() == containerd_config_text(engine)
    except OSError:
        return False
    return (config_ok and _argv(dpid) == dockerd_argv(engine, driver)
            and _argv(cpid) == containerd_argv(engine))


# --------------------------------------------------------------------------------------------
# Start
# --------------------------------------------------------------------------------------------
def containerd_config_text(engine: Engine) -> str:
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


def containerd_argv(engine: Engine) -> list[str]:
    """How the node's containerd runs (inside the namespace)."""
    return [_tool("containerd"), "--config", str(engine.containerd_config)]


def dockerd_argv(engine: Engine, driver: str) -> list[str]:
    """How the node's dockerd runs (inside the namespace)."""
    return [
        _tool("dockerd"),
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


def _existing_driver(data_root: Path) -> str | None:
    return next((d for d in _DRIVERS if (data_root / d).is_dir()), None)


def _overlay_works(directory: Path) -> bool:
    """Whether the kernel mounts an overlay whose upper layer is on ``directory``'s file system."""
    probe = directory / ".overlay-probe"
    shutil.rmtree(probe, ignore_errors=True)
    dirs = {name: probe / name for name in ("lower", "upper", "work", "merged")}
    for path in dirs.values():
        path.mkdir(parents=True)
    options = (f"lowerdir={dirs['lower']},upperdir={dirs['upper']},"
               f"workdir={dirs['work']}")
    res = _run([_tool("mount"), "-t", "overlay", "overlay", "-o", options, str(dirs["merged"])],
               check=False)
    if res.ok:
        _run([_tool("umount"), str(dirs["merged"])])
    shutil.rmtree(probe)
    return res.ok


def storage_driver(engine: Engine) -> str:
    """overlay2 where the data root's file system can hold an overlay's upper layer, else vfs.

    overlay2 works on this project's hosts (ext4 under /var/lib, checked). It does not where
    /var/lib is itself an overlay (a container) or a file system without d_type/xattrs: there
    vfs (a full copy per layer: slow and large, but it works everywhere) is the fallback. A
    data root keeps the driver it was created with, else its cached images would vanish.
    """
    existing = _existing_driver(engine.data_root)
    if existing is not None:
        return existing
    return "overlay2" if _overlay_works(engine.data_root) else "vfs"


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def _launch(engine: Engine, argv: Sequence[str], log: Path, pidfile: Path | None) -> None:
    """Start ``argv`` detached (own session) inside the node's network namespace only."""
    # setsid -f returns at once; the daemon's output goes to its log, never to our pipes.
    body = ('p=$0; l=$1; shift; [ "$p" = - ] || echo $$ >"$p" || exit 1; '
            'exec "$@" </dev/null >>"$l" 2>&1')
    _run([_tool("setsid"), "-f", "sh", "-c", body, str(pidfile or "-"), str(log),
          _tool("nsenter"), f"--net={engine.netns}", "--", *argv],
         env={"PATH": ENGINE_PATH})


def _log_tail(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def _socket_accepts(path: Path) -> bool:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(0.5)
            sock.connect(str(path))
        return True
    except OSError:
        return False


def _still_starting(engine: Engine) -> bool:
    """containerd's launch is still alive: the PID its launcher wrote (the shell that execs
    nsenter, then containerd, keeping its PID), or, before that file exists, a process of the
    launch found by its arguments. The pid file first: while a process execs, its
    /proc/<pid>/cmdline can read empty for a moment, and one such scan ended a good start."""
    pid = _pidfile_pid(engine.containerd_pidfile)
    return (pid is not None and _alive(pid)) or bool(_scan(_is_launching, engine))


def _start_containerd(engine: Engine) -> None:
    _write(engine.containerd_config, containerd_config_text(engine))
    engine.containerd_pidfile.unlink(missing_ok=True)  # a stale PID must not look alive
    _launch(engine, containerd_argv(engine), engine.containerd_log, engine.containerd_pidfile)
    deadline = time.monotonic() + WAIT_S
    while not _socket_accepts(engine.containerd_socket):
        if not _still_starting(engine) or time.monotonic() > deadline:
            raise TestbedError(f"local testbed: containerd of {engine.node} did not start "
                               f"({engine.containerd_log}: {_log_tail(engine.containerd_log)})")
        time.sleep(0.02)


def start(engine: Engine) -> None:
    """Start the node's containerd, then its dockerd (not waiting for the API: see
    :func:`wait_ready`). The engine must be stopped (:func:`stop`)."""
    for directory in (engine.run_dir, engine.exec_root):
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    engine.data_root.mkdir(mode=0o710, parents=True, exist_ok=True)
    _write(engine.daemon_config, "{}\n")
    driver = storage_driver(engine)
    engine.pidfile.unlink(missing_ok=True)  # dockerd refuses a pid file naming a live PID
    _start_containerd(engine)
    _launch(engine, dockerd_argv(engine, driver), engine.log_file, None)


def ensure(engine: Engine) -> bool:
    """Start (or restart) the engine unless the right one already runs in the node.

    Returns True when it (re)started it; then :func:`wait_ready` must follow.
    """
    if status(engine).running and is_current(engine):
        return False
    stop(engine)
    start(engine)
    return True


def wait_ready(engines: Sequence[Engine], timeout: float = WAIT_S) -> None:
    """Poll until every engine answers ``_ping`` (bounded); fail at once if one exited."""
    pending = list(engines)
    deadline = time.monotonic() + timeout
    while pending:
        pending = [e for e in pending if not ping(e, timeout=0.5)]
        if not pending:
            return
        for engine in pending:
            if not _scan(_is_launching, engine):
                raise TestbedError(f"local testbed: dockerd of {engine.node} exited at start "
                                   f"({engine.log_file}: {_log_tail(engine.log_file)})")
        if time.monotonic() > deadline:
            engine = pending[0]
            raise TestbedError(
                f"local testbed: dockerd of {engine.node} did not answer on {engine.socket} "
                f"within {timeout:g} s ({engine.log_file}: {_log_tail(engine.log_file)})")
        time.sleep(0.05)


# --------------------------------------------------------------------------------------------
# Stop
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Mount:
    mount_id: int
    parent_id: int
    device: str  # major:minor
    point: str


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _mounts() -> list[_Mount]:
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        f = line.split()
        out.append(_Mount(int(f[0]), int(f[1]), f[2], _unescape(f[4])))
    return out


def _leftover_mounts(roots: Sequence[Path]) -> list[str]:
    """Mount points below the roots, deepest first; a root itself only when it is the bind
    mount of itself dockerd makes on its data root (same device as the mount under it)."""
    mounts = _mounts()
    by_id = {m.mount_id: m for m in mounts}
    found = []
    for m in mounts:
        for root in map(str, roots):
            if m.point.startswith(root + "/"):
                found.append(m.point)
            elif m.point == root and m.parent_id in by_id \
                    and by_id[m.parent_id].device == m.device:
                found.append(m.point)
    return sorted(found, key=lambda p: p.count("/"), reverse=True)


def _unmount_all(roots: Sequence[Path]) -> None:
    """Unmount what the engine left below its roots (overlays, shm, its netns bind mount)."""
    for point in _leftover_mounts(roots):
        if not _run([_tool("umount"), point], check=False).ok:
            _run([_tool("umount"), "-l", point], check=False)
    left = _leftover_mounts(roots)
    if left:
        raise TestbedError(f"local testbed: cannot unmount {', '.join(left)}")


def _remove_containers(engine: Engine) -> None:
    """``docker rm -f`` of every container of a live engine (best effort: kills follow)."""
    docker = _find("docker")
    if docker is None or not ping(engine):
        return
    res = _run([docker, "-H", engine.host, "ps", "-aq", "--no-trunc"], check=False)
    ids = res.stdout.split() if res.ok else []
    if ids:
        _run([docker, "-H", engine.host, "rm", "-f", *ids], check=False, timeout=RM_TIMEOUT_S)


def _remove_cgroups(engine: Engine) -> None:
    for cgroup in reversed(_cgroup_dirs(engine)):
        try:
            cgroup.rmdir()
        except OSError:
            pass


def _rmdir_empty(*paths: Path) -> None:
    for path in paths:
        try:
            path.rmdir()
        except OSError:
            pass


def stop(engine: Engine, purge: bool = False) -> None:
    """Remove every container, stop dockerd, containerd and the shims, unmount what they
    left and remove the exec-root; ``purge`` also removes the data root (the image cache).

    Everything is found by pid file and command line (and cgroup for container processes),
    so other engines on this machine are never touched. Idempotent.
    """
    _remove_containers(engine)
    roots = {engine.exec_root, engine.data_root}
    for pid in [dockerd_pid(engine), *_scan(_is_dockerd, engine)]:
        data_root = _flag(_argv(pid), "--data-root") if pid is not None else None
        if data_root:  # the one it runs with, should DATA_ROOT have changed since
            roots.add(Path(data_root))
    _terminate(_scan(_is_dockerd, engine), DOCKERD_GRACE_S)
    _terminate(_scan(_is_launching, engine) + _scan(_is_shim, engine)
               + _cgroup_pids(engine), STOP_GRACE_S)
    _unmount_all(sorted(roots))
    _remove_cgroups(engine)
    shutil.rmtree(engine.run_dir, ignore_errors=True)
    engine.socket.unlink(missing_ok=True)
    _rmdir_empty(RUN_ROOT, RUN_ROOT.parent)
    if purge:
        shutil.rmtree(engine.data_root, ignore_errors=True)
        _rmdir_empty(DATA_ROOT, DATA_ROOT.parent)
