"""Where everything of the local testbed is: nodes, their addresses, links and paths.

Pure data, nothing here runs a command. The default layout (all addresses from the
benchmarking range 198.18.0.0/15)::

    root namespace (management node)     netns qir-server             netns qir-client
    qir-mg-s 198.18.0.1/30 ---veth--- mgmt0 198.18.0.2/30 (sshd :22)
    qir-mg-c 198.18.0.5/30 ---veth------------------------------------ mgmt0 198.18.0.6/30 (sshd :22)
                                      data0 198.19.0.1/24 ---veth--- data0 198.19.0.2/24

The veth pairs are data (:attr:`Layout.links`), not code: ``up`` creates, ``status`` checks and
``down`` removes whatever the list names, so another node (a router between server and client)
is another :class:`NodeSpec` and a few more :class:`VethLink` entries. The static testbed file
describing the default layout is ``configs/testbeds/local.yml``.
"""  # noqa: E501 - the address diagram above needs its full width

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from interop_runner.paths import LOCAL_TESTBED_FILE

TESTBED_NAME = "local"
TESTBED_FILE = LOCAL_TESTBED_FILE
SSH_PORT = 22
SSH_USER = "root"
MGMT_IF = "mgmt0"
DATA_IF = "data0"
MGMT_PREFIX = 30
DATA_PREFIX = 24
MGMT_NET = ipaddress.IPv4Network("198.18.0.0/24")  # one /30 per node, from the root namespace
DATA_NET = ipaddress.IPv4Network(f"198.19.0.0/{DATA_PREFIX}")  # the nodes' data link

STATE_DIR = Path("/run/qir-testbed")
LOCK_FILE = Path("/run/qir-testbed.lock")  # outside STATE_DIR: survives down()
NETNS_DIR = Path("/run/netns")
PRIVSEP_DIR = Path("/run/sshd")
WORK_ROOT = Path("/var/tmp/qir")
SCRATCH_ROOT = Path("/dev/shm")
DOCKER_RUN_ROOT = Path("/run/qir/docker")
DOCKER_DATA_ROOT = Path("/var/lib/qir/docker")

# What a link is for: its state shows in the node's `mgmt` or `data` column of `status`.
MANAGEMENT, DATA = "management", "data"


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
    state_dir: Path  # host key, sshd config, pid file and logs of the node

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


@dataclass(frozen=True)
class LinkEnd:
    """One end of a veth pair."""

    owner: str  # the node whose status covers this end (its address is checked there)
    netns: str | None  # None: the root namespace
    ifname: str
    cidr: str


@dataclass(frozen=True)
class VethLink:
    """A veth pair between two namespaces; ``up`` creates it as ``ip link add <a> ... peer
    <b>``."""

    purpose: str  # MANAGEMENT or DATA
    a: LinkEnd
    b: LinkEnd

    @property
    def ends(self) -> tuple[LinkEnd, LinkEnd]:
        """Both ends, ``a`` first."""
        return self.a, self.b

    def touches(self, node: str) -> bool:
        """Whether an end of this link belongs to ``node``."""
        return node in (self.a.owner, self.b.owner)

    def add_args(self) -> list[str]:
        """Arguments of ``ip`` (run in the root namespace) creating the pair in place."""
        return ["link", "add", self.a.ifname, *_netns_args(self.a), "type", "veth",
                "peer", "name", self.b.ifname, *_netns_args(self.b)]


def _netns_args(end: LinkEnd) -> list[str]:
    return ["netns", end.netns] if end.netns is not None else []


@dataclass(frozen=True)
class EngineLayout:
    """Where the Docker Engine of one node lives (its dockerd and containerd): sockets,
    directories, pid files and logs. Nothing here runs; see ``engines.py``."""

    node: str  # node name: server, client
    netns: Path  # /run/netns/<namespace>
    log_dir: Path  # the node's state directory
    run_root: Path  # every node's run directory and socket are below it
    data_roots: Path  # every node's data root (image cache) is below it

    @property
    def run_dir(self) -> Path:
        """Configuration and pid files (removed by ``stop``)."""
        return self.run_root / self.node

    @property
    def exec_root(self) -> Path:
        """dockerd's ``--exec-root``; our containerd keeps its socket and state below it."""
        return self.run_dir / "exec"

    @property
    def data_root(self) -> Path:
        """dockerd's ``--data-root``: the persistent image cache."""
        return self.data_roots / self.node

    @property
    def socket(self) -> Path:
        """The engine's API socket."""
        return self.run_root / f"{self.node}.sock"

    @property
    def host(self) -> str:
        """The engine's address for ``docker -H`` (the node's ``docker_host``)."""
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
class Layout:
    """The whole testbed: its nodes, the veth pairs between namespaces, and the paths of
    state, locks, work directories and engines."""

    nodes: tuple[NodeSpec, ...]
    links: tuple[VethLink, ...]
    state_dir: Path = STATE_DIR  # keys, known_hosts and one directory per node
    lock_file: Path = LOCK_FILE
    netns_dir: Path = NETNS_DIR
    privsep_dir: Path = PRIVSEP_DIR
    work_root: Path = WORK_ROOT  # the parent of the nodes' work directories
    docker_run_root: Path = DOCKER_RUN_ROOT
    docker_data_root: Path = DOCKER_DATA_ROOT

    @property
    def mgmt_key(self) -> Path:
        """The management key the runner logs in with (``.pub`` next to it)."""
        return self.state_dir / "id_ed25519"

    @property
    def mgmt_pubkey(self) -> Path:
        """The management public key."""
        return self.state_dir / "id_ed25519.pub"

    @property
    def authorized_keys(self) -> Path:
        """The one authorized_keys file of every node's sshd."""
        return self.state_dir / "authorized_keys"

    @property
    def known_hosts(self) -> Path:
        """The nodes' host keys by management address."""
        return self.state_dir / "known_hosts"

    @property
    def namespaces(self) -> tuple[str, ...]:
        """Every node's network namespace, in node order."""
        return tuple(n.namespace for n in self.nodes)

    @property
    def root_links(self) -> tuple[str, ...]:
        """The veth ends in the root namespace."""
        return tuple(e.ifname for link in self.links for e in link.ends if e.netns is None)

    def node(self, name: str) -> NodeSpec:
        """The node called ``name`` (KeyError: no such node)."""
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def netns_path(self, namespace: str) -> Path:
        """The bind mount that names a network namespace (``ip netns``)."""
        return self.netns_dir / namespace

    def links_of(self, node: str, purpose: str) -> tuple[VethLink, ...]:
        """The links for ``purpose`` with an end of ``node``."""
        return tuple(x for x in self.links if x.purpose == purpose and x.touches(node))

    def interfaces(self, node: NodeSpec) -> list[tuple[str | None, str, str | None]]:
        """``(netns, ifname, cidr)`` of every interface ``up`` sets up for the node, in order:
        its ends in the root namespace, lo (no address), its ends in its namespace."""
        ends = [e for link in self.links for e in link.ends if e.owner == node.name]
        return ([(e.netns, e.ifname, e.cidr) for e in ends if e.netns is None]
                + [(node.namespace, "lo", None)]
                + [(e.netns, e.ifname, e.cidr) for e in ends if e.netns is not None])

    def engine(self, node: NodeSpec) -> EngineLayout:
        """Where the node's Docker Engine (dockerd and containerd in its namespace) lives."""
        return EngineLayout(node.name, self.netns_path(node.namespace), node.state_dir,
                            self.docker_run_root, self.docker_data_root)

    def docker_host(self, node: str) -> str:
        """``docker_host`` of a node (``server``, ``client``): its own engine's socket."""
        return self.engine(self.node(node)).host


def management_addresses(index: int) -> tuple[str, str]:
    """Root-side and node-side address of the ``index``-th node's management /30."""
    block = list(MGMT_NET.subnets(new_prefix=MGMT_PREFIX))[index]
    host, node = list(block.hosts())
    return str(host), str(node)


def data_address(index: int) -> str:
    """The ``index``-th node's address on the data link."""
    return str(DATA_NET.network_address + 1 + index)


def endpoint(name: str, index: int, *, work_root: Path = WORK_ROOT,
             scratch_root: Path = SCRATCH_ROOT) -> NodeSpec:
    """The ``index``-th node, role ``name`` (``server``, ``client``): namespace
    ``qir-<name>``, its management /30 and data address by index."""
    host_ip, mgmt_ip = management_addresses(index)
    return NodeSpec(name=name, role=name, namespace=f"qir-{name}", host_if=f"qir-mg-{name[0]}",
                    host_ip=host_ip, mgmt_ip=mgmt_ip, data_ip=data_address(index),
                    workdir=str(work_root / name), tmpdir=str(scratch_root / f"qir-{name}"),
                    state_dir=STATE_DIR / name)


def management_link(node: NodeSpec) -> VethLink:
    """The veth pair from the root namespace to the node's mgmt0 (both ends the node's)."""
    return VethLink(MANAGEMENT, LinkEnd(node.name, None, node.host_if, node.host_cidr),
                    LinkEnd(node.name, node.namespace, MGMT_IF, node.mgmt_cidr))


def data_link(a: NodeSpec, b: NodeSpec) -> VethLink:
    """A data0 to data0 veth pair between two nodes."""
    return VethLink(DATA, LinkEnd(a.name, a.namespace, DATA_IF, a.data_cidr),
                    LinkEnd(b.name, b.namespace, DATA_IF, b.data_cidr))


def make_layout(*, work_root: Path = WORK_ROOT, scratch_root: Path = SCRATCH_ROOT,
                docker_data_root: Path = DOCKER_DATA_ROOT) -> Layout:
    """Server and client, each with a management link, and the data link between them; the
    arguments move the directories that ``down --purge`` removes (tests)."""
    server, client = (endpoint(name, i, work_root=work_root, scratch_root=scratch_root)
                      for i, name in enumerate(("server", "client")))
    links = (management_link(server), management_link(client), data_link(server, client))
    return Layout(nodes=(server, client), links=links, work_root=work_root,
                  docker_data_root=docker_data_root)


DEFAULT_LAYOUT = make_layout()
