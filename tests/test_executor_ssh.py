"""SSHExecutor against the real sshd of a local-testbed node."""

from __future__ import annotations

import os
import signal
import time

import pytest

from interop_runner.remote.executor import CommandFailed, CommandTimeout
from interop_runner.remote.ssh import SSHExecutor
from interop_runner.testbed.node import ssh_target

from .conftest import kill_ssh_sessions, stray_processes, wait_until


@pytest.fixture
def server(local_testbed):
    _, node = local_testbed.node("server")
    ex = SSHExecutor("server", ssh_target(node.ssh))
    yield ex
    ex.close()


def test_run_quotes_argv_and_reports_exit(server):
    res = server.run(["printf", "%s|", "a b", "$(id)", "'q'"], timeout=10)
    assert res.stdout == "a b|$(id)|'q'|" and res.stderr == ""
    res = server.run(["sh", "-c", "echo bad >&2; exit 4"], timeout=10, check=False)
    assert (res.exit_code, res.stderr) == (4, "bad\n")
    with pytest.raises(CommandFailed, match="exited 4: bad"):
        server.run(["sh", "-c", "echo bad >&2; exit 4"], timeout=10)


def test_runs_inside_the_node(server):
    assert server.run(["ip", "netns", "identify"], timeout=10).stdout.strip() == "qir-server"


def test_timeout_kills_remote_process_group(server):
    t0 = time.monotonic()
    with pytest.raises(CommandTimeout):  # a group that outlives the timeout: the scenario
        server.run(["sh", "-c", "sleep 100 & sleep 100"], timeout=0.5)
    assert time.monotonic() - t0 < 5
    assert stray_processes("qir-server") == []


def test_background_over_ssh(server):
    server.run(["mkdir", "-p", "/var/tmp/qir/server/t"], timeout=10)
    out = "/var/tmp/qir/server/t/bg.out"
    # the scenario: a group (shell and a grandchild) that runs until it is stopped
    proc = server.start(["sh", "-c", "echo started; sleep 100 & sleep 100"], stdout=out,
                        stderr=out + ".err")
    assert server.poll(proc) is None and server.alive(proc)
    wait_until(lambda: server.read_text(out) == "started\n", timeout=20,
               what=f"'started' in {out}")
    assert server.read_text(out) == "started\n"
    server.stop(proc, grace=2)
    assert not server.alive(proc)
    assert stray_processes("qir-server") == []
    proc = server.start(["sh", "-c", "exit 3"], stdout=out, stderr=out + ".err")
    assert server.wait(proc, timeout=10) == 3
    server.run(["rm", "-rf", "/var/tmp/qir/server/t"], timeout=10)


def test_file_transfer(server, tmp_path):
    src = tmp_path / "tree"
    (src / "a").mkdir(parents=True)
    (src / "a" / "run").write_text("#!/bin/sh\necho hi\n")
    (src / "a" / "run").chmod(0o755)
    remote = "/var/tmp/qir/server/ft"
    server.put_dir(src, remote)
    assert server.run([f"{remote}/a/run"], timeout=10).stdout == "hi\n"
    server.write_text(f"{remote}/x.txt", "payload")
    server.get(f"{remote}/x.txt", tmp_path / "back.txt")
    assert (tmp_path / "back.txt").read_text() == "payload"
    server.run(["rm", "-rf", remote], timeout=10)


# paramiko's read-ahead thread of the cut transfer dies with the connection (its own thread)
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
@pytest.mark.parametrize("direction", ["get", "put"])
def test_sftp_transfer_cut_midway_reconnects_and_completes(server, tmp_path, direction):
    """The connection dropped in the middle of a file transfer: the executor reconnects
    (bounded backoff) and transfers the whole file again; the result is byte-identical."""
    import hashlib
    import threading

    size = 256 * 2**20
    remote = "/dev/shm/qir-sftp-cut"
    local_file = tmp_path / "file"
    if direction == "get":
        server.run(["sh", "-c", f"head -c {size} /dev/urandom >{remote}"], timeout=60)
        target = tmp_path / "back"
    else:
        local_file.write_bytes(os.urandom(size))
        target = local_file
    seen = {"killed": 0}

    def cut() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if direction == "get":
                done = target.stat().st_size if target.exists() else 0
            else:
                assert server_probe is not None
                done = int(server_probe.run(["sh", "-c", f"stat -c %s {remote} 2>/dev/null "
                                             "|| echo 0"], timeout=10).stdout.strip() or 0)
            if done > size // 4:
                seen["killed"] = kill_ssh_sessions("qir-server", signal.SIGKILL)
                return
            time.sleep(0.005)  # poll interval (bounded by the deadline above)

    # a second connection watches the remote file grow (it is cut as well)
    server_probe = SSHExecutor("probe", server.target) if direction == "put" else None
    try:
        before = server.reconnects
        thread = threading.Thread(target=cut)
        thread.start()
        t0 = time.monotonic()
        if direction == "get":
            server.get(remote, target)
        else:
            server.put(local_file, remote)
        thread.join(timeout=70)
        assert seen["killed"] >= 1, "the connection was never cut"
        assert server.reconnects == before + 1
        assert time.monotonic() - t0 < 120
        want = server.run(["sha256sum", remote], timeout=60).stdout.split()[0]
        if direction == "get":
            assert hashlib.sha256(target.read_bytes()).hexdigest() == want
            assert target.stat().st_size == size
        else:
            assert hashlib.sha256(local_file.read_bytes()).hexdigest() == want
    finally:
        if server_probe is not None:
            server_probe.close()
        server.run(["rm", "-f", remote], timeout=10)


def test_a_file_error_is_not_taken_for_a_dropped_connection(server, tmp_path):
    before = server.reconnects
    with pytest.raises(FileNotFoundError):
        server.get("/nonexistent/qir-file", tmp_path / "x")
    with pytest.raises(FileNotFoundError):
        server.read_bytes("/nonexistent/qir-file")
    assert server.reconnects == before
