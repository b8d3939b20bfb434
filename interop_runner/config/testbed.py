"""The testbed file: its nodes (server, client and at most one router), how the management node
reaches each over SSH, and the addresses of the path through the router."""

from __future__ import annotations

import ipaddress
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from interop_runner.config.flows import (
    written_seconds,
)
from interop_runner.config.strict import Strict


class SSHConfig(Strict):
    """How the management node reaches a node."""

    host: str
    port: int = Field(22, ge=1, le=65535)
    user: str = "root"
    key: str | None = None
    known_hosts: str | None = None
    jump: "SSHConfig | None" = None
    connect_timeout: float = Field(10.0, gt=0)

    @field_validator("connect_timeout", mode="before")
    @classmethod
    def _timeout(cls, value: Any, info: ValidationInfo) -> float:
        return written_seconds(value, info)
    # an unknown host key is refused unless this is set: then it is trusted on first use,
    # appended to `known_hosts` and recorded in campaign.json; a changed key is always refused
    trust_on_first_use: bool = False


def _ip_address(value: str) -> str:
    ipaddress.ip_address(value)
    return value


IPText = Annotated[str, AfterValidator(_ip_address)]  # an IP address, kept as written


class RoutedAddress(Strict):
    """An endpoint's interface and address on the path through the router."""

    interface: str
    ip: IPText


ENDPOINT_ROLES = ("server", "client")


class NodeConfig(Strict):
    """One node: a measurement endpoint (server, client) or the router between them."""

    role: Literal["server", "client", "router"]
    ssh: SSHConfig
    # an endpoint's data-plane interface and address; a router's interface towards the client
    # (the data direction's egress, where a bottleneck goes) and its address there
    interface: str
    ip: IPText
    workdir: str
    tmpdir: str = "/dev/shm/qir"
    # the node's Docker Engine, as the node's own docker CLI addresses it (``docker -H``); the
    # management node reaches it through the node's SSH connection (``docker system
    # dial-stdio``), never through an open port. The local testbed gives each node its own.
    docker_host: str = Field("unix:///var/run/docker.sock", pattern=r"^(unix|tcp|ssh|fd)://\S+$")
    # a router only (required there): its interface towards the server (the reverse
    # direction's egress)
    server_interface: str | None = Field(None, validate_default=True)
    # an endpoint only: its interface and address on the path through the router, where
    # `interface`/`ip` are a direct link that bypasses the router (the local testbed); without
    # it, on a testbed with a router, `interface`/`ip` already go through the router
    via_router: RoutedAddress | None = Field(None, validate_default=True)

    @field_validator("workdir", "tmpdir")
    @classmethod
    def _abs(cls, value: str) -> str:
        path = PurePosixPath(value)
        if not path.is_absolute() or len(path.parts) < 3:
            raise ValueError(f"must be an absolute path at least two levels deep, got {value!r}")
        if ".." in path.parts:  # /var/tmp/../.. would put (and later rm -rf) files elsewhere
            raise ValueError(f"must not contain '..', got {value!r}")
        return str(path)

    @field_validator("server_interface")
    @classmethod
    def _server_interface(cls, value: str | None, info: ValidationInfo) -> str | None:
        role = info.data.get("role")  # absent when the role itself was invalid
        if role == "router" and value is None:
            raise ValueError("required for a node with role router (its interface towards "
                             "the server)")
        if role in ENDPOINT_ROLES and value is not None:
            raise ValueError(f"only a router has one (this node's role is {role})")
        return value

    @field_validator("via_router")
    @classmethod
    def _via_router(cls, value: RoutedAddress | None,
                    info: ValidationInfo) -> RoutedAddress | None:
        if info.data.get("role") == "router" and value is not None:
            raise ValueError("only an endpoint (server, client) has one: a router's "
                             "`interface` and `ip` are already on the path")
        return value

    def through_router(self) -> RoutedAddress:
        """The endpoint's interface and address on the path through the router
        (``via_router``, else its own ``interface`` and ``ip``)."""
        return self.via_router or RoutedAddress(interface=self.interface, ip=self.ip)


class TestbedConfig(Strict):
    """A testbed file: the nodes of one host pair, and at most one router between them."""

    name: str
    local: bool = False
    nodes: dict[str, NodeConfig]
    # measurement port on this testbed (default: the campaign's `port`); lets two testbeds that
    # share hosts measure side by side
    port: int | None = Field(None, ge=1, le=65535)

    @field_validator("nodes")
    @classmethod
    def _roles(cls, nodes: dict[str, NodeConfig]) -> dict[str, NodeConfig]:
        roles = sorted(n.role for n in nodes.values() if n.role != "router")
        if roles != ["client", "server"]:
            raise ValueError("needs exactly one node with role server and one with role client "
                             f"(got {', '.join(roles) or 'no node'})")
        routers = [k for k, n in nodes.items() if n.role == "router"]
        if len(routers) > 1:
            raise ValueError(f"at most one node may have role router (got {', '.join(routers)})")
        return nodes

    @field_validator("nodes")
    @classmethod
    def _via_router(cls, nodes: dict[str, NodeConfig]) -> dict[str, NodeConfig]:
        endpoints = [(k, n) for k, n in nodes.items() if n.role in ENDPOINT_ROLES]
        have = [k for k, n in endpoints if n.via_router is not None]
        if not have:
            return nodes
        lack = [k for k, n in endpoints if n.via_router is None]
        if lack:
            raise ValueError(f"{have[0]} has via_router but {lack[0]} has not (give both "
                             "endpoints their address through the router, or neither)")
        if not any(n.role == "router" for n in nodes.values()):
            raise ValueError(f"via_router (on {', '.join(have)}) needs a node with role router")
        return nodes

    @model_validator(mode="after")
    def _dirs(self) -> "TestbedConfig":
        dirs = [PurePosixPath(d) for n in self.nodes.values() for d in (n.workdir, n.tmpdir)]
        for i, a in enumerate(dirs):
            for b in dirs[i + 1:]:
                if a == b or a in b.parents or b in a.parents:
                    raise ValueError(f"nodes must not share directories ({a} and {b} overlap)")
        return self

    def node(self, role: str) -> tuple[str, NodeConfig]:
        """The (name, node) with the given role (KeyError: the testbed has none)."""
        found = next(((k, n) for k, n in self.nodes.items() if n.role == role), None)
        if found is None:
            raise KeyError(f"testbed {self.name} has no node with role {role}")
        return found

    def router(self) -> tuple[str, NodeConfig] | None:
        """The (name, node) of the router, or None when server and client are linked
        directly."""
        return next(((k, n) for k, n in self.nodes.items() if n.role == "router"), None)

    def endpoint_nodes(self) -> list[tuple[str, NodeConfig]]:
        """(name, node) of the server, then the client: the nodes a campaign measures on."""
        return [self.node(role) for role in ENDPOINT_ROLES]

