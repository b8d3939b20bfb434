"""Fault injection on the real namespace testbed: nothing lost, left behind or let in.

Each test runs a small campaign (quic-go, 32 MiB over a 200 Mbit/s tbf, 3 repetitions, host
knobs set), injects one fault, and then measures: the faulted attempt's record, every other
record (none lost, duplicated or shifted), processes left on the nodes, host knobs not
restored, and whether ``run.py run --resume`` completes the campaign. Each measurement becomes
a row of docs/reliability.md (tests/reliability.py); the last test renders the table.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from interop_runner.config.loader import load_campaign
from interop_runner.measure.attempt import Attempt
from interop_runner.measure.campaign import Campaign
from interop_runner.measure.outcome import CampaignStopped
from interop_runner.measure.plan import build_plan
from interop_runner.remote.executor import LocalExecutor
from interop_runner.remote.ssh import SSHExecutor
from interop_runner.storage.layout import iter_run_files
from interop_runner.storage.run_record import read_run
from interop_runner.testbed import local
from interop_runner.testbed.local.sshd import listener_pid
from interop_runner.testbed.node import Node

from .conftest import (
    ROOT,
    TESTBED_FILE,
    campaign_dirs,
    cmdline,
    kill_ssh_sessions,
    namespace_pids,
    stop_sshd,
    stray_processes,
    write,
)
from .reliability import DOC, Collector, Row
from .test_campaign import default_sigint, run_cli
from .test_campaign_sweep import host_state
from .test_containers_local import our_containers, qir_cgroups

FAULTS = [
    "server process killed mid-transfer",
    "client process killed mid-transfer",
    "client hangs (SIGSTOP) until the client timeout",
    "sshd of the client node stopped mid-transfer, back after 3 s",
    "sshd of the client node stopped for good",
    "management link of the server node down for 2 s mid-transfer",
    "download corrupted (one byte flipped)",
    "client work directory too small (preflight)",
    "client work directory fills up mid-transfer",
    "runner killed with SIGKILL mid-transfer",
    "SIGINT during setup",
    "SIGINT during the transfer",
    "SIGINT during post (cleanup after the transfer)",
    "setup (build) of an implementation fails",
    "a second runner (`run`, then `testbed restore`) started on the testbed mid-transfer",
    "runner killed with SIGKILL while a client container transfers (image quic-go-qir)",
    "runner killed with SIGKILL while a client container transfers, then `testbed restore`",
    "runner killed with SIGKILL mid-transfer with an emulated path active (router)",
    "delay line of the path killed mid-transfer",
    "SIGINT while several flows (a quic-go pair, a kernel TCP flow) transfer",
    "runner killed with SIGKILL while several flows transfer",
]
COLLECTOR = Collector(FAULTS)
REPS = 3
SERVER_BIN = b"quic-go/bin/server"
CLIENT_BIN = b"quic-go/bin/client"
SMALL_TMP = "/dev/shm/qirf-client"  # the client's tmpdir in the small-disk testbed


@pytest.fixture(scope="session")
def reliability() -> Collector:
    """The session's collector of measured rows."""
    return COLLECTOR


def fault_config(tmp_path: Path, name: str, on_error: str = "continue", client_timeout: float = 5,
                 testbed: Path = TESTBED_FILE, size: str = "32MiB", reps: int = REPS,
                 client: str = "quic-go") -> Path:
    """A campaign with host knobs on both nodes (restore exercised by every fault)."""
    return write(tmp_path / f"{name}.yml", f"""testbed: {testbed}
name: {name}
file_size: {size}
repetitions: {reps}
port: 4470
on_error: {on_error}
timeouts: {{client: {client_timeout}s, command: 30s}}
pairs: [{{server: quic-go, client: {client}}}]
knobs: {{rmem: 2x}}
server_knobs: {{rate: 200mbit}}
""")


def program(pid: int) -> bytes:
    """The process's argv[0]: the program itself, not a tool that names it in its arguments
    (the implementation's `version` script runs `go version -m .../quic-go/bin/server` on
    the node, a process an argument match would count as the first server)."""
    return cmdline(pid).split(b"\0", 1)[0]


class Injector(threading.Thread):
    """Waits for the ``nth`` distinct process (in ``ns``) whose program (argv[0]) holds
    ``needle``, lets it run ``delay`` s, then calls ``action(pid)`` once."""

    def __init__(self, ns: str, needle: bytes, nth: int, action: Callable[[int], None],
                 delay: float = 0.5, timeout: float = 150) -> None:
        super().__init__(daemon=True)
        self.ns, self.needle, self.nth, self.action = ns, needle, nth, action
        self.delay, self.timeout = delay, timeout
        self.fired = False
        self.error: BaseException | None = None

    def run(self) -> None:
        seen: set[int] = set()
        deadline = time.monotonic() + self.timeout
        try:
            while time.monotonic() < deadline:
                try:
                    pids = namespace_pids(self.ns)
                except Exception:
                    pids = set()
                for pid in sorted(pids - seen):
                    if self.needle in program(pid):
                        seen.add(pid)
                        if len(seen) == self.nth:
                            # the scenario: the fault hits a process that has run `delay` s.
                            # Not a race: fault_config sizes every transfer by a rate limit
                            # (32 MiB through a 200 Mbit/s tbf lasts >= 1.3 s, whatever the
                            # CPU), so the process is still there (checked just below)
                            time.sleep(self.delay)
                            if self.needle not in program(pid):
                                raise AssertionError("the process ended before the fault")
                            self.action(pid)
                            self.fired = True
                            return
                time.sleep(0.02)  # poll interval (bounded by the deadline above)
        except BaseException as exc:  # reported by the test
            self.error = exc

    def check(self) -> None:
        self.join(timeout=60)
        assert self.error is None, self.error
        assert self.fired, "the fault was never injected"


def start_injector(*args: Any, **kwargs: Any) -> Injector:
    inj = Injector(*args, **kwargs)
    inj.start()
    return inj


def execute(cfg_path: Path, tmp_path: Path) -> Path:
    """Run a campaign via the API; any exception (stop, abort, interrupt) is swallowed."""
    cfg, testbed = load_campaign(cfg_path)
    try:
        Campaign(cfg, testbed, tmp_path / "results").execute()
    except (CampaignStopped, KeyboardInterrupt):
        pass
    (camp,) = campaign_dirs(tmp_path / "results")
    return camp


def records(camp: Path) -> list[tuple[Path, dict[str, Any]]]:
    return [(p, read_run(p)) for p in iter_run_files(camp)]


def the_record(camp: Path, rep: int, attempt: int = 1) -> dict[str, Any]:
    found = [d for p, d in records(camp) if d["repetition"] == rep and d["attempt"] == attempt]
    assert len(found) == 1, f"no single record for repetition {rep} attempt {attempt}"
    return found[0]


NODE_NAMESPACES = ("qir-server", "qir-client", "qir-router")


def processes_left() -> int:
    return sum(len(stray_processes(ns, settle_s=3.0)) for ns in NODE_NAMESPACES)


def knobs_not_restored(before: dict[str, str]) -> int:
    now = host_state()
    return sum(1 for k in set(before) | set(now) if before.get(k) != now.get(k))


def audit(camp: Path, faulted: list[tuple[int, int]], reps: int = REPS) -> int:
    """Violations after the resume: each repetition exactly one ok record; the faulted
    attempts keep their own non-ok record with a reason; nothing else; nothing shifted."""
    bad = 0
    by_rep: dict[int, list[dict[str, Any]]] = {}
    for path, data in records(camp):
        # shifted: stored where it does not say it belongs
        if path.parent.name != f"attempt-{data['attempt']}" or \
                path.parent.parent.name != str(data["repetition"]):
            bad += 1
        by_rep.setdefault(data["repetition"], []).append(data)
    for rep in range(1, reps + 1):
        recs = by_rep.pop(rep, [])
        ok = [r for r in recs if r["status"] == "ok"]
        own = [r for r in recs if (rep, r["attempt"]) in faulted]
        bad += abs(len(ok) - 1)  # missing or duplicated
        for key in [k for k in faulted if k[0] == rep]:
            mine = [r for r in own if r["attempt"] == key[1]]
            if len(mine) != 1 or mine[0]["status"] == "ok" or not mine[0]["reason"]:
                bad += 1
        bad += len(recs) - len(ok) - len([r for r in own if r["status"] != "ok"])  # extras
    bad += sum(len(v) for v in by_rep.values())  # repetitions never planned
    return bad


def resume(cfg_path: Path, camp: Path) -> bool:
    """``run.py run --resume``: exit 0 and status finished."""
    proc = run_cli("run", str(cfg_path), "--resume", str(camp), "--no-progress",
                   timeout=240)
    assert proc.returncode == 0, proc.stderr
    return json.loads((camp / "campaign.json").read_text())["status"] == "finished"


def finish(reliability: Collector, fault: str, reaction: str, happened: str, cfg_path: Path,
           camp: Path, before: dict[str, str], faulted: list[tuple[int, int]],
           resume_with: Callable[[], bool] | None = None, left: int | None = None,
           knobs: int | None = None) -> Row:
    """Measure leftovers, resume, audit the records, add the row and check it is clean."""
    left = processes_left() if left is None else left
    knobs = knobs_not_restored(before) if knobs is None else knobs
    resumed = (resume_with or (lambda: resume(cfg_path, camp)))()
    resumed = resumed and processes_left() == 0 and knobs_not_restored(before) == 0
    row = Row(fault, reaction, happened, audit(camp, faulted), left, knobs, resumed)
    reliability.add(row)
    assert (row.records_lost, row.processes_left, row.knobs_not_restored, row.resumed) == \
        (0, 0, 0, True), row
    return row


def outcome(rec: dict[str, Any]) -> str:
    """'failed: client exited 137' -- the status and the reason's stable part."""
    reason = rec["reason"] or ""
    return f"{rec['status']}: {reason}"


def stopped_or_continued(camp: Path) -> str:
    meta = json.loads((camp / "campaign.json").read_text())
    if meta["status"].startswith("stopped"):
        return "campaign stopped (status `stopped: ...`)"
    done = sum(1 for _, d in records(camp) if d["status"] == "ok")
    return f"campaign continued ({done} of {REPS} repetitions ok)"


# -- processes killed or stopped ---------------------------------------------------------------
@pytest.mark.usefixtures("local_testbed")
def test_server_killed_mid_transfer(tmp_path, reliability):
    before = host_state()
    cfg = fault_config(tmp_path, "f-server-kill")
    inj = start_injector("qir-server", SERVER_BIN, 2, lambda pid: os.kill(pid, signal.SIGKILL))
    camp = execute(cfg, tmp_path)
    inj.check()
    rec = the_record(camp, 2)
    assert rec["status"] in ("failed", "timeout") and rec["server"]["exit_code"] == 137
    finish(reliability, FAULTS[0], "continue",
           # failed or timeout: whichever the client noticed first, the connection's end
           # or its idle timeout
           "attempt recorded `failed` or `timeout` (server exit 137); "
           f"{stopped_or_continued(camp)}",
           cfg, camp, before, [(2, 1)])


@pytest.mark.usefixtures("local_testbed")
def test_client_killed_mid_transfer(tmp_path, reliability):
    before = host_state()
    cfg = fault_config(tmp_path, "f-client-kill", on_error="stop")
    inj = start_injector("qir-client", CLIENT_BIN, 2, lambda pid: os.kill(pid, signal.SIGKILL))
    camp = execute(cfg, tmp_path)
    inj.check()
    rec = the_record(camp, 2)
    assert rec["status"] == "failed" and rec["reason"].startswith("client exited 137")
    meta = json.loads((camp / "campaign.json").read_text())
    assert meta["status"].startswith("stopped: ") and "client exited 137" in meta["status"]
    assert len(records(camp)) == 2  # repetition 3 not run
    finish(reliability, FAULTS[1], "stop", f"attempt recorded `{outcome(rec)}`; "
           f"{stopped_or_continued(camp)}", cfg, camp, before, [(2, 1)])


@pytest.mark.usefixtures("local_testbed")
def test_client_hangs_until_timeout(tmp_path, reliability):
    before = host_state()
    cfg = fault_config(tmp_path, "f-client-hang", client_timeout=5)
    inj = start_injector("qir-client", CLIENT_BIN, 2, lambda pid: os.kill(pid, signal.SIGSTOP))
    camp = execute(cfg, tmp_path)
    inj.check()
    rec = the_record(camp, 2)
    assert rec["status"] == "timeout" and rec["reason"] == "client did not finish within 5 s"
    finish(reliability, FAULTS[2], "continue", f"attempt recorded `{outcome(rec)}`; "
           f"{stopped_or_continued(camp)}", cfg, camp, before, [(2, 1)])


# -- the management connection -----------------------------------------------------------------
def count_reconnects(monkeypatch) -> dict[str, int]:
    """Count SSHExecutor reconnections that succeeded, per node."""
    counts: dict[str, int] = {}
    real = SSHExecutor._reconnect

    def reconnect(self, why):
        real(self, why)
        counts[self.name] = counts.get(self.name, 0) + 1

    monkeypatch.setattr(SSHExecutor, "_reconnect", reconnect)
    return counts


@pytest.mark.usefixtures("local_testbed")
def test_sshd_stopped_mid_transfer_reconnects(tmp_path, reliability, monkeypatch):
    before = host_state()
    cfg = fault_config(tmp_path, "f-sshd-restart")
    counts = count_reconnects(monkeypatch)

    def stop_sshd_for_3_s(pid: int) -> None:
        stop_sshd("qir-client")
        time.sleep(3)  # the scenario: the node's sshd is away for 3 s
        local.up()  # starts the node's sshd again

    inj = start_injector("qir-client", CLIENT_BIN, 2, stop_sshd_for_3_s)
    camp = execute(cfg, tmp_path)
    inj.check()
    rec = the_record(camp, 2)
    assert rec["status"] == "failed" and "SSH connection to 198.18.0.6:22 dropped" in \
        rec["reason"], rec["reason"]
    assert counts.get("client") == 1
    finish(reliability, FAULTS[3], "continue",
           f"the runner reconnected with backoff ({counts['client']} reconnection); the attempt "
           f"in flight recorded `failed: runner: client: SSH connection to 198.18.0.6:22 "
           f"dropped during ...`; {stopped_or_continued(camp)}", cfg, camp, before, [(2, 1)])


@pytest.mark.usefixtures("local_testbed")
def test_sshd_stopped_for_good_is_one_line_error(tmp_path, reliability):
    before = host_state()
    cfg = fault_config(tmp_path, "f-sshd-gone")
    inj = start_injector("qir-client", CLIENT_BIN, 2,
                         lambda pid: stop_sshd("qir-client"))
    try:
        proc = run_cli("run", str(cfg), "--results-dir", str(tmp_path / "results"),
                       "--no-progress", timeout=180)
        inj.check()
    finally:
        local.up()
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[-1].startswith("error: client: SSH connection to 198.18.0.6:22 lost") and \
        "not re-established after 6 tries" in lines[-1], lines[-1]
    (camp,) = campaign_dirs(tmp_path / "results")
    rec = the_record(camp, 2)
    assert rec["status"] == "failed" and rec["reason"].startswith("runner: client: SSH conn")
    # the client node was unreachable at the end: what it held is cleaned by the next start
    left_now, knobs_now = processes_left(), knobs_not_restored(before)
    left_note = ("nothing was left behind (the client's transfer ended on its own)"
                 if left_now == knobs_now == 0 else
                 f"{left_now} process(es) and {knobs_now} knob item(s) stayed on the "
                 "unreachable node until the resume's start cleaned them")
    finish(reliability, FAULTS[4], "stop (always)",
           "attempt recorded `failed: runner: client: SSH connection to 198.18.0.6:22 lost "
           "(...) and not re-established after 6 tries ...`; the run ended with that one-line "
           f"error (exit 1); {left_note}", cfg, camp, before, [(2, 1)], left=left_now,
           knobs=knobs_now)


def link(name: str, state: str) -> None:
    LocalExecutor("t").run(["ip", "link", "set", name, state], timeout=10)


@pytest.mark.usefixtures("local_testbed")
def test_management_link_down_and_up(tmp_path, reliability, monkeypatch):
    before = host_state()
    cfg = fault_config(tmp_path, "f-link")
    counts = count_reconnects(monkeypatch)

    def flap(pid: int) -> None:
        link(local.SERVER.host_if, "down")
        try:
            # the node forgets the connection meanwhile: the runner must open a new one
            kill_ssh_sessions("qir-server")
            time.sleep(2)  # the scenario: the link is down for 2 s
        finally:
            link(local.SERVER.host_if, "up")

    inj = start_injector("qir-client", CLIENT_BIN, 2, flap)
    try:
        camp = execute(cfg, tmp_path)
        inj.check()
    finally:
        link(local.SERVER.host_if, "up")
    rec = the_record(camp, 2)
    happened = (f"the runner reconnected to the server node ({counts.get('server', 0)} "
                f"reconnection); attempt 2 `{rec['status']}`; {stopped_or_continued(camp)}")
    finish(reliability, FAULTS[5], "continue", happened, cfg, camp, before,
           [] if rec["status"] == "ok" else [(2, 1)])
    assert counts.get("server") == 1


# -- the data ----------------------------------------------------------------------------------
@pytest.mark.usefixtures("local_testbed")
def test_corrupted_download_is_a_hash_mismatch(tmp_path, reliability, monkeypatch):
    before = host_state()
    cfg = fault_config(tmp_path, "f-corrupt", on_error="stop")
    real = Attempt.verify

    def verify(self):
        if self.plan.repetition == 2 and self.plan.attempt == 1:
            path = Path(self.client.downloads) / self.plan.file_name  # shared filesystem
            with open(path, "r+b") as fh:
                fh.seek(12345)
                byte = fh.read(1)
                fh.seek(12345)
                fh.write(bytes([byte[0] ^ 0xFF]))
        return real(self)

    monkeypatch.setattr(Attempt, "verify", verify)
    camp = execute(cfg, tmp_path)
    monkeypatch.undo()
    rec = the_record(camp, 2)
    assert rec["status"] == "failed" and rec["reason"].startswith("blake3 mismatch")
    assert rec["hash_ok"] is False and rec["bytes_received"] == 32 * 2**20
    finish(reliability, FAULTS[6], "stop", "attempt recorded `failed: blake3 mismatch: "
           f"expected ..., got ...` (hash_ok false); {stopped_or_continued(camp)}",
           cfg, camp, before, [(2, 1)])


def small_disk_testbed(tmp_path: Path) -> Path:
    """The local testbed with the client's scratch on its own directory (a small tmpfs)."""
    return write(tmp_path / "small.yml", TESTBED_FILE.read_text().replace(
        "tmpdir: /dev/shm/qir-client", f"tmpdir: {SMALL_TMP}"))


def in_client(*argv: str) -> None:
    """Run a command in the client node's mount namespace (where its sshd runs)."""
    sshd = listener_pid(local.CLIENT)
    LocalExecutor("t").run(["nsenter", "-t", str(sshd), "-m", *argv], timeout=30)


@pytest.fixture
def small_disk():
    """A tmpfs mounted over SMALL_TMP inside the client node; ``size(MiB)`` resizes it."""
    os.makedirs(SMALL_TMP, exist_ok=True)
    in_client("mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", SMALL_TMP)

    def size(mib: int) -> None:
        in_client("mount", "-o", f"remount,size={mib}m", SMALL_TMP)

    yield size
    in_client("umount", SMALL_TMP)
    os.rmdir(SMALL_TMP)


@pytest.mark.usefixtures("local_testbed")
def test_client_disk_too_small_caught_by_preflight(tmp_path, reliability, small_disk):
    before = host_state()
    cfg = fault_config(tmp_path, "f-disk-preflight", testbed=small_disk_testbed(tmp_path))
    proc = run_cli("run", str(cfg), "--results-dir", str(tmp_path / "results"),
                   "--no-progress")
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert lines == [f"error: client: {SMALL_TMP} has 40.00 MiB free, the campaign needs "
                     "48.00 MiB (lower file_size or free space)"], proc.stderr
    (camp,) = campaign_dirs(tmp_path / "results")
    assert records(camp) == []
    small_disk(128)
    finish(reliability, FAULTS[7], "stop (always)", "no attempt ran; the run ended with "
           f"`{lines[0]}` (exit 1)", cfg, camp, before, [])


@pytest.mark.usefixtures("local_testbed")
def test_client_disk_fills_up_mid_transfer(tmp_path, reliability, small_disk):
    before = host_state()
    small_disk(56)  # preflight needs 48 MiB
    cfg = fault_config(tmp_path, "f-disk-full", testbed=small_disk_testbed(tmp_path))
    ballast = f"{SMALL_TMP}/ballast"

    def fill(pid: int) -> None:  # full until this client has given up, then freed again
        in_client("sh", "-c", 'head -c 40m /dev/zero >"$0" || true', ballast)
        while CLIENT_BIN in cmdline(pid):  # until the client gave up (bounded: timeouts.client)
            time.sleep(0.02)
        in_client("rm", "-f", ballast)

    inj = start_injector("qir-client", CLIENT_BIN, 2, fill, delay=0.1)
    camp = execute(cfg, tmp_path)
    inj.check()
    rec = the_record(camp, 2)
    assert rec["status"] == "failed" and "no space left on device" in rec["reason"].lower(), \
        rec["reason"]
    finish(reliability, FAULTS[8], "continue", f"attempt recorded `failed: "
           f"{rec['reason'].split(':')[0]}: ... no space left on device`; "
           f"{stopped_or_continued(camp)}", cfg, camp, before, [(2, 1)])


# -- the runner itself -------------------------------------------------------------------------
def start_cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(ROOT / "run.py"), *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)


def interrupt_mid_transfer(cfg: Path, tmp_path: Path, nth: int) -> tuple[int, str]:
    """Start ``run.py run`` on ``cfg``, send it SIGINT 0.5 s into the ``nth`` client process;
    return its exit code and stderr."""
    proc = start_cli("run", str(cfg), "--results-dir", str(tmp_path / "results"),
                     "--no-progress")
    try:
        inj = start_injector("qir-client", CLIENT_BIN, nth,
                             lambda pid: proc.send_signal(signal.SIGINT))
        inj.check()
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err


def kill_runner_mid_transfer(cfg: Path, tmp_path: Path, needle: bytes) -> Path:
    """Start ``run.py run`` on ``cfg``, SIGKILL it 0.5 s into repetition 2's client process
    (its command line holds ``needle``); return the campaign directory it left."""
    proc = start_cli("run", str(cfg), "--results-dir", str(tmp_path / "results"),
                     "--no-progress")
    try:
        inj = start_injector("qir-client", needle, 2, lambda pid: proc.kill(), delay=0.5)
        inj.check()
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    (camp,) = campaign_dirs(tmp_path / "results")
    return camp


@pytest.mark.usefixtures("local_testbed")
def test_runner_sigkill_is_cleaned_up_by_the_resume(tmp_path, reliability):
    before = host_state()
    cfg = fault_config(tmp_path, "f-runner-kill", size="64MiB")
    camp = kill_runner_mid_transfer(cfg, tmp_path, CLIENT_BIN)
    left_by_kill = sum(len(stray_processes(ns, settle_s=0)) for ns in NODE_NAMESPACES)
    knobs_by_kill = knobs_not_restored(before)
    assert left_by_kill >= 1 and knobs_by_kill >= 1  # the server runs on, the tbf stays
    assert not (camp / "quic-go_quic-go/goodput/2/attempt-1/run.json").exists()
    ok = resume(cfg, camp)
    meta = json.loads((camp / "campaign.json").read_text())
    assert meta["killed_leftovers"] and meta["restored_leftovers"]
    rec = the_record(camp, 2)
    assert rec["status"] == "failed" and rec["interrupted"] and "runner was killed" in \
        rec["reason"]
    finish(reliability, FAULTS[9], "-", f"no record could be written by the killed runner; "
           "it left processes running (their number depends on which monitors had started) and "
           f"{knobs_by_kill} knob item(s); the resume "
           "killed the journaled process groups, replayed the knob journals, recorded the "
           f"attempt as `{outcome(rec)}` and ran it again", cfg, camp, before, [(2, 1)],
           resume_with=lambda: ok, left=processes_left(), knobs=knobs_not_restored(before))


@pytest.mark.usefixtures("local_testbed")
def test_sigint_during_setup(tmp_path, reliability, monkeypatch):
    before = host_state()
    cfg = fault_config(tmp_path, "f-int-setup")
    real = Node.install

    def install(self, *args, **kwargs):
        if self.cfg.role == "client":
            raise KeyboardInterrupt("injected")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Node, "install", install)
    camp = execute(cfg, tmp_path)
    monkeypatch.undo()
    meta = json.loads((camp / "campaign.json").read_text())
    assert meta["status"] == "interrupted" and records(camp) == []
    finish(reliability, FAULTS[10], "stop", "no attempt had started; campaign status "
           "`interrupted`, nodes cleaned", cfg, camp, before, [])


@pytest.mark.usefixtures("local_testbed")
def test_sigint_during_transfer(tmp_path, reliability):
    before = host_state()
    cfg = fault_config(tmp_path, "f-int-transfer")
    code, err = interrupt_mid_transfer(cfg, tmp_path, 2)
    assert code == 130 and "Traceback" not in err, err
    (camp,) = campaign_dirs(tmp_path / "results")
    rec = the_record(camp, 2)
    assert rec["interrupted"] and rec["status"] == "failed"
    finish(reliability, FAULTS[11], "stop", f"attempt recorded `{outcome(rec)}` "
           "(interrupted), exit 130, campaign status `interrupted`", cfg, camp, before,
           [(2, 1)])


@pytest.mark.usefixtures("local_testbed")
def test_sigint_during_post(tmp_path, reliability, monkeypatch):
    before = host_state()
    cfg = fault_config(tmp_path, "f-int-post")
    real = Attempt.run_script

    def script(self, node, meta, name, env):
        if name == "post" and self.plan.repetition == 2:
            raise KeyboardInterrupt("injected")
        return real(self, node, meta, name, env)

    monkeypatch.setattr(Attempt, "run_script", script)
    camp = execute(cfg, tmp_path)
    monkeypatch.undo()
    meta = json.loads((camp / "campaign.json").read_text())
    assert meta["status"] == "interrupted"
    rec = the_record(camp, 2)
    assert rec["interrupted"]
    finish(reliability, FAULTS[12], "stop", f"attempt recorded `{outcome(rec)}` "
           "(interrupted, its measurement kept), campaign status `interrupted`", cfg, camp,
           before, [(2, 1)])


@pytest.mark.usefixtures("local_testbed")
def test_failed_setup_fails_only_its_runs(tmp_path, reliability, monkeypatch):
    import shutil

    from interop_runner.config import loader as config_mod
    from interop_runner.config.implementations import IMPLEMENTATIONS_DIR, load_registry
    from interop_runner.measure import campaign as campaign_mod
    from interop_runner.measure import plan as plan_mod
    from interop_runner.measure import prepare as prepare_mod

    before = host_state()
    root = tmp_path / "impls"
    shutil.copytree(IMPLEMENTATIONS_DIR / "quic-go", root / "quic-go")
    shutil.copytree(IMPLEMENTATIONS_DIR / "quic-go", root / "broken")
    shutil.copytree(IMPLEMENTATIONS_DIR / "_shared", root / "_shared")
    meta_yml = root / "broken" / "meta.yml"
    meta_yml.write_text(meta_yml.read_text().replace("name: quic-go", "name: broken"))
    setup = root / "broken" / "setup"
    good = setup.read_text()
    setup.write_text("#!/usr/bin/env bash\nfor i in $(seq 1 40); do echo \"compiling unit "
                     "$i\"; done\necho 'error: linker failed' >&2\nexit 2\n")
    monkeypatch.setattr(campaign_mod, "load_registry", lambda: load_registry(root))
    monkeypatch.setattr(config_mod, "load_registry", lambda: load_registry(root))
    monkeypatch.setattr(plan_mod, "load_registry", lambda: load_registry(root))
    monkeypatch.setattr(prepare_mod, "load_registry", lambda: load_registry(root))
    cfg_path = write(tmp_path / "f-setup.yml", fault_config(tmp_path, "f-setup").read_text()
                     .replace("pairs: [{server: quic-go, client: quic-go}]",
                              "pairs: [{server: broken, client: quic-go}, "
                              "{server: quic-go, client: quic-go}]")
                     .replace(f"repetitions: {REPS}", "repetitions: 1"))
    camp = execute(cfg_path, tmp_path)
    recs = {d["server"]["implementation"]: d for _, d in records(camp)}
    assert recs["quic-go"]["status"] == "ok"
    broken = recs["broken"]
    assert broken["status"] == "failed" and "setup of broken failed (exit 2)" in \
        broken["reason"] and "error: linker failed" in broken["reason"]
    tail = json.loads((camp / "campaign.json").read_text())["implementations"][
        "server:broken"]["setup_log_tail"].splitlines()
    assert len(tail) == 30 and tail[-1] == "error: linker failed"
    left, knobs = processes_left(), knobs_not_restored(before)
    setup.write_text(good)  # the build is fixed; the resume runs the failed pair again

    def resume_api() -> bool:
        cfg, testbed = load_campaign(cfg_path)
        again = Campaign(cfg, testbed, tmp_path / "results",
                         build_plan(cfg, [testbed.name], camp))
        assert again.skipped == 1 and len(again.runs) == 1
        again.execute()
        return json.loads((camp / "campaign.json").read_text())["status"] == "finished"

    # per pair: the audit of a 1-repetition campaign
    row = Row(FAULTS[13], "continue", "", 0, left, knobs, False)
    row.resumed = resume_api() and processes_left() == 0 and knobs_not_restored(before) == 0
    by_pair: dict[str, list[dict[str, Any]]] = {}
    for _, d in records(camp):
        by_pair.setdefault(d["server"]["implementation"], []).append(d)
    lost = abs(len([d for d in by_pair.get("quic-go", []) if d["status"] == "ok"]) - 1)
    lost += len(by_pair.get("quic-go", [])) - 1
    b = sorted(by_pair.get("broken", []), key=lambda d: d["attempt"])
    lost += 0 if [d["status"] for d in b] == ["failed", "ok"] else 1
    row.records_lost = lost
    row.happened = ("its runs recorded `failed: server: setup of broken failed (exit 2): "
                    "error: linker failed` with the last 30 lines of the build in "
                    "campaign.json; the other pair ran `ok`; after fixing the build the "
                    "resume (Python API: test registry) ran the failed pair")
    reliability.add(row)
    assert (row.records_lost, row.processes_left, row.knobs_not_restored, row.resumed) == \
        (0, 0, 0, True), row


# -- two runners ---------------------------------------------------------------------------------
@pytest.mark.usefixtures("local_testbed")
def test_second_runner_on_a_busy_testbed_is_refused(tmp_path, reliability):
    """A campaign runs; another `run.py run` and a `run.py testbed restore` on the same nodes
    would take its processes and knob journal for a killed runner's leftovers. Both are
    refused by the node lease with one line, write nothing and touch nothing; the running
    campaign finishes with every repetition ok."""
    before = host_state()
    # 256 MiB at 200 Mbit/s: about 11 s per repetition, so the campaign is still running
    # while the second runner tries (each refusal takes a few seconds)
    cfg = fault_config(tmp_path, "f-second", client_timeout=60, size="256MiB")
    other = tmp_path / "other"
    other.mkdir()
    second = fault_config(other, "f-second-b", client_timeout=60)
    seen: dict[str, subprocess.CompletedProcess[str]] = {}

    def second_runner(pid: int) -> None:
        seen["run"] = run_cli("run", str(second), "--results-dir", str(other / "results"),
                              "--no-progress", timeout=60)
        seen["restore"] = run_cli("testbed", "restore", timeout=60)

    inj = start_injector("qir-client", CLIENT_BIN, 2, second_runner, delay=0.2)
    camp = execute(cfg, tmp_path)
    inj.check()
    run, restore = seen["run"], seen["restore"]
    for proc in (run, restore):
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 1 and len(lines) == 1 and "Traceback" not in proc.stderr, \
            proc.stderr
        assert f"is in use by campaign {camp.name} (runner pid {os.getpid()} on " in lines[0]
    assert not (other / "results").exists() or not any((other / "results").iterdir())
    assert all(d["status"] == "ok" for _, d in records(camp)) and len(records(camp)) == REPS
    finish(reliability, FAULTS[14], "refused",
           "both stopped with one line (exit 1, no record, no change), "
           "`error: testbed local: server: "
           f"/var/tmp/qir/server is in use by campaign {camp.name.split('_')[0]}_... (runner pid "
           "..., since ...); wait for it to finish or stop it first` (restore: `server: ...`); "
           "the second campaign wrote nothing; the running campaign was not touched and "
           f"finished ({REPS} of {REPS} repetitions ok)", cfg, camp, before, [])


# -- containers --------------------------------------------------------------------------------
CONTAINER_CLIENT_BIN = b"quic-go-client"  # the harness binary inside quic-go-qir's image


def kill_runner_in_container_transfer(tmp_path: Path, name: str
                                      ) -> tuple[Path, Path, dict[str, str], int]:
    """SIGKILL a runner while repetition 2's client container transfers; return (config,
    campaign dir, host state before, containers left)."""
    before = host_state()
    cfg = fault_config(tmp_path, name, size="64MiB", client="quic-go-qir")
    camp = kill_runner_mid_transfer(cfg, tmp_path, CONTAINER_CLIENT_BIN)
    containers = len(our_containers())
    left = sum(len(stray_processes(ns, settle_s=0)) for ns in NODE_NAMESPACES)
    assert containers == 1 and left >= 1  # the client container and the server run on
    return cfg, camp, before, containers


@pytest.mark.usefixtures("local_testbed")
def test_runner_sigkill_during_container_transfer_next_campaign_removes_it(tmp_path,
                                                                            reliability):
    cfg, camp, before, containers = kill_runner_in_container_transfer(tmp_path, "f-ct")
    ok = resume(cfg, camp)
    meta = json.loads((camp / "campaign.json").read_text())
    removed = [k for k in sum(meta["killed_leftovers"].values(), []) if "container" in k]
    assert len(removed) == 1 and our_containers() == [] and qir_cgroups() == []
    rec = the_record(camp, 2)
    assert rec["status"] == "failed" and "runner was killed" in rec["reason"]
    finish(reliability, FAULTS[15], "-", f"the killed runner left {containers} container "
           "(and processes in the node namespaces with the server); the resume removed "
           "the container by its labels (`killed_leftovers`: `removed container ...`), killed "
           f"the journaled server, recorded the attempt as `{outcome(rec)}` and ran it again; "
           "0 containers and 0 cgroups left", cfg, camp, before, [(2, 1)],
           resume_with=lambda: ok, left=processes_left(), knobs=knobs_not_restored(before))


@pytest.mark.usefixtures("local_testbed")
def test_runner_sigkill_during_container_transfer_restore_removes_it(tmp_path, reliability):
    cfg, camp, before, containers = kill_runner_in_container_transfer(tmp_path, "f-ctr")
    restore = run_cli("testbed", "restore", timeout=120)
    assert restore.returncode == 0, restore.stderr
    assert "removed container" in restore.stdout, restore.stdout
    left_after, knobs_after = processes_left(), knobs_not_restored(before)
    assert our_containers() == [] and qir_cgroups() == []
    assert left_after == 0 and knobs_after == 0
    finish(reliability, FAULTS[16], "-", f"the killed runner left {containers} container "
           "(and processes with the server); `run.py testbed restore` removed the "
           "container, killed the server and replayed the knob journals: 0 containers, "
           "0 processes, 0 knobs left before the resume", cfg, camp, before, [(2, 1)],
           left=left_after, knobs=knobs_after)



# -- an emulated path (docs/paths.md) ----------------------------------------------------------
def path_fault_config(tmp_path: Path, name: str) -> Path:
    """The fault campaign over a path through the router: 100 Mbit/s, 10 ms, 1 BDP (32 MiB
    last >= 2.7 s, whatever the CPU), nfqueue backend (the delay line holds the reverse
    direction), calibrated with `warn`: the faults are the subject here, and a loaded machine
    can add a millisecond to the pings (tests/test_path_local.py checks `strict`)."""
    return write(tmp_path / f"{name}.yml", f"""testbed: {TESTBED_FILE}
name: {name}
file_size: 32MiB
repetitions: {REPS}
port: 4470
timeouts: {{client: 15s, command: 30s}}
pairs: [{{server: quic-go, client: quic-go}}]
knobs: {{rmem: 2x}}
path: {{rate: 100mbit, rtt: 10ms, buffer: 1bdp, backend: nfqueue, calibrate: warn}}
""")


def path_left() -> tuple[int, int]:
    """Delay lines running and path items (qdiscs, the path's chain) left in the router."""
    ex = LocalExecutor("t")
    pids = namespace_pids("qir-router")
    lines = sum(1 for pid in pids if b"qir-delayline" in program(pid))
    items = ex.run(["ip", "netns", "exec", "qir-router", "sh", "-c",
                    "tc qdisc show | grep -c -e tbf -e netem; iptables -S | grep -c qir-path"],
                   timeout=10, check=False).stdout.split()
    return lines, sum(int(x) for x in items if x.isdigit())


@pytest.mark.usefixtures("local_testbed")
def test_runner_sigkill_with_a_path_active_is_cleaned_up(tmp_path, reliability):
    before = host_state()
    cfg = path_fault_config(tmp_path, "f-path-kill")
    camp = kill_runner_mid_transfer(cfg, tmp_path, CLIENT_BIN)
    lines, items = path_left()
    assert lines >= 1 and items >= 2, (lines, items)  # the delay line, tbf and chain stay
    ok = resume(cfg, camp)
    meta = json.loads((camp / "campaign.json").read_text())
    assert meta["killed_leftovers"].get("router")  # the delay line's process group
    assert "router" in meta["restored_leftovers"]
    assert path_left() == (0, 0)
    rec = the_record(camp, 2)
    assert rec["status"] == "failed" and "runner was killed" in rec["reason"]
    finish(reliability, FAULTS[17], "-", f"the killed runner left {lines} delay line(s) "
           f"running and {items} path item(s) (qdiscs, the path's iptables chain) on the "
           "router; the resume killed the journaled delay lines, replayed the router's path "
           f"journal, recorded the attempt as `{outcome(rec)}` and ran it again over the "
           "same path (calibrated once, in campaign.json)", cfg, camp, before, [(2, 1)],
           resume_with=lambda: ok)


@pytest.mark.usefixtures("local_testbed")
def test_delay_line_killed_mid_transfer(tmp_path, reliability):
    before = host_state()
    cfg = path_fault_config(tmp_path, "f-path-line")

    def kill_lines(pid: int) -> None:
        for line in namespace_pids("qir-router"):
            if b"qir-delayline" in program(line):
                os.kill(line, signal.SIGKILL)

    inj = start_injector("qir-client", CLIENT_BIN, 2, kill_lines)
    camp = execute(cfg, tmp_path)
    inj.check()
    rec = the_record(camp, 2)
    assert rec["status"] in ("failed", "timeout") and "delay line died" in rec["reason"]
    assert rec["path"]["delay_lines_alive"] == {"reverse": False}
    assert the_record(camp, 3)["status"] == "ok"  # the path was built anew for it
    assert path_left() == (0, 0)
    finish(reliability, FAULTS[18], "continue", f"attempt recorded `{rec['status']}: "
           f"{rec['reason'].split(';')[0]}`; the next attempt found the delay line dead and "
           f"built the path anew; {stopped_or_continued(camp)}", cfg, camp, before, [(2, 1)])

# -- the process journal, without a testbed ----------------------------------------------------
def test_process_journal_kills_only_provable_leftovers(tmp_path):
    journal = tmp_path / "procs"
    ex = LocalExecutor("node")
    ex.proc_journal, ex.proc_tag = str(journal), "camp-1"
    stopped = ex.start(["sleep", "60"], stdout=str(tmp_path / "a.out"),
                       stderr=str(tmp_path / "a.err"))
    ex.stop(stopped, grace=1)
    left = ex.start(["sleep", "60"], stdout=str(tmp_path / "b.out"),
                    stderr=str(tmp_path / "b.err"))  # "the runner died": never stopped
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)  # not ours
    try:
        lines = journal.read_text().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"{left.pgid} ")  # stopped: forgotten
        # a line whose process number was reused by another process (start time differs)
        with journal.open("a") as fh:
            fh.write(f"{other.pid} 1 camp-0 bg\n")
        # a tracked foreground command is journaled while it runs, and forgotten after
        res = ex.run_tracked(["sh", "-c", 'cat "$0"', str(journal)], timeout=10)
        assert len(res.stdout.splitlines()) == 3 and res.stdout.splitlines()[-1].endswith(
            tuple("0123456789abcdef"))
        assert len(journal.read_text().splitlines()) == 2
        assert ex.reap_journal() == [(left.pgid, "camp-1")]
        assert not ex.alive(left) and other.poll() is None and not journal.exists()
    finally:
        other.kill()
        other.wait()


def flows_fault_config(tmp_path: Path, name: str) -> Path:
    """The fault campaign of flows: a quic-go pair and a kernel TCP reference flow, 4 s each,
    through the router's 50 Mbit/s, 10 ms bottleneck (the rest as path_fault_config)."""
    return write(tmp_path / f"{name}.yml", f"""testbed: {TESTBED_FILE}
name: {name}
file_size: 200MB
repetitions: {REPS}
port: 4470
duration: 4s
timeouts: {{command: 30s}}
flows: [{{server: quic-go, client: quic-go, congestion_control: reno}}, {{tcp: reno}}]
path: {{rate: 50mbit, rtt: 10ms, buffer: 1bdp, backend: nfqueue, calibrate: warn}}
""")


@pytest.mark.usefixtures("local_testbed")
def test_sigint_while_flows_transfer(tmp_path, reliability):
    before = host_state()
    cfg = flows_fault_config(tmp_path, "f-flows-int")
    code, err = interrupt_mid_transfer(cfg, tmp_path, 2)
    assert code == 130 and "Traceback" not in err, err
    (camp,) = campaign_dirs(tmp_path / "results")
    rec = the_record(camp, 2)
    assert rec["interrupted"] and rec["status"] == "failed"
    assert len(rec["flows"]) == 2
    assert path_left() == (0, 0)
    finish(reliability, FAULTS[19], "stop", f"attempt recorded `{outcome(rec)}` "
           "(interrupted) with both flows' records, exit 130; every server, client and the "
           "path removed", cfg, camp, before, [(2, 1)])


@pytest.mark.usefixtures("local_testbed")
def test_runner_sigkill_while_flows_transfer(tmp_path, reliability):
    before = host_state()
    cfg = flows_fault_config(tmp_path, "f-flows-kill")
    camp = kill_runner_mid_transfer(cfg, tmp_path, CLIENT_BIN)
    left = processes_left()
    assert left >= 1, left  # at least the quic-go server (the clients end at their duration)
    ok = resume(cfg, camp)
    meta = json.loads((camp / "campaign.json").read_text())
    assert meta["killed_leftovers"].get("server")  # the journaled server process groups
    rec = the_record(camp, 2)
    assert rec["status"] == "failed" and "runner was killed" in rec["reason"]
    finish(reliability, FAULTS[20], "-", "the killed runner left the flows' processes on the "
           "nodes; the resume killed the journaled process groups, removed the path, recorded "
           f"the attempt as `{outcome(rec)}` and ran it again", cfg, camp, before, [(2, 1)],
           resume_with=lambda: ok)


# -- the table ---------------------------------------------------------------------------------
# marked testbed: it renders the rows the fault tests measured, so it runs where they run
# (./test.sh's testbed run); in the other run it would only ever skip
@pytest.mark.testbed
def test_reliability_table_is_current(reliability):
    """Render the measured rows; write docs/reliability.md or check it is the committed one."""
    missing = reliability.missing()
    if missing:
        pytest.skip(f"not every fault test ran in this session (missing: {missing[0]}, ...)")
    text = reliability.render()
    if os.environ.get("QIR_WRITE_RELIABILITY") == "1":
        DOC.write_text(text)
    else:
        assert DOC.read_text() == text, "docs/reliability.md is stale: rerun with " \
            "QIR_WRITE_RELIABILITY=1"

