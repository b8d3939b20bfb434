"""``campaign.json`` (and ``testbed-<name>.json``): the record of a campaign, typed and versioned.

One model, :class:`CampaignRecord`, describes both documents: ``campaign.json`` of a campaign
on one testbed (``testbed``, ``hosts``, ``implementations``, ``monitors``), ``campaign.json``
of a campaign over several testbeds (``testbeds``, ``distribute``, ``testbed_files``), and each
such testbed's ``testbed-<name>.json`` (shaped like the one-testbed document). One builder,
:func:`new_campaign_record`, starts every one of them; the campaign then fills it in as it
goes and writes it with :func:`write_campaign`.

Versions (:data:`CAMPAIGN_SCHEMA_VERSION` is the one written):

1. assembled as dicts by the campaign code. Early files lack ``monitors`` (before the monitors
   existed) and ``plan`` (before sweeps: runs went pair by pair, repetitions in order).
2. written from the typed model: ``plan`` always, ``monitors`` on every one-testbed document,
   optional keys absent rather than null. :func:`upgrade_1_to_2`.
3. a choice of hash for the served file: ``file.hash_algorithm`` and ``file.digest``
   (``file.sha256`` only as stored by versions 1-2), ``file.reused`` (taken from the
   server node's cache of generated files) and ``file.note`` (why a cached file was
   generated anew). :func:`upgrade_2_to_3`.
4. ``synthetic``: true for a campaign generated from captured outputs rather than measured
   (``bench/history_scale.py``), so a results database can tell them apart; false for every
   campaign the runner measures and every older document. :func:`upgrade_3_to_4`.
5. ``paths``: the emulated paths of the campaign by key (configuration, resolved numbers,
   backend, placement and calibration), absent for a campaign over the direct link.
   :func:`upgrade_4_to_5`.
6. ``upload_file``: the file the clients upload (as ``file``, on the client node), absent for
   a campaign without an upload workload, as for every older document. :func:`upgrade_5_to_6`.

:func:`read_campaign` returns the upgraded plain dict (what the analysis and the report
read); :func:`load_campaign_record` returns the validated model (what resume reads).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
)

from interop_runner.errors import StoreError
from interop_runner.storage.layout import utc_now, write_json_atomic
from interop_runner.storage.schema import DocumentSchema, first_error, read_document

CAMPAIGN_SCHEMA_VERSION = 6


class _Doc(BaseModel):
    """A part of the document: unknown keys are refused (a new key is a new version), and the
    optional keys named in ``_omit_none`` are left out while unset (as the writers always did)."""

    model_config = ConfigDict(extra="forbid")
    _omit_none: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _drop_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if v is not None or k not in self._omit_none}


class RunnerInfo(_Doc):
    """The runner that wrote the document: package version, git commit, dirty work tree."""

    package: str | None = None
    commit: str | None = None
    dirty: bool | None = None


class PlanInfo(_Doc):
    """The run order: ``sequential``/``shuffled``/``paired``, its seed and the variant ids."""

    order: str = "sequential"
    seed: int | None = None
    variants: list[str] = Field(default_factory=lambda: [""])


class Session(_Doc):
    """An earlier session of a resumed campaign: how it ended."""

    status: str | None = None
    finished_at: str | None = None


class FileInfo(_Doc):
    """The file the clients download: its hash (``blake3`` or ``sha256``) and whether it came
    from the server node's cache of generated files (``reused``; None: not recorded)."""

    _omit_none = frozenset({"sha256", "reused", "note"})

    name: str
    size: int
    sha256: str | None = None  # versions 1-2 only
    hash_algorithm: str = "sha256"
    digest: str | None = None
    reused: bool | None = None
    note: str | None = None  # why a cached file was not used (generated anew)


class ImplementationEntry(_Doc):
    """One implementation (or variant) in one role: what was declared, what got installed."""

    _omit_none = frozenset({"variant", "variant_source", "setup_error", "setup_log_tail"})

    declared_version: str | None = None
    source_hash: str | None = None
    node: str | None = None
    variant: dict[str, Any] | None = None
    variant_source: dict[str, Any] | None = None
    version: str | None = None
    setup_error: str | None = None
    setup_log_tail: str | None = None


class AdaptiveRound(_Doc):
    """An extra paired round of an adaptive A/B campaign: its repetition and open cells."""

    repetition: int
    cells: list[str]


class CampaignRecord(_Doc):
    """``campaign.json`` / ``testbed-<name>.json``. Keys in the order the writers used."""

    _omit_none = frozenset({
        "testbed", "testbeds", "distribute", "hosts", "implementations", "monitors",
        "testbed_files", "sessions", "resumed_at", "skipped_runs",
        "ssh_host_keys_trusted_on_first_use", "killed_leftovers", "restored_leftovers", "file",
        "upload_file", "adaptive_rounds", "worker_exit_codes", "wall_s", "paths"})

    schema_version: int = CAMPAIGN_SCHEMA_VERSION
    campaign: str
    config: dict[str, Any]
    testbed: dict[str, Any] | None = None  # one testbed (or this document's testbed)
    testbeds: dict[str, dict[str, Any]] | None = None  # several: name -> testbed config
    distribute: str | None = None
    runner: RunnerInfo = Field(default_factory=RunnerInfo)
    started_at: str | None = None
    finished_at: str | None = None
    status: str = "running"
    planned_runs: int = 0
    hosts: dict[str, dict[str, Any]] | None = None  # node name -> host facts summary
    implementations: dict[str, ImplementationEntry] | None = None  # "<role>:<name>" -> entry
    monitors: dict[str, dict[str, str]] | None = None  # role -> monitor -> status
    plan: PlanInfo = Field(default_factory=PlanInfo)
    testbed_files: dict[str, str] | None = None  # several testbeds: name -> document
    sessions: list[Session] | None = None
    resumed_at: str | None = None
    skipped_runs: int | None = None
    ssh_host_keys_trusted_on_first_use: list[dict[str, str]] | None = None
    killed_leftovers: dict[str, list[str]] | None = None
    restored_leftovers: dict[str, list[str]] | None = None
    file: FileInfo | None = None
    upload_file: FileInfo | None = None  # the clients' file to upload (on the client node)
    adaptive_rounds: list[AdaptiveRound] | None = None
    worker_exit_codes: dict[str, int | None] | None = None
    wall_s: float | None = None
    synthetic: bool = False  # generated from captured outputs, not measured
    # emulated paths by key (docs/paths.md): configuration, backend, placement, calibration
    paths: dict[str, dict[str, Any]] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The document's contents (plain JSON-serialisable dict)."""
        return self.model_dump()


def plain(value: Any) -> Any:
    """``value`` as it reads back from JSON (paths as strings, tuples as lists): what the
    document holds in memory is what a later session loads."""
    return json.loads(json.dumps(value, default=str))


def new_campaign_record(campaign: str, config: dict[str, Any], runner: dict[str, Any],
                        planned_runs: int, plan: PlanInfo, *,
                        testbed: dict[str, Any] | None = None,
                        testbeds: dict[str, dict[str, Any]] | None = None,
                        distribute: str | None = None,
                        previous: CampaignRecord | None = None,
                        skipped_runs: int = 0) -> CampaignRecord:
    """The document at the start of a session: on one ``testbed`` (its hosts,
    implementations and monitors follow), or over several ``testbeds`` (each one's details
    go to its ``testbed-<name>.json``). A resumed campaign (``previous``) keeps its start
    time and notes how each earlier session ended."""
    now = utc_now()
    record = CampaignRecord(
        campaign=campaign, config=plain(config), runner=RunnerInfo.model_validate(runner),
        started_at=now, planned_runs=planned_runs, plan=plan,
        testbed=plain(testbed) if testbed is not None else None,
        testbeds=plain(testbeds) if testbeds is not None else None, distribute=distribute,
        hosts={} if testbeds is None else None,
        implementations={} if testbeds is None else None,
        monitors={} if testbeds is None else None,
        testbed_files={n: f"testbed-{n}.json" for n in testbeds} if testbeds else None)
    if previous is not None:
        record.started_at = previous.started_at or now
        record.sessions = [*(previous.sessions or []),
                           Session(status=previous.status, finished_at=previous.finished_at)]
        record.resumed_at = utc_now()
        record.skipped_runs = skipped_runs
    return record


# -- upgrade steps: version n -> n + 1, on the parsed dict ------------------------------------
def upgrade_1_to_2(data: dict[str, Any]) -> dict[str, Any]:
    """Fill what early version 1 writers left out: ``monitors`` (none ran) and ``plan`` (runs
    in sequence, pair by pair, no variants, no seed)."""
    if "testbeds" not in data:
        data.setdefault("monitors", {})
    data.setdefault("plan", {"order": "sequential", "seed": None, "variants": [""]})
    return data


def upgrade_2_to_3(data: dict[str, Any]) -> dict[str, Any]:
    """A choice of hash: a version 2 runner hashed the served file with SHA-256."""
    file = data.get("file")
    if isinstance(file, dict):
        data["file"] = {**file, "hash_algorithm": file.get("hash_algorithm", "sha256"),
                        "digest": file.get("digest", file.get("sha256"))}
    return data


def upgrade_3_to_4(data: dict[str, Any]) -> dict[str, Any]:
    """Every campaign before version 4 was measured."""
    data.setdefault("synthetic", False)
    return data


def upgrade_4_to_5(data: dict[str, Any]) -> dict[str, Any]:
    """Emulated paths: no version 4 campaign had one (``paths`` stays absent)."""
    return data


def upgrade_5_to_6(data: dict[str, Any]) -> dict[str, Any]:
    """Upload workloads: no version 5 campaign uploaded (``upload_file`` stays absent)."""
    return data


CAMPAIGN_SCHEMA = DocumentSchema("campaign.json", CAMPAIGN_SCHEMA_VERSION,
                                 {1: upgrade_1_to_2, 2: upgrade_2_to_3, 3: upgrade_3_to_4,
                                  4: upgrade_4_to_5, 5: upgrade_5_to_6})


# -- files ------------------------------------------------------------------------------------
def read_campaign(path: Path) -> dict[str, Any]:
    """``campaign.json`` (or ``testbed-<name>.json``) as a plain dict of the current version
    (upgraded, not validated). Raises OSError, ValueError (not a JSON object) or
    :class:`~interop_runner.errors.SchemaError` (a newer or unknown version, one line)."""
    return read_document(path, CAMPAIGN_SCHEMA)


def hosts_of_campaign(meta: dict[str, Any], directory: Path) -> dict[str, Any]:
    """The host facts of a campaign from its (read) ``campaign.json``: its ``hosts``, or for
    several testbeds ``{"by_testbed": {name: hosts}}`` from the ``testbed-<name>.json`` files
    in ``directory`` (``{}`` for a file that cannot be read)."""
    files = meta.get("testbed_files")
    if files:
        return {"by_testbed": {name: _hosts_of(directory / file) for name, file in files.items()}}
    hosts = meta.get("hosts")
    return hosts if isinstance(hosts, dict) else {}


def _hosts_of(path: Path) -> dict[str, Any]:
    try:
        hosts = read_campaign(path).get("hosts")
    except (OSError, ValueError, StoreError):
        return {}
    return hosts if isinstance(hosts, dict) else {}


def campaign_from_dict(data: dict[str, Any], source: Path | str = "campaign.json"
                       ) -> CampaignRecord:
    """The validated record of stored contents of any readable version (StoreError when
    they do not fit the model)."""
    upgraded = CAMPAIGN_SCHEMA.upgrade(data, source)
    try:
        return CampaignRecord.model_validate(upgraded)
    except ValidationError as exc:
        raise StoreError(f"{source}: not a valid campaign.json: {first_error(exc)}") from None


def load_campaign_record(path: Path) -> CampaignRecord:
    """``campaign.json`` (or ``testbed-<name>.json``) as a validated :class:`CampaignRecord`."""
    return campaign_from_dict(read_campaign(path), path)


def write_campaign(path: Path, record: CampaignRecord, *, overwrite: bool = True) -> None:
    """Write the document atomically (``overwrite=False``: refuse an existing file)."""
    write_json_atomic(path, record.to_dict(), overwrite=overwrite)
