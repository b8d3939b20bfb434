"""The embedded local testbed: two network namespaces on this machine acting as nodes.

Layout (all addresses from the benchmarking range 198.18.0.0/15)::

    root namespace (management node)     netns qir-server             netns qir-client
    qir-mg-s 198.18.0.1/30 ---veth--- mgmt0 198.18.0.2/30 (sshd :22)
    qir-mg-c 198.18.0.5/30 ---veth------------------------------------ mgmt0 198.18.0.6/30 (sshd :22)
                                      data0 198.19.0.1/24 ---veth--- data0 198.19.0.2/24

Each namespace runs its own sshd (started with ``ip netns exec``), so the runner reaches the
nodes exactly as it reaches real ones: over SSH with the management key and a strict
known_hosts file, both kept in :data:`STATE_DIR`. Each namespace also runs its own Docker
Engine (:mod:`~interop_runner.testbed.local_docker`; socket :func:`docker_host`) when
docker.io is installed. The static testbed file describing this layout is
``configs/testbeds/local.yml``.

:func:`up` is idempotent and cheap when everything is already in place: it first takes a
:func:`status` snapshot and returns at once when the testbed is healthy; otherwise every step
checks the current state and only does what is missing (so it also repairs a half-made
testbed). :func:`down` removes everything again, stopping processes by PID only; the
engines' image caches and each node's scratch tmpfs (with the server's cached file) survive
it unless ``purge`` is given.

All commands run through :class:`~interop_runner.remote.executor.LocalExecutor` as argv lists.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import pwd
import shlex
import re
import shutil
import signal
import socket
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from interop_runner.errors import ExecutorError, TestbedError

from interop_runner.remote.executor import LocalExecutor, Result
from interop_runner.testbed import local_docker

# --------------------------------------------------------------------------------------------
# Names, addresses and paths
# --------------------------------------------------------------------------------------------
TESTBED_NAME = "local"
from interop_runner.paths import LOCAL_TESTBED_FILE as TESTBED_FILE

STATE_DIR = Path("/run/qir-testbed")
LOCK_FILE = Path("/run/qir-testbed.lock")  # outside STATE_DIR: survives down()
MGMT_KEY = STATE_DIR / "id_ed25519"
MGMT_PUBKEY = STATE_DIR / "id_ed25519.pub"
AUTHORIZED_KEYS = STATE_DIR / "authorized_keys"
KNOWN_HOSTS = STATE_DIR / "known_hosts"
PRIVSEP_DIR = Path("/run/sshd")
NETNS_DIR = Path("/run/netns")

SSH_PORT = 22
SSH_USER = "root"
MGMT_IF = "mgmt0"
DATA_IF = "data0"
MGMT_PREFIX = 30
DATA_PREFIX = 24
WORK_ROOT = Path("/var/tmp/qir")

NODE_SHELL_RC = "# ~/.bashrc of a local-testbed node: intentionally empty (see testbeds/local.py)\n"

# each node's tmpdir is a tmpfs of its own (see _ensure_scratch); its size is a limit, not
# a reservation: an 8 GiB file on the server plus its 8 GiB download on the client fit
SCRATCH_OPTIONS = "mode=0755,size=75%"
SCRATCH_HUGE = "huge=always"
SSH_WAIT_S = 10.0  # how long up() waits for both sshd to answer
STOP_GRACE_S = 2.0  # TERM -> KILL grace when stopping processes
CMD_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class NodeSpec:
    """Static description of one namespace node."""

    name: str
    role: str
    namespace: str
    host_if: str  # root-namespace end of the management veth
    host_ip: str  # address of host_if
    mgmt_ip: str  # address of mgmt0 inside the namespace (sshd listens here)
    data_ip: str  # address of data0 inside the namespace
    workdir: str
    tmpdir: str

    @property
    def state_dir(self) -> Path:
        """Per-node state directory (host key, sshd config, pid file, log)."""
        return STATE_DIR / self.name

    @property
    def host_key(self) -> Path:
        """The node's sshd host key (private; ``.pub`` next to it)."""
        return self.state_dir / "ssh_host_ed25519_key"

    @property
    def host_pubkey(self) -> Path:
        """The node's sshd host public key."""
        return self.state_dir / "ssh_host_ed25519_key.pub"

    @property
    def sshd_config(self) -> Path:
        """The node's sshd configuration file."""
        return self.state_dir / "sshd_config"

    @property
    def pid_file(self) -> Path:
        """Where the node's sshd writes its PID."""
        return self.state_dir / "sshd.pid"

    @property
    def log_file(self) -> Path:
        """The node's sshd log (``sshd -E``)."""
        return self.state_dir / "sshd.log"

    @property
    def shell_rc(self) -> Path:
        """The node's own shell rc file, mounted over root's ~/.bashrc inside the node."""
        return self.state_dir / "bashrc"

    @property
    def stamp_file(self) -> Path:
        """Hash of config + host key the running sshd was started with."""
        return self.state_dir / "sshd.stamp"

    @property
    def engine(self) -> local_docker.Engine:
        """The node's Docker Engine (dockerd and containerd in the node's namespace)."""
        return local_docker.Engine(self.name, NETNS_DIR / self.namespace, self.state_dir)

    @property
    def mgmt_cidr(self) -> str:
        """Expected address of mgmt0 with prefix."""
        return f"{self.mgmt_ip}/{MGMT_PREFIX}"

    @property
    def host_cidr(self) -> str:
        """Expected address of the root-side management veth with prefix."""
        return f"{self.host_ip}/{MGMT_PREFIX}"

    @property
    def data_cidr(self) -> str:
        """Expected address of data0 with prefix."""
        return f"{self.data_ip}/{DATA_PREFIX}"


SERVER = NodeSpec(
    name="server", role="server", namespace="qir-server",
    host_if="qir-mg-s", host_ip="198.18.0.1", mgmt_ip="198.18.0.2", data_ip="198.19.0.1",
    workdir="/var/tmp/qir/server", tmpdir="/dev/shm/qir-server",
)
CLIENT = NodeSpec(
    name="client", role="client", namespace="qir-client",
    host_if="qir-mg-c", host_ip="198.18.0.5", mgmt_ip="198.18.0.6", data_ip="198.19.0.2",
    workdir="/var/tmp/qir/client", tmpdir="/dev/shm/qir-client",
)
NODES: tuple[NodeSpec, ...] = (SERVER, CLIENT)
NODES_BY_NAME: dict[str, NodeSpec] = {n.name: n for n in NODES}
NAMESPACES: tuple[str, ...] = tuple(n.namespace for n in NODES)
ROOT_LINKS: tuple[str, ...] = tuple(n.host_if for n in NODES)

# Tools the testbed needs, with the Debian package that provides each.
REQUIRED_TOOLS: tuple[tuple[str, str], ...] = (
    ("sshd", "openssh-server"), ("ip", "iproute2"), ("ssh-keygen", "openssh-client"),
)
_SBIN_DIRS: tuple[str, ...] = ("/usr/sbin", "/sbin", "/usr/local/sbin")


def docker_host(node: str) -> str:
    """``docker_host`` of a node (``server``, ``client``): its own engine's socket."""
    return local_docker.docker_host(node)


# --------------------------------------------------------------------------------------------
# Status
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NodeStatus:
    """Observed state of one namespace node."""

    name: str
    namespace: str
    mgmt_ip: str
    data_ip: str
    namespace_exists: bool
    lo_up: bool
    mgmt_link_up: bool  # both veth ends up, paired, with the expected addresses
    data_link_up: bool  # data0 up, paired with the other node's data0, expected address
    sshd_pid: int | None  # PID of our sshd (alive, ours), whatever its namespace
    sshd_running: bool  # sshd_pid alive *inside this node's namespace*
    ssh_reachable: bool  # port 22 on the management IP answers with an SSH banner
    engine: local_docker.EngineStatus  # the node's Docker Engine

    @property
    def healthy(self) -> bool:
        """True when every check of this node passes (an engine only where docker.io is
        installed)."""
        return (self.namespace_exists and self.lo_up and self.mgmt_link_up
                and self.data_link_up and self.sshd_running and self.ssh_reachable
                and self.engine.state != local_docker.NOT_RUNNING)

    def problems(self) -> list[str]:
        """Short descriptions of the failing checks."""
        checks = [
            (self.namespace_exists, f"namespace {self.namespace} missing"),
            (self.lo_up, "lo down"),
            (self.mgmt_link_up, f"management link ({MGMT_IF} {self.mgmt_ip}) not up"),
            (self.data_link_up, f"data link ({DATA_IF} {self.data_ip}) not up"),
            (self.sshd_running, "sshd not running"),
            (self.ssh_reachable, f"ssh {self.mgmt_ip}:{SSH_PORT} not reachable"),
            (self.engine.state != local_docker.NOT_RUNNING,
             f"docker engine not running ({self.engine.detail})"),
        ]
        return [f"{self.name}: {msg}" for ok, msg in checks if not ok]


@dataclass(frozen=True)
class TestbedStatus:
    """Observed state of the whole local testbed."""

    __test__ = False  # not a pytest test class despite the name

    nodes: dict[str, NodeStatus]
    keys_present: bool  # management key, authorized_keys and known_hosts exist

    @property
    def healthy(self) -> bool:
        """True when the keys exist and every node is healthy."""
        return self.keys_present and all(n.healthy for n in self.nodes.values())

    def problems(self) -> list[str]:
        """Short descriptions of everything that is wrong (empty when healthy)."""
        out = [] if self.keys_present else [f"keys missing in {STATE_DIR}"]
        for node in self.nodes.values():
            out += node.problems()
        return out

    def render(self) -> str:
        """A short human-readable table."""

        def yn(ok: bool) -> str:
            return "ok" if ok else "--"

        def engine(e: local_docker.EngineStatus) -> str:
            if e.state == local_docker.UNAVAILABLE:
                return "n/a"
            return f"pid {e.pid}" if e.running else f"pid {e.pid}?" if e.pid else "--"

        head = ("node", "namespace", "netns", "lo", "mgmt", "data", "sshd", "ssh", "docker")
        rows = [head]
        for n in self.nodes.values():
            sshd = (f"pid {n.sshd_pid}" if n.sshd_running
                    else f"pid {n.sshd_pid}?" if n.sshd_pid else "--")
            rows.append((
                n.name, n.namespace, yn(n.namespace_exists), yn(n.lo_up),
                f"{yn(n.mgmt_link_up)} {n.mgmt_ip}", f"{yn(n.data_link_up)} {n.data_ip}",
                sshd, yn(n.ssh_reachable), engine(n.engine),
            ))
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines = [f"local testbed: {'healthy' if self.healthy else 'NOT healthy'}"
                 f" (keys in {STATE_DIR}: {'ok' if self.keys_present else 'missing'})"]
        lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        unavailable = [n.engine.detail for n in self.nodes.values()
                       if n.engine.state == local_docker.UNAVAILABLE]
        if unavailable:
            lines.append(f"  containers: unavailable ({unavailable[0]})")
        return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------
_executor = LocalExecutor("testbed")
_tool_cache: dict[str, str] = {}
_sshd_version: tuple[int, int] | None = None


def find_tool(name: str) -> str | None:
    """Absolute path of a tool: ``$PATH`` first, then the sbin directories (or None)."""
    found = shutil.which(name)
    if found:
        return os.path.abspath(found)
    for directory in _SBIN_DIRS:
        path = os.path.join(directory, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def _tool(name: str) -> str:
    if name not in _tool_cache:
        path = find_tool(name)
        if path is None:
            package = dict(REQUIRED_TOOLS).get(name, name)
            raise TestbedError(f"local testbed: missing tool {name!r} "
                               f"(install {package}, see pos_scripts/install.sh)")
        _tool_cache[name] = path
    return _tool_cache[name]


def _check_prerequisites() -> None:
    if os.geteuid() != 0:
        raise TestbedError("local testbed: must run as root")
    for name, _package in REQUIRED_TOOLS:
        _tool_cache.pop(name, None)
        _tool(name)


def _run(argv: Sequence[str], *, check: bool = True, timeout: float = CMD_TIMEOUT_S) -> Result:
    try:
        return _executor.run(list(argv), timeout=timeout, check=check)
    except ExecutorError as exc:
        raise TestbedError(f"local testbed: {exc}") from None


def _ip(*args: str, ns: str | None = None, check: bool = True) -> Result:
    return _run([_tool("ip"), *(["-n", ns] if ns else []), *args], check=check)


def _ns_path(ns: str) -> Path:
    return NETNS_DIR / ns


def _ns_exists(ns: str) -> bool:
    """A named namespace exists when its bind mount under /run/netns is in place."""
    return os.path.ismount(_ns_path(ns))


def _ns_ident(ns: str) -> tuple[int, int] | None:
    try:
        st = os.stat(_ns_path(ns))
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _pid_ns_ident(pid: int) -> tuple[int, int] | None:
    try:
        st = os.stat(f"/proc/{pid}/ns/net")
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _pid_alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
    except OSError:
        return ""


def _is_our_sshd(pid: int, node: NodeSpec) -> bool:
    """The process is an sshd listener started with this node's config file."""
    if not _pid_alive(pid):
        return False
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return False
    return comm == "sshd" and str(node.sshd_config) in _cmdline(pid)


def _pidfile_pid(node: NodeSpec) -> int | None:
    try:
        return int(node.pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _sshd_pid(node: NodeSpec) -> int | None:
    """PID of this node's sshd listener according to its pid file (None if not alive/ours)."""
    pid = _pidfile_pid(node)
    return pid if pid is not None and _is_our_sshd(pid, node) else None


def _scan_sshd(node: NodeSpec) -> list[int]:
    """All live sshd listeners started with this node's config (pid file or not)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _is_our_sshd(int(entry), node):
            found.append(int(entry))
    return found


def _netns_members(ident: tuple[int, int]) -> list[int]:
    """PIDs of all live processes in the network namespace ``ident`` (device, inode)."""
    return [int(e) for e in os.listdir("/proc")
            if e.isdigit() and _pid_ns_ident(int(e)) == ident and _pid_alive(int(e))]


def _stop_sshd(node: NodeSpec) -> None:
    """Stop every sshd listener started with this node's config, by PID.

    A listener living in a namespace that is no longer named (``ip netns delete`` while it
    ran) keeps that namespace alive; everything in such an orphaned namespace was started
    there by us, so its remaining processes (sessions, children) are stopped as well.
    """
    from_file = _sshd_pid(node)
    pids = sorted(set(_scan_sshd(node) + ([from_file] if from_file is not None else [])))
    named = {_ns_ident(ns) for ns in NAMESPACES} | {_pid_ns_ident(os.getpid())}
    for pid in list(pids):
        ident = _pid_ns_ident(pid)
        if ident is not None and ident not in named:
            pids += _netns_members(ident)
    _terminate(pids)


def _terminate(pids: Sequence[int], grace: float = STOP_GRACE_S) -> None:
    """Stop processes by PID: SIGTERM, then SIGKILL for those still alive after ``grace``."""
    me = os.getpid()
    pending = [p for p in set(pids) if p != me and p > 1]
    for sig, wait_s in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
        for pid in pending:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait_s
        while pending and time.monotonic() < deadline:
            pending = [p for p in pending if _pid_alive(p)]
            if pending:
                time.sleep(0.01)
        pending = [p for p in pending if _pid_alive(p)]
        if not pending:
            return


def _write_if_changed(path: Path, text: str, mode: int = 0o600) -> bool:
    """Atomically write ``text`` unless the file already holds it; return True if written."""
    try:
        if path.read_text() == text:
            if path.stat().st_mode & 0o777 != mode:
                os.chmod(path, mode)
            return False
    except OSError:
        pass
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)
    return True


def _ensure_dir(path: Path, mode: int) -> None:
    path.mkdir(mode=mode, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o777 != mode:
        os.chmod(path, mode)


@contextmanager
def _lock(timeout: float = 120.0) -> Iterator[None]:
    """Serialise up()/down() between processes (e.g. parallel test sessions)."""
    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK_FILE, "a") as fh:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() > deadline:
                    raise TestbedError(
                        f"local testbed: {LOCK_FILE} is held by another process") from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _probe_ssh(ip: str, timeout: float = 1.0) -> bool:
    """True when ``ip:22`` accepts a TCP connection and sends an SSH banner."""
    try:
        with socket.create_connection((ip, SSH_PORT), timeout=timeout) as sock:
            return sock.recv(64).startswith(b"SSH-")
    except OSError:
        return False


# --------------------------------------------------------------------------------------------
# Links
# --------------------------------------------------------------------------------------------
Link = dict[str, Any]


def _links(ns: str | None) -> dict[str, Link]:
    """All links of a namespace (None: the root namespace) as ``ip -j -d addr`` objects."""
    res = _ip("-j", "-d", "addr", "show", ns=ns, check=False)
    if not res.ok:
        if ns is not None and not _ns_exists(ns):
            return {}
        # Never mistake a failing `ip` for "no links": up() would then re-create existing ones.
        tail = (res.stderr.strip().splitlines() or ["?"])[-1]
        raise TestbedError(f"local testbed: cannot list the links of "
                           f"{ns or 'the root namespace'}: {tail}")
    if not res.stdout.strip():
        return {}
    return {link["ifname"]: link for link in json.loads(res.stdout)}


def _v4(link: Link) -> set[str]:
    return {f"{a['local']}/{a['prefixlen']}" for a in link.get("addr_info", [])
            if a.get("family") == "inet"}


def _is_veth(link: Link | None) -> bool:
    return link is not None and link.get("linkinfo", {}).get("info_kind") == "veth"


def _is_up(link: Link | None) -> bool:
    flags = (link or {}).get("flags", [])
    return "UP" in flags and "LOWER_UP" in flags


def _paired(a: Link | None, b: Link | None) -> bool:
    """Two veth ends (in different namespaces) point at each other."""
    return (_is_veth(a) and _is_veth(b) and a is not None and b is not None
            and a.get("link_index") == b.get("ifindex")
            and b.get("link_index") == a.get("ifindex"))


def _addressed(link: Link | None, cidr: str) -> bool:
    return link is not None and _is_up(link) and _v4(link) == {cidr}


# --------------------------------------------------------------------------------------------
# status()
# --------------------------------------------------------------------------------------------
def status() -> TestbedStatus:
    """Inspect the testbed (namespaces, links, addresses, sshd, SSH port) without changing it."""
    root = _links(None)
    exists = {n.name: _ns_exists(n.namespace) for n in NODES}
    ns_links = {n.name: _links(n.namespace) if exists[n.name] else {} for n in NODES}
    nodes: dict[str, NodeStatus] = {}
    for node in NODES:
        links = ns_links[node.name]
        other = CLIENT if node is SERVER else SERVER
        host, mgmt, data = root.get(node.host_if), links.get(MGMT_IF), links.get(DATA_IF)
        mgmt_ok = (_paired(host, mgmt) and _addressed(host, node.host_cidr)
                   and _addressed(mgmt, node.mgmt_cidr))
        data_ok = _paired(data, ns_links[other.name].get(DATA_IF)) and _addressed(
            data, node.data_cidr)
        lo = links.get("lo")
        pid = _sshd_pid(node)
        ns_id = _ns_ident(node.namespace) if exists[node.name] else None
        running = pid is not None and ns_id is not None and _pid_ns_ident(pid) == ns_id
        # Probe only when the management route exists; otherwise the connect would leave
        # through the default route and time out.
        reachable = mgmt_ok and _probe_ssh(node.mgmt_ip)
        nodes[node.name] = NodeStatus(
            name=node.name, namespace=node.namespace, mgmt_ip=node.mgmt_ip,
            data_ip=node.data_ip, namespace_exists=exists[node.name],
            lo_up=lo is not None and "UP" in lo.get("flags", []),
            mgmt_link_up=mgmt_ok, data_link_up=data_ok, sshd_pid=pid,
            sshd_running=running, ssh_reachable=reachable,
            engine=local_docker.status(node.engine),
        )
    keys = all(p.is_file() for p in (MGMT_KEY, MGMT_PUBKEY, AUTHORIZED_KEYS, KNOWN_HOSTS))
    return TestbedStatus(nodes=nodes, keys_present=keys)


# --------------------------------------------------------------------------------------------
# up()
# --------------------------------------------------------------------------------------------
def _ensure_keypair(private: Path, comment: str) -> None:
    """Generate an ed25519 key pair without passphrase, or restore a missing ``.pub``."""
    public = private.with_name(private.name + ".pub")
    if private.is_file():
        if public.is_file():
            return
        res = _run([_tool("ssh-keygen"), "-y", "-f", str(private)], check=False)
        if res.ok and res.stdout.startswith("ssh-"):
            _write_if_changed(public, res.stdout.strip() + f" {comment}\n", 0o600)
            return
    for path in (private, public):
        path.unlink(missing_ok=True)
    _run([_tool("ssh-keygen"), "-q", "-t", "ed25519", "-N", "", "-C", comment,
          "-f", str(private)])
    os.chmod(private, 0o600)
    os.chmod(public, 0o600)


def _pubkey_fields(path: Path) -> str:
    """``type base64`` of an OpenSSH public key file (comment dropped)."""
    fields = path.read_text().split()
    if len(fields) < 2:
        raise TestbedError(f"local testbed: {path} is not an OpenSSH public key")
    return f"{fields[0]} {fields[1]}"


def _expected_authorized_keys() -> str:
    return _pubkey_fields(MGMT_PUBKEY) + " qir-testbed-management\n"


def _expected_known_hosts() -> str:
    return "".join(f"{n.mgmt_ip} {_pubkey_fields(n.host_pubkey)}\n" for n in NODES)


def _ensure_state() -> None:
    """State directory, privsep directory, keys, authorized_keys and known_hosts."""
    _ensure_dir(STATE_DIR, 0o700)
    for node in NODES:
        _ensure_dir(node.state_dir, 0o700)
    if not PRIVSEP_DIR.is_dir():
        PRIVSEP_DIR.mkdir(mode=0o755, parents=True)
    _ensure_keypair(MGMT_KEY, "qir-testbed-management")
    for node in NODES:
        _ensure_keypair(node.host_key, f"qir-testbed-{node.name}")
    _write_if_changed(AUTHORIZED_KEYS, _expected_authorized_keys(), 0o600)
    _write_if_changed(KNOWN_HOSTS, _expected_known_hosts(), 0o600)


def _ensure_namespaces() -> None:
    for ns in NAMESPACES:
        if _ns_exists(ns):
            continue
        if _ns_path(ns).exists():  # stale entry without a namespace mounted on it
            _ip("netns", "delete", ns, check=False)
        _ip("netns", "add", ns)


def _ensure_links() -> None:
    """Create missing or broken veth pairs, then fix addresses and link state."""
    root = _links(None)
    ns_links = {n.name: _links(n.namespace) for n in NODES}
    created = False
    for node in NODES:
        host, mgmt = root.get(node.host_if), ns_links[node.name].get(MGMT_IF)
        if not _paired(host, mgmt):
            if host is not None:
                _ip("link", "delete", node.host_if, check=False)
            if mgmt is not None:
                _ip("link", "delete", MGMT_IF, ns=node.namespace, check=False)
            _ip("link", "add", node.host_if, "type", "veth",
                "peer", "name", MGMT_IF, "netns", node.namespace)
            created = True
    s_data, c_data = ns_links[SERVER.name].get(DATA_IF), ns_links[CLIENT.name].get(DATA_IF)
    if not _paired(s_data, c_data):
        if s_data is not None:
            _ip("link", "delete", DATA_IF, ns=SERVER.namespace, check=False)
        if c_data is not None:
            _ip("link", "delete", DATA_IF, ns=CLIENT.namespace, check=False)
        _ip("link", "add", DATA_IF, "netns", SERVER.namespace, "type", "veth",
            "peer", "name", DATA_IF, "netns", CLIENT.namespace)
        created = True
    if created:
        root = _links(None)
        ns_links = {n.name: _links(n.namespace) for n in NODES}
    by_ns: dict[str | None, dict[str, Link]] = {None: root}
    by_ns.update({n.namespace: ns_links[n.name] for n in NODES})

    wanted: list[tuple[str | None, str, str | None]] = []
    for node in NODES:
        wanted += [(None, node.host_if, node.host_cidr),
                   (node.namespace, "lo", None),
                   (node.namespace, MGMT_IF, node.mgmt_cidr),
                   (node.namespace, DATA_IF, node.data_cidr)]
    for ns, ifname, cidr in wanted:
        link = by_ns[ns].get(ifname)
        if link is None:
            raise TestbedError(f"local testbed: link {ifname} missing in "
                               f"{ns or 'root namespace'} after creating it")
        if cidr is not None and _v4(link) != {cidr}:
            if _v4(link):
                _ip("-4", "addr", "flush", "dev", ifname, ns=ns)
            _ip("addr", "add", cidr, "dev", ifname, ns=ns)
        if "UP" not in link.get("flags", []):
            _ip("link", "set", "dev", ifname, "up", ns=ns)


def _sshd_major_minor() -> tuple[int, int]:
    global _sshd_version
    if _sshd_version is None:
        res = _run([_tool("sshd"), "-V"], check=False)
        match = re.search(r"OpenSSH_(\d+)\.(\d+)", res.stdout + res.stderr)
        _sshd_version = (int(match.group(1)), int(match.group(2))) if match else (0, 0)
    return _sshd_version


def sshd_config_text(node: NodeSpec) -> str:
    """The sshd configuration of one node."""
    lines = [
        f"# qir local testbed: node {node.name} (netns {node.namespace}); written by up()",
        f"ListenAddress {node.mgmt_ip}",
        f"Port {SSH_PORT}",
        "AddressFamily inet",
        f"HostKey {node.host_key}",
        f"PidFile {node.pid_file}",
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        f"AuthorizedKeysFile {AUTHORIZED_KEYS}",
        "StrictModes yes",
        "UseDNS no",
        "MaxSessions 64",
        "MaxStartups 64:30:128",
        "LoginGraceTime 30",
        "X11Forwarding no",
        "PrintMotd no",
        "PrintLastLog no",
        "PermitUserEnvironment no",
        "LogLevel INFO",
        "Subsystem sftp internal-sftp",
    ]
    if _sshd_major_minor() >= (9, 8):
        # Newer sshd penalise sources that connect without authenticating (our port probes).
        lines.append("PerSourcePenalties no")
    return "\n".join(lines) + "\n"


def _stamp(node: NodeSpec, config: str) -> str:
    digest = hashlib.sha256(config.encode() + node.host_pubkey.read_bytes()).hexdigest()
    return digest + "\n"


def _stamp_current(node: NodeSpec) -> bool:
    try:
        config = node.sshd_config.read_text()
        return (config == sshd_config_text(node)
                and node.stamp_file.read_text() == _stamp(node, config))
    except OSError:
        return False


def _log_tail(node: NodeSpec) -> str:
    try:
        lines = node.log_file.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1][:200] if lines else ""


def _tmpfs_at(path: str, mounts: str) -> str | None:
    """The options of the tmpfs mounted at ``path`` in a mount table (None: none is)."""
    for entry in mounts.splitlines():
        fields = entry.split()
        if len(fields) >= 4 and fields[1] == path and fields[2] == "tmpfs":
            return fields[3]
    return None


def _scratch_visible(node: NodeSpec, pid: int | None = None) -> bool:
    """Whether the node's scratch tmpfs is mounted here (or in process ``pid``'s mounts)."""
    table = Path(f"/proc/{pid}/mounts" if pid else "/proc/self/mounts")
    try:
        return _tmpfs_at(node.tmpdir, table.read_text()) is not None
    except OSError:
        return False


def _ensure_scratch(node: NodeSpec) -> None:
    """Give the node's tmpdir its own tmpfs with transparent huge pages where the kernel has
    them: hashing and removing an 8 GiB download then costs ~1 s instead of ~3 s (2 M
    fewer pages to fault in and free). ``huge=always``: a download written by appending
    (curl) gets huge pages too, not only one whose size is set first. Mounted before the
    node's sshd starts, so the node's mount namespace holds the same file system; it stays
    until ``down --purge``."""
    options = _tmpfs_at(node.tmpdir, Path("/proc/self/mounts").read_text())
    if options is not None:
        if SCRATCH_HUGE not in options.split(","):  # mounted by an earlier version
            _run(["mount", "-o", f"remount,{SCRATCH_HUGE}", node.tmpdir], check=False)
        return
    Path(node.tmpdir).mkdir(parents=True, exist_ok=True)
    for options in (f"{SCRATCH_OPTIONS},{SCRATCH_HUGE}", SCRATCH_OPTIONS):
        if _run(["mount", "-t", "tmpfs", "-o", options, f"qir-{node.name}", node.tmpdir],
                check=False).ok:
            return
    raise TestbedError(f"local testbed: cannot mount a tmpfs on {node.tmpdir}")


def _ensure_sshd(node: NodeSpec) -> None:
    """Start (or restart) the node's sshd unless the right one already runs in its namespace
    (and sees the node's scratch file system)."""
    config = sshd_config_text(node)
    _write_if_changed(node.sshd_config, config, 0o600)
    pid = _sshd_pid(node)
    in_ns = pid is not None and _pid_ns_ident(pid) == _ns_ident(node.namespace)
    if pid is not None and in_ns and _stamp_current(node) and _scratch_visible(node, pid):
        return
    # Stop every listener started with this node's config (pid file, orphaned namespace, ...).
    _stop_sshd(node)
    node.pid_file.unlink(missing_ok=True)
    sshd = _tool("sshd")
    check = _run([sshd, "-t", "-f", str(node.sshd_config)], check=False)
    if not check.ok:
        tail = (check.stderr.strip().splitlines() or ["?"])[-1]
        raise TestbedError(f"local testbed: sshd config of {node.name} rejected: {tail}")
    # A node is a separate host: it must not run the management host's ~/.bashrc (here it
    # starts pyenv and costs ~80 ms per SSH command). `ip netns exec` gives sshd a private
    # mount namespace, so a bind mount of the node's own rc file stays inside the node.
    _write_if_changed(node.shell_rc, NODE_SHELL_RC, 0o644)
    home_rc = Path(pwd.getpwnam(SSH_USER).pw_dir) / ".bashrc"
    launch = [sshd, "-f", str(node.sshd_config), "-E", str(node.log_file)]
    # `ip netns exec` also gives the node a fresh /sys without the cgroup mounts; a real host
    # has them, and the runner reads a container's CPU time there.
    launch = ["sh", "-c", _cgroup_mount_script() + 'exec "$@"', "sshd", *launch]
    if home_rc.is_file():
        launch = ["sh", "-c", 'mount --bind "$0" "$1" && shift && exec "$@"', str(node.shell_rc),
                  str(home_rc), *launch]
    res = _run([_tool("ip"), "netns", "exec", node.namespace, *launch], check=False)
    if not res.ok:
        raise TestbedError(f"local testbed: sshd of {node.name} failed to start "
                           f"(exit {res.exit_code}): {_log_tail(node) or res.stderr.strip()}")
    _write_if_changed(node.stamp_file, _stamp(node, config), 0o600)


_MOUNT_FLAGS = {"rw", "ro", "relatime", "noatime", "nosuid", "nodev", "noexec", "seclabel"}


def _cgroup_mount_script(mounts: str | None = None) -> str:
    """Shell lines that mount, in a node's mount namespace, the cgroup file systems this
    host mounts below /sys/fs/cgroup (the same hierarchies: a v1 hierarchy mounted again with
    its controllers is the same hierarchy)."""
    text = Path("/proc/self/mounts").read_text() if mounts is None else mounts
    lines = []
    for entry in text.splitlines():
        fields = entry.split()
        if len(fields) < 4 or not fields[1].startswith("/sys/fs/cgroup"):
            continue
        _, point, fstype, opts = fields[:4]
        if fstype not in ("tmpfs", "cgroup", "cgroup2"):
            continue
        keep = ",".join(o for o in opts.split(",") if o not in _MOUNT_FLAGS and "=" not in o
                        or o.startswith("name="))
        if fstype == "tmpfs":
            keep = "mode=755"
        opt = ["-o", keep] if keep else []
        lines.append(shlex.join(["mkdir", "-p", point]) + "; " +
                     shlex.join(["mount", "-t", fstype, *opt, fstype, point]) + "; ")
    return "".join(lines)


def _wait_for_ssh(timeout: float = SSH_WAIT_S) -> None:
    """Poll until every node's sshd answers on its management address (bounded)."""
    pending = list(NODES)
    deadline = time.monotonic() + timeout
    while pending:
        pending = [n for n in pending if not _probe_ssh(n.mgmt_ip, timeout=0.5)]
        if not pending:
            return
        if time.monotonic() > deadline:
            node = pending[0]
            tail = _log_tail(node)
            raise TestbedError(
                f"local testbed: sshd of {node.name} did not answer on {node.mgmt_ip}:{SSH_PORT} "
                f"within {timeout:g} s" + (f" ({node.log_file}: {tail})" if tail else ""))
        time.sleep(0.01)


def _check_root_account() -> None:
    """With ``UsePAM no`` sshd refuses a locked root account ('!' password), even for keys."""
    try:
        for line in Path("/etc/shadow").read_text().splitlines():
            fields = line.split(":")
            if fields[0] == SSH_USER and len(fields) > 1 and fields[1].startswith("!"):
                raise TestbedError(
                    "local testbed: root account is locked ('!' in /etc/shadow), sshd with "
                    "UsePAM no refuses it; unlock for key-only login with: usermod -p '*' root")
    except OSError:
        pass


def _config_current() -> bool:
    """Keys, authorized_keys, known_hosts and sshd configs match what up() would write."""
    try:
        if (AUTHORIZED_KEYS.read_text() != _expected_authorized_keys()
                or KNOWN_HOSTS.read_text() != _expected_known_hosts()):
            return False
    except (OSError, TestbedError):
        return False
    if not (all(n.host_key.is_file() for n in NODES) and all(_stamp_current(n) for n in NODES)):
        return False
    if not all(_scratch_visible(n, _sshd_pid(n)) for n in NODES):
        return False
    return (local_docker.unavailable_reason() is not None
            or all(local_docker.is_current(n.engine) for n in NODES))


def _ensure_engines() -> None:
    """Start each node's Docker Engine unless it runs as it should; skipped (status says
    "unavailable") where docker.io is not installed."""
    if local_docker.unavailable_reason() is not None:
        return
    started = [n.engine for n in NODES if local_docker.ensure(n.engine)]
    local_docker.wait_ready(started)


def up() -> TestbedStatus:
    """Bring the local testbed up (or repair it) and return its status once SSH answers.

    Idempotent: when the testbed is already healthy this only inspects it (~40 ms on a 2-core
    VM, ~5 ms of it the engines: three ``ip`` calls, one SSH-banner probe and one engine
    ``_ping`` per node);
    otherwise every missing piece (namespace, veth, address, key, sshd, engine) is recreated.
    Raises :class:`TestbedError` when not root, a tool is missing or a step fails.
    """
    _check_prerequisites()
    with _lock():
        for node in NODES:
            _ensure_scratch(node)  # before an sshd starts (one that runs without it restarts)
        current = status()
        if current.healthy and _config_current():
            return current
        _check_root_account()
        _ensure_state()
        _ensure_namespaces()
        _ensure_links()
        for node in NODES:
            _ensure_sshd(node)
        _wait_for_ssh()
        _ensure_engines()
        result = status()
    if not result.healthy:
        raise TestbedError("local testbed: still unhealthy after up: "
                           + "; ".join(result.problems()))
    return result


# --------------------------------------------------------------------------------------------
# down()
# --------------------------------------------------------------------------------------------
def _ns_pids(ns: str) -> list[int]:
    res = _ip("netns", "pids", ns, check=False)
    return [int(tok) for tok in res.stdout.split() if tok.isdigit()] if res.ok else []


def down(purge: bool = False) -> None:
    """Tear the local testbed down: engines, sshd, every process in the namespaces, links,
    state.

    Each node's engine goes first (its containers removed, dockerd and containerd stopped,
    their mounts and exec-root removed; the image cache stays). Processes are stopped by PID
    only (sshd from its pid file, then everything listed by ``ip netns pids``, TERM then
    KILL). With ``purge`` the nodes' work and tmpfs directories (their scratch file systems
    unmounted, the cached generated file with them) and the engines' data roots
    are removed too. Idempotent.
    """
    if os.geteuid() != 0:
        raise TestbedError("local testbed: must run as root")
    with _lock():
        for node in NODES:
            local_docker.stop(node.engine, purge=purge)
        for node in NODES:
            # The pid file's sshd, plus any listener whose pid file is gone or whose
            # namespace was deleted under it (with that orphaned namespace's processes).
            _stop_sshd(node)
        for ns in NAMESPACES:
            if _ns_exists(ns):
                # Everything inside our namespaces is ours (sshd sessions, implementations).
                for _ in range(3):
                    pids = _ns_pids(ns)
                    if not pids:
                        break
                    _terminate(pids)
            if _ns_path(ns).exists():
                _ip("netns", "delete", ns, check=False)
        root = _links(None)
        for name in ROOT_LINKS:
            if name in root:
                _ip("link", "delete", name, check=False)
        if STATE_DIR.exists():
            shutil.rmtree(STATE_DIR)
        if purge:
            for node in NODES:
                if _scratch_visible(node):
                    _run(["umount", node.tmpdir], check=False)
                for path in (node.workdir, node.tmpdir):
                    shutil.rmtree(path, ignore_errors=True)
            try:
                WORK_ROOT.rmdir()
            except OSError:
                pass
