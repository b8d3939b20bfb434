"""One side of an attempt run as a container image, as the QUIC Interop Runner runs it.

The QIR endpoint contract: ``ROLE``, ``TESTCASE`` (QIR's names: ``transfer`` for hq-interop,
``http3`` for h3), ``REQUESTS``, ``SSLKEYLOGFILE``, ``QLOGDIR``; ``/www``, ``/downloads``,
``/certs``, ``/logs``; the host names ``server``/``server4``/``server46`` (and ``client``…)
mapped to the data-plane addresses and ``sim`` to a listener on the client node that satisfies
the images' wait for the simulator. Unlike QIR, containers use host networking, so packets
leave through the node's real NIC, and the image's simulator set-up (``/setup.sh``: routes,
offloads) is prevented: a runner-owned script is mounted over it, and the container gets no
NET_ADMIN/NET_RAW, so nothing in it can change the node's routes, offloads or sysctls.

Every container carries the campaign and the node directory as labels, which is the journal a
later campaign or ``run.py testbed restore`` uses to remove what a killed runner left.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from interop_runner.config.implementations import QIR_TESTCASES, ImplementationMeta
from interop_runner.errors import ExecutorError
from interop_runner.parsers.cgroup import CGROUP_ROOT, accounting_dir, cgroup_cpu_seconds
from interop_runner.parsers.common import ParseError
from interop_runner.remote.docker_engine import LABEL_CAMPAIGN, LABEL_WORKDIR, ContainerSpec
from interop_runner.remote.executor import Background
from interop_runner.testbed.containers import RMDIRS, cgroup_root
from interop_runner.testbed.node import Node

SIM_PORT = 57832  # QIR's images wait for the simulator's TCP port: sim:57832
NETWORK_SETUP_NOTE = "prevented"
SETUP_SHIM = """#!/bin/sh
# Mounted over the image's /setup.sh by the Extended QUIC Interop Runner. QIR's set-up script
# prepares routes and offloads for its ns-3 simulator; with host networking it would change the
# node itself, so it does not run. QIR's script also creates /logs/qlog: so does this one.
mkdir -p /logs/qlog 2>/dev/null || true
echo "qir: the image's network set-up (/setup.sh) was prevented: host networking, the node's \
routes, offloads and sysctls stay as they are" >&2
echo prevented >/logs/qir-network-setup.txt 2>/dev/null || true
exit 0
"""
# Accepts and closes connections on 127.0.0.1:SIM_PORT until stopped (the simulator's port).
_SIM_LISTENER = (
    "import socket\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    f"s.bind(('127.0.0.1', {SIM_PORT})); s.listen(64)\n"
    "while True:\n"
    "    s.accept()[0].close()\n"
)
# Wait until the server listens on the port or its container's cgroup is gone (it exited).
_READY = (
    'procs=$0; flag=$1; port=$2; '
    'while :; do '
    '  if [ ! -e "$procs" ]; then echo exited; exit 0; fi; '
    '  if [ -n "$(ss -H "$flag" "sport = :$port")" ]; then echo ready; exit 0; fi; '
    '  sleep 0.005; '
    'done'
)
# The PIDs in the container's parent cgroup (cgroup v2 or v1's cpuacct), every 0.02 s until
# stopped (perf's process filter). Started before the container is, so a client that ends
# within one tick is seen too; appended unsorted, so stopping it loses nothing.
_WATCH = ('while :; do cat "$0"/*/cgroup.procs "$1"/*/cgroup.procs 2>/dev/null; sleep 0.02; '
          'done >>"$2"')
_CPU = ('d=$0; getconf CLK_TCK; cat "$d/cpuacct.stat" 2>/dev/null || cat "$d/cpu.stat"')


def qir_testcase(testcase: str, alpn: str | None) -> str:
    """The QIR test case name for our test case and the pair's protocol (unknown: ours, which
    a QIR image answers with 127)."""
    if testcase == "goodput" and alpn in QIR_TESTCASES:
        return QIR_TESTCASES[alpn]
    return testcase


def hosts_map(server_ip: str, client_ip: str) -> dict[str, str]:
    """The host names QIR images use, mapped to this testbed's data-plane addresses."""
    return {"server": server_ip, "server46": server_ip,
            ("server6" if ":" in server_ip else "server4"): server_ip,
            "client": client_ip, "client46": client_ip,
            ("client6" if ":" in client_ip else "client4"): client_ip, "sim": "127.0.0.1"}


def cgroup_parent(node: Node, token: str) -> str:
    """The cgroup the attempt's container goes below (its CPU stays readable there)."""
    return f"{cgroup_root(node.name)}/{token}"


@dataclass
class ClientOutcome:
    """How a client container ended, with times and CPU on the client node."""

    exit_code: int | None  # None: timed out
    start_ns: int | None
    end_ns: int | None
    pid: int | None
    cpu_user_s: float | None
    cpu_system_s: float | None


class ContainerSide:
    """A container for one side of one attempt; always removed by :meth:`remove`."""

    def __init__(self, node: Node, meta: ImplementationMeta, image: str, logs: str,
                 token: str, downloads: str | None = None) -> None:
        self.node, self.meta, self.image, self.logs = node, meta, image, logs
        self.token = token
        # a client's /downloads (a flow's own directory when several clients share the node)
        self.downloads = downloads or node.downloads
        self.cid: str | None = None
        self.pid: int | None = None
        self.procs_file: str | None = None
        self._watch: Background | None = None
        self._sim: Background | None = None

    @property
    def role(self) -> str:
        return self.node.cfg.role

    def spec(self, env: dict[str, str], server_ip: str, client_ip: str) -> ContainerSpec:
        """The container as QIR would run it, on host networking, set-up prevented."""
        node = self.node
        shim = f"{node.scratch}/qir-setup.sh"
        mounts = [(shim, "/setup.sh", True), (node.certs, "/certs", True), (self.logs, "/logs",
                                                                              False)]
        mounts.append((node.www, "/www", True) if self.role == "server"
                      else (self.downloads, "/downloads", False))
        return ContainerSpec(
            image=self.image, name=f"qir-{node.name}-{self.token}", env=env, mounts=mounts,
            extra_hosts=hosts_map(server_ip, client_ip),
            labels={LABEL_CAMPAIGN: node.campaign_id, LABEL_WORKDIR: node.cfg.workdir,
                    "qir.role": self.role, "qir.implementation": self.meta.name},
            cgroup_parent=cgroup_parent(node, self.token))

    def start(self, env: dict[str, str], server_ip: str, client_ip: str,
              watch_pids: bool = False) -> None:
        """Create and start the container; find where its processes are accounted. With
        ``watch_pids`` its PIDs are recorded from before it starts (``pids.txt``)."""
        self.create(env, server_ip, client_ip)
        assert self.cid is not None
        if watch_pids:
            self._watch_pids()
        self.node.engine().start_created(self.cid)
        self.find_accounting()

    def create(self, env: dict[str, str], server_ip: str, client_ip: str) -> None:
        """Create the container without starting it (with what it needs on the node: the
        set-up shim, a client's simulator listener)."""
        node = self.node
        node.executor.write_bytes(f"{node.scratch}/qir-setup.sh", SETUP_SHIM.encode(), 0o755)
        if self.role == "client":
            self._start_sim_listener()
        self.cid = node.engine().create(self.spec(env, server_ip, client_ip))

    def attach_argv(self) -> list[str]:
        """The command that starts the created container on the node and waits for it,
        attached: it exits with the container's code and passes signals on to it (a flow's
        client, started at its scheduled time and stopped at its duration)."""
        assert self.cid is not None
        return ["docker", "-H", self.node.cfg.docker_host, "start", "--attach", self.cid]

    def find_accounting(self) -> None:
        """The started container's PID and the cgroup that accounts its CPU."""
        node = self.node
        assert self.cid is not None
        state = node.engine().state(self.cid)
        self.pid = state.pid
        if state.pid is None:
            return  # exited already: the caller reads its exit code
        res = node.run(["cat", f"/proc/{state.pid}/cgroup"], check=False)
        try:
            self.procs_file = f"{accounting_dir(res.stdout)}/cgroup.procs"
        except ParseError:
            self.procs_file = None

    def _start_sim_listener(self) -> None:
        node = self.node
        if node.run(["ss", "-H", "-ltn", f"sport = :{SIM_PORT}"]).stdout.strip():
            return  # anything listening there satisfies the wait
        self._sim = node.executor.start(["python3", "-c", _SIM_LISTENER],
                                        stdout=f"{self.logs}/sim-listener.log",
                                        stderr=f"{self.logs}/sim-listener.err")
        node.run(["sh", "-c", 'until [ -n "$(ss -H -ltn "sport = :$0")" ]; do '
                  'sleep 0.005; done', str(SIM_PORT)], timeout=30)

    def wait_ready(self, flag: str, port: int, timeout: float) -> str:
        """``ready`` once the server listens, else ``exited`` (ExecutorError on timeout)."""
        if self.procs_file is None:
            return "exited"
        return self.node.run(["sh", "-c", _READY, self.procs_file, flag, str(port)],
                             timeout=timeout).stdout.strip()

    def _watch_pids(self) -> None:
        """Record the PIDs of the container's cgroup until :meth:`remove` (``pids.txt``)."""
        parent = cgroup_parent(self.node, self.token)
        self._watch = self.node.executor.start(
            ["sh", "-c", _WATCH, f"{CGROUP_ROOT}{parent}", f"{CGROUP_ROOT}/cpuacct{parent}",
             f"{self.logs}/pids.txt"],
            stdout=f"{self.logs}/pid-watch.log", stderr=f"{self.logs}/pid-watch.err")

    def run_client(self, timeout: float) -> ClientOutcome:
        """Wait for the client container; its times are the engine's, on the client node."""
        assert self.cid is not None
        engine = self.node.engine()
        code = engine.wait(self.cid, timeout)
        if code is None:
            return ClientOutcome(None, None, None, self.pid, None, None)
        state = engine.state(self.cid)
        user, system = self.cpu()
        return ClientOutcome(code, state.started_ns, state.finished_ns, self.pid, user, system)

    def cpu(self) -> tuple[float | None, float | None]:
        """User and system CPU seconds of every process the container ran (also after it
        ended: its parent cgroup keeps them until :meth:`remove`)."""
        if self.procs_file is not None:
            parents = [os.path.dirname(os.path.dirname(self.procs_file))]
        else:  # never seen running (a flow's client): where cgroup v2 or v1 put its parent
            parent = cgroup_parent(self.node, self.token)
            parents = [f"{CGROUP_ROOT}{parent}", f"{CGROUP_ROOT}/cpuacct{parent}"]
        for directory in parents:
            res = self.node.run(["sh", "-c", _CPU, directory], check=False)
            lines = res.stdout.splitlines()
            try:
                return cgroup_cpu_seconds("\n".join(lines[1:]), int(lines[0]))
            except (ParseError, ValueError, IndexError):
                continue
        return None, None

    def stop(self, grace: float) -> int | None:
        """Stop the container (SIGTERM, SIGKILL after ``grace``); its exit code."""
        if self.cid is None:
            return None
        return self.node.engine().stop(self.cid, grace)

    def save_logs(self) -> None:
        """The container's stdout/stderr as ``<role>.stdout.log``/``.stderr.log`` in LOGS."""
        if self.cid is None:
            return
        out, err = self.node.engine().logs(self.cid)
        self.node.executor.write_bytes(f"{self.logs}/{self.role}.stdout.log", out)
        self.node.executor.write_bytes(f"{self.logs}/{self.role}.stderr.log", err)

    def record(self) -> dict[str, Any]:
        """What run.json keeps about the container."""
        return {"image": self.image, "id": self.cid, "network_setup": NETWORK_SETUP_NOTE,
                "network": "host"}

    def remove(self) -> list[str]:
        """Remove the container, its helpers and its cgroups; problems as warnings."""
        problems: list[str] = []
        node = self.node
        for proc in (self._watch, self._sim):
            if proc is not None:
                try:
                    node.executor.stop(proc, grace=2)
                except ExecutorError as exc:
                    problems.append(f"{node.name}: {exc}")
        if self.cid is not None:
            try:
                node.engine().remove(self.cid)
            except ExecutorError as exc:
                problems.append(f"{node.name}: container {self.cid[:12]} not removed: {exc}")
        node.run(["sh", "-c", RMDIRS, cgroup_parent(node, self.token), CGROUP_ROOT],
                 check=False)
        return problems
