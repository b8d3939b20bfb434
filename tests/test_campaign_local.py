"""The campaign's whole run path on this machine, without SSH and without root.

The nodes are real :class:`Node` objects backed by :class:`LocalExecutor` in temporary
directories (``Campaign.connect`` is the node factory), and the implementations are tiny but
real: a Python HTTP server and client (``plain``), one that speaks only h3 (so no common
protocol with ``plain``) and one whose setup fails. Everything else is the code that runs on
a testbed: leases, host facts, leftovers, setup, file generation and hashing, certificates,
attempts, log fetching, cleanup, records, resume, ``on_error: stop``, SIGTERM, two testbeds in
worker processes.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any, Iterator, Sequence

import pytest

from interop_runner.config.implementations import load_registry
from interop_runner.config.loader import load_campaign_testbeds
from interop_runner.config.testbed import NodeConfig
from interop_runner.errors import SchemaError, StoreError
from interop_runner.measure import campaign as campaign_mod
from interop_runner.measure import plan as plan_mod
from interop_runner.measure import prepare as prepare_mod
from interop_runner.measure.campaign import Campaign
from interop_runner.measure.hooks import CampaignHooks
from interop_runner.measure.outcome import (
    CampaignResult,
    CampaignStopped,
    combined_status,
    ended_status,
)
from interop_runner.measure.plan import build_plan
from interop_runner.remote.executor import LocalExecutor
from interop_runner.storage.campaign_record import CAMPAIGN_SCHEMA_VERSION, load_campaign_record
from interop_runner.storage.layout import iter_run_files
from interop_runner.storage.run_record import RUN_SCHEMA_VERSION, load_run, read_run
from interop_runner.testbed.node import Node

from .conftest import campaign_dirs, scratch_leftovers

SIZE = 256 * 1024

SERVER = """#!/bin/sh
exec python3 -m http.server "$PORT" --bind "$IP" --directory "$WWW"
"""
# fails once per flag file: `fail` exits 3, `term` sends SIGTERM to the runner (as `kill` would)
CLIENT = """#!/bin/sh
flags={flags}
if [ -e "$flags/fail" ]; then rm -f "$flags/fail"; echo "plain: told to fail" >&2; exit 3; fi
if [ -e "$flags/term" ]; then rm -f "$flags/term"; kill -TERM {runner}; sleep 5; fi
url="http${{REQUESTS#https}}"
exec python3 -c 'import shutil, sys, urllib.request as u
shutil.copyfileobj(u.urlopen(sys.argv[1]), open(sys.argv[2], "wb"))' "$url" \
  "$DOWNLOADS/${{REQUESTS##*/}}"
"""


def _impl(root: Path, name: str, meta: str, scripts: dict[str, str]) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "meta.yml").write_text(f"name: {name}\nversion: '1.0'\nroles: [server, client]\n"
                                     + meta)
    for script, body in scripts.items():
        (folder / script).write_text(body)
        (folder / script).chmod(0o755)


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A registry of local implementations; returns the folder of client flag files."""
    from interop_runner.config import loader as config_mod

    root, flags = tmp_path / "impls", tmp_path / "flags"
    flags.mkdir()
    ok = {"setup": "#!/bin/sh\nexit 0\n", "version": "#!/bin/sh\necho plain/1.0\n"}
    _impl(root, "plain", "alpns: [http/1.1]\nready: tcp\n",
          {**ok, "run-server": SERVER,
           "run-client": CLIENT.format(flags=flags, runner=os.getpid())})
    _impl(root, "h3only", "alpns: [h3]\nready: udp\n",
          {**ok, "run-server": "#!/bin/sh\nexit 1\n", "run-client": "#!/bin/sh\nexit 1\n"})
    _impl(root, "broken", "alpns: [http/1.1]\nready: tcp\n",
          {"setup": "#!/bin/sh\necho 'compiling'\necho 'error: no compiler' >&2\nexit 2\n",
           "run-server": SERVER, "run-client": "#!/bin/sh\nexit 1\n"})
    for module in (campaign_mod, config_mod, plan_mod, prepare_mod):
        monkeypatch.setattr(module, "load_registry", lambda: load_registry(root))
    return flags


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_testbed_file(tmp_path: Path, name: str) -> Path:
    base = tmp_path / "nodes" / name
    nodes = "\n".join(
        f"  {role}:\n    role: {role}\n    ssh: {{host: unused.invalid}}\n    interface: lo\n"
        f"    ip: 127.0.0.1\n    workdir: {base}/{role}/work\n    tmpdir: {base}/{role}/tmp"
        for role in ("server", "client"))
    path = tmp_path / f"{name}.yml"
    path.write_text(f"name: {name}\nport: {free_port()}\nnodes:\n{nodes}\n")
    return path


def local_node(name: str, cfg: NodeConfig, campaign_id: str, timeout: float) -> Node:
    """What Node.connect does, with the commands run here instead of over SSH."""
    executor = LocalExecutor(name)
    executor.proc_journal, executor.proc_tag = f"{cfg.workdir}/procs", campaign_id
    return Node(name, cfg, executor, campaign_id, timeout)


def campaign(tmp_path: Path, body: str, testbeds: tuple[str, ...] = ("local-a",),
             resume: Path | None = None) -> Campaign:
    files = [tmp_path / f"{t}.yml" if (tmp_path / f"{t}.yml").exists()
             else make_testbed_file(tmp_path, t) for t in testbeds]
    where = f"testbed: {files[0]}" if len(files) == 1 else \
        f"testbeds: [{', '.join(str(f) for f in files)}]"
    cfg_file = tmp_path / "c.yml"
    cfg_file.write_text(f"name: local\n{where}\nfile_size: {SIZE}B\nmonitors: []\n{body}")
    cfg, beds = load_campaign_testbeds(cfg_file)
    plan = build_plan(cfg, [b.name for b in beds], resume)
    return Campaign(cfg, beds, tmp_path / "results", plan, CampaignHooks(connect=local_node))


def assert_nodes_clean(tmp_path: Path) -> None:
    """Nothing of the campaign is left on the nodes: no scratch files, no run logs, no lease
    holder, no process of it in the journal."""
    for work in (tmp_path / "nodes").glob("*/*/work"):
        assert not (work / "runs").exists() or list((work / "runs").iterdir()) == []
        assert not (work / "procs").exists() or (work / "procs").read_text().strip() == ""
    for tmp in (tmp_path / "nodes").glob("*/*/tmp"):
        assert scratch_leftovers(tmp) == []  # the server's kept file is no leftover


def stored(result: CampaignResult) -> list[dict[str, Any]]:
    return [read_run(p) for p in iter_run_files(result.directory)]


def test_records_carry_the_source_hash_of_the_tree_that_was_installed(
        tmp_path: Path, registry: Path) -> None:
    """The source hash is taken once, when an implementation is installed: a tree changed
    while the campaign runs changes neither its campaign.json entry nor a later record."""
    tree = tmp_path / "impls" / "plain"

    def changing_tree(items: Iterator[Any], runs: Sequence[Any]) -> Iterator[Any]:
        for n, item in enumerate(items):
            if n:  # after the first attempt, before the next one is planned
                (tree / "notes.txt").write_text(f"changed before attempt {n + 1}\n")
            yield item

    camp = campaign(tmp_path, "repetitions: 3\npairs: [{server: plain, client: plain}]\n")
    result = camp.execute(progress=changing_tree)
    doc = load_campaign_record(result.directory / "campaign.json")
    assert doc.implementations is not None
    installed = doc.implementations["server:plain"].source_hash
    assert installed == doc.implementations["client:plain"].source_hash
    assert installed != load_registry(tmp_path / "impls")["plain"].source_hash()  # changed
    assert [(r.status, r.server.source_hash, r.client.source_hash) for r in result.records] \
        == [("ok", installed, installed)] * 3


def test_a_campaign_runs_end_to_end_and_writes_typed_records(tmp_path: Path,
                                                             registry: Path) -> None:
    camp = campaign(tmp_path, """repetitions: 2
sweep: {order: sequential}
pairs:
  - {server: plain, client: plain}
  - {server: plain, client: h3only}
  - {server: broken, client: plain}
""")
    result = camp.execute()
    by_pair = {(r.server.implementation, r.client.implementation, r.repetition): r
               for r in result.records}
    assert len(result.records) == 6 and not result.interrupted
    for rep in (1, 2):
        ok = by_pair["plain", "plain", rep]
        assert ok.status == "ok" and ok.hash_ok and ok.bytes_received == SIZE, ok.reason
        assert ok.goodput_mbps and ok.goodput_mbps > 0 and ok.client.exit_code == 0
        assert ok.server.version == "plain/1.0" and ok.cell == {"server": "plain",
                                                                 "client": "plain"}
        assert ok.hosts["server"]["hostname"] == socket.gethostname()
        assert (result.directory / "plain_plain" / "goodput" / str(rep) / "attempt-1" /
                "client" / "client.stderr.log").is_file()
        nope = by_pair["plain", "h3only", rep]
        assert nope.status == "unsupported" and "no common protocol" in str(nope.reason)
        broken = by_pair["broken", "plain", rep]
        assert broken.status == "failed" and "setup of broken failed (exit 2)" in \
            str(broken.reason)
    # every stored record is the current version and loads as the model it was written from
    for path in iter_run_files(result.directory):
        assert read_run(path)["schema_version"] == RUN_SCHEMA_VERSION
        assert load_run(path) in result.records
    doc = load_campaign_record(result.directory / "campaign.json")
    assert doc.schema_version == CAMPAIGN_SCHEMA_VERSION and doc.status == "finished"
    assert doc.planned_runs == 6 and doc.plan.order == "sequential" and doc.finished_at
    assert doc.file is not None and doc.file.size == SIZE
    assert doc.implementations is not None and doc.hosts is not None
    entry = doc.implementations["server:broken"]
    assert entry.version is None and entry.setup_log_tail == "compiling\nerror: no compiler"
    assert doc.implementations["client:plain"].version == "plain/1.0"
    assert set(doc.hosts) == {"server", "client", "management"}
    assert doc.monitors == {"server": {}, "client": {}}
    raw = json.loads((result.directory / "campaign.json").read_text())
    assert "sessions" not in raw and "testbeds" not in raw and raw["wall_s"] > 0
    assert (result.directory / "hosts" / "server").is_dir()
    assert_nodes_clean(tmp_path)


def test_on_error_stop_then_resume_reruns_the_failed_run(tmp_path: Path,
                                                         registry: Path) -> None:
    body = "repetitions: 3\non_error: stop\npairs: [{server: plain, client: plain}]\n"
    (registry / "fail").touch()  # the first client run fails
    with pytest.raises(CampaignStopped, match="attempt 1 failed: client exited 3: plain: "
                                              "told to fail"):
        campaign(tmp_path, body).execute()
    (directory,) = campaign_dirs(tmp_path / "results")
    doc = load_campaign_record(directory / "campaign.json")
    assert doc.status.startswith("stopped: ") and doc.finished_at
    (first,) = [load_run(p) for p in iter_run_files(directory)]
    assert first.status == "failed" and not first.interrupted
    # a runner killed during an attempt leaves its directory without a record
    orphan = directory / "plain_plain" / "goodput" / "2" / "attempt-1"
    orphan.mkdir(parents=True)

    result = campaign(tmp_path, body, resume=directory).execute()
    again = load_campaign_record(directory / "campaign.json")
    assert again.status == "finished" and again.skipped_runs == 0
    assert again.started_at == doc.started_at and again.resumed_at
    assert [(s.status, s.finished_at) for s in again.sessions or []] == \
        [(doc.status, doc.finished_at)]
    records = {(r["repetition"], r["attempt"]): r for r in stored(result)}
    assert records[1, 1]["status"] == "failed" and records[1, 2]["status"] == "ok"
    assert records[2, 1]["interrupted"] and "runner was killed" in records[2, 1]["reason"]
    assert records[2, 2]["status"] == "ok" and records[3, 1]["status"] == "ok"
    assert len(records) == 5

    # everything is done now: a second resume skips every run
    last = campaign(tmp_path, body, resume=directory)
    assert last.runs == [] and last.skipped == 3
    assert_nodes_clean(tmp_path)


def test_sigterm_during_an_attempt_records_it_and_resume_continues(tmp_path: Path,
                                                                   registry: Path) -> None:
    body = "repetitions: 2\npairs: [{server: plain, client: plain}]\n"
    (registry / "term").touch()  # the first client sends SIGTERM to this process
    camp = campaign(tmp_path, body)
    with pytest.raises(KeyboardInterrupt):
        camp.execute()
    (directory,) = campaign_dirs(tmp_path / "results")
    doc = load_campaign_record(directory / "campaign.json")
    assert doc.status == "interrupted" and doc.finished_at and doc.wall_s
    (rec,) = [load_run(p) for p in iter_run_files(directory)]
    assert rec.interrupted and rec.status == "failed"
    assert rec.reason == "interrupted (Ctrl-C or SIGTERM)"
    assert_nodes_clean(tmp_path)

    resumed = campaign(tmp_path, body, resume=directory)
    assert resumed.seed == doc.plan.seed and len(resumed.runs) == 2
    result = resumed.execute()
    assert [(r.repetition, r.attempt, r.status) for r in result.records] == \
        [(1, 2, "ok"), (2, 1, "ok")]
    assert load_campaign_record(directory / "campaign.json").status == "finished"


def test_resume_refuses_a_newer_or_changed_campaign(tmp_path: Path, registry: Path) -> None:
    body = "repetitions: 1\npairs: [{server: plain, client: plain}]\n"
    result = campaign(tmp_path, body).execute()
    path = result.directory / "campaign.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "schema_version": 9}))
    with pytest.raises(SchemaError) as err:
        campaign(tmp_path, body, resume=result.directory)
    assert str(err.value) == (f"{path}: cannot resume: campaign.json schema version 9 is newer "
                              f"than this runner reads ({CAMPAIGN_SCHEMA_VERSION}); update the "
                              f"runner")
    path.write_text(json.dumps(data))
    with pytest.raises(StoreError, match="cannot resume: the config differs from the stored "
                                         "one in repetitions"):
        campaign(tmp_path, body.replace("repetitions: 1", "repetitions: 2"),
                 resume=result.directory)
    path.write_text(json.dumps({**data, "plan": {"order": 3}}))
    with pytest.raises(StoreError, match=r"cannot resume: not a valid campaign\.json: "
                                         r"plan\.order"):
        campaign(tmp_path, body, resume=result.directory)


def test_two_testbeds_share_the_runs_in_worker_processes(tmp_path: Path,
                                                         registry: Path) -> None:
    body = "repetitions: 4\npairs: [{server: plain, client: plain}]\n"
    result = campaign(tmp_path, body, testbeds=("local-a", "local-b")).execute()
    assert sorted((r.repetition, r.status) for r in result.records) == \
        [(n, "ok") for n in (1, 2, 3, 4)]
    doc = load_campaign_record(result.directory / "campaign.json")
    assert doc.status == "finished" and doc.worker_exit_codes == {"local-a": 0, "local-b": 0}
    assert doc.testbed_files == {"local-a": "testbed-local-a.json",
                                 "local-b": "testbed-local-b.json"}
    assert doc.hosts is None and doc.testbeds is not None and doc.distribute == "spread"
    for name, file in doc.testbed_files.items():
        part = load_campaign_record(result.directory / file)
        assert part.status == "finished" and part.testbed and part.testbed["name"] == name
        assert (part.hosts and part.implementations
                and part.schema_version == CAMPAIGN_SCHEMA_VERSION)
    assert_nodes_clean(tmp_path)


def test_status_bookkeeping() -> None:
    assert ended_status(KeyboardInterrupt(), "running") == "interrupted"
    assert ended_status(CampaignStopped("x failed"), "running") == "stopped: x failed"
    assert ended_status(OSError("disk"), "running") == "aborted: disk"
    assert ended_status(EOFError(), "running") == "aborted: EOFError"
    assert ended_status(SystemExit(1), "running") == "running"
    assert combined_status(["finished", "finished"], ["a", "b"], False) == "finished"
    assert combined_status(["finished", "interrupted"], ["a", "b"], False) == "interrupted"
    assert combined_status(["finished", "finished"], ["a", "b"], True) == "interrupted"
    assert combined_status(["finished", "not started"], ["a", "b"], False) == \
        "a: finished; b: not started"
