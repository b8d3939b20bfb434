"""What ``status`` reports of the local testbed: one :class:`NodeStatus` per node and the
whole :class:`TestbedStatus`, with its problems and the table ``run.py testbed status``
prints."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from interop_runner.testbed.local.engines import NOT_RUNNING, UNAVAILABLE, EngineStatus
from interop_runner.testbed.local.layout import DATA_IF, MGMT_IF, SSH_PORT


@dataclass(frozen=True)
class NodeStatus:
    """Observed state of one namespace node."""

    name: str
    namespace: str
    mgmt_ip: str
    data_ip: str | None  # None: the node is not on the data link (the router)
    namespace_exists: bool
    lo_up: bool
    mgmt_link_up: bool  # its management veths paired, up, with the expected addresses
    data_link_up: bool  # its data veths paired with their peers, up, with its addresses
    sshd_pid: int | None  # PID of our sshd (alive, ours), whatever its namespace
    sshd_running: bool  # sshd_pid alive *inside this node's namespace*
    ssh_reachable: bool  # port 22 on the management IP answers with an SSH banner
    engine: EngineStatus | None  # the node's Docker Engine (None: the node has none)
    path_ips: tuple[str, ...] = ()  # its addresses on the path through the router
    path_link_up: bool = True  # its path veths paired, up, with its addresses
    routing: tuple[str, ...] = ()  # what is wrong with its routes or forwarding

    @property
    def healthy(self) -> bool:
        """True when every check of this node passes (an engine only where the node has one
        and docker.io is installed)."""
        return (self.namespace_exists and self.lo_up and self.mgmt_link_up
                and self.data_link_up and self.path_link_up and not self.routing
                and self.sshd_running and self.ssh_reachable
                and (self.engine is None or self.engine.state != NOT_RUNNING))

    def problems(self) -> list[str]:
        """Short descriptions of the failing checks."""
        checks = [
            (self.namespace_exists, f"namespace {self.namespace} missing"),
            (self.lo_up, "lo down"),
            (self.mgmt_link_up, f"management link ({MGMT_IF} {self.mgmt_ip}) not up"),
            (self.data_link_up, f"data link ({DATA_IF} {self.data_ip}) not up"),
            (self.path_link_up, f"path link ({', '.join(self.path_ips)}) not up"),
            *((False, problem) for problem in self.routing),
            (self.sshd_running, "sshd not running"),
            (self.ssh_reachable, f"ssh {self.mgmt_ip}:{SSH_PORT} not reachable"),
            (self.engine is None or self.engine.state != NOT_RUNNING,
             f"docker engine not running ({self.engine and self.engine.detail})"),
        ]
        return [f"{self.name}: {msg}" for ok, msg in checks if not ok]

    def row(self) -> tuple[str, ...]:
        """The node's row of the status table (:data:`COLUMNS`)."""
        sshd = (f"pid {self.sshd_pid}" if self.sshd_running
                else f"pid {self.sshd_pid}?" if self.sshd_pid else "--")
        data = "n/a" if self.data_ip is None else f"{_yes_no(self.data_link_up)} {self.data_ip}"
        path = (f"{_yes_no(self.path_link_up)} {','.join(self.path_ips)}" if self.path_ips
                else "n/a")
        return (self.name, self.namespace, _yes_no(self.namespace_exists), _yes_no(self.lo_up),
                f"{_yes_no(self.mgmt_link_up)} {self.mgmt_ip}", data, path,
                _yes_no(not self.routing), sshd, _yes_no(self.ssh_reachable),
                _engine_cell(self.engine))


COLUMNS = ("node", "namespace", "netns", "lo", "mgmt", "data", "path", "routing", "sshd", "ssh",
           "docker")


def _yes_no(ok: bool) -> str:
    return "ok" if ok else "--"


def _engine_cell(engine: EngineStatus | None) -> str:
    if engine is None:
        return "none"
    if engine.state == UNAVAILABLE:
        return "n/a"
    return (f"pid {engine.pid}" if engine.running
            else f"pid {engine.pid}?" if engine.pid else "--")


@dataclass(frozen=True)
class TestbedStatus:
    """Observed state of the whole local testbed."""

    __test__ = False  # not a pytest test class despite the name

    nodes: dict[str, NodeStatus]
    keys_present: bool  # management key, authorized_keys and known_hosts exist
    state_dir: Path  # where the keys are

    @property
    def healthy(self) -> bool:
        """True when the keys exist and every node is healthy."""
        return self.keys_present and all(n.healthy for n in self.nodes.values())

    def problems(self) -> list[str]:
        """Short descriptions of everything that is wrong (empty when healthy)."""
        out = [] if self.keys_present else [f"keys missing in {self.state_dir}"]
        for node in self.nodes.values():
            out += node.problems()
        return out

    def render(self) -> str:
        """A short human-readable table."""
        rows = [COLUMNS, *(n.row() for n in self.nodes.values())]
        widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
        lines = [f"local testbed: {'healthy' if self.healthy else 'NOT healthy'}"
                 f" (keys in {self.state_dir}: {'ok' if self.keys_present else 'missing'})"]
        lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        unavailable = [n.engine.detail for n in self.nodes.values()
                       if n.engine is not None and n.engine.state == UNAVAILABLE]
        if unavailable:
            lines.append(f"  containers: unavailable ({unavailable[0]})")
        return "\n".join(lines)
