"""The local testbed as one object: :class:`LocalTestbed` brings it up, tears it down and
reports its state, from its :class:`~.layout.Layout` (what should exist) and its
:class:`~.host.Host` (the commands it runs and what it learnt about the machine).

``up`` is idempotent and cheap when everything is already in place: it first takes a
``status`` snapshot and returns at once when the testbed is healthy; otherwise every step
checks the current state and only does what is missing (so it also repairs a half-made
testbed). ``down`` removes everything again, stopping processes by PID only; the engines'
image caches and each node's scratch tmpfs (with the server's cached file) survive it unless
``purge`` is given.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import time
from contextlib import contextmanager
from typing import Iterator

from interop_runner.errors import TestbedError
from interop_runner.testbed.local import (
    engine_start,
    engine_stop,
    engines,
    keys,
    links,
    processes,
    routes,
    scratch,
    sshd,
)
from interop_runner.testbed.local.host import Host
from interop_runner.testbed.local.layout import (
    DATA,
    DEFAULT_LAYOUT,
    MANAGEMENT,
    PATH,
    Layout,
    NodeSpec,
)
from interop_runner.testbed.local.status import NodeStatus, TestbedStatus

LOCK_WAIT_S = 120.0


def _require_root() -> None:
    if os.geteuid() != 0:
        raise TestbedError("local testbed: must run as root")


class LocalTestbed:
    """The namespace testbed on this machine: its layout and everything learnt while
    driving it (the one place of the testbed's mutable state is :attr:`host`)."""

    def __init__(self, layout: Layout = DEFAULT_LAYOUT, host: Host | None = None) -> None:
        self.layout = layout
        self.host = host or Host()

    # ----------------------------------------------------------------------------------------
    # status
    # ----------------------------------------------------------------------------------------
    def status(self) -> TestbedStatus:
        """Inspect the testbed (namespaces, links, addresses, routes and forwarding, sshd, SSH
        port, engines) without changing it."""
        present = {n.name: links.ns_exists(self.layout, n.namespace) for n in self.layout.nodes}
        seen = links.observe(self.host, self.layout, present)
        routing = routes.observe(self.host, self.layout, present)
        nodes = {n.name: self._node_status(n, seen, routing, present[n.name])
                 for n in self.layout.nodes}
        return TestbedStatus(nodes=nodes, keys_present=keys.keys_present(self.layout),
                             state_dir=self.layout.state_dir)

    def _node_status(self, node: NodeSpec, seen: links.SeenLinks, routing: routes.SeenRouting,
                     present: bool) -> NodeStatus:
        mgmt_ok = seen.links_ok(self.layout, node.name, MANAGEMENT)
        pid = sshd.listener_pid(node)
        return NodeStatus(
            name=node.name, namespace=node.namespace, mgmt_ip=node.mgmt_ip,
            data_ip=node.data_ip, namespace_exists=present, lo_up=seen.lo_up(node),
            mgmt_link_up=mgmt_ok, data_link_up=seen.links_ok(self.layout, node.name, DATA),
            sshd_pid=pid, sshd_running=present and sshd.running_in_node(self.layout, node, pid),
            # Probe only when the management route exists; otherwise the connect would leave
            # through the default route and time out.
            ssh_reachable=mgmt_ok and sshd.probe_ssh(node.mgmt_ip),
            engine=engines.status(self.host, self.layout.engine(node)) if node.engine else None,
            path_ips=self.layout.addresses(node.name, PATH),
            path_link_up=seen.links_ok(self.layout, node.name, PATH),
            routing=tuple(routes.problems(self.layout, routing, node)),
        )

    # ----------------------------------------------------------------------------------------
    # up
    # ----------------------------------------------------------------------------------------
    def up(self) -> TestbedStatus:
        """Bring the local testbed up (or repair it) and return its status once SSH answers.

        Idempotent: when the testbed is already healthy this only inspects it (four ``ip addr``
        calls, the routes of server and client, the router's forwarding and offloads, one
        SSH-banner probe per node and one engine ``_ping`` per node with an engine); otherwise
        every missing piece (namespace, veth, address, route, forwarding, key, sshd, engine) is
        recreated. Raises :class:`TestbedError` when not root, a tool is
        missing or a step fails.
        """
        _require_root()
        self.host.check_tools()
        with self._lock():
            for node in self.layout.nodes:
                # before an sshd starts (one that runs without it restarts)
                scratch.ensure_scratch(self.host, node)
            current = self.status()
            if current.healthy and self._config_current():
                return current
            self._repair()
            result = self.status()
        if not result.healthy:
            raise TestbedError("local testbed: still unhealthy after up: "
                               + "; ".join(result.problems()))
        return result

    def _repair(self) -> None:
        """Every step of ``up``, each doing only what is missing."""
        sshd.check_root_account()
        keys.ensure_state(self.host, self.layout)
        links.ensure_namespaces(self.host, self.layout)
        links.ensure_links(self.host, self.layout)
        routes.ensure(self.host, self.layout)
        for node in self.layout.nodes:
            sshd.ensure_sshd(self.host, self.layout, node)
        sshd.wait_for_ssh(self.layout)
        self._ensure_engines()

    def _config_current(self) -> bool:
        """Keys, authorized_keys, known_hosts, sshd configs and engines match what ``up``
        would make now."""
        if not (keys.keys_current(self.layout) and sshd.sshd_current(self.host, self.layout)):
            return False
        return (self.host.engines_unavailable() is not None
                or all(engines.is_current(self.host, self.layout.engine(n))
                       for n in self.layout.engine_nodes))

    def _ensure_engines(self) -> None:
        """Start the Docker Engine of each node that has one unless it runs as it should;
        skipped (status says "unavailable") where docker.io is not installed."""
        if self.host.engines_unavailable() is not None:
            return
        started = [self.layout.engine(n) for n in self.layout.engine_nodes
                   if engine_start.ensure(self.host, self.layout.engine(n))]
        engine_start.wait_ready(started)

    # ----------------------------------------------------------------------------------------
    # down
    # ----------------------------------------------------------------------------------------
    def down(self, purge: bool = False) -> None:
        """Tear the local testbed down: engines, sshd, every process in the namespaces,
        links (with the routes and forwarding in the namespaces), state.

        Each node's engine goes first (its containers removed, dockerd and containerd
        stopped, their mounts and exec-root removed; the image cache stays). Processes are
        stopped by PID only (sshd from its pid file, then everything listed by ``ip netns
        pids``, TERM then KILL). With ``purge`` the nodes' work and tmpfs directories (their
        scratch file systems unmounted, the cached generated file with them) and the
        engines' data roots are removed too. Idempotent.
        """
        _require_root()
        with self._lock():
            for node in self.layout.engine_nodes:
                engine_stop.stop(self.host, self.layout.engine(node), purge=purge)
            for node in self.layout.nodes:
                # The pid file's sshd, plus any listener whose pid file is gone or whose
                # namespace was deleted under it (with that orphaned namespace's processes).
                sshd.stop_sshd(self.layout, node)
            for ns in self.layout.namespaces:
                if links.ns_exists(self.layout, ns):
                    processes.stop_namespace(self.host, ns)
                links.delete_namespace(self.host, self.layout, ns)
            links.delete_root_links(self.host, self.layout)
            if self.layout.state_dir.exists():
                shutil.rmtree(self.layout.state_dir)
            if purge:
                self._remove_node_dirs()

    def _remove_node_dirs(self) -> None:
        for node in self.layout.nodes:
            scratch.remove_node_dirs(self.host, node)
        try:
            self.layout.work_root.rmdir()
        except OSError:
            pass

    # ----------------------------------------------------------------------------------------
    @contextmanager
    def _lock(self, timeout: float = LOCK_WAIT_S) -> Iterator[None]:
        """Serialise up()/down() between processes (e.g. parallel test sessions)."""
        lock_file = self.layout.lock_file
        lock_file.parent.mkdir(parents=True, exist_ok=True)
        with open(lock_file, "a") as fh:
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
                            f"local testbed: {lock_file} is held by another process") from None
                    time.sleep(0.05)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
