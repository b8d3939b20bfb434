"""SSHExecutor against the real sshd of a local-testbed node."""

from __future__ import annotations

import time

import pytest

from interop_runner.executor import CommandFailed, CommandTimeout, SSHExecutor
from interop_runner.nodes import ssh_target

from .conftest import stray_processes


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
    with pytest.raises(CommandTimeout):
        server.run(["sh", "-c", "sleep 100 & sleep 100"], timeout=0.5)
    assert time.monotonic() - t0 < 5
    assert stray_processes("qir-server") == []


def test_background_over_ssh(server):
    server.run(["mkdir", "-p", "/var/tmp/qir/server/t"], timeout=10)
    out = "/var/tmp/qir/server/t/bg.out"
    proc = server.start(["sh", "-c", "echo started; sleep 100 & sleep 100"], stdout=out,
                        stderr=out + ".err")
    assert server.poll(proc) is None and server.alive(proc)
    time.sleep(0.2)
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
