"""SSHExecutor when the connection drops at the moment a command is sent (paramiko raises
EOFError from ``exec_command``: the campaign of 2026-11-27 05:56 died on it with a
traceback): a dropped connection like any other, reconnected and reported as
ConnectionLost (the command's outcome unknown). No sshd: the transport is a fake."""

from __future__ import annotations

import paramiko
import pytest

from interop_runner.errors import ConnectionLost
from interop_runner.remote.ssh import SSHExecutor, SSHTarget


class _Channel:
    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.closed = False

    def exec_command(self, command: str) -> None:
        raise self.error

    def close(self) -> None:
        self.closed = True


class _Transport:
    def __init__(self, error: BaseException) -> None:
        self.channels: list[_Channel] = []
        self.error = error

    def is_active(self) -> bool:
        return True

    def open_session(self, timeout: float | None = None) -> _Channel:
        self.channels.append(_Channel(self.error))
        return self.channels[-1]


class _Client:
    def __init__(self, error: BaseException) -> None:
        self.transport = _Transport(error)

    def get_transport(self) -> _Transport:
        return self.transport


@pytest.mark.parametrize("error", [EOFError(), paramiko.SSHException("Channel closed."),
                                   ConnectionResetError(104, "Connection reset by peer")])
def test_a_connection_that_drops_as_the_command_is_sent_is_reconnected(
        monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    ex = SSHExecutor.__new__(SSHExecutor)
    ex.name, ex.target = "server", SSHTarget(host="node.invalid")
    ex._jump, ex._sftp = None, None
    ex._client = _Client(error)  # type: ignore[assignment]
    reconnects: list[str] = []
    monkeypatch.setattr(SSHExecutor, "_reconnect", lambda self, why: reconnects.append(why))
    with pytest.raises(ConnectionLost, match=r"server: SSH connection to node.invalid:22 "
                                             r"dropped during `rm -rf -- /x`"):
        ex.run(["rm", "-rf", "--", "/x"], timeout=5)
    assert reconnects == ["during `rm -rf -- /x`"]
    assert ex._client.transport.channels[0].closed  # type: ignore[attr-defined]
