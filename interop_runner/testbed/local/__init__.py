"""The embedded local testbed: network namespaces on this machine acting as nodes (server,
client, and the router between them).

One module per concern, the state in one object:

* ``layout``: nodes, addresses (198.18.0.0/15), veth links, routes and the router's
  forwarding as data, paths (pure);
* ``host``: the commands the testbed runs and the tools it found (the mutable state);
* ``processes``: finding processes through /proc and stopping them by PID;
* ``links``: namespaces, veth pairs, addresses;
* ``routes``: the endpoints' routes through the router, its forwarding and offloads;
* ``keys``, ``sshd``, ``scratch``: each node's SSH keys, sshd and scratch tmpfs;
* ``engines``, ``engine_start``, ``engine_stop``: the Docker Engine of each node that has
  one (server and client; the router has none);
* ``status``: what ``status`` reports; ``testbed``: :class:`LocalTestbed`, up/down/status.

:data:`TESTBED` is the testbed of the default layout (``configs/testbeds/local.yml``);
:func:`up`, :func:`down` and :func:`status` act on it.
"""

from __future__ import annotations

from interop_runner.testbed.local.host import REQUIRED_TOOLS, Host, find_tool
from interop_runner.testbed.local.layout import (
    DATA_IF,
    DEFAULT_LAYOUT,
    MGMT_IF,
    PATH_IF,
    SSH_PORT,
    SSH_USER,
    TESTBED_FILE,
    TESTBED_NAME,
    EngineLayout,
    Layout,
    NodeSpec,
    make_layout,
)
from interop_runner.testbed.local.status import NodeStatus, TestbedStatus
from interop_runner.testbed.local.testbed import LocalTestbed

TESTBED = LocalTestbed(DEFAULT_LAYOUT)
SERVER, CLIENT, ROUTER = (DEFAULT_LAYOUT.node(name) for name in ("server", "client", "router"))
NODES = DEFAULT_LAYOUT.nodes  # server, client, router


def up() -> TestbedStatus:
    """Bring the default local testbed up or repair it (:meth:`LocalTestbed.up`)."""
    return TESTBED.up()


def down(purge: bool = False) -> None:
    """Tear the default local testbed down (:meth:`LocalTestbed.down`)."""
    TESTBED.down(purge=purge)


def status() -> TestbedStatus:
    """Inspect the default local testbed (:meth:`LocalTestbed.status`)."""
    return TESTBED.status()


def docker_host(node: str) -> str:
    """``docker_host`` of a node (``server``, ``client``): its own engine's socket."""
    return DEFAULT_LAYOUT.docker_host(node)


__all__ = [
    "CLIENT", "DATA_IF", "DEFAULT_LAYOUT", "MGMT_IF", "NODES", "PATH_IF", "REQUIRED_TOOLS",
    "ROUTER", "SERVER", "SSH_PORT", "SSH_USER", "TESTBED", "TESTBED_FILE", "TESTBED_NAME",
    "EngineLayout", "Host", "Layout", "LocalTestbed", "NodeSpec", "NodeStatus", "TestbedStatus",
    "docker_host", "down", "find_tool", "make_layout", "status", "up",
]
