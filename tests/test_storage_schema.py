"""Versioned documents: frozen samples of every version of run.json and campaign.json load,
older ones through the upgrade steps, newer ones are refused with one line.

``tests/data/schema/<kind>-v<n>[-<what>].json`` are real documents, frozen: never edit one.
A new schema version adds a sample of it (``test_every_version_has_a_frozen_sample``).
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from interop_runner.errors import ReportError, SchemaError, StoreError
from interop_runner.storage.campaign_record import (
    CAMPAIGN_SCHEMA,
    CAMPAIGN_SCHEMA_VERSION,
    CampaignRecord,
    load_campaign_record,
    read_campaign,
    write_campaign,
)
from interop_runner.storage.run_record import (
    RUN_SCHEMA,
    RUN_SCHEMA_VERSION,
    RunRecord,
    load_run,
    read_run,
    write_run,
)
from interop_runner.storage.schema import DocumentSchema

SCHEMA_DIR = Path(__file__).parent / "data" / "schema"
SAMPLE_NAME = re.compile(r"^(run|campaign)-v(\d+)(-[a-z0-9-]+)?\.json$")


@dataclass(frozen=True)
class Kind:
    schema: DocumentSchema
    read: Callable[[Path], dict[str, Any]]
    load: Callable[[Path], Any]

    def write(self, path: Path, model: Any) -> None:
        if isinstance(model, RunRecord):
            write_run(path.parent, model)
        else:
            write_campaign(path, model, overwrite=False)


KINDS = {"run": Kind(RUN_SCHEMA, read_run, load_run),
         "campaign": Kind(CAMPAIGN_SCHEMA, read_campaign, load_campaign_record)}


def samples(kind: str | None = None) -> list[tuple[str, int, Path]]:
    """(kind, version in the name, path) of every frozen sample."""
    out = []
    for path in sorted(SCHEMA_DIR.glob("*.json")):
        m = SAMPLE_NAME.match(path.name)
        assert m, f"{path.name}: name it <run|campaign>-v<n>[-<what>].json"
        if kind in (None, m.group(1)):
            out.append((m.group(1), int(m.group(2)), path))
    return out


def raw(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_version_has_a_frozen_sample(kind: str) -> None:
    """Bumping a schema version without freezing a document of it fails here."""
    schema = KINDS[kind].schema
    assert {v for _, v, _ in samples(kind)} == set(range(1, schema.current + 1))
    assert sorted(schema.upgrades) == list(range(1, schema.current))
    assert (RUN_SCHEMA.current, CAMPAIGN_SCHEMA.current) == \
        (RUN_SCHEMA_VERSION, CAMPAIGN_SCHEMA_VERSION)


@pytest.mark.parametrize(("kind", "version", "path"), samples(),
                         ids=[p.name for _, _, p in samples()])
def test_frozen_sample_loads_as_the_current_version(kind: str, version: int,
                                                    path: Path) -> None:
    stored = raw(path)
    assert stored.get("schema_version", 1) == version  # the name tells the truth
    data = KINDS[kind].read(path)
    assert data["schema_version"] == KINDS[kind].schema.current
    model = KINDS[kind].load(path)
    # the typed model holds every upgraded value unchanged (and fills what older ones lack)
    assert contains(json.loads(json.dumps(model.to_dict(), default=str)), data)
    # what was stored survives the upgrade: no value changes, keys are only added
    assert contains(data, {k: v for k, v in stored.items() if k != "schema_version"})


def contains(big: Any, small: Any) -> bool:
    """Every key of ``small`` (recursively in objects, and in the objects of lists, item by
    item) is in ``big`` with the same value."""
    if isinstance(small, dict):
        return isinstance(big, dict) and all(k in big and contains(big[k], v)
                                             for k, v in small.items())
    if isinstance(small, list):
        return isinstance(big, list) and len(big) == len(small) and \
            all(contains(b, s) for b, s in zip(big, small))
    return bool(big == small)


@pytest.mark.parametrize(("kind", "path"), [(k, p) for k, v, p in samples()
                                            if v == KINDS[k].schema.current],
                         ids=[p.name for k, v, p in samples() if v == KINDS[k].schema.current])
def test_todays_writer_reproduces_a_current_sample(kind: str, path: Path,
                                                   tmp_path: Path) -> None:
    """Load a current-version sample and write it with today's writer: the same document."""
    model = KINDS[kind].load(path)
    out = tmp_path / "a" / ("run.json" if kind == "run" else "campaign.json")
    KINDS[kind].write(out, model)
    assert raw(out) == raw(path)
    assert list(raw(out)) == list(raw(path))  # keys in the same order too
    assert KINDS[kind].load(out) == model


def test_run_v1_upgrade_adds_the_standard_parameters() -> None:
    for name in ("run-v1.json", "run-v1-before-pid.json"):
        stored, data = raw(SCHEMA_DIR / name), read_run(SCHEMA_DIR / name)
        assert data["params"] == {}
        for role in ("server", "client"):
            assert data[role] == {**stored[role], "effective": {}, "unhonoured": [],
                                  "negotiated": None, "container": None}
        assert {k: data[k] for k in stored if k not in ("server", "client", "schema_version")} \
            == {k: v for k, v in stored.items() if k not in ("server", "client",
                                                               "schema_version")}
    early = load_run(SCHEMA_DIR / "run-v1-before-pid.json")
    assert early.client.pid is None and early.hosts == {} and early.cell is None
    assert early.goodput_mbps == raw(SCHEMA_DIR / "run-v1-before-pid.json")["goodput_mbps"]


def test_campaign_v1_upgrade_fills_plan_and_monitors() -> None:
    early = read_campaign(SCHEMA_DIR / "campaign-v1-before-sweeps.json")
    assert early["plan"] == {"order": "sequential", "seed": None, "variants": [""]}
    assert early["monitors"] == raw(SCHEMA_DIR / "campaign-v1-before-sweeps.json")["monitors"]
    no_monitors = {k: v for k, v in raw(SCHEMA_DIR / "campaign-v1-before-sweeps.json").items()
                   if k not in ("monitors", "plan")}
    assert CAMPAIGN_SCHEMA.upgrade(no_monitors, "x")["monitors"] == {}
    two = read_campaign(SCHEMA_DIR / "campaign-v1-two-testbeds.json")
    assert "monitors" not in two and "hosts" not in two  # those live in testbed-<name>.json
    resumed = load_campaign_record(SCHEMA_DIR / "campaign-v1.json")
    assert resumed.sessions and resumed.killed_leftovers and resumed.plan.seed is not None


def test_a_document_without_version_is_version_1(tmp_path: Path) -> None:
    data = raw(SCHEMA_DIR / "run-v1.json")
    del data["schema_version"]
    (tmp_path / "run.json").write_text(json.dumps(data))
    assert read_run(tmp_path / "run.json") == read_run(SCHEMA_DIR / "run-v1.json")


def _newest(kind: str) -> Path:
    return SCHEMA_DIR / f"{kind}-v{KINDS[kind].schema.current}.json"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_newer_version_is_refused_with_one_line(kind: str, tmp_path: Path) -> None:
    path = tmp_path / f"{kind}.json"
    current = KINDS[kind].schema.current
    path.write_text(json.dumps({**raw(_newest(kind)), "schema_version": current + 7}))
    for read in (KINDS[kind].read, KINDS[kind].load):
        with pytest.raises(SchemaError) as err:
            read(path)
        assert str(err.value) == (f"{path}: {kind}.json schema version {current + 7} is newer "
                                  f"than this runner reads ({current}); update the runner")
    assert isinstance(err.value, StoreError)


@pytest.mark.parametrize("version", ["2", 0, -1, True, 1.5, None])
def test_a_version_that_is_no_version_number_is_refused(version: Any, tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps({**raw(SCHEMA_DIR / "run-v2.json"), "schema_version": version}))
    with pytest.raises(SchemaError, match=r"run\.json: run\.json schema version .* is not a "
                                          rf"version number \(this runner reads 1 to "
                                          rf"{RUN_SCHEMA_VERSION}\)$"):
        read_run(path)


def test_not_an_object_and_not_json_stay_value_errors(tmp_path: Path) -> None:
    """The analysis turns these into a row with the reason (as before versions existed)."""
    (tmp_path / "a.json").write_text("[1, 2]")
    (tmp_path / "b.json").write_text("{torn")
    with pytest.raises(ValueError, match="not a JSON object"):
        read_run(tmp_path / "a.json")
    with pytest.raises(ValueError):
        read_campaign(tmp_path / "b.json")


def test_a_record_that_does_not_fit_the_model_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "campaign.json"
    path.write_text(json.dumps({**raw(SCHEMA_DIR / "campaign-v2.json"), "planned_runs": "x",
                                "extra": 1}))
    with pytest.raises(StoreError, match=r"not a valid campaign\.json: planned_runs: .*"
                                         r"\(and 1 more\)$") as err:
        load_campaign_record(path)
    assert "\n" not in str(err.value)


def test_report_refuses_a_newer_campaign_with_the_same_line(tmp_path: Path) -> None:
    from interop_runner.report.model import load_campaign

    camp = tmp_path / "c"
    camp.mkdir()
    (camp / "campaign.json").write_text(json.dumps({**raw(SCHEMA_DIR / "campaign-v2.json"),
                                                   "schema_version": 9}))
    with pytest.raises(ReportError, match=r"campaign\.json schema version 9 is newer than "
                                          rf"this runner reads \({CAMPAIGN_SCHEMA_VERSION}\); "
                                          r"update the runner$"):
        load_campaign(camp)


def test_schema_table_must_cover_every_older_version() -> None:
    with pytest.raises(AssertionError, match="1..2"):
        DocumentSchema("x.json", 3, {1: dict})


def test_analysis_loads_a_tree_of_every_run_version(tmp_path: Path) -> None:
    """load_results over stored records of every version: one row each, current columns."""
    from interop_runner.analysis import load_results

    camp = tmp_path / "c_20261121T000000Z"
    camp.mkdir()
    shutil.copy(SCHEMA_DIR / "campaign-v1-before-sweeps.json", camp / "campaign.json")
    runs = [p for k, _, p in samples("run")]
    for i, path in enumerate(runs, 1):
        (camp / "x_y" / "goodput" / str(i) / "attempt-1").mkdir(parents=True)
        shutil.copy(path, camp / "x_y" / "goodput" / str(i) / "attempt-1" / "run.json")
    frame = load_results(camp, cache=False)
    assert len(frame) == len(runs)
    assert frame["reason"].fillna("").str.startswith("unreadable").sum() == 0
    # the column says which version each record was written in (upgrading changes no value)
    assert set(frame["schema_version"]) == set(range(1, RUN_SCHEMA_VERSION + 1))
    v2 = raw(SCHEMA_DIR / "run-v2-ok.json")
    row = frame[frame["goodput_mbps"] == v2["goodput_mbps"]].iloc[0]
    assert row["congestion_control"] == v2["params"]["congestion_control"]
    assert row["cell_server"] == v2["cell"]["server"]


def test_a_fresh_campaign_record_round_trips(tmp_path: Path) -> None:
    """Today's builder: what it writes loads back as the same record."""
    from interop_runner.storage.campaign_record import PlanInfo, new_campaign_record

    rec = new_campaign_record("c_1", {"name": "c", "path": Path("/x")}, {"package": "0"}, 3,
                              PlanInfo(order="shuffled", seed=7, variants=[""]),
                              testbed={"name": "local"})
    write_campaign(tmp_path / "campaign.json", rec)
    data = raw(tmp_path / "campaign.json")
    assert data["schema_version"] == CAMPAIGN_SCHEMA_VERSION and data["config"]["path"] == "/x"
    assert data["hosts"] == data["implementations"] == data["monitors"] == {}
    assert "sessions" not in data and "testbeds" not in data and data["finished_at"] is None
    assert load_campaign_record(tmp_path / "campaign.json") == rec
    again = new_campaign_record("c_1", {"name": "c"}, {}, 3, PlanInfo(), testbeds={"a": {},
                                                                                 "b": {}},
                                distribute="spread", previous=rec, skipped_runs=2)
    data = again.to_dict()
    assert data["testbed_files"] == {"a": "testbed-a.json", "b": "testbed-b.json"}
    assert "hosts" not in data and data["started_at"] == rec.started_at
    assert data["sessions"] == [{"status": "running", "finished_at": None}]
    assert data["skipped_runs"] == 2
    assert CampaignRecord.model_validate(data) == again


def test_run_v9_upgrade_gives_every_flow_its_download() -> None:
    """A version 8 flow downloaded its size or for its duration on one stream of one
    connection; its files were not kept per flow."""
    stored, data = raw(SCHEMA_DIR / "run-v6.json"), read_run(SCHEMA_DIR / "run-v6.json")
    assert data["flows"] and len(data["flows"]) == len(stored["flows"])
    for before, after in zip(stored["flows"], data["flows"]):
        assert after["workload"] == {"kind": "download", "size_bytes": before["size_bytes"],
                                     "duration_s": before["duration_s"], "streams": 1,
                                     "connections": 1}
        assert after["transfers"] is None
