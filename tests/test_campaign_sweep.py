"""Sweeps, resume and host knobs on the real namespace testbed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from interop_runner.config.knobs import DEFAULT_SOCKET_BUFFER
from interop_runner.config.loader import load_campaign
from interop_runner.measure.attempt import Attempt
from interop_runner.measure.campaign import Campaign
from interop_runner.measure.plan import build_plan
from interop_runner.remote.executor import LocalExecutor
from interop_runner.storage.layout import iter_run_files
from interop_runner.storage.run_record import read_run

from .conftest import ROOT, campaign_dirs, scratch_leftovers, wait_until
from .test_campaign import assert_nodes_clean, campaign, default_sigint, receiving, run_cli

SWEEP = """name: sweep
file_size: 2MiB
repetitions: 2
port: 4450
pairs: [{server: quic-go, client: quic-go}]
monitors: [handshake]
sweep:
  seed: 11
  axes:
    - {path: params.cipher, values: [TLS_AES_128_GCM_SHA256, TLS_CHACHA20_POLY1305_SHA256]}
    - {path: knobs.rmem, values: [1x, 2x]}
"""


def host_state() -> dict[str, str]:
    """What the knobs touch: the host's buffer sysctls and each node's link, qdisc, rules."""
    ex = LocalExecutor("t")
    state = {"sysctl": ex.run(["sysctl", "-n", "net.core.rmem_default", "net.core.rmem_max",
                               "net.core.wmem_default", "net.core.wmem_max"],
                              timeout=10).stdout}
    for ns in ("qir-server", "qir-client"):
        def run(*argv: str) -> str:
            return ex.run(["ip", "netns", "exec", ns, *argv], timeout=10).stdout

        state[ns] = "\n".join([
            run("cat", "/sys/class/net/data0/mtu"),
            run("ethtool", "-k", "data0"),
            run("tc", "qdisc", "show", "dev", "data0"),
            run("iptables", "-S"),
        ])
        journal = Path(f"/var/tmp/qir/{ns.split('-')[1]}/restore.sh")
        state[ns + " journal"] = journal.read_text() if journal.exists() else ""
    state.update(router_state(ex))
    host = Path("/var/tmp/qir/host-restore.sh")
    state["host journal"] = host.read_text() if host.exists() else ""
    return state


def router_state(ex: LocalExecutor) -> dict[str, str]:
    """What an emulated path touches on the router: its qdiscs, rules, IFBs, journals."""
    if ex.run(["ip", "netns", "exec", "qir-router", "true"], timeout=10, check=False).exit_code:
        return {}
    out = ex.run(["ip", "netns", "exec", "qir-router", "sh", "-c",
                  "tc qdisc show; iptables -S; ip -br link"], timeout=10).stdout
    journals = [Path("/var/tmp/qir/router") / name for name in ("restore.sh", "path-restore.sh")]
    return {"qir-router": out, **{str(j): j.read_text() if j.exists() else "" for j in journals}}


def interrupt_on(monkeypatch, call: int) -> None:
    """Raise KeyboardInterrupt (as Ctrl-C would) in the ``call``-th attempt's transfer."""
    real = Attempt.verify
    calls = {"n": 0}

    def verify(self):
        calls["n"] += 1
        if calls["n"] == call:
            raise KeyboardInterrupt("injected")
        return real(self)

    monkeypatch.setattr(Attempt, "verify", verify)


def by_key(directory: Path) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for path in iter_run_files(directory):
        data = read_run(path)
        key = f"{data['variant']}/{data['repetition']}"
        out.setdefault(key, []).append(data)
    return out


@pytest.mark.usefixtures("local_testbed")
def test_two_axis_sweep_resumes_after_interruption(tmp_path, local_testbed, monkeypatch):
    before = host_state()
    cfg_path = campaign(tmp_path, SWEEP)
    cfg, testbed = load_campaign(cfg_path)
    interrupt_on(monkeypatch, 4)
    with pytest.raises(KeyboardInterrupt):
        Campaign(cfg, testbed, tmp_path / "results").execute()
    (camp,) = campaign_dirs(tmp_path / "results")
    assert host_state() == before, "knobs not restored after the interruption"
    first = {p: p.read_bytes() for p in iter_run_files(camp)}
    assert len(first) == 4
    meta = json.loads((camp / "campaign.json").read_text())
    assert meta["status"] == "interrupted" and meta["plan"]["seed"] == 11

    dry = run_cli("run", str(cfg_path), "--dry-run", "--resume", str(camp))
    assert dry.returncode == 0, dry.stderr
    assert "8 run(s) (4 variant(s) x 1 pair(s) x 2 repetition(s), order shuffled, seed 11), " \
           "5 to run" in dry.stdout
    assert dry.stdout.count("(stored: skipped)") == 3

    monkeypatch.undo()
    resumed = Campaign(cfg, testbed, tmp_path / "results", build_plan(cfg, [testbed.name], camp))
    assert resumed.skipped == 3 and len(resumed.runs) == 5
    result = resumed.execute()
    assert [r.status for r in result.records] == ["ok"] * 5
    # nothing stored earlier was rewritten
    assert all(p.read_bytes() == content for p, content in first.items())
    runs = by_key(camp)
    assert len(runs) == 8  # every variant x repetition, none missing
    for key, records in runs.items():
        final = [r for r in records if not r["interrupted"]]
        assert len(final) == 1 and final[0]["status"] == "ok", key  # none duplicated
        interrupted = [r for r in records if r["interrupted"]]
        assert len(interrupted) <= 1
        if interrupted:  # the resumed repetition is a new attempt beside the interrupted one
            assert final[0]["attempt"] == interrupted[0]["attempt"] + 1
        rec = final[0]
        # values did not shift between variants: each record holds its own variant's values
        assert rec["variant"] == f"cipher={rec['params']['cipher']},rmem={rec['axes']['rmem']}"
        assert rec["handshake"]["selected"] == rec["params"]["cipher"]
        want = {"1x": DEFAULT_SOCKET_BUFFER, "2x": 2 * DEFAULT_SOCKET_BUFFER}[rec["axes"]["rmem"]]
        server, client = rec["knobs"]["server"], rec["knobs"]["client"]
        assert server["applied"]["rmem"] == want
        assert server["after"] == server["before"]
        # the namespaces share the host's sysctls: the server node sets and records them
        assert "rmem" not in client.get("applied", {}) and "server node" in client["notes"][0]
    meta = json.loads((camp / "campaign.json").read_text())
    assert meta["status"] == "finished" and meta["skipped_runs"] == 3
    assert meta["sessions"][0]["status"] == "interrupted"
    assert host_state() == before
    assert_nodes_clean(local_testbed)


KNOBS = """name: knobs
file_size: {size}
repetitions: 1
port: 4451
pairs: [{{server: quic-go, client: quic-go}}]
knobs: {{rmem: 4x, wmem: 2MiB}}
server_knobs: {{offload: "off", mtu: 1400, rate: 400mbit, pin: "1"}}
client_knobs: {{offload: all-on, mtu: 1400, loss: 0.0001, pin: "0"}}
"""


@pytest.mark.usefixtures("local_testbed")
def test_knobs_are_applied_recorded_and_restored_after_a_failure(tmp_path, local_testbed,
                                                                  monkeypatch):
    before = host_state()
    cfg, testbed = load_campaign(campaign(tmp_path, KNOBS.format(size="4MiB")))

    def boom(self):
        during.update(host_state())
        raise RuntimeError("injected failure")

    during: dict[str, str] = {}
    monkeypatch.setattr(Attempt, "verify", boom)
    with pytest.raises(RuntimeError):
        Campaign(cfg, testbed, tmp_path / "results").execute()
    assert host_state() == before
    assert during["sysctl"].split() == [str(4 * DEFAULT_SOCKET_BUFFER)] * 2 + [str(2**21)] * 2
    assert "orphan" not in during
    assert "1400" in during["qir-server"] and "tbf" in during["qir-server"]
    assert "statistic" in during["qir-client"]
    (path,) = iter_run_files(campaign_dirs(tmp_path / "results")[0])
    rec = read_run(path)
    assert rec["status"] == "failed" and "injected failure" in rec["reason"]
    server, client = rec["knobs"]["server"], rec["knobs"]["client"]
    assert server["applied"]["mtu"] == 1400 and server["before"]["mtu"] == 1500
    assert server["after"]["mtu"] == 1500 and server["cpus"] == "1" and client["cpus"] == "0"
    assert server["applied"]["qdisc"].startswith("tbf rate 400mbit")
    assert client["applied"]["loss"] == 0.0001
    assert server["before"]["offload"] == server["after"]["offload"]
    assert_nodes_clean(local_testbed)


@pytest.mark.usefixtures("local_testbed")
def test_knobs_are_restored_after_sigint(tmp_path, local_testbed):
    before = host_state()
    # 400 MiB through the 400 Mbit/s tbf of KNOBS: the transfer lasts >= 8 s however fast
    # the machine, so Ctrl-C lands inside it
    cfg = campaign(tmp_path, KNOBS.format(size="400MiB"))
    client_tmp = local_testbed.node("client")[1].tmpdir
    proc = subprocess.Popen([sys.executable, str(ROOT / "run.py"), "run", str(cfg),
                             "--results-dir", str(tmp_path / "results"), "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            preexec_fn=default_sigint)
    try:
        # the knobs are applied and the transfer runs
        wait_until(lambda: receiving(client_tmp, proc) and "tbf" in host_state()["qir-server"],
                   timeout=300, interval=0.2, what="the transfer to run with the knobs applied")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert host_state() == before
    assert_nodes_clean(local_testbed)


@pytest.mark.usefixtures("local_testbed")
def test_testbed_restore_undoes_a_left_journal(tmp_path, local_testbed):
    before = host_state()
    ex = LocalExecutor("t")
    ns = ["ip", "netns", "exec", "qir-server"]
    # what a killed runner leaves: the undo line written, the change made, no restore
    ex.run([*ns, "sh", "-c", "mkdir -p /var/tmp/qir/server && echo 'ip link set dev data0 mtu "
            "1500' >>/var/tmp/qir/server/restore.sh && ip link set dev data0 mtu 1300"],
           timeout=10)
    assert host_state() != before
    proc = run_cli("testbed", "restore")
    assert proc.returncode == 0, proc.stderr
    assert "server: restored" in proc.stdout
    assert host_state() == before
    assert "nothing to restore" in run_cli("testbed", "restore").stdout


@pytest.mark.usefixtures("local_testbed")
def test_netem_knobs_fail_clearly_without_netem(tmp_path):
    if LocalExecutor("t").run(["unshare", "-n", "tc", "qdisc", "add", "dev", "lo", "root",
                               "netem", "delay", "1ms"], timeout=10, check=False).ok:
        pytest.skip("this kernel has netem")
    cfg = campaign(tmp_path, """name: netem
file_size: 1MiB
repetitions: 1
pairs: [{server: quic-go, client: quic-go}]
server_knobs: {delay: 10ms}
""")
    proc = run_cli("run", str(cfg), "--results-dir", str(tmp_path / "results"),
                   "--no-progress")
    assert proc.returncode == 1
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines[-1].startswith("error: ") and "netem" in lines[-1]
    assert "Traceback" not in proc.stderr


def second_testbed(tmp_path: Path) -> Path:
    """A second testbed on the same two namespaces: own name, directories and port."""
    from .conftest import TESTBED_FILE

    text = (TESTBED_FILE.read_text().replace("name: local", "name: local-b")
            .replace("/var/tmp/qir/", "/var/tmp/qir-b/").replace("/dev/shm/qir-", "/dev/shm/qirb-"))
    path = tmp_path / "local-b.yml"
    path.write_text(text + "port: 4461\n")
    return path


@pytest.mark.usefixtures("local_testbed")
@pytest.mark.parametrize("distribute", ["each", "spread"])  # each first: both prepared once
def test_runs_spread_over_two_testbeds(tmp_path, local_testbed, distribute):
    from .conftest import TESTBED_FILE

    cfg_path = tmp_path / "c.yml"
    cfg_path.write_text(f"""name: two
testbeds: [{TESTBED_FILE}, {second_testbed(tmp_path)}]
distribute: {distribute}
file_size: 8MiB
repetitions: {4 if distribute == "each" else 8}
port: 4460
pairs: [{{server: quic-go, client: quic-go}}]
""")
    dry = run_cli("run", str(cfg_path), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    total = 8
    assert f"{total} run(s)" in dry.stdout and "testbed local, local-b" in dry.stdout
    proc = run_cli("run", str(cfg_path), "--results-dir", str(tmp_path / "results"),
                   "--no-progress")
    assert proc.returncode == 0, proc.stderr
    (camp,) = campaign_dirs(tmp_path / "results")
    records = [read_run(p) for p in iter_run_files(camp)]
    assert len(records) == total and all(r["status"] == "ok" for r in records)
    used = sorted(r["testbed"] for r in records)
    # both testbeds measured (with spread, whichever is free takes the next run)
    assert set(used) == {"local", "local-b"}
    for rec in records:
        assert rec["hosts"]["server"]["hostname"] and rec["hosts"]["client"]["kernel"]
    keys = {(r["variant"], r["repetition"]) for r in records}
    assert len(keys) == total  # each run once
    if distribute == "each":
        assert used == ["local"] * 4 + ["local-b"] * 4
        assert all(r["axes"]["testbed"] == r["testbed"] for r in records)
    meta = json.loads((camp / "campaign.json").read_text())
    assert meta["status"] == "finished" and set(meta["testbed_files"]) == {"local", "local-b"}
    for name in ("local", "local-b"):
        part = json.loads((camp / f"testbed-{name}.json").read_text())
        assert part["status"] == "finished" and part["hosts"]["server"]["kernel"]
    from interop_runner.analysis import load_results

    df = load_results(camp)
    assert sorted(df["testbed"]) == used and (df["status"] == "ok").all()
    assert_nodes_clean(local_testbed)
    if distribute == "spread":
        for d in ("/var/tmp/qir-b", "/dev/shm/qirb-server", "/dev/shm/qirb-client"):
            subprocess.run(["rm", "-rf", d], check=False)


@pytest.mark.usefixtures("local_testbed")
def test_ctrl_c_stops_every_testbed_worker(tmp_path, local_testbed):
    from .conftest import TESTBED_FILE, cmdline, namespace_pids

    cfg_path = tmp_path / "c.yml"
    # `each`: every testbed has its own runs, so the first one ready cannot take them all while
    # the other still builds (its directories are fresh when this test runs after the others)
    cfg_path.write_text(f"""name: two-int
testbeds: [{TESTBED_FILE}, {second_testbed(tmp_path)}]
distribute: each
file_size: 1GiB
repetitions: 10
port: 4460
pairs: [{{server: quic-go, client: quic-go}}]
""")
    proc = subprocess.Popen([sys.executable, str(ROOT / "run.py"), "run", str(cfg_path),
                             "--results-dir", str(tmp_path / "results"), "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            preexec_fn=default_sigint)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # both testbeds transferring
        cmds = [cmdline(p) for p in namespace_pids("qir-client")]
        if sum(b"quic-go/bin/client" in c for c in cmds) >= 2:
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    else:
        pytest.fail("the two clients never ran at the same time")
    proc.send_signal(signal.SIGINT)  # to the main process only: it passes it on
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert_nodes_clean(local_testbed)
    for d in ("/dev/shm/qirb-server", "/dev/shm/qirb-client"):
        assert scratch_leftovers(d) == []
    (camp,) = campaign_dirs(tmp_path / "results")
    meta = json.loads((camp / "campaign.json").read_text())
    assert meta["status"] == "interrupted"
    records = [read_run(p) for p in iter_run_files(camp)]
    assert records and all(r["interrupted"] for r in records if r["status"] != "ok")
    subprocess.run(["rm", "-rf", "/var/tmp/qir-b"], check=False)
