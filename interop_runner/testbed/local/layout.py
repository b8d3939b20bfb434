"""Where everything of the local testbed is: nodes, their addresses, links, routes and paths.

Pure data, nothing here runs a command. The default layout (all addresses from the
benchmarking range 198.18.0.0/15)::

    root namespace (management node)   netns qir-server         netns qir-router              netns qir-client
    qir-mg-s 198.18.0.1/30 ---veth--- mgmt0 198.18.0.2/30 (sshd :22)
    qir-mg-c 198.18.0.5/30 ---veth------------------------------------------------------------- mgmt0 198.18.0.6/30 (sshd :22)
    qir-mg-r 198.18.0.9/30 ---veth----------------------------- mgmt0 198.18.0.10/30 (sshd :22, no engine)
                                    data0 198.19.0.1/24 ---------------veth---------------------- data0 198.19.0.2/24
                                    path0 198.19.1.1/24 --veth-- srv0 198.19.1.254/24
                                                                 cli0 198.19.2.254/24 --veth-- path0 198.19.2.1/24

Server and client are linked twice: directly (``data0``, what a campaign without a path
measures over) and through the router (``path0``, their ``via_router`` addresses). Routes:
the server reaches 198.19.2.0/24 via 198.19.1.254, the client 198.19.1.0/24 via 198.19.2.254;
the router forwards (``net.ipv4.ip_forward=1`` in its namespace) with tso, gso, gro and
tx-udp-segmentation off on srv0 and cli0, so it sends MTU-sized packets (also of UDP GSO
sends) as a real router with offloads off does.

The veth pairs, routes and forwarding are data (:attr:`Layout.links`, :attr:`Layout.routes`,
:attr:`Layout.forwarding`), not code: ``up`` creates, ``status`` checks and ``down`` removes
whatever the lists name. The static testbed file describing the default layout is
``configs/testbeds/local.yml``.
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

# The path through the router: one /24 on each side of it.
PATH_IF = "path0"  # an endpoint's end of the path (its via_router interface)
ROUTER_SERVER_IF = "srv0"  # the router's interface towards the server
ROUTER_CLIENT_IF = "cli0"  # ... towards the client (the data direction's egress)
PATH_PREFIX = 24
SERVER_PATH_IP, ROUTER_SERVER_IP = "198.19.1.1", "198.19.1.254"
CLIENT_PATH_IP, ROUTER_CLIENT_IP = "198.19.2.1", "198.19.2.254"
SERVER_PATH_NET = ipaddress.IPv4Network(f"{SERVER_PATH_IP}/{PATH_PREFIX}", strict=False)
CLIENT_PATH_NET = ipaddress.IPv4Network(f"{CLIENT_PATH_IP}/{PATH_PREFIX}", strict=False)
# what a router turns off on its interfaces (ethtool -K names): it then forwards MTU-sized
# packets instead of the veth's 64 KiB GSO packets. tx-udp-segmentation too: a UDP GSO packet
# (QUIC stacks send them) crosses a veth whole, and without it the router's egress would pass
# it on unsegmented (tso and gso off segment only TCP and software GSO)
ROUTER_OFFLOADS_OFF = ("tso", "gso", "gro", "tx-udp-segmentation")
ENDPOINT_OFFLOADS_OFF = ("tso", "tx-udp-segmentation")  # segmented before the path's wire

STATE_DIR = Path("/run/qir-testbed")
LOCK_FILE = Path("/run/qir-testbed.lock")  # outside STATE_DIR: survives down()
NETNS_DIR = Path("/run/netns")
PRIVSEP_DIR = Path("/run/sshd")
WORK_ROOT = Path("/var/tmp/qir")
SCRATCH_ROOT = Path("/dev/shm")
DOCKER_RUN_ROOT = Path("/run/qir/docker")
DOCKER_DATA_ROOT = Path("/var/lib/qir/docker")

# What a link is for: its state shows in the node's `mgmt`, `data` or `path` column of
# `status` (path: server and client through the router).
MANAGEMENT, DATA, PATH = "management", "data", "path"


@dataclass(frozen=True)
class NodeSpec:
    """Static description of one namespace node."""

    name: str
    role: str
    namespace: str
    host_if: str  # root-namespace end of the management veth
    host_ip: str  # address of host_if
    mgmt_ip: str  # address of mgmt0 inside the namespace (sshd listens here)
    data_ip: str | None  # address of data0 inside the namespace (None: not on the data link)
    workdir: str
    tmpdir: str
    state_dir: Path  # host key, sshd config, pid file and logs of the node
    engine: bool = True  # runs its own Docker Engine (a router does not)

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
        """Expected address of data0 with prefix (ValueError: the node has no data0)."""
        if self.data_ip is None:
            raise ValueError(f"node {self.name} is not on the data link")
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

    purpose: str  # MANAGEMENT, DATA or PATH
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
class Route:
    """A static route in a node's namespace (checked by that node's status)."""

    node: str
    dest: str  # network with prefix
    via: str  # gateway
    dev: str

    def replace_args(self) -> list[str]:
        """Arguments of ``ip -n <namespace>`` setting the route (idempotent)."""
        return ["route", "replace", self.dest, "via", self.via, "dev", self.dev]

    def __str__(self) -> str:
        return f"{self.dest} via {self.via} dev {self.dev}"


@dataclass(frozen=True)
class Forwarding:
    """A node on the path through the router: the router forwards IPv4 between its
    interfaces as a router with offloads off does (``net.ipv4.ip_forward=1`` in its
    namespace, ``forward``), and on every node of the path the ``offloads`` are off on
    ``interfaces`` (the endpoints': segmentation, so that the veth "wire" carries
    MTU-sized packets as a real one does, not 64 KB GSO/TSO batches)."""

    node: str
    interfaces: tuple[str, ...]
    offloads: tuple[str, ...] = ROUTER_OFFLOADS_OFF  # ethtool -K names, turned off
    forward: bool = True


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
    routes: tuple[Route, ...] = ()
    forwarding: tuple[Forwarding, ...] = ()
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

    @property
    def engine_nodes(self) -> tuple[NodeSpec, ...]:
        """The nodes that run a Docker Engine."""
        return tuple(n for n in self.nodes if n.engine)

    def links_of(self, node: str, purpose: str) -> tuple[VethLink, ...]:
        """The links for ``purpose`` with an end of ``node``."""
        return tuple(x for x in self.links if x.purpose == purpose and x.touches(node))

    def addresses(self, node: str, purpose: str) -> tuple[str, ...]:
        """The node's own addresses (without prefix) on its links for ``purpose``."""
        return tuple(e.cidr.split("/")[0] for link in self.links_of(node, purpose)
                     for e in link.ends if e.owner == node)

    def routes_of(self, node: str) -> tuple[Route, ...]:
        """The static routes in the node's namespace."""
        return tuple(r for r in self.routes if r.node == node)

    def forwarding_of(self, node: str) -> Forwarding | None:
        """How the node forwards (None: it does not)."""
        return next((f for f in self.forwarding if f.node == node), None)

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


def node_spec(name: str, role: str, index: int, *, data_ip: str | None, engine: bool = True,
              work_root: Path = WORK_ROOT, scratch_root: Path = SCRATCH_ROOT) -> NodeSpec:
    """The ``index``-th node: namespace ``qir-<name>``, its management /30 by index, work and
    scratch directories by name."""
    host_ip, mgmt_ip = management_addresses(index)
    return NodeSpec(name=name, role=role, namespace=f"qir-{name}", host_if=f"qir-mg-{name[0]}",
                    host_ip=host_ip, mgmt_ip=mgmt_ip, data_ip=data_ip,
                    workdir=str(work_root / name), tmpdir=str(scratch_root / f"qir-{name}"),
                    state_dir=STATE_DIR / name, engine=engine)


def endpoint(name: str, index: int, *, work_root: Path = WORK_ROOT,
             scratch_root: Path = SCRATCH_ROOT) -> NodeSpec:
    """The ``index``-th node, role ``name`` (``server``, ``client``), on the data link by
    index, with its own engine."""
    return node_spec(name, name, index, data_ip=data_address(index), work_root=work_root,
                     scratch_root=scratch_root)


def router(index: int, *, work_root: Path = WORK_ROOT,
           scratch_root: Path = SCRATCH_ROOT) -> NodeSpec:
    """The router node ``router`` (``qir-router``): not on the data link, no engine."""
    return node_spec("router", "router", index, data_ip=None, engine=False,
                     work_root=work_root, scratch_root=scratch_root)


def management_link(node: NodeSpec) -> VethLink:
    """The veth pair from the root namespace to the node's mgmt0 (both ends the node's)."""
    return VethLink(MANAGEMENT, LinkEnd(node.name, None, node.host_if, node.host_cidr),
                    LinkEnd(node.name, node.namespace, MGMT_IF, node.mgmt_cidr))


def data_link(a: NodeSpec, b: NodeSpec) -> VethLink:
    """A data0 to data0 veth pair between two nodes."""
    return VethLink(DATA, LinkEnd(a.name, a.namespace, DATA_IF, a.data_cidr),
                    LinkEnd(b.name, b.namespace, DATA_IF, b.data_cidr))


def path_link(a: NodeSpec, a_if: str, a_ip: str, b: NodeSpec, b_if: str, b_ip: str) -> VethLink:
    """A veth pair of the path through the router (``/PATH_PREFIX`` addresses)."""
    return VethLink(PATH, LinkEnd(a.name, a.namespace, a_if, f"{a_ip}/{PATH_PREFIX}"),
                    LinkEnd(b.name, b.namespace, b_if, f"{b_ip}/{PATH_PREFIX}"))


def router_path(server: NodeSpec, client: NodeSpec, middle: NodeSpec
                ) -> tuple[tuple[VethLink, ...], tuple[Route, ...], tuple[Forwarding, ...]]:
    """The path from server to client through the router ``middle``: its two links, the
    endpoints' routes to each other's side, and the router's forwarding."""
    links = (path_link(server, PATH_IF, SERVER_PATH_IP, middle, ROUTER_SERVER_IF,
                       ROUTER_SERVER_IP),
             path_link(middle, ROUTER_CLIENT_IF, ROUTER_CLIENT_IP, client, PATH_IF,
                       CLIENT_PATH_IP))
    routes = (Route(server.name, str(CLIENT_PATH_NET), ROUTER_SERVER_IP, PATH_IF),
              Route(client.name, str(SERVER_PATH_NET), ROUTER_CLIENT_IP, PATH_IF))
    return links, routes, (
        Forwarding(middle.name, (ROUTER_SERVER_IF, ROUTER_CLIENT_IF)),
        *(Forwarding(n.name, (PATH_IF,), ENDPOINT_OFFLOADS_OFF, forward=False)
          for n in (server, client)))


def make_layout(*, work_root: Path = WORK_ROOT, scratch_root: Path = SCRATCH_ROOT,
                docker_data_root: Path = DOCKER_DATA_ROOT) -> Layout:
    """Server, client and the router, each with a management link; the data link between
    server and client and the path through the router; the arguments move the directories
    that ``down --purge`` removes (tests)."""
    dirs = {"work_root": work_root, "scratch_root": scratch_root}
    server, client = (endpoint(name, i, **dirs) for i, name in enumerate(("server", "client")))
    middle = router(2, **dirs)
    path, routes, forwarding = router_path(server, client, middle)
    links = (*(management_link(n) for n in (server, client, middle)),
             data_link(server, client), *path)
    return Layout(nodes=(server, client, middle), links=links, routes=routes,
                  forwarding=forwarding, work_root=work_root,
                  docker_data_root=docker_data_root)


DEFAULT_LAYOUT = make_layout()
