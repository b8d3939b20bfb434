"""Shared fixtures."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Callable, TypeVar

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TESTBED_FILE = ROOT / "configs" / "testbeds" / "local.yml"


T = TypeVar("T")


def wait_until(predicate: Callable[[], T], *, timeout: float = 30.0, interval: float = 0.05,
               what: str = "the condition",
               retry_on: tuple[type[Exception], ...] = (OSError, ValueError, LookupError)) -> T:
    """Poll ``predicate`` until it returns a true value (returned) or fail the test after
    ``timeout`` s with a message naming ``what`` it waited for.

    Use this instead of a fixed sleep before an assertion: it is as fast as the machine
    allows and does not fail on a slow one; ``timeout`` only bounds a hang. An exception in
    ``retry_on`` raised by the predicate (e.g. a file that does not exist yet) counts as "not
    yet"; the last one is named in the failure.
    """
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except retry_on as exc:  # not there yet
            last = exc
        if time.monotonic() >= deadline:
            detail = f" (last error: {last!r})" if last is not None else ""
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}{detail}",
                        pytrace=False)
        time.sleep(interval)


def campaign_dirs(results: Path) -> list[Path]:
    """The campaign directories in a results directory (not its history.duckdb)."""
    return sorted(p for p in results.iterdir() if (p / "campaign.json").is_file())


def write(path: Path, text: str) -> Path:
    """Write a text file and return its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def campaign_file(tmp_path: Path):
    """Factory: write a campaign YAML (testbed points at the local testbed file)."""

    def make(body: str, name: str = "c.yml") -> Path:
        text = f"testbed: {TESTBED_FILE}\n" + body
        return write(tmp_path / name, text)

    return make


needs_root_testbed = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("sshd", path="/usr/sbin:/usr/bin") is None,
    reason="integration tests need root and openssh-server (run pos_scripts/install.sh)",
)


@pytest.fixture(scope="session")
def local_testbed():
    """Bring the namespace testbed up for the session (down at the end if we brought it up)."""
    if os.geteuid() != 0 or shutil.which("sshd", path="/usr/sbin:/usr/bin") is None:
        pytest.skip("integration tests need root and openssh-server (pos_scripts/install.sh)")
    from interop_runner.config.loader import load_testbed
    from interop_runner.testbed import local

    was_up = local.status().healthy
    local.up()
    testbed = load_testbed(TESTBED_FILE)
    remove_earlier_sessions_dirs(testbed)
    yield testbed
    if not was_up:
        local.down()


def remove_earlier_sessions_dirs(testbed) -> None:
    """Remove what an earlier test session that was killed (Ctrl-C, a session's end, a CI
    run's time limit) left in the nodes' scratch and run directories. A campaign reaps such
    directories only on the nodes it uses, so one without a path would leave the router's to
    fail the next test's cleanliness check; the tests start from a clean testbed, the file
    cache (``files/``) kept."""
    for node in testbed.nodes.values():
        for root in (Path(node.tmpdir), Path(node.workdir) / "runs"):
            if root.is_dir():
                for entry in root.iterdir():
                    if entry.is_dir() and entry.name != "files":
                        shutil.rmtree(entry)
                    elif not entry.is_dir():
                        entry.unlink()


def namespace_pids(namespace: str) -> set[int]:
    """PIDs of all processes inside a network namespace, as seen from the root namespace."""
    from interop_runner.remote.executor import LocalExecutor

    out = LocalExecutor().run(["ip", "netns", "pids", namespace], timeout=10).stdout
    return {int(p) for p in out.split()}


def sshd_processes(namespace: str) -> list[int]:
    """sshd listener and session processes inside a node namespace."""
    out = []
    for pid in namespace_pids(namespace):
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if comm in ("sshd", "sshd-session"):
            out.append(pid)
    return out


def sshd_listener(namespace: str) -> int | None:
    """PID of the sshd listener of the testbed node in ``namespace`` (None: not running)."""
    from interop_runner.testbed import local
    from interop_runner.testbed.local.sshd import listener_pid

    (node,) = [n for n in local.NODES if n.namespace == namespace]
    return listener_pid(node)


def kill_ssh_sessions(namespace: str, sig: int = signal.SIGTERM) -> int:
    """Signal the SSH sessions (not the listener) of a node, so that its connections drop;
    the number of processes signalled."""
    listener = sshd_listener(namespace)
    killed = 0
    for pid in sshd_processes(namespace):
        if pid != listener:
            try:
                os.kill(pid, sig)
                killed += 1
            except ProcessLookupError:
                pass
    return killed


def stop_sshd(namespace: str) -> None:
    """Stop a node's whole sshd, as if it had crashed: the listener first, so that it accepts
    no new connection, then every session process, scanning again until none is left.

    One scan is not enough: a connection the listener accepted between the scan and its
    signal has a process of its own that would keep serving (the runner reconnects within
    milliseconds of its session dying, so that race was seen on CI).
    """
    listener = sshd_listener(namespace)
    if listener is not None:
        os.kill(listener, signal.SIGKILL)
    wait_until(lambda: kill_ssh_sessions(namespace) == 0 and not sshd_processes(namespace),
               timeout=15, interval=0.02, what=f"no sshd process left in {namespace}")


def cmdline(pid: int) -> bytes:
    """A process's command line, NUL-separated (empty when it has just ended: reading an
    exiting process's /proc entry raises, ProcessLookupError among others)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def stray_processes(namespace: str, settle_s: float = 5.0) -> list[str]:
    """Processes in the namespace other than sshd (listener and session processes) and the
    node's Docker Engine (dockerd and its containerd)."""
    deadline = time.monotonic() + settle_s
    while True:
        sshd = sshd_listener(namespace)
        others = []
        for pid in namespace_pids(namespace) - {sshd}:
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            if comm in ("sshd", "sshd-session"):  # sessions of an open SSH connection
                continue
            # the node's own Docker Engine (testbed up starts it); a container's shim or
            # processes are strays
            if comm in ("dockerd", "containerd"):
                continue
            others.append(f"{pid}: {cmd.strip()}")
        if not others or time.monotonic() > deadline:
            return others
        time.sleep(0.1)


def scratch_leftovers(tmpdir: str | Path) -> list[str]:
    """What a campaign left in a node's tmpdir, except the node's cache of generated files
    (``files/`` with one ``random-<size>.bin`` and its ``.json`` record: kept on purpose)."""
    root = Path(tmpdir)
    if not root.exists():
        return []
    left = [p.name for p in root.iterdir() if p.name != "files"]
    cache = root / "files"
    if cache.is_dir():
        names = sorted(p.name for p in cache.iterdir())
        sizes = {n.rsplit(".", 1)[0] for n in names}
        if len(names) != 2 or len(sizes) != 1 or not all(
                n.startswith("random-") and n.endswith((".bin", ".json")) for n in names):
            left += [f"files/{n}" for n in names]
    return left


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that uses the namespace testbed (directly or through another fixture) is
    marked ``testbed``, so ``pytest -m "not testbed"`` runs the rest anywhere, without root
    (and ./test.sh runs the two sets beside each other)."""
    for item in items:
        # analysis_results asks for local_testbed at run time (getfixturevalue), so it is
        # not among the names pytest sees at collection; ``testbed`` is the module fixture of
        # test_testbed_local and test_testbed_docker, which bring the testbed up and DOWN
        # (unmarked, ``-m "not testbed"`` tore down a campaign's testbed under it)
        if {"local_testbed", "analysis_results", "testbed"} & \
                set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.testbed)


def fake_gtlsclient(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A SETUP_DIR whose ngtcp2 client records its options and writes the download."""
    bin_dir = tmp_path / "setup" / "ngtcp2" / "bin"
    bin_dir.mkdir(parents=True)
    args = tmp_path / "args"
    client = bin_dir / "client"
    client.write_text("#!/usr/bin/env bash\n"
                      f"printf '%s\\n' \"$@\" > {args}\n"
                      f"echo data > {tmp_path}/dl/file.bin\n")
    client.chmod(0o755)
    env = {"PATH": os.environ["PATH"], "SETUP_DIR": str(tmp_path / "setup"),
           "TESTCASE": "goodput", "ALPN": "h3", "DOWNLOADS": str(tmp_path / "dl"),
           "REQUESTS": "https://198.18.0.1:4433/file.bin"}
    return env, args
