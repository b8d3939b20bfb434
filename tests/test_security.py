"""Security defaults: SSH host keys (strict, trust on first use), no key material in the
results unless asked, results and journals private to the user."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from interop_runner.config.loader import check_ssh_files, load_campaign_testbeds
from interop_runner.config.testbed import SSHConfig
from interop_runner.errors import ConfigError, ConnectError, HostKeyError
from interop_runner.remote.executor import LocalExecutor, PrivateFilesExecutor
from interop_runner.remote.ssh import SSHExecutor
from interop_runner.storage.layout import new_campaign_dir, private_mkdir, write_json_atomic
from interop_runner.testbed.node import Node, ssh_target

from .conftest import ROOT, TESTBED_FILE, campaign_dirs, write

STATE = Path("/run/qir-testbed")
SERVER_HOST = "198.18.0.2"


def _umask(value: int) -> int:
    return os.umask(value)


def public_key(node: str) -> str:
    """``type base64`` of a local-testbed node's sshd host key."""
    return " ".join((STATE / node / "ssh_host_ed25519_key.pub").read_text().split()[:2])


def group_or_other_bits(root: Path) -> list[str]:
    """Every path below ``root`` (root included) with any group/other permission bit."""
    bad = []
    for path in [root, *root.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if mode & 0o077 and not path.is_symlink():
            bad.append(f"{oct(mode)} {path}")
    return bad


def run_cli(*args: str, timeout: float = 170) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


def copied_testbed(tmp_path: Path, known_hosts: Path, tofu: bool, local: bool = True) -> Path:
    """The local testbed file with another known_hosts file (and trust on first use)."""
    text = TESTBED_FILE.read_text().replace(
        "known_hosts: /run/qir-testbed/known_hosts",
        f"known_hosts: {known_hosts}" + (", trust_on_first_use: true" if tofu else ""))
    if not local:
        text = text.replace("local: true", "local: false")
    return write(tmp_path / "tb.yml", text)


# ------------------------------------------------------------------ without the testbed ----
def test_trust_on_first_use_is_off_by_default_and_parsed():
    assert SSHConfig(host="h").trust_on_first_use is False
    cfg = SSHConfig.model_validate({"host": "h", "trust_on_first_use": True,
                                    "jump": {"host": "j"}})
    assert cfg.trust_on_first_use and not cfg.jump.trust_on_first_use  # type: ignore[union-attr]
    assert ssh_target(cfg).trust_on_first_use and not ssh_target(cfg).jump.trust_on_first_use


def test_missing_known_hosts_is_fine_only_with_trust_on_first_use(tmp_path):
    missing = tmp_path / "nope" / "known_hosts"
    key = write(tmp_path / "id_ed25519", "not read: only its existence is checked\n")
    for tofu in (False, True):
        tb = copied_testbed(tmp_path, missing, tofu, local=False)
        # the key of the local testbed exists only while it is up: use one that always does
        tb.write_text(tb.read_text().replace("key: /run/qir-testbed/id_ed25519", f"key: {key}"))
        cfg_path = write(tmp_path / "c.yml", f"testbed: {tb}\nname: x\nrepetitions: 1\n"
                                             "pairs: [{server: quic-go, client: quic-go}]\n")
        cfg, testbeds = load_campaign_testbeds(cfg_path)
        if tofu:
            check_ssh_files(cfg_path, cfg, testbeds)
        else:
            with pytest.raises(ConfigError, match="known_hosts: file not found"):
                check_ssh_files(cfg_path, cfg, testbeds)


def test_store_writes_private_files_and_dirs_even_with_an_open_umask(tmp_path):
    old = _umask(0)
    try:
        camp = new_campaign_dir(tmp_path / "results", "sec")
        write_json_atomic(camp / "a" / "b" / "run.json", {"x": 1})
        write_json_atomic(camp / "campaign.json", {"x": 1})
        write_json_atomic(camp / "campaign.json", {"x": 2}, overwrite=True)
        private_mkdir(camp / "c" / "d")
    finally:
        _umask(old)
    assert stat.S_IMODE(camp.stat().st_mode) == 0o700
    assert group_or_other_bits(camp) == []


def test_private_files_executor_creates_0600_files_and_0700_dirs(tmp_path):
    old = _umask(0)
    try:
        ex = PrivateFilesExecutor(LocalExecutor())
        ex.run(["sh", "-c", 'mkdir -p "$0/j" && echo x >>"$0/j/restore.sh"', str(tmp_path)],
               timeout=10)
        LocalExecutor().make_private_dir(str(tmp_path / "w" / "x"))
    finally:
        _umask(old)
    assert stat.S_IMODE((tmp_path / "j").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "j" / "restore.sh").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "w" / "x").stat().st_mode) == 0o700


def test_fetch_dir_holds_back_private_keys_and_key_logs(tmp_path):
    from interop_runner.config.testbed import NodeConfig

    remote = tmp_path / "remote"
    files = {
        "server.stderr.log": "hello\n",
        "keys.log": "CLIENT_HANDSHAKE_TRAFFIC_SECRET 00 11\n",
        "priv.key": "-----BEGIN PRIVATE KEY-----\nMIG\n-----END PRIVATE KEY-----\n",
        "nginx/combined.pem": "-----BEGIN EC PRIVATE KEY-----\nMHc\n-----END EC PRIVATE KEY-----\n",
        "sub/capture.pcap": "\0\1binary",
    }
    for rel, text in files.items():
        write(remote / rel, text)
    cfg = NodeConfig(role="server", ssh=SSHConfig(host="h"), interface="lo", ip="127.0.0.1",
                     workdir="/var/tmp/qir-sec-test/w", tmpdir="/var/tmp/qir-sec-test/t")
    node = Node("n1", cfg, LocalExecutor("n1"), "c")
    old = _umask(0)
    try:
        skipped: list[str] = []
        got = node.fetch_dir(str(remote), tmp_path / "out", skipped=skipped)
        with_keylog = node.fetch_dir(str(remote), tmp_path / "out2", keylogs=True)
    finally:
        _umask(old)
    assert sorted(got) == ["server.stderr.log", "sub/capture.pcap"]
    assert sorted(skipped) == ["keys.log", "nginx/combined.pem", "priv.key"]
    assert sorted(with_keylog) == ["keys.log", "server.stderr.log", "sub/capture.pcap"]
    assert group_or_other_bits(tmp_path / "out") == []
    assert group_or_other_bits(tmp_path / "out2") == []


# ----------------------------------------------------------------------- on the testbed ----
@pytest.fixture
def server_ssh(local_testbed) -> SSHConfig:
    _, node = local_testbed.node("server")
    return node.ssh


def connect(cfg: SSHConfig, known: Path, tofu: bool) -> SSHExecutor:
    target = ssh_target(cfg.model_copy(update={"known_hosts": str(known),
                                               "trust_on_first_use": tofu}))
    return SSHExecutor("server", target)


def test_unknown_host_key_is_refused(server_ssh, tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text(f"198.18.0.6 {public_key('client')}\n")  # another host only
    for path in (known, tmp_path / "missing"):
        with pytest.raises(ConnectError) as info:
            connect(server_ssh, path, tofu=False)
        assert not isinstance(info.value, HostKeyError)
        assert f"host key of {SERVER_HOST}:22 is not in {path}" in str(info.value)
        assert "\n" not in str(info.value)
    assert known.read_text() == f"198.18.0.6 {public_key('client')}\n"
    assert not (tmp_path / "missing").exists()


def test_trust_on_first_use_appends_and_records(server_ssh, tmp_path):
    known = tmp_path / "ssh" / "known_hosts"  # neither the file nor its directory exists
    ex = connect(server_ssh, known, tofu=True)
    try:
        assert ex.run(["true"], timeout=10).ok
        (entry,) = ex.trusted_host_keys
    finally:
        ex.close()
    assert known.read_text() == f"{SERVER_HOST} {public_key('server')}\n"
    assert stat.S_IMODE(known.stat().st_mode) == 0o600
    assert stat.S_IMODE(known.parent.stat().st_mode) == 0o700
    assert entry["host"] == SERVER_HOST and entry["key_type"] == "ssh-ed25519"
    assert entry["fingerprint"].startswith("SHA256:") and entry["known_hosts"] == str(known)
    # from now on the key is known: no second line, nothing recorded, also without TOFU
    for tofu in (True, False):
        ex = connect(server_ssh, known, tofu=tofu)
        assert ex.trusted_host_keys == []
        ex.close()
    assert known.read_text().count("\n") == 1


def test_changed_host_key_is_refused_even_with_trust_on_first_use(server_ssh, tmp_path):
    known = tmp_path / "known_hosts"
    wrong = f"{SERVER_HOST} {public_key('client')}\n"  # a real key, but the other node's
    known.write_text(wrong)
    for tofu in (False, True):
        with pytest.raises(HostKeyError) as info:
            connect(server_ssh, known, tofu=tofu)
        msg = str(info.value)
        assert "\n" not in msg and SERVER_HOST in msg and str(known) in msg
        assert "does not match" in msg
    assert known.read_text() == wrong


def test_changed_host_key_is_a_one_line_cli_error(local_testbed, tmp_path):
    known = write(tmp_path / "known_hosts", f"{SERVER_HOST} {public_key('client')}\n"
                                            f"198.18.0.6 {public_key('client')}\n")
    tb = copied_testbed(tmp_path, known, tofu=True)
    cfg = write(tmp_path / "c.yml", f"testbed: {tb}\nname: badkey\nfile_size: 1MiB\n"
                                    "repetitions: 1\npairs: [{server: quic-go, client: quic-go}]\n")
    proc = run_cli("run", str(cfg), "--results-dir", str(tmp_path / "results"), "--no-progress")
    assert proc.returncode == 2, proc.stderr  # a testbed-file problem, found before any run
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith(f"error: testbed local: server: host key of {SERVER_HOST}:22 "
                               f"does not match {known}")
    # as for an unreachable node: nothing written
    assert not (tmp_path / "results").exists() or not list((tmp_path / "results").iterdir())


def secrets_in(root: Path) -> list[str]:
    """Files below ``root`` holding TLS secrets or private keys, by content or name."""
    hits = []
    for path in root.rglob("*"):
        if not path.is_file():
            continue
        data = path.read_bytes()
        if (b"CLIENT_HANDSHAKE_TRAFFIC_SECRET" in data or b"PRIVATE KEY" in data
                or path.name.endswith((".key", "keys.log"))):
            hits.append(str(path.relative_to(root)))
    return hits


def test_tcpdump_run_keeps_no_key_material_and_everything_is_private(local_testbed,
                                                                      tmp_path):
    known = tmp_path / "known_hosts"  # fresh: both nodes are trusted on first use
    tb = copied_testbed(tmp_path, known, tofu=True)
    cfg = write(tmp_path / "c.yml", f"""testbed: {tb}
name: sec
file_size: 4MiB
repetitions: 1
pairs: [{{server: quic-go, client: quic-go}}]
monitors: [tcpdump, nstat]
""")
    proc = run_cli("run", str(cfg), "--results-dir", str(tmp_path / "results"), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert "trusting the unknown host key of" in proc.stderr
    (camp,) = campaign_dirs(tmp_path / "results")
    meta = json.loads((camp / "campaign.json").read_text())
    trusted = meta["ssh_host_keys_trusted_on_first_use"]
    assert sorted(k["host"] for k in trusted) == ["198.18.0.2", "198.18.0.6"]
    assert sorted(known.read_text().splitlines()) == sorted(
        [f"198.18.0.2 {public_key('server')}", f"198.18.0.6 {public_key('client')}"])
    (run_json,) = camp.rglob("run.json")
    record = json.loads(run_json.read_text())
    assert record["status"] == "ok", record["reason"]
    assert (run_json.parent / "client" / "capture.pcap").is_file()  # tcpdump did run
    assert secrets_in(camp) == []
    assert (camp / ".cache").is_dir()  # the summary's Parquet cache is covered too
    assert group_or_other_bits(camp) == []
    # nothing left on the nodes either (attempt logs and scratch removed)
    for node in local_testbed.nodes.values():
        assert not (Path(node.workdir) / "runs" / camp.name).exists()
        assert not (Path(node.tmpdir) / camp.name).exists()


def test_keylog_true_keeps_key_logs_and_the_report_says_so(local_testbed, tmp_path):
    cfg = write(tmp_path / "c.yml", f"""testbed: {TESTBED_FILE}
name: seckl
file_size: 4MiB
repetitions: 1
pairs: [{{server: quic-go, client: quic-go}}]
keylog: true
""")
    proc = run_cli("run", str(cfg), "--results-dir", str(tmp_path / "results"), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    (camp,) = campaign_dirs(tmp_path / "results")
    (run_json,) = camp.rglob("run.json")
    keys = run_json.parent / "client" / "keys.log"
    assert "CLIENT_HANDSHAKE_TRAFFIC_SECRET" in keys.read_text()
    assert not [p for p in camp.rglob("*") if p.name.endswith(".key")
                or (p.is_file() and b"PRIVATE KEY" in p.read_bytes())]
    assert group_or_other_bits(camp) == []
    report = run_cli("report", str(camp), "-o", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr
    html = (tmp_path / "report" / "report.html").read_text()
    assert "TLS key logs present" in html and "keys.log" in html


def test_knob_journals_are_private(local_testbed):
    from interop_runner.testbed.leftovers import HOST_JOURNAL, node_knobs

    name, cfg = local_testbed.node("server")
    node = Node.connect(name, cfg, "sec-test")
    try:
        nk = node_knobs(node, local_testbed)
        if nk.journal.pending() or nk.sysctl.pending():
            pytest.skip("a journal of another run is pending on the shared testbed")
        for journal in (nk.journal, nk.sysctl):
            journal.add(["true"])
        try:
            for path in (Path(cfg.workdir) / "restore.sh", Path(HOST_JOURNAL)):
                assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
                assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700, path.parent
        finally:
            assert nk.journal.replay() == [] and nk.sysctl.replay() == []
    finally:
        node.close()
