"""The SSH half of the executor: one persistent paramiko connection per node.

Same interface as :class:`~interop_runner.remote.executor.LocalExecutor` (see that module's
docstring for commands, background processes and the process journal). What is particular to
SSH lives here: host key checking (known_hosts, trust on first use), reconnecting with bounded
backoff after a dropped connection (commands, SFTP transfers, and the hooks in
``after_reconnect`` such as the node lease), and holding a command for the life of a channel.
"""

from __future__ import annotations

import fcntl
import logging
import os
import select
import shlex
import socket
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence, TypeVar

import paramiko

from interop_runner.errors import ConnectError, ConnectionLost, HostKeyError
from interop_runner.remote.executor import CommandTimeout, Executor, Held
from interop_runner.remote.protocol import (
    open_private_file,
    output_before_ready,
    split_pgid_marker,
    wrapped_argv,
)
from interop_runner.storage.layout import PRIVATE_FILE_MODE

_T = TypeVar("_T")
_log = logging.getLogger(__name__)


def _os_error_text(exc: OSError) -> str:
    """'Connection refused' rather than paramiko's '[Errno None] Unable to connect ...'."""
    errors = getattr(exc, "errors", None)  # paramiko.ssh_exception.NoValidConnectionsError
    if errors:
        exc = next(iter(errors.values()))
    if isinstance(exc, socket.timeout):
        return "timed out"
    return (exc.strerror or str(exc)).lower() if exc.strerror else str(exc)


class _Dropped(Exception):
    """Internal: the transport died under a running command."""


def _send(chan: paramiko.Channel, command: str) -> None:
    """Start ``command`` on the channel, its stdin closed; a connection that drops as the
    command is sent (paramiko: EOFError, SSHException, a reset socket) is :class:`_Dropped`."""
    try:
        chan.exec_command(command)
    except (paramiko.SSHException, OSError, EOFError):
        raise _Dropped() from None
    chan.shutdown_write()


class _SSHHeld(Held):
    def __init__(self, chan: paramiko.Channel) -> None:
        self.chan = chan

    def close(self) -> None:
        try:
            self.chan.close()
        except Exception:  # a dead connection: the command has ended with it
            pass

    def alive(self) -> bool:
        transport = self.chan.get_transport()
        return (not self.chan.closed and not self.chan.exit_status_ready()
                and transport is not None and transport.is_active())


@dataclass(frozen=True)
class SSHTarget:
    """Where and how to reach a node over SSH."""

    host: str
    port: int = 22
    user: str = "root"
    key: str | None = None
    known_hosts: str | None = None
    jump: "SSHTarget | None" = None
    connect_timeout: float = 10.0
    trust_on_first_use: bool = False


class _TrustOnFirstUse(paramiko.MissingHostKeyPolicy):
    """Accept an unknown host key, append it to the known_hosts file and note it.

    Only called by paramiko for hosts without any known key; a host whose known key differs
    raises :class:`paramiko.BadHostKeyException` before a policy is asked.
    """

    def __init__(self, known: Path, node: str, trusted: list[dict[str, str]]) -> None:
        self.known, self.node, self.trusted = known, node, trusted

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str,
                         key: paramiko.PKey) -> None:
        """Trust ``key`` for ``hostname`` (``host`` or ``[host]:port``) from now on."""
        line = f"{hostname} {key.get_name()} {key.get_base64()}\n"
        self.known.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.known, os.O_RDWR | os.O_CREAT | os.O_APPEND, PRIVATE_FILE_MODE)
        with os.fdopen(fd, "r+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)  # parallel testbed workers may append at once
            fh.seek(0)
            if line not in fh.readlines():
                fh.write(line)
        client.get_host_keys().add(hostname, key.get_name(), key)
        entry = {"node": self.node, "host": hostname, "key_type": key.get_name(),
                 "fingerprint": key.fingerprint, "known_hosts": str(self.known)}
        self.trusted.append(entry)
        _log.warning("%s: trusting the unknown host key of %s on first use (%s %s); "
                     "added to %s", self.node, hostname, key.get_name(), key.fingerprint,
                     self.known)


class SSHExecutor(Executor):
    """Runs commands on a node over one persistent paramiko connection."""

    def __init__(self, name: str, target: SSHTarget) -> None:
        self.name = name
        self.target = target
        # host keys accepted on first use by this executor (recorded in campaign.json)
        self.trusted_host_keys: list[dict[str, str]] = []
        # called after the connection was re-established (e.g. to take the node lease again)
        self.after_reconnect: list[Callable[[], None]] = []
        self._jump: paramiko.SSHClient | None = None
        self._client = self._connect(target)
        self._sftp: paramiko.SFTPClient | None = None

    def _connect(self, t: SSHTarget) -> paramiko.SSHClient:
        sock = None
        if t.jump is not None:
            self._jump = SSHExecutor._open_client(t.jump, None, self.name,
                                                  self.trusted_host_keys)
            transport = self._jump.get_transport()
            assert transport is not None
            try:
                sock = transport.open_channel("direct-tcpip", (t.host, t.port), ("127.0.0.1", 0))
            except (paramiko.SSHException, OSError) as exc:
                raise ConnectError(
                    f"{self.name}: jump host {t.jump.host} cannot reach {t.host}:{t.port}: {exc}"
                ) from None
        return SSHExecutor._open_client(t, sock, self.name, self.trusted_host_keys)

    @staticmethod
    def _open_client(t: SSHTarget, sock: object, name: str,
                     trusted: list[dict[str, str]] | None = None) -> paramiko.SSHClient:
        """Connect and authenticate; host keys as the module docstring says. ``trusted``
        collects the keys accepted on first use."""
        client = paramiko.SSHClient()
        known = Path(t.known_hosts or "~/.ssh/known_hosts").expanduser()
        if known.exists():
            try:
                client.load_host_keys(str(known))
            except (OSError, paramiko.SSHException) as exc:
                raise ConnectError(f"{name}: cannot read {known}: {exc}") from None
        if t.trust_on_first_use:
            client.set_missing_host_key_policy(
                _TrustOnFirstUse(known, name, trusted if trusted is not None else []))
        else:
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            client.connect(
                t.host, port=t.port, username=t.user,
                key_filename=str(Path(t.key).expanduser()) if t.key else None,
                timeout=t.connect_timeout, banner_timeout=t.connect_timeout,
                auth_timeout=t.connect_timeout, allow_agent=t.key is None,
                look_for_keys=t.key is None, sock=sock,  # type: ignore[arg-type]
            )
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise HostKeyError(
                f"{name}: host key of {t.host}:{t.port} does not match {known} (offered "
                f"{exc.key.get_name()} {exc.key.fingerprint}, known {exc.expected_key.get_name()} "
                f"{exc.expected_key.fingerprint}): refusing to connect; if the host was "
                f"reinstalled, check the new key and remove the old line from {known}"
            ) from None
        except paramiko.SSHException as exc:
            client.close()
            if "not found in known_hosts" in str(exc):
                raise ConnectError(
                    f"{name}: host key of {t.host}:{t.port} is not in {known} (add it after "
                    f"checking its fingerprint, or set ssh.trust_on_first_use: true)"
                ) from None
            raise ConnectError(f"{name}: SSH to {t.user}@{t.host}:{t.port} failed: {exc}") from None
        except OSError as exc:
            raise ConnectError(
                f"{name}: cannot connect to {t.host}:{t.port}: {_os_error_text(exc)}") from None
        transport = client.get_transport()
        if transport is not None:
            transport.set_keepalive(15)
            if isinstance(transport.sock, socket.socket):
                # Without it every command waits ~40 ms for Nagle/delayed-ACK.
                transport.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return client

    # reconnecting after a dropped connection: this many tries, waiting reconnect_delay s
    # before the second and doubling up to reconnect_max_delay (about 16 s in all), then give up
    reconnect_tries = 6
    reconnect_delay = 0.5
    reconnect_max_delay = 8.0
    reconnects = 0  # how often this executor re-established its connection
    sftp_timeout = 120.0  # s without any progress of an SFTP operation: the link is dead
    _gave_up: str | None = None

    def _live_transport(self) -> paramiko.Transport:
        """The connection's transport, re-established first when it has dropped."""
        transport = self._client.get_transport()
        if transport is None or not transport.is_active():
            self._reconnect("connection lost")
            transport = self._client.get_transport()
            assert transport is not None
        return transport

    def _reconnect(self, why: str) -> None:
        """Reconnect with bounded exponential backoff; else ConnectError naming the host."""
        if self._gave_up is not None:
            raise ConnectError(self._gave_up)
        for closing in (self._sftp, self._client, self._jump):
            try:
                if closing is not None:
                    closing.close()
            except Exception:  # a dead connection may fail to close; it is dropped anyway
                pass
        self._sftp = None
        t0, delay, last = time.monotonic(), self.reconnect_delay, ""
        for attempt in range(self.reconnect_tries):
            if attempt:
                time.sleep(delay)
                delay = min(delay * 2, self.reconnect_max_delay)
            try:
                self._client = self._connect(self.target)
            except HostKeyError:
                raise
            except ConnectError as exc:
                last = str(exc).removeprefix(f"{self.name}: ")
                continue
            self.reconnects += 1
            for hook in self.after_reconnect:
                try:
                    hook()
                except Exception as exc:  # the command that reconnected must still run
                    _log.warning("%s: after reconnecting: %s", self.name, exc)
            return
        self._gave_up = (f"{self.name}: SSH connection to {self.target.host}:{self.target.port} "
                         f"lost ({why}) and not re-established after {self.reconnect_tries} "
                         f"tries in {time.monotonic() - t0:.0f} s: {last}")
        raise ConnectError(self._gave_up)

    def _exec(self, argv: Sequence[str], timeout: float) -> tuple[int, str, str, float]:
        command = shlex.join(wrapped_argv(argv))
        transport = self._live_transport()
        t0 = time.monotonic()
        try:
            chan = transport.open_session(timeout=30)
        except (paramiko.SSHException, OSError, EOFError):  # dropped before the command ran
            self._reconnect("connection lost")
            transport = self._live_transport()
            chan = transport.open_session(timeout=30)
        pgid: int | None = None
        out: list[bytes] = []
        err: list[bytes] = []
        try:
            _send(chan, command)
            deadline = t0 + timeout
            while True:
                if chan.recv_ready():
                    out.append(chan.recv(1 << 16))
                    continue
                if chan.recv_stderr_ready():
                    err.append(chan.recv_stderr(1 << 16))
                    if pgid is None:
                        pgid, _ = split_pgid_marker(b"".join(err).decode(errors="replace"))
                    continue
                if not transport.is_active() and chan.exit_status == -1:
                    raise _Dropped()
                if chan.exit_status_ready() and chan.eof_received:
                    break
                if time.monotonic() > deadline:
                    raise CommandTimeout(self.name, argv, timeout)
                select.select([chan], [], [], 0.01)
            code = chan.recv_exit_status()
        except _Dropped:
            if pgid is None:
                pgid, _ = split_pgid_marker(b"".join(err).decode(errors="replace"))
            what = shlex.join(argv)
            self._reconnect(f"during `{what[:60]}`")  # ConnectError when it cannot
            if pgid is not None:
                self.kill_group(pgid)  # what ran on the node for the lost command
            raise ConnectionLost(
                f"{self.name}: SSH connection to {self.target.host}:{self.target.port} dropped "
                f"during `{what[:80]}` (reconnected; the command's outcome is unknown)") from None
        except BaseException:
            if pgid is None:
                pgid, _ = split_pgid_marker(b"".join(err).decode(errors="replace"))
            if pgid is not None:
                self.kill_group(pgid)
            raise
        finally:
            chan.close()
        _, err_s = split_pgid_marker(b"".join(err).decode(errors="replace"))
        return code, b"".join(out).decode(errors="replace"), err_s, time.monotonic() - t0

    def hold(self, argv: Sequence[str], ready: str, timeout: float
             ) -> tuple[Held | None, int, str]:
        chan = self._live_transport().open_session(timeout=30)
        buf, deadline = b"", time.monotonic() + timeout
        try:
            chan.exec_command(shlex.join([str(a) for a in argv]))
            while True:
                if (before := output_before_ready(buf, ready)) is not None:
                    return _SSHHeld(chan), 0, before
                if chan.recv_ready():
                    buf += chan.recv(4096)
                    continue
                if chan.exit_status_ready() and chan.eof_received:
                    code = chan.recv_exit_status()
                    chan.close()
                    return None, code, buf.decode(errors="replace")
                if time.monotonic() > deadline:
                    raise CommandTimeout(self.name, argv, timeout)
                select.select([chan], [], [], 0.05)
        except BaseException:
            chan.close()
            raise

    def open_stream(self, argv: Sequence[str], timeout: float = 30.0) -> paramiko.Channel:
        """Start ``argv`` on the node in a new channel of this connection and return the
        channel as a byte stream to its stdin/stdout (``docker system dial-stdio``)."""
        chan = self._live_transport().open_session(timeout=timeout)
        chan.settimeout(timeout)
        chan.exec_command(shlex.join([str(a) for a in argv]))
        return chan

    @property
    def sftp(self) -> paramiko.SFTPClient:
        """The node's SFTP session (opened on first use)."""
        if self._sftp is None:
            self._live_transport()
            self._sftp = self._client.open_sftp()
            # a silently dead link would otherwise block a read forever
            self._sftp.get_channel().settimeout(self.sftp_timeout)  # type: ignore[union-attr]
        return self._sftp

    def _file_op(self, what: str, op: Callable[[paramiko.SFTPClient], _T]) -> _T:
        """Run an SFTP operation; when the connection drops during it, reconnect (with the
        same bounded backoff as commands) and run it once more from the start. Every
        operation here can be repeated: files are written whole, renamed into place, or
        truncated and fetched again."""
        try:
            return op(self.sftp)
        except TimeoutError:  # no byte for sftp_timeout s: the connection is as good as gone
            pass
        except (OSError, EOFError, paramiko.SSHException) as exc:
            transport = self._client.get_transport()
            if isinstance(exc, OSError) and exc.errno is not None and transport is not None \
                    and transport.is_active():
                raise  # a real file error (no such file, permission): not the connection
        self._sftp = None
        self._reconnect(f"during sftp {what}")
        return op(self.sftp)

    def put(self, local: Path | str, remote: str) -> None:
        def op(sftp: paramiko.SFTPClient) -> None:
            sftp.put(str(local), remote)
            sftp.chmod(remote, stat.S_IMODE(os.stat(local).st_mode))

        self._file_op(f"put {remote}", op)

    def get(self, remote: str, local: Path | str) -> None:
        def op(sftp: paramiko.SFTPClient) -> None:
            with open_private_file(local) as fh:  # truncated on each try
                sftp.getfo(remote, fh)

        self._file_op(f"get {remote}", op)

    def write_bytes(self, remote: str, data: bytes, mode: int = 0o644) -> None:
        tmp = f"{remote}.tmp{os.getpid()}"

        def op(sftp: paramiko.SFTPClient) -> None:
            with sftp.open(tmp, "wb") as fh:
                fh.write(data)
            sftp.chmod(tmp, mode)
            sftp.posix_rename(tmp, remote)

        self._file_op(f"write {remote}", op)

    def read_bytes(self, remote: str) -> bytes:
        def op(sftp: paramiko.SFTPClient) -> bytes:
            with sftp.open(remote, "rb") as fh:
                return fh.read()

        return self._file_op(f"read {remote}", op)

    def close(self) -> None:
        if self._sftp is not None:
            self._sftp.close()
            self._sftp = None
        self._client.close()
        if self._jump is not None:
            self._jump.close()
