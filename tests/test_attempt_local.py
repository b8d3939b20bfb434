"""One Attempt end to end over the local executor: a real server (python3 -m http.server) and a
real client (curl) of a tiny implementation folder, installed on two Node.local nodes whose
directories live in a temp dir. Covers the attempt contract without root, namespaces or sshd:
readiness check, the timing wrapper, size and SHA-256 verification, every status (ok, failed,
unsupported = exit 127, timeout), the reason, the cleanup on the nodes and the stored record.

Only recorded values are asserted, never durations; the few short timeouts (1 s) are for
commands that never finish, so they end the same way on any machine.
"""

from __future__ import annotations

import hashlib
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from interop_runner.config.implementations import ImplementationMeta
from interop_runner.measure.attempt import Attempt, AttemptPlan
from interop_runner.measure.side import SidePlan
from interop_runner.storage.run_record import RunRecord, read_run, write_run
from interop_runner.testbed.files import file_digest, prepare_file
from interop_runner.testbed.node import Node

from .test_node_local import CAMPAIGN, fake_implementation, local_pair, needs_tools, wait_until

pytestmark = needs_tools

FILE = "goodput-262144.bin"
SIZE = 256 * 1024
ZEROS_SHA256 = hashlib.sha256(bytes(SIZE)).hexdigest()
# BLAKE3 of SIZE zero bytes, as b3sum prints it (checked in test_zeros_digest_is_b3sums)
ZEROS_BLAKE3 = "86bb2b521a10612d5a1d38204fac4fa632466d1866144d8a6a7e3afc050ce7ae"
# the hash the campaign took of the implementation's tree when it installed it
SOURCE_HASH = "5" * 64


@dataclass
class Bench:
    meta: ImplementationMeta
    server: Node
    client: Node
    digests: dict[str, str]  # algorithm -> digest of the served file
    attempts: Iterator[int]


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    """Both nodes prepared as a campaign does: preflight, install, file, certificate."""
    base = tmp_path_factory.mktemp("attempt")
    meta = fake_implementation(base / "implementations")
    server, client = local_pair(base / "nodes")
    for node in (server, client):
        node.preflight(SIZE + 2**20, node.cfg.tmpdir)
        assert node.install(meta, timeout=120) == "fake-1.0+local"
    served = prepare_file(server, FILE, SIZE, "sha256", keep=True, timeout=120)
    digests = {"sha256": served.digest,
               "blake3": file_digest(server, served.path, "blake3", timeout=60)}
    client.install_ca(server.make_certificate(server.cfg.ip))
    yield Bench(meta, server, client, digests, iter(range(1, 1000)))
    for node in (server, client):
        node.cleanup(keep_files=False)
        node.close()


@pytest.fixture(autouse=True)
def test_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QIR_TEST_PYTHON", sys.executable)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def make_plan(bench: Bench, *, server: str = "ok", client: str = "ok", port: int | None = None,
              client_timeout: float = 300, ready_timeout: float = 120,
              algorithm: str = "blake3") -> AttemptPlan:
    return AttemptPlan(
        campaign_id=CAMPAIGN, testbed="local-executor", testcase="goodput", repetition=1,
        attempt=next(bench.attempts),
        server=SidePlan("server", bench.meta, "fake-1.0+local", SOURCE_HASH, {"mode": server}),
        client=SidePlan("client", bench.meta, "fake-1.0+local", SOURCE_HASH, {"mode": client}),
        alpn="http/1.1",
        port=port or free_port(), file_name=FILE, file_size=SIZE,
        file_digest=bench.digests[algorithm], hash_algorithm=algorithm,
        client_timeout=client_timeout, server_ready_timeout=ready_timeout)


def processes_with(needle: str) -> list[int]:
    """PIDs (not zombies) whose environment holds ``needle``: what an attempt started."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if needle.encode() not in (proc / "environ").read_bytes():
                continue
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            found.append(int(proc.name))
    return found


def run_attempt(bench: Bench, plan: AttemptPlan, out: Path) -> tuple[RunRecord, Attempt]:
    """Run one attempt, store its record as the campaign does, check the nodes are clean."""
    attempt = Attempt(plan, bench.server, bench.client, out)
    record = attempt.run()
    assert attempt.abort is None
    write_run(out, record)
    # nothing left running, nothing left behind on the nodes, no journal entry
    for logs in (attempt.server_logs, attempt.client_logs):
        assert wait_until(lambda: not processes_with(f"LOGS={logs}\0")), logs
        assert not Path(logs).exists()
    assert not Path(bench.client.downloads, FILE).exists()
    assert Path(bench.server.www, FILE).is_file()  # the campaign's file stays for the next
    for node in (bench.server, bench.client):
        journal = Path(str(node.executor.proc_journal))
        assert not journal.exists() or journal.read_text().strip() == ""
    return record, attempt


def stored(out: Path) -> dict[str, Any]:
    return read_run(out / "run.json")


# ----------------------------------------------------------------------------------- tests ----


def test_ok_attempt_is_timed_verified_and_stored(bench: Bench, tmp_path: Path) -> None:
    rec, _ = run_attempt(bench, make_plan(bench), tmp_path)
    assert (rec.status, rec.reason) == ("ok", None), rec.reason
    assert rec.hash_ok is True and rec.bytes_received == SIZE
    assert rec.hash_algorithm == "blake3"
    assert rec.digest_received == rec.digest_expected == bench.digests["blake3"]
    assert rec.sha256_received is None and rec.sha256_expected is None  # run.json 1-3 only
    assert rec.client.exit_code == 0 and rec.client.pid is not None and rec.client.pid > 0
    assert rec.start_ns is not None and rec.end_ns is not None and rec.end_ns >= rec.start_ns
    assert rec.goodput_mbps is not None and rec.duration_s is not None
    assert rec.client.cpu_user_s is not None and rec.client.cpu_user_s >= 0
    assert (rec.server.implementation, rec.client.version) == ("fake", "fake-1.0+local")
    # the hash taken at install, not one of the tree as it is now
    assert rec.server.source_hash == rec.client.source_hash == SOURCE_HASH
    assert rec.client.params == {"mode": "ok"} and rec.warnings == []
    # the logs came home: the server saw the request, the client's output files exist
    assert f"GET /{FILE} HTTP/1.1\" 200" in (tmp_path / "server" / "server.stderr.log").read_text()
    assert (tmp_path / "client" / "client.stdout.log").is_file()
    assert (tmp_path / "client" / "pre.log").is_file()
    saved = stored(tmp_path)
    assert (saved["status"], saved["hash_ok"], saved["bytes_received"]) == ("ok", True, SIZE)
    assert saved["client"]["exit_code"] == 0


@pytest.mark.parametrize("mode,status,reason,code", [
    ("fail", "failed", "client exited 3: client: connection refused", 3),
    ("unsupported", "unsupported",
     "client exited 127 (unsupported): client: speaks hq-interop only", 127),
    ("killed", "failed", "client exited 137 (killed by SIGKILL)", 137),
])
def test_client_exit_codes(bench: Bench, tmp_path: Path, mode: str, status: str, reason: str,
                           code: int) -> None:
    rec, _ = run_attempt(bench, make_plan(bench, client=mode), tmp_path)
    assert (rec.status, rec.reason, rec.client.exit_code) == (status, reason, code)
    assert rec.hash_ok is None and rec.bytes_received is None and rec.goodput_mbps is None
    assert stored(tmp_path)["status"] == status


@pytest.mark.parametrize("mode,reason,received,hash_ok,algorithm", [
    ("nothing", f"client exited 0 but {FILE} is missing", None, None, "blake3"),
    ("truncate", f"size mismatch: expected {SIZE} bytes, got 100", 100, False, "blake3"),
    ("corrupt", "blake3 mismatch: expected {expected}, got " + ZEROS_BLAKE3, SIZE, False,
     "blake3"),
    ("corrupt", "sha256 mismatch: expected {expected}, got " + ZEROS_SHA256, SIZE, False,
     "sha256"),
])
def test_download_is_verified(bench: Bench, tmp_path: Path, mode: str, reason: str,
                              received: int | None, hash_ok: bool | None,
                              algorithm: str) -> None:
    """A missing, short or corrupted download fails, with either hash (the corrupt client
    writes SIZE zero bytes: the right size, the wrong content)."""
    rec, _ = run_attempt(bench, make_plan(bench, client=mode, algorithm=algorithm), tmp_path)
    assert (rec.status, rec.client.exit_code) == ("failed", 0)
    assert rec.reason == reason.format(expected=bench.digests[algorithm])
    assert (rec.bytes_received, rec.hash_ok, rec.goodput_mbps) == (received, hash_ok, None)
    assert rec.hash_algorithm == algorithm


def test_zeros_digest_is_b3sums(tmp_path: Path) -> None:
    """The BLAKE3 digest above is what b3sum prints for SIZE zero bytes (and not SHA-256)."""
    (tmp_path / "zeros").write_bytes(bytes(SIZE))
    out = subprocess.run(["b3sum", "--", str(tmp_path / "zeros")], capture_output=True,
                         text=True, check=True).stdout
    assert out.split()[0] == ZEROS_BLAKE3 != ZEROS_SHA256


def test_client_timeout_kills_the_client(bench: Bench, tmp_path: Path) -> None:
    rec, _ = run_attempt(bench, make_plan(bench, client="hang", client_timeout=1), tmp_path)
    assert (rec.status, rec.reason) == ("timeout", "client did not finish within 1 s")
    assert rec.client.exit_code is None and rec.hash_ok is None
    assert stored(tmp_path)["status"] == "timeout"


def test_server_that_never_listens(bench: Bench, tmp_path: Path) -> None:
    plan = make_plan(bench, server="silent", ready_timeout=1)
    rec, _ = run_attempt(bench, plan, tmp_path)
    assert (rec.status, rec.reason) == (
        "failed", f"server not listening on port {plan.port} after 1 s")
    assert rec.client.exit_code is None  # the client never ran


@pytest.mark.parametrize("mode,status,reason,code", [
    ("crash", "failed", "server exited 2: server: cannot bind", 2),
    ("unsupported", "unsupported",
     "server exited 127 (unsupported): server: no such protocol: http/1.1", 127),
])
def test_server_exiting_before_ready(bench: Bench, tmp_path: Path, mode: str, status: str,
                                     reason: str, code: int) -> None:
    rec, _ = run_attempt(bench, make_plan(bench, server=mode), tmp_path)
    assert (rec.status, rec.reason, rec.server.exit_code) == (status, reason, code)
    assert rec.client.exit_code is None


def test_busy_port_is_refused_before_the_server_starts(bench: Bench, tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        rec, _ = run_attempt(bench, make_plan(bench, port=port), tmp_path)
    assert rec.status == "failed"
    assert rec.reason is not None and rec.reason.startswith(
        f"port {port} is already in use on server: ")
    assert rec.server.exit_code is None and rec.client.exit_code is None


def test_failing_pre_script_fails_the_attempt(bench: Bench, tmp_path: Path) -> None:
    rec, _ = run_attempt(bench, make_plan(bench, client="prefail"), tmp_path)
    assert (rec.status, rec.reason) == ("failed", "client pre exited 5")
    assert (tmp_path / "client" / "pre.log").read_text() == "pre: no hugepages here\n"


def test_failing_post_script_is_a_warning(bench: Bench, tmp_path: Path) -> None:
    rec, _ = run_attempt(bench, make_plan(bench, client="postfail"), tmp_path)
    assert (rec.status, rec.hash_ok) == ("ok", True)
    assert rec.warnings == ["client: post exited 1"]
