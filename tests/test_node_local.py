"""Node on this machine (Node.local: a LocalExecutor, directories in a temp dir): preflight,
install of a real (tiny) implementation folder, the generated file, certificates, log
fetching, leases, leftovers and cleanup. No root, no namespaces, no sshd.

``fake_implementation`` is also the implementation tests/test_attempt_local.py measures with:
its server is ``python3 -m http.server``, its client ``curl``; ``PARAM_MODE`` makes either side
misbehave in one chosen way.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

from interop_runner.config.implementations import ImplementationMeta, load_registry
from interop_runner.errors import NodeBusy, PreflightError, SetupError
from interop_runner.testbed.files import prepare_file
from interop_runner.testbed.node import Node

TOOLS = ("bash", "sha256sum", "stat", "ss", "head", "df", "env", "setsid", "openssl", "ps",
         "find", "curl", "flock", "pgrep", "truncate", "shred", "b3sum")
needs_tools = pytest.mark.skipif(any(shutil.which(t) is None for t in TOOLS),
                                 reason=f"needs {', '.join(TOOLS)} on PATH")
pytestmark = needs_tools

CAMPAIGN = "local_20260101T000000Z"

META = """name: fake
version: "1.0"
roles: [server, client]
alpns: [http/1.1]
ready: tcp
parameters:
  mode: {type: str, help: "how this side behaves (see run-server / run-client)"}
"""
SETUP = """#!/usr/bin/env bash
set -euo pipefail
# a real setup: remembers what it got, fails on request, "builds" once per SETUP_DIR
printf '%s %s %s\\n' "$ROLE" "$SETUP_DIR" "$PWD" >>"$SETUP_DIR/setup-calls"
if [ -e "$SETUP_DIR/fail-setup" ]; then
  echo "compiling..."; echo "error: linker exploded" >&2; exit 4
fi
[ -e "$SETUP_DIR/built" ] || touch "$SETUP_DIR/built"
"""
VERSION = """#!/usr/bin/env bash
echo "fake-1.0+$(cat "$SETUP_DIR/built-tag" 2>/dev/null || echo local)"
echo "second line is ignored"
"""
SERVER = """#!/usr/bin/env bash
set -euo pipefail
case "${PARAM_MODE:-ok}" in
  unsupported) echo "server: no such protocol: $ALPN" >&2; exit 127 ;;
  crash) echo "server: cannot bind" >&2; exit 2 ;;
  silent) exec sleep 600 ;;  # runs, never listens
esac
exec "$QIR_TEST_PYTHON" -m http.server --bind "$IP" --directory "$WWW" "$PORT"
"""
CLIENT = """#!/usr/bin/env bash
set -euo pipefail
name=${REQUESTS##*/}
url="http://${REQUESTS#https://}"  # the fake server speaks plain HTTP
out="$DOWNLOADS/$name"
fetch() { curl -sS --fail --retry 0 -o "$1" "$url"; }
case "${PARAM_MODE:-ok}" in
  ok|prefail|postfail) fetch "$out" ;;
  fail) echo "client: connection refused" >&2; exit 3 ;;
  unsupported) echo "client: speaks hq-interop only" >&2; exit 127 ;;
  killed) kill -KILL $$ ;;
  hang) exec sleep 600 ;;
  nothing) exit 0 ;;
  truncate) fetch "$out"; truncate -s 100 "$out" ;;
  corrupt) fetch "$out.tmp"; head -c "$(stat -c %s "$out.tmp")" /dev/zero >"$out"
           rm -f "$out.tmp" ;;
esac
"""
PRE = """#!/usr/bin/env bash
[ "${PARAM_MODE:-ok}" != prefail ] || { echo "pre: no hugepages here"; exit 5; }
"""
POST = """#!/usr/bin/env bash
[ "${PARAM_MODE:-ok}" != postfail ] || exit 1
"""
SCRIPTS = {"setup": SETUP, "version": VERSION, "pre": PRE, "run-server": SERVER,
           "run-client": CLIENT, "post": POST}


def fake_implementation(root: Path, extra: dict[str, str] | None = None) -> ImplementationMeta:
    """Write implementations/fake/ below ``root`` and load it like the real registry."""
    folder = root / "fake"
    folder.mkdir(parents=True)
    (folder / "meta.yml").write_text(META)
    for name, text in {**SCRIPTS, **(extra or {})}.items():
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return load_registry(root)["fake"]


def local_pair(base: Path, campaign: str = CAMPAIGN) -> tuple[Node, Node]:
    return (Node.local("server", "server", base, campaign, command_timeout=60),
            Node.local("client", "client", base, campaign, command_timeout=60))


def wait_until(check: Callable[[], object], timeout: float = 30.0) -> bool:
    """Poll ``check`` until it is true or ``timeout`` seconds passed; return its last value."""
    deadline = time.monotonic() + timeout
    while not (ok := bool(check())) and time.monotonic() < deadline:
        time.sleep(0.02)
    return ok


def pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.fixture(autouse=True)
def test_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake server runs this interpreter's http.server (the node environment is ours)."""
    monkeypatch.setenv("QIR_TEST_PYTHON", sys.executable)


# ----------------------------------------------------------------------------------- tests ----


def test_local_node_lives_below_its_base(tmp_path: Path) -> None:
    server, client = local_pair(tmp_path)
    assert server.cfg.workdir == f"{tmp_path.resolve()}/server/work"
    assert client.cfg.tmpdir == f"{tmp_path.resolve()}/client/tmp"
    assert (server.cfg.role, client.cfg.role) == ("server", "client")
    assert server.runs_dir == f"{server.cfg.workdir}/runs/{CAMPAIGN}"
    assert client.downloads == f"{client.cfg.tmpdir}/{CAMPAIGN}/downloads"
    assert server.executor.proc_journal == f"{server.cfg.workdir}/procs"
    assert server.run(["id", "-u"]).stdout.strip() == str(os.getuid())


def test_preflight_checks_tools_and_space(tmp_path: Path) -> None:
    server, _ = local_pair(tmp_path)
    server.preflight(1024, server.cfg.tmpdir)
    assert Path(server.cfg.tmpdir).is_dir() and Path(server.cfg.workdir).is_dir()
    with pytest.raises(PreflightError, match=r"^server: .* free, the campaign needs "):
        server.preflight(2**60, server.cfg.tmpdir)


def test_install_uploads_runs_setup_and_reads_version(tmp_path: Path) -> None:
    meta = fake_implementation(tmp_path / "implementations")
    server, client = local_pair(tmp_path / "nodes")
    for node in (server, client):
        assert node.install(meta, timeout=60) == "fake-1.0+local"
        target = Path(node.impl_dir("fake"))
        for script in SCRIPTS:
            assert (target / script).read_text() == SCRIPTS[script]
            assert os.access(target / script, os.X_OK)
        calls = Path(node.setup_dir, "setup-calls").read_text().splitlines()
        assert calls == [f"{node.cfg.role} {node.setup_dir} {target}"]
    # run again: uploaded afresh, setup called again (its own cache decides what to rebuild)
    Path(server.setup_dir, "built-tag").write_text("cached")
    assert server.install(meta, timeout=60) == "fake-1.0+cached"
    assert len(Path(server.setup_dir, "setup-calls").read_text().splitlines()) == 2


def test_failing_setup_is_a_setup_error_with_its_output(tmp_path: Path) -> None:
    meta = fake_implementation(tmp_path / "implementations")
    server, _ = local_pair(tmp_path / "nodes")
    Path(server.setup_dir).mkdir(parents=True)
    Path(server.setup_dir, "fail-setup").touch()
    with pytest.raises(SetupError) as err:
        server.install(meta, timeout=60)
    assert str(err.value) == "server: setup of fake failed (exit 4): error: linker exploded"
    assert err.value.tail.splitlines() == ["compiling...", "error: linker exploded"]


def test_generated_file_certificate_and_fetch(tmp_path: Path) -> None:
    server, client = local_pair(tmp_path)
    served = prepare_file(server, "goodput-4096.bin", 4096, "sha256", keep=False, timeout=60)
    data = Path(server.www, "goodput-4096.bin").read_bytes()
    assert len(data) == 4096 and hashlib.sha256(data).hexdigest() == served.digest
    pem = server.make_certificate(server.cfg.ip)
    assert pem.startswith(b"-----BEGIN CERTIFICATE-----")
    client.install_ca(pem)
    assert Path(client.certs, "ca.pem").read_bytes() == pem
    skipped: list[str] = []
    got = server.fetch_dir(server.certs, tmp_path / "fetched", skipped=skipped)
    assert got == ["cert.pem"] and skipped == ["priv.key"]  # private keys never leave a node
    assert (tmp_path / "fetched" / "cert.pem").read_bytes() == pem


def test_lease_keeps_a_second_runner_out(tmp_path: Path) -> None:
    server, _ = local_pair(tmp_path)
    server.run(["mkdir", "-p", server.cfg.workdir])
    server.take_lease(wait=0)
    other = Node.local("server", "server", tmp_path, "other_20260101T000000Z")
    try:
        assert CAMPAIGN in (other.lease_holder() or "")
        with pytest.raises(NodeBusy, match=f"is in use by campaign {CAMPAIGN}"):
            other.take_lease(wait=0)
    finally:
        server.close()
    assert other.lease_holder() is None
    other.take_lease(wait=0)
    other.close()


def test_leftovers_of_a_killed_runner_are_reaped(tmp_path: Path) -> None:
    """A process group a runner started and never stopped (it was killed), and its scratch
    files, are removed by the next runner on that node directory, and only those."""
    killed = Node.local("server", "server", tmp_path, "dead_20260101T000000Z")
    killed.run(["mkdir", "-p", killed.www, killed.runs_dir])
    proc = killed.executor.start(["sleep", "600"], stdout=f"{killed.runs_dir}/o",
                                 stderr=f"{killed.runs_dir}/e")
    assert wait_until(lambda: pid_alive(proc.pgid))
    server, _ = local_pair(tmp_path)
    server.run(["mkdir", "-p", server.www])
    done = server.reap_leftovers()
    assert done == [f"killed process group {proc.pgid} (campaign dead_20260101T000000Z)"]
    assert wait_until(lambda: not pid_alive(proc.pgid))
    assert not Path(killed.scratch).exists() and not Path(killed.runs_dir).exists()
    assert Path(server.www).is_dir()  # this campaign's own files stay
    assert server.reap_leftovers() == []  # the journal is gone with them


def test_cleanup_removes_the_campaign_files(tmp_path: Path) -> None:
    server, client = local_pair(tmp_path)
    prepare_file(server, "f", 10, "blake3", keep=False, timeout=60)
    server.run(["mkdir", "-p", f"{server.runs_dir}/x"])
    client.run(["mkdir", "-p", client.downloads, f"{client.runs_dir}/x"])
    server.cleanup(keep_files=True)
    assert Path(server.www, "f").is_file()
    server.cleanup(keep_files=False)
    client.cleanup(keep_files=False)
    for node in (server, client):
        assert not Path(node.scratch).exists() and not Path(node.runs_dir).exists()
        assert not Path(node.cfg.tmpdir).exists()  # emptied, so removed
        assert Path(node.cfg.workdir).is_dir()
