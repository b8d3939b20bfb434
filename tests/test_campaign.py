"""End to end on the real namespace testbed: real sshd, real quic-go and nginx/curl."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from interop_runner.analysis import load_results
from interop_runner.config.loader import load_campaign
from interop_runner.measure.attempt import Attempt
from interop_runner.measure.campaign import Campaign

from .conftest import (
    ROOT,
    TESTBED_FILE,
    campaign_dirs,
    scratch_leftovers,
    stray_processes,
    wait_until,
    write,
)

SIZE = 50 * 2**20


def campaign(tmp_path: Path, body: str, name: str = "c.yml") -> Path:
    return write(tmp_path / name, f"testbed: {TESTBED_FILE}\n{body}")


def execute(cfg_path: Path, tmp_path: Path):
    """Run a campaign file through the Python API into tmp_path/results."""
    cfg, testbed = load_campaign(cfg_path)
    return Campaign(cfg, testbed, tmp_path / "results").execute()


def patch_client_env(monkeypatch, repetition: int, change) -> None:
    """Let ``change(env)`` alter the client's contract environment in one repetition."""
    real_env = Attempt.side_env

    def patched(self, node, logs, side):
        env = real_env(self, node, logs, side)
        if node.cfg.role == "client" and self.plan.repetition == repetition:
            change(env)
        return env

    monkeypatch.setattr(Attempt, "side_env", patched)


def assert_nodes_clean(testbed) -> None:
    for ns in ("qir-server", "qir-client"):
        assert stray_processes(ns) == [], f"processes left in {ns}"
    for node in testbed.nodes.values():
        leftovers = scratch_leftovers(node.tmpdir)  # the file cache stays, on purpose
        assert leftovers == [], f"scratch files left on {node.role}: {leftovers}"
        runs = Path(node.workdir) / "runs"
        assert not runs.exists() or list(runs.iterdir()) == []


def receiving(tmpdir: str, proc: subprocess.Popen[str] | None = None) -> bool:
    """True once a client download under the client's ``tmpdir`` has bytes: the transfer
    runs. With ``proc`` (a runner started by the test), a runner that ended first fails."""
    if proc is not None:
        assert proc.poll() is None, proc.communicate()
    return any(f.stat().st_size > 0 for f in Path(tmpdir).glob("*/downloads/*"))


def default_sigint() -> None:
    """In the child: Ctrl-C handling as in a terminal, even when the test suite itself runs
    as a background job (which starts with SIGINT ignored, and Python keeps it so)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


@pytest.mark.usefixtures("local_testbed")
def test_end_to_end_quicgo_tcptls(tmp_path, local_testbed):
    cfg = campaign(tmp_path, f"""name: e2e
file_size: {SIZE}B
repetitions: 2
keylog: true
pairs:
  - {{server: quic-go, client: quic-go}}
  - {{server: tcp-tls, client: tcp-tls}}
  - {{server: quic-go, client: tcp-tls}}
""")
    proc = run_cli("run", str(cfg), "--results-dir", str(tmp_path / "results"), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert "median_mbps" in proc.stdout and "quic-go" in proc.stdout

    (camp,) = campaign_dirs(tmp_path / "results")
    df = load_results(camp)
    assert len(df) == 6
    ok = df[df["status"] == "ok"]
    assert sorted(set(zip(ok["server"], ok["client"]))) == [("quic-go", "quic-go"),
                                                             ("tcp-tls", "tcp-tls")]
    assert len(ok) == 4
    assert (ok["goodput_mbps"] > 0).all() and ok["hash_ok"].all()
    assert (ok["bytes_received"] == SIZE).all()
    assert (ok["end_ns"] > ok["start_ns"]).all()
    expected_s = (ok["end_ns"] - ok["start_ns"]).astype("int64") / 1e9  # exact int64 maths
    assert ok["duration_s"].astype(float).tolist() == pytest.approx(expected_s.tolist())
    assert ok["goodput_mbps"].astype(float).tolist() == pytest.approx(
        (8 * SIZE / ok["duration_s"].astype(float) / 1e6).tolist())
    assert (ok["digest_received"] == ok["digest_expected"]).all()
    assert set(ok["hash_algorithm"]) == {"blake3"} and ok["sha256_expected"].isna().all()
    assert set(ok["alpn"]) == {"h3", "http/1.1"}
    assert set(ok.loc[ok["server"] == "quic-go", "server_version"]) == {"v0.65.0"}

    unsup = df[df["status"] == "unsupported"]
    assert len(unsup) == 2 and set(unsup["client"]) == {"tcp-tls"}
    assert unsup["reason"].str.contains("no common protocol").all()
    assert unsup["goodput_mbps"].isna().all()  # not measured: missing, never 0

    run_json = camp / "quic-go_quic-go" / "goodput" / "1" / "attempt-1" / "run.json"
    data = json.loads(run_json.read_text())
    for key in ("schema_version", "status", "reason", "goodput_mbps", "duration_s",
                "bytes_received", "hash_ok", "start_ns", "end_ns", "repetition", "attempt"):
        assert key in data
    assert data["server"]["implementation"] == "quic-go" and data["attempt"] == 1
    assert len(data["server"]["source_hash"]) == 64
    attempt = run_json.parent
    assert (attempt / "server" / "server.stderr.log").exists()
    assert (attempt / "client" / "client.stderr.log").exists()
    assert (attempt / "client" / "keys.log").read_text().count("CLIENT_TRAFFIC_SECRET_0") >= 1

    meta = json.loads((camp / "campaign.json").read_text())
    assert meta["status"] == "finished" and meta["planned_runs"] == 6
    assert meta["config"]["file_size"] == SIZE
    assert len(meta["runner"]["commit"]) == 40 and isinstance(meta["runner"]["dirty"], bool)
    for node in ("server", "client"):
        facts = meta["hosts"][node]
        assert facts["kernel"] and int(facts["cores"]) >= 1 and facts["cpu_model"]
    assert meta["file"]["digest"] == data["digest_expected"]
    assert meta["file"]["hash_algorithm"] == data["hash_algorithm"] == "blake3"
    assert isinstance(meta["file"]["reused"], bool) and "sha256" not in meta["file"]

    # parse writes the same rows
    out = tmp_path / "all.parquet"
    parsed = run_cli("parse", str(camp), "-o", str(out))
    assert parsed.returncode == 0, parsed.stderr
    import pandas as pd

    assert len(pd.read_parquet(out)) == 6
    assert_nodes_clean(local_testbed)


@pytest.mark.usefixtures("local_testbed")
def test_failing_client_is_recorded_and_next_repetition_runs(tmp_path, local_testbed,
                                                             monkeypatch):
    cfg_path = campaign(tmp_path, """name: failing
file_size: 4MiB
repetitions: 3
timeouts: {client: 4s}
pairs:
  - {server: tcp-tls, client: tcp-tls}
  - {server: quic-go, client: quic-go}
""")
    patch_client_env(monkeypatch, 1, lambda env: env.update(  # nothing listens on 4999
        REQUESTS=env["REQUESTS"].replace(":4433/", ":4999/")))
    result = execute(cfg_path, tmp_path)
    df = load_results(result.directory)
    assert len(df) == 6
    by = {(r.server, r.repetition): r for r in df.itertuples()}
    tcp1 = by[("tcp-tls", 1)]
    assert tcp1.status == "failed" and tcp1.reason.startswith("client exited 7")
    assert pd_isna(tcp1.goodput_mbps) and tcp1.client_exit_code == 7
    quic1 = by[("quic-go", 1)]
    assert quic1.status in ("failed", "timeout")  # QUIC to a closed UDP port: no answer
    assert pd_isna(quic1.goodput_mbps)
    for server in ("tcp-tls", "quic-go"):
        for rep in (2, 3):
            assert by[(server, rep)].status == "ok", by[(server, rep)].reason
    assert_nodes_clean(local_testbed)


def pd_isna(value) -> bool:
    import pandas as pd

    return bool(pd.isna(value))


@pytest.mark.usefixtures("local_testbed")
def test_client_timeout_becomes_timeout_record(tmp_path, local_testbed):
    # 64 MiB through a 200 Mbit/s tbf lasts >= 2.6 s however fast the machine: the 0.5 s
    # client timeout always fires first
    cfg_path = campaign(tmp_path, """name: slow
file_size: 64MiB
repetitions: 1
timeouts: {client: 0.5s}
pairs: [{server: quic-go, client: quic-go}]
server_knobs: {rate: 200mbit}
""")
    (rec,) = execute(cfg_path, tmp_path).records
    assert rec.status == "timeout" and "0.5 s" in rec.reason
    assert rec.goodput_mbps is None and rec.duration_s is None
    assert_nodes_clean(local_testbed)


@pytest.mark.usefixtures("local_testbed")
def test_ctrl_c_mid_run_leaves_nothing_running(tmp_path, local_testbed):
    # 256 MiB through a 200 Mbit/s tbf: the transfer lasts >= 10 s however fast the machine,
    # so Ctrl-C lands inside the first one
    cfg = campaign(tmp_path, """name: interrupted
file_size: 256MiB
repetitions: 3
pairs: [{server: quic-go, client: quic-go}]
server_knobs: {rate: 200mbit}
""")
    client_tmp = local_testbed.node("client")[1].tmpdir
    proc = subprocess.Popen([sys.executable, str(ROOT / "run.py"), "run", str(cfg),
                             "--results-dir", str(tmp_path / "results"), "--no-progress"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)
    try:
        wait_until(lambda: receiving(client_tmp, proc), timeout=300, interval=0.1,
                   what="the client to receive data")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert_nodes_clean(local_testbed)
    (camp,) = campaign_dirs(tmp_path / "results")
    meta = json.loads((camp / "campaign.json").read_text())
    assert meta["status"] == "interrupted" and meta["finished_at"]
    df = load_results(camp)
    assert len(df) == 1 and df.loc[0, "status"] == "failed"
    assert "interrupted" in df.loc[0, "reason"]


@pytest.mark.usefixtures("local_testbed")
def test_exception_mid_run_leaves_nothing_running(tmp_path, local_testbed, monkeypatch):
    cfg_path = campaign(tmp_path, """name: crash
file_size: 4MiB
repetitions: 2
pairs: [{server: tcp-tls, client: tcp-tls}]
""")

    def boom(self):
        raise RuntimeError("bug in the runner")

    monkeypatch.setattr(Attempt, "verify", boom)
    with pytest.raises(RuntimeError, match="bug in the runner"):
        execute(cfg_path, tmp_path)
    assert_nodes_clean(local_testbed)
    (camp,) = campaign_dirs(tmp_path / "results")
    assert json.loads((camp / "campaign.json").read_text())["finished_at"]


@pytest.mark.usefixtures("local_testbed")
def test_exit_127_is_recorded_as_unsupported(tmp_path, local_testbed, monkeypatch):
    """The real quic-go client script refuses an ALPN it does not speak with exit 127."""
    cfg_path = campaign(tmp_path, """name: unsup
file_size: 1MiB
repetitions: 2
pairs: [{server: quic-go, client: quic-go}]
""")
    patch_client_env(monkeypatch, 1, lambda env: env.update(ALPN="spdy/3"))
    result = execute(cfg_path, tmp_path)
    first, second = result.records
    assert first.status == "unsupported" and first.client.exit_code == 127
    assert "exited 127 (unsupported)" in first.reason and first.goodput_mbps is None
    assert second.status == "ok"
    assert_nodes_clean(local_testbed)


@pytest.mark.usefixtures("local_testbed")
def test_preflight_refuses_too_large_file(tmp_path, local_testbed):
    cfg = campaign(tmp_path, """name: huge
file_size: 64TiB
repetitions: 1
pairs: [{server: quic-go, client: quic-go}]
""")
    proc = run_cli("run", str(cfg), "--results-dir", str(tmp_path / "results"), "--no-progress")
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert lines[0].startswith("error: server: /dev/shm/qir-server has ")
    assert "the campaign needs 64.00 TiB" in lines[0]
    (camp,) = campaign_dirs(tmp_path / "results")
    meta = json.loads((camp / "campaign.json").read_text())
    assert meta["status"].startswith("aborted: server: /dev/shm/qir-server has")
    assert_nodes_clean(local_testbed)


@pytest.mark.testbed  # the local testbed's key files (/run/qir-testbed, root only)
def test_unreachable_node_is_one_line_error(tmp_path):
    tb = write(tmp_path / "tb.yml", TESTBED_FILE.read_text().replace(
        "host: 198.18.0.2, port: 22", "host: 127.0.0.1, port: 1").replace(
        "local: true", "local: false"))
    cfg = write(tmp_path / "c.yml", f"""testbed: {tb}
name: unreachable
file_size: 1MiB
repetitions: 1
pairs: [{{server: quic-go, client: quic-go}}]
""")
    proc = run_cli("run", str(cfg), "--results-dir", str(tmp_path / "results"), "--no-progress")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: testbed local: server: cannot connect to 127.0.0.1:1: connection refused"]
    assert not (tmp_path / "results").exists()  # found before anything was written


@pytest.mark.usefixtures("local_testbed")
def test_port_already_in_use_fails_clearly(tmp_path, local_testbed):
    from interop_runner.remote.ssh import SSHExecutor
    from interop_runner.testbed.node import ssh_target

    _, node = local_testbed.node("server")
    squatter = SSHExecutor("server", ssh_target(node.ssh))
    # holds the port for the whole campaign (the scenario), until stopped below
    proc = squatter.start(["python3", "-c", "import socket,time; s=socket.socket(socket.AF_INET,"
                           "socket.SOCK_DGRAM); s.bind(('0.0.0.0', 4433)); time.sleep(60)"],
                          stdout=f"{node.workdir}/squat.out", stderr=f"{node.workdir}/squat.err")
    try:
        wait_until(lambda: squatter.run(["ss", "-Hlun", "sport = :4433"], timeout=10).stdout,
                   timeout=30, what="the squatter to bind UDP port 4433")
        cfg_path = campaign(tmp_path, """name: busy
file_size: 1MiB
repetitions: 1
pairs: [{server: quic-go, client: quic-go}]
""")
        (rec,) = execute(cfg_path, tmp_path).records
    finally:
        squatter.stop(proc)
        squatter.run(["rm", "-f", f"{node.workdir}/squat.out", f"{node.workdir}/squat.out.exit",
                      f"{node.workdir}/squat.err"], timeout=10)
        squatter.close()
    assert rec.status == "failed" and rec.reason.startswith("port 4433 is already in use")
    assert_nodes_clean(local_testbed)


@pytest.mark.usefixtures("local_testbed")
def test_failed_setup_fails_only_its_pairs_with_the_log_tail(tmp_path, local_testbed,
                                                              monkeypatch):
    import shutil

    from interop_runner.config import loader as config_mod
    from interop_runner.config.implementations import IMPLEMENTATIONS_DIR, load_registry
    from interop_runner.measure import campaign as campaign_mod
    from interop_runner.measure import plan as plan_mod
    from interop_runner.measure import prepare as prepare_mod

    root = tmp_path / "impls"
    shutil.copytree(IMPLEMENTATIONS_DIR / "quic-go", root / "quic-go")
    shutil.copytree(IMPLEMENTATIONS_DIR / "_shared", root / "_shared")
    broken = root / "broken"
    broken.mkdir()
    (broken / "meta.yml").write_text("name: broken\nversion: '1'\nroles: [server, client]\n"
                                     "alpns: [h3]\nready: udp\n")
    (broken / "setup").write_text("#!/usr/bin/env bash\nset -euo pipefail\n"
                                  "for i in $(seq 1 40); do echo \"compiling unit $i\"; done\n"
                                  "echo 'error: linker failed' >&2\nexit 2\n")
    (broken / "setup").chmod(0o755)
    monkeypatch.setattr(campaign_mod, "load_registry", lambda: load_registry(root))
    monkeypatch.setattr(config_mod, "load_registry", lambda: load_registry(root))
    monkeypatch.setattr(plan_mod, "load_registry", lambda: load_registry(root))
    monkeypatch.setattr(prepare_mod, "load_registry", lambda: load_registry(root))
    cfg = campaign(tmp_path, """name: broken
file_size: 1MiB
repetitions: 1
pairs: [{server: broken, client: quic-go}, {server: quic-go, client: quic-go}]
""")
    result = execute(cfg, tmp_path)
    first, second = result.records
    assert first.status == "failed" and "setup of broken failed (exit 2)" in first.reason
    assert "error: linker failed" in first.reason
    assert second.status == "ok"
    meta = json.loads((result.directory / "campaign.json").read_text())
    tail = meta["implementations"]["server:broken"]["setup_log_tail"].splitlines()
    assert len(tail) == 30 and tail[-1] == "error: linker failed"
    assert tail[-2] == "compiling unit 40"
    assert meta["status"] == "finished"
    assert_nodes_clean(local_testbed)


@pytest.mark.usefixtures("local_testbed")
def test_a_cached_file_is_reused_until_its_content_changes(tmp_path, local_testbed):
    """The second campaign of a size serves the server node's cached file; once a byte of it
    changes, the next campaign generates a new one (a note says why) and every download of
    it verifies."""
    size = 3 * 2**20 + 7  # a size no other test uses: the first campaign generates it
    cfg = campaign(tmp_path, f"""name: cache
file_size: {size}B
repetitions: 1
pairs: [{{server: quic-go, client: quic-go}}]
""")
    cached = Path(local_testbed.nodes["server"].tmpdir) / "files" / f"random-{size}.bin"
    cached.unlink(missing_ok=True)  # from an earlier run of this test
    files = []
    for round_ in range(3):
        if round_ == 2:
            with open(cached, "r+b") as fh:
                fh.seek(size // 3)
                byte = fh.read(1)[0]
                fh.seek(size // 3)
                fh.write(bytes([byte ^ 0x80]))
        camp = execute(cfg, tmp_path / str(round_))
        files.append(json.loads((camp.directory / "campaign.json").read_text())["file"])
        assert [r.status for r in camp.records] == ["ok"]
        assert camp.records[0].digest_received == files[-1]["digest"]
    assert [f.get("reused") for f in files] == [False, True, False]
    assert files[0]["digest"] == files[1]["digest"] != files[2]["digest"]
    assert "no longer matches its blake3 digest" in files[2]["note"]
    assert_nodes_clean(local_testbed)


def leave_scratch(node, name: str, owner: str, kept: bool = False) -> Path:
    """The scratch directory a runner killed between processes leaves: its file and certs,
    the owner file naming the node directory whose lease it held, and no journaled process."""
    scratch = Path(node.tmpdir) / name
    (scratch / "www").mkdir(parents=True)
    (scratch / "www" / "goodput-4194304.bin").write_bytes(b"x" * 4096)
    (scratch / ".qir-owner").write_text(owner + "\n")
    if kept:
        (scratch / ".qir-kept").touch()
    return scratch


@pytest.mark.usefixtures("local_testbed")
def test_a_killed_runners_directories_are_removed_by_the_next_campaign(tmp_path,
                                                                        local_testbed):
    """A runner SIGKILLed while none of its processes ran leaves its scratch and run
    directories and nothing in the process journal; the next campaign on the node (under
    the same lease) removes them and says so. Kept (keep_files) scratch and that of another
    node directory stay."""
    server, client = local_testbed.nodes["server"], local_testbed.nodes["client"]
    stale = [leave_scratch(n, "gone_20200101T000000Z", n.workdir) for n in (server, client)]
    stale_run = Path(server.workdir) / "runs" / "gone_20200101T000000Z-2"
    stale_run.mkdir(parents=True)
    kept = leave_scratch(server, "kept_20200101T000000Z", server.workdir, kept=True)
    foreign = leave_scratch(server, "other_20200101T000000Z", "/var/tmp/qir-b/server")
    try:
        cfg = campaign(tmp_path, """name: after-kill
file_size: 4MiB
repetitions: 1
pairs: [{server: quic-go, client: quic-go}]
""")
        result = execute(cfg, tmp_path)
        assert [r.status for r in result.records] == ["ok"]
        assert not any(p.exists() for p in stale) and not stale_run.exists()
        assert kept.is_dir() and foreign.is_dir()
        said = json.loads((result.directory / "campaign.json").read_text())["killed_leftovers"]
        assert sorted(said["server"]) == sorted(
            f"removed {p} (left by a runner that did not end cleanly)"
            for p in (stale[0], stale_run))
        assert said["client"] == [f"removed {stale[1]} (left by a runner that did not end "
                                  "cleanly)"]
    finally:
        subprocess.run(["rm", "-rf", "--", str(kept), str(foreign)], check=True)
    assert_nodes_clean(local_testbed)


@pytest.mark.usefixtures("local_testbed")
def test_the_results_cache_is_complete_when_the_campaign_ends(tmp_path):
    """Each stored record is parsed while the campaign runs (LiveCache on the campaign's
    on_stored hook); at the end the cache is written, and the first load reads it
    and gets what a cold parse gives."""
    import pandas as pd

    from interop_runner.analysis.running.live_cache import LiveCache
    from interop_runner.measure.hooks import CampaignHooks

    cfg, testbed = load_campaign(campaign(tmp_path, """name: live-cache
file_size: 1MiB
repetitions: 3
monitors: [ethtool, sysfs, nstat, pidstat, mpstat]
pairs: [{server: quic-go, client: quic-go}]
"""))
    live = LiveCache()
    stored: list[Path] = []

    def on_stored(directory: Path, path: Path) -> None:
        stored.append(path)
        assert live.on_stored is not None
        live.on_stored(directory, path)

    camp = Campaign(cfg, testbed, tmp_path / "results", hooks=CampaignHooks(on_stored=on_stored))
    result = camp.execute()
    assert [p.parent.parent.name for p in stored] == ["1", "2", "3"]
    assert all(p.is_file() for p in stored)  # handed on after it was stored
    cache = result.directory / ".cache" / "attempts.parquet"
    assert not cache.exists()  # written at the end, from the final campaign.json
    assert live.finish(result.directory) is None
    written = cache.stat().st_mtime_ns
    first = load_results(result.directory)
    assert cache.stat().st_mtime_ns == written  # read, not parsed and written again
    pd.testing.assert_frame_equal(first, load_results(result.directory, cache=False))
    assert list(first["status"]) == ["ok"] * 3
