"""The node lease (one runner per node directory): locally, then over real SSH on the testbed."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from interop_runner.errors import NodeBusy
from interop_runner.remote.executor import LocalExecutor
from interop_runner.remote.lease import Lease, holder, owner_line
from interop_runner.testbed.node import Node

from .conftest import ROOT, TESTBED_FILE, stray_processes, wait_until, write


def test_second_lease_is_refused_naming_the_holder(tmp_path):
    ex = LocalExecutor("n")
    first = Lease(ex, str(tmp_path / "w"), "campaign A")
    first.take()
    try:
        assert first.held
        assert holder(ex, str(tmp_path / "w"), wait=0) == "campaign A"
        with pytest.raises(NodeBusy, match=r"n: .*/w is in use by campaign A; wait"):
            Lease(ex, str(tmp_path / "w"), "campaign B").take(wait=0)
        # owner file and lock are private to the user
        assert stat.S_IMODE((tmp_path / "w" / "lease.owner").stat().st_mode) == 0o600
    finally:
        first.release()
    assert not first.held
    assert holder(ex, str(tmp_path / "w")) is None
    second = Lease(ex, str(tmp_path / "w"), "campaign B")
    second.take(wait=0)
    assert holder(ex, str(tmp_path / "w"), wait=0) == "campaign B"
    second.release()


def test_a_free_directory_has_no_holder_and_is_not_created_by_peeking(tmp_path):
    assert holder(LocalExecutor("n"), str(tmp_path / "nowhere")) is None
    assert not (tmp_path / "nowhere").exists()


def test_the_lease_ends_with_the_runner_that_held_it(tmp_path):
    """A runner killed with SIGKILL holds nothing: its lock ends with its connection."""
    code = ("import sys, time; sys.path.insert(0, sys.argv[1]);"
            "from interop_runner.remote.executor import LocalExecutor;"
            "from interop_runner.remote.lease import Lease;"
            "Lease(LocalExecutor('n'), sys.argv[2], 'killed runner').take();"
            "print('held', flush=True); time.sleep(600)")  # holds it until killed below
    proc = subprocess.Popen([sys.executable, "-c", code, str(ROOT), str(tmp_path / "w")],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    ex = LocalExecutor("n")
    assert holder(ex, str(tmp_path / "w"), wait=0) == "killed runner"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    lease = Lease(ex, str(tmp_path / "w"), "next runner")
    t0 = time.monotonic()
    lease.take(wait=10)  # waits for the dead runner's `cat` to see end of file
    assert time.monotonic() - t0 < 5
    lease.release()


def test_a_waiting_runner_gets_the_lease_once_the_holder_releases_it(tmp_path):
    ex = LocalExecutor("n")
    first = Lease(ex, str(tmp_path / "w"), "first")
    first.take()
    import threading

    # the scenario: the holder releases after 1 s; the waiter cannot have it any earlier
    timer = threading.Timer(1.0, first.release)
    timer.start()
    second = Lease(ex, str(tmp_path / "w"), "second")
    t0 = time.monotonic()
    second.take(wait=10)
    assert 0.8 < time.monotonic() - t0 < 8
    assert holder(ex, str(tmp_path / "w"), wait=0) == "second"
    second.release()
    timer.join()


def test_owner_line_names_campaign_pid_and_host():
    line = owner_line("c_20261123T000000Z")
    assert line.startswith("campaign c_20261123T000000Z (runner pid ")
    assert f"pid {os.getpid()} on " in line


# -- over SSH on the local testbed ------------------------------------------------------------

def run_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


@pytest.mark.usefixtures("local_testbed")
def test_busy_testbed_refuses_a_second_campaign_and_restore(tmp_path, local_testbed):
    name, cfg = local_testbed.node("server")
    node = Node.connect(name, cfg, "other_20261123T000000Z")
    try:
        node.take_lease()
        assert node.lease_holder() is not None
        config = write(tmp_path / "c.yml", f"""testbed: {TESTBED_FILE}
name: second
file_size: 1MiB
pairs: [{{server: quic-go, client: quic-go}}]
""")
        proc = run_cli("run", str(config), "--results-dir", str(tmp_path / "results"),
                       "--no-progress")
        assert proc.returncode == 1
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert "server" in lines[0] and "in use by campaign other_20261123T000000Z" in lines[0]
        assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())
        proc = run_cli("testbed", "restore")
        assert proc.returncode == 1
        assert "in use by campaign other_20261123T000000Z" in proc.stderr
    finally:
        node.close()
    # closing the connection gave the lease up: the next runner finds it free
    probe = Node.connect(name, cfg, "probe")
    try:
        wait_until(lambda: probe.lease_holder() is None, timeout=10, interval=0.1,
                   what="the closed connection's lease to end")
        assert probe.lease_holder() is None
    finally:
        probe.close()


@pytest.mark.usefixtures("local_testbed")
def test_restore_kills_what_a_killed_runner_left_running(tmp_path, local_testbed):
    """A process group a runner journaled and never stopped (it was killed) is killed by
    `run.py testbed restore`; nothing else is."""
    name, cfg = local_testbed.node("client")
    node = Node.connect(name, cfg, "killed_20261123T000000Z")
    try:
        node.run(["mkdir", "-p", f"{cfg.tmpdir}/killed_20261123T000000Z"])
        bg = node.executor.start(["sleep", "300"],  # a group left running: the scenario
                                 stdout=f"{cfg.tmpdir}/killed_20261123T000000Z/out",
                                 stderr=f"{cfg.tmpdir}/killed_20261123T000000Z/err")
        assert node.executor.alive(bg)
    finally:
        node.executor.close()  # as a SIGKILLed runner: the group is left, and journaled
    assert any("sleep 300" in p for p in stray_processes("qir-client", settle_s=0))
    proc = run_cli("testbed", "restore")
    assert proc.returncode == 0, proc.stderr
    assert f"client: killed process group {bg.pgid} (campaign killed_20261123T000000Z)" \
        in proc.stdout
    assert stray_processes("qir-client") == []
    assert not Path(f"{cfg.tmpdir}/killed_20261123T000000Z").exists()
    assert "nothing to restore" in run_cli("testbed", "restore").stdout
