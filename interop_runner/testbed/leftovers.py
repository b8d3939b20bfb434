"""What a killed runner leaves on the nodes, and undoing it: knob journals and processes.

``node_knobs`` builds a node's knob handler over its restore journals; ``restore_testbed``
(``run.py testbed restore``) kills the process groups a killed runner left running and replays
the journals, holding each node's lease so that a campaign still running is never touched.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from interop_runner.config.testbed import TestbedConfig
from interop_runner.remote.executor import LocalExecutor, PrivateFilesExecutor
from interop_runner.testbed.containers import reap_containers
from interop_runner.testbed.knobs import Journal, NodeKnobs
from interop_runner.testbed.node import Node

HOST_JOURNAL = "/var/tmp/qir/host-restore.sh"
PATH_JOURNAL = "path-restore.sh"  # in a node's workdir: the undo of an emulated path


def node_knobs(node: Node, testbed: TestbedConfig) -> NodeKnobs:
    """The knob handler of a node; on the local testbed sysctls go to the management host.

    The journals are private: 0600 files (written under umask 077) in 0700 directories.
    """
    node.executor.make_private_dir(node.cfg.workdir)
    journal = Journal(PrivateFilesExecutor(node.executor), f"{node.cfg.workdir}/restore.sh")
    sysctl = None
    if testbed.local:
        host = LocalExecutor("management")
        host.make_private_dir(os.path.dirname(HOST_JOURNAL))
        sysctl = Journal(PrivateFilesExecutor(host), HOST_JOURNAL)
    return NodeKnobs(node.name, node.executor, node.cfg.interface, journal, sysctl,
                     shared_sysctls=testbed.local and node.cfg.role == "client")


def path_journal(node: Node) -> Journal:
    """The journal of the emulated path built on a node (router, or server without one):
    its own file, so restoring the knobs after an attempt leaves the path in place."""
    node.executor.make_private_dir(node.cfg.workdir)
    return Journal(PrivateFilesExecutor(node.executor), f"{node.cfg.workdir}/{PATH_JOURNAL}")


def restore_testbed(testbed: TestbedConfig, timeout: float = 60.0) -> dict[str, Restored]:
    """Undo what killed runs left on the nodes (server, client and the router when the
    testbed has one): node -> what was done there.

    Kills the process groups a killed runner left running (the node's process journal),
    then replays the journals of an emulated path and of the knobs. Takes each node's lease
    first, so a campaign still running there is never touched (lease.NodeBusy). Returns only
    the nodes that had something to undo.
    """
    out: dict[str, Restored] = {}
    nodes: list[Node] = []
    router = testbed.router()
    try:
        for name, cfg in testbed.endpoint_nodes() + ([router] if router else []):
            nodes.append(Node.connect(name, cfg, "restore", timeout))
            nodes[-1].take_lease(wait=0)
        for node in nodes:
            killed = node.reap_leftovers()
            if node.cfg.role != "router":  # a router runs no containers (and may have no engine)
                killed += reap_containers(node)
            nk = node_knobs(node, testbed)
            pending = nk.journal.pending() or nk.sysctl.pending()
            path = path_journal(node)
            path_pending = path.pending()
            if killed or pending or path_pending:
                failed = (path.replay() if path_pending else []) + (
                    nk.restore(None, []) if pending else [])
                out[node.name] = Restored(killed, failed)
    finally:
        for node in nodes:
            node.close()
    return out


@dataclass
class Restored:
    """What ``restore_testbed`` did on one node."""

    killed: list[str]  # process groups a killed runner left running
    failed: list[str] = field(default_factory=list)  # undo commands that failed
