"""A node's Docker Engine, driven with the Docker SDK through the node's SSH connection.

No Docker port is ever opened on a node: every API request travels in a channel of the
node's existing (host-key checked) paramiko connection, to ``docker system dial-stdio`` run on
the node, which relays it to the engine's socket (``NodeConfig.docker_host``). A node reached
without SSH (``LocalExecutor``) talks to the socket directly.
"""

from __future__ import annotations

import calendar
import io
import re
import shlex
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import docker
import docker.errors
import paramiko
import requests.adapters
import requests.exceptions
import urllib3.connection
import urllib3.connectionpool
from requests import PreparedRequest

from interop_runner.errors import EngineError, ExecutorError
from interop_runner.remote.executor import Executor
from interop_runner.remote.ssh import SSHExecutor

API_VERSION = "1.41"  # Debian 12's docker.io 20.10; every newer engine still serves it
_BASE_URL = "tcp://qir-node:2375"  # a placeholder: requests never leave the SSH channel
_MOUNT_PREFIX = "http://qir-node:2375"
LABEL_CAMPAIGN = "qir.campaign"
LABEL_WORKDIR = "qir.workdir"


class _ChannelConnection(urllib3.connection.HTTPConnection):
    """An HTTP connection whose socket is a fresh dial-stdio channel."""

    def __init__(self, dial: Callable[[float], paramiko.Channel], timeout: float) -> None:
        super().__init__("qir-node", timeout=timeout)
        self._dial, self._timeout = dial, timeout

    def connect(self) -> None:
        self.sock = self._dial(self._timeout)


class _ChannelPool(urllib3.connectionpool.HTTPConnectionPool):
    def __init__(self, dial: Callable[[float], paramiko.Channel], timeout: float) -> None:
        super().__init__("qir-node", timeout=timeout, maxsize=4)
        self._dial, self._conn_timeout = dial, timeout

    def _new_conn(self) -> _ChannelConnection:
        return _ChannelConnection(self._dial, self._conn_timeout)


class _ChannelAdapter(requests.adapters.HTTPAdapter):
    """Sends every request of the SDK through :class:`_ChannelPool`."""

    def __init__(self, dial: Callable[[float], paramiko.Channel], timeout: float) -> None:
        self._pool = _ChannelPool(dial, timeout)
        super().__init__()

    def get_connection_with_tls_context(self, request: PreparedRequest, verify: bool | str | None,
                                        proxies: Mapping[str, str] | None = None,
                                        cert: Any = None) -> _ChannelPool:
        return self._pool

    def get_connection(self, url: str | bytes, proxies: Mapping[str, str] | None = None
                       ) -> _ChannelPool:
        return self._pool

    def close(self) -> None:
        self._pool.close()


def sdk_client(executor: Executor, docker_host: str, timeout: float = 120.0
               ) -> docker.DockerClient:
    """A Docker SDK client for the engine at ``docker_host`` on the executor's node."""
    if not isinstance(executor, SSHExecutor):
        return docker.DockerClient(base_url=docker_host, version=API_VERSION, timeout=int(timeout))
    argv = ["docker", "-H", docker_host, "system", "dial-stdio"]

    def dial(t: float) -> paramiko.Channel:
        return executor.open_stream(argv, timeout=t)

    client = docker.DockerClient(base_url=_BASE_URL, version=API_VERSION, timeout=int(timeout))
    client.api.mount(_MOUNT_PREFIX, _ChannelAdapter(dial, timeout))
    return client


@dataclass
class ContainerSpec:
    """One container as the runner starts it: host networking, no extra capabilities."""

    image: str
    name: str
    env: dict[str, str]
    mounts: list[tuple[str, str, bool]]  # (path on the node, path in the container, read-only)
    extra_hosts: dict[str, str]
    labels: dict[str, str]
    cgroup_parent: str | None = None
    # Without NET_ADMIN/NET_RAW an image cannot change the node's routes, offloads or sysctls
    # (host networking shares them); /proc/sys is read-only in any unprivileged container.
    cap_drop: list[str] = field(default_factory=lambda: ["NET_ADMIN", "NET_RAW", "SYS_ADMIN",
                                                         "SYS_MODULE"])
    entrypoint: list[str] | None = None
    command: list[str] | None = None


@dataclass
class ContainerState:
    """What the engine says about a container (times on the node's clock, ns since epoch)."""

    running: bool
    exit_code: int | None
    pid: int | None
    started_ns: int | None
    finished_ns: int | None


_RFC3339 = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")


def rfc3339_ns(stamp: str) -> int | None:
    """``2026-11-24T10:00:01.123456789Z`` -> ns since the epoch; None for Docker's zero time."""
    match = _RFC3339.match(stamp)
    if match is None or stamp.startswith("0001-"):
        return None
    whole, frac, zone = match.groups()
    secs = calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S"))
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        secs -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return secs * 1_000_000_000 + int((frac or "0").ljust(9, "0")[:9])


class Engine:
    """The operations the runner needs from one node's engine; errors become EngineError."""

    def __init__(self, node: str, executor: Executor, docker_host: str,
                 timeout: float = 120.0) -> None:
        self.node, self.executor, self.docker_host = node, executor, docker_host
        self.client = sdk_client(executor, docker_host, timeout)

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except docker.errors.DockerException as exc:
            raise EngineError(f"{self.node}: docker {what}: {_short(exc)}") from None
        except (requests.exceptions.RequestException, paramiko.SSHException, OSError) as exc:
            raise EngineError(f"{self.node}: docker engine at {self.docker_host} unreachable "
                              f"({what}): {_short(exc)}") from None

    def ping(self) -> str:
        """The engine's version (EngineError when it does not answer)."""
        with self._errors("version"):
            return str(self.client.version().get("Version", "?"))

    def image_id(self, ref: str) -> str | None:
        """The image id of ``ref`` on this engine, None when it is not there."""
        with self._errors(f"image inspect {ref}"):
            try:
                return str(self.client.api.inspect_image(ref)["Id"])  # type: ignore[no-untyped-call]
            except docker.errors.ImageNotFound:
                return None

    def image_attrs(self, ref: str) -> dict[str, Any]:
        """``docker image inspect`` of ``ref``."""
        with self._errors(f"image inspect {ref}"):
            return dict(self.client.api.inspect_image(ref))  # type: ignore[no-untyped-call]

    def build(self, context_tar: bytes, tag: str, buildargs: Mapping[str, str],
              timeout: float) -> list[str]:
        """Build ``tag`` from a tar of its context; return the build log lines."""
        log: list[str] = []
        with self._errors(f"build {tag}"):
            stream = self.client.api.build(fileobj=io.BytesIO(context_tar), custom_context=True,
                                           tag=tag, buildargs=dict(buildargs), rm=True,
                                           forcerm=True, decode=True, network_mode="none",
                                           timeout=int(timeout))
            for chunk in stream:
                if "stream" in chunk:
                    log.extend(ln for ln in str(chunk["stream"]).splitlines() if ln.strip())
                if "error" in chunk:
                    raise EngineError(f"{self.node}: docker build {tag} failed: "
                                      f"{str(chunk['error']).strip()}")
        return log

    def pull(self, ref: str, timeout: float) -> None:
        """Pull ``ref`` from its registry (the node needs access to it)."""
        with self._errors(f"pull {ref}"):
            repo, _, tag = ref.partition("@") if "@" in ref else ref.rpartition(":")
            self.client.api.pull(repo or ref, tag=tag or None)

    def load_file(self, path: str, timeout: float) -> None:
        """``docker load`` of an archive already on the node (copied there over SFTP)."""
        self._cli(["load", "-i", path], timeout)

    def import_file(self, path: str, ref: str, timeout: float) -> None:
        """``docker import`` of a root file system tarball already on the node as ``ref``."""
        self._cli(["import", path, ref], timeout)

    def _cli(self, args: list[str], timeout: float) -> None:
        try:
            self.executor.run(["docker", "-H", self.docker_host, *args], timeout=timeout)
        except ExecutorError as exc:
            raise EngineError(f"{self.node}: docker {shlex.join(args)}: {exc}") from None

    def start(self, spec: ContainerSpec) -> str:
        """Create and start a container; return its id."""
        cid = self.create(spec)
        self.start_created(cid)
        return cid

    def start_created(self, cid: str) -> None:
        """Start a container made by :meth:`create`."""
        with self._errors(f"start {cid[:12]}"):
            self.client.api.start(cid)

    def create(self, spec: ContainerSpec) -> str:
        """Create a container without starting it; return its id."""
        with self._errors(f"create {spec.image}"):
            api = self.client.api
            host_config = api.create_host_config(
                network_mode="host", binds=[f"{h}:{c}:{'ro' if ro else 'rw'}"
                                            for h, c, ro in spec.mounts],
                extra_hosts=dict(spec.extra_hosts), cap_drop=list(spec.cap_drop),
                cgroup_parent=spec.cgroup_parent, init=False)
            created = api.create_container(
                spec.image, command=spec.command, entrypoint=spec.entrypoint, name=spec.name,
                environment=dict(spec.env), labels=dict(spec.labels), host_config=host_config)
            return str(created["Id"])

    def state(self, cid: str) -> ContainerState:
        """The container's state now."""
        with self._errors(f"inspect {cid[:12]}"):
            st = self.client.api.inspect_container(cid)["State"]
        running = bool(st.get("Running"))
        return ContainerState(
            running=running, exit_code=None if running else int(st.get("ExitCode", -1)),
            pid=int(st["Pid"]) or None if st.get("Pid") else None,
            started_ns=rfc3339_ns(str(st.get("StartedAt", ""))),
            finished_ns=None if running else rfc3339_ns(str(st.get("FinishedAt", ""))))

    def wait(self, cid: str, timeout: float) -> int | None:
        """Block until the container exits; its exit code, or None after ``timeout`` s."""
        try:
            with self._errors(f"wait {cid[:12]}"):
                return int(self.client.api.wait(cid, timeout=max(1, int(timeout)))["StatusCode"])
        except EngineError:
            if self.state(cid).running:
                return None
            raise

    def logs(self, cid: str) -> tuple[bytes, bytes]:
        """The container's (stdout, stderr) so far."""
        with self._errors(f"logs {cid[:12]}"):
            out = self.client.api.logs(cid, stdout=True, stderr=False)
            err = self.client.api.logs(cid, stdout=False, stderr=True)
        return bytes(out), bytes(err)

    def stop(self, cid: str, grace: float) -> int | None:
        """SIGTERM, SIGKILL after ``grace`` s; the exit code (None if it was not running)."""
        with self._errors(f"stop {cid[:12]}"):
            self.client.api.stop(cid, timeout=max(1, int(grace)))
        return self.state(cid).exit_code

    def remove(self, cid: str) -> None:
        """Remove the container (killed first if it still runs); gone already is fine."""
        with self._errors(f"rm {cid[:12]}"):
            try:
                self.client.api.remove_container(cid, force=True, v=True)
            except docker.errors.NotFound:
                pass

    def labelled(self, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        """Every container (running or not) carrying all of ``labels``."""
        with self._errors("ps"):
            found = self.client.api.containers(
                all=True, filters={"label": [f"{k}={v}" for k, v in labels.items()]})
        return [dict(c) for c in found]

    def close(self) -> None:
        """Release the SDK client's connections."""
        try:
            self.client.close()
        except Exception:  # closing a channel of a dead connection may fail; nothing leaks
            pass


def _short(exc: BaseException) -> str:
    text = str(getattr(exc, "explanation", None) or exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
