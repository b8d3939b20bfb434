"""``run.json``: the record of one attempt, its typed model, its versions and its loader.

Versions (:data:`RUN_SCHEMA_VERSION` is the one written):

1. the first format (until the standard parameters).
2. standard parameters: the record's ``params`` (asked for), and per side ``effective`` (as
   the side runs them), ``unhonoured`` (requests it could not honour) and ``negotiated``
   (what its library reported after the handshake). :func:`upgrade_1_to_2`.
3. container images: per side ``container`` (image, container id, network, what became of
   the image's network set-up), ``None`` for a side that ran natively. :func:`upgrade_2_to_3`.
4. a choice of hash: ``hash_algorithm`` (``blake3`` or ``sha256``) with ``digest_expected``
   and ``digest_received``; ``sha256_expected``/``sha256_received`` stay as stored by
   versions 1-3 and are no longer written. :func:`upgrade_3_to_4`.
5. emulated paths: ``path`` (the path the attempt ran over: its configuration, backend,
   placement, the key of its calibration in campaign.json, and the counters of its
   bottleneck and delay lines during the attempt), ``None`` over a direct link.
   :func:`upgrade_4_to_5`.
6. competing flows: ``flows`` (one dict per flow of an attempt of a ``flows:`` campaign: what
   it was, its port, its planned start, size or duration, and its own status, timestamps,
   bytes received and how they were verified; docs/flows.md), ``None`` for an attempt of one
   pair. :func:`upgrade_5_to_6`.
7. busy hosts: ``host_load`` (per node and the management host, over the attempt: load
   averages, runnable tasks of other work before and after, the shares of CPU time busy,
   stolen and waited for, with ``busy`` and its reasons; docs/paths.md, "A busy host") and
   ``host_busy`` (some host was busy), ``None`` for a record that did not read them.
   :func:`upgrade_6_to_7`.
8. workloads: ``workload`` (kind, bytes per stream, duration, streams, connections: what the
   attempt moved, docs/workloads.md), ``stopped_at_duration`` (the workload's duration ended
   the client), ``transfers`` (one dict per file a stream moved: direction, connection,
   stream, name, bytes landed, digest, how it was verified, on which node), and
   ``goodput_down_mbps``/``goodput_up_mbps`` (each direction's goodput). A version 7 attempt
   downloaded ``file_size`` on one stream of one connection; its goodput was the download's.
   :func:`upgrade_7_to_8`.
9. a workload per flow: each of ``flows`` has ``workload`` (as the attempt's: kind, bytes
   per stream, duration, streams, connections) and ``transfers`` (a QUIC flow's files, one
   per stream, as the attempt's; None for a kernel TCP flow, which iperf3 counts). A version 8
   flow downloaded its ``size_bytes`` (or for its ``duration_s``) on one stream of one
   connection. :func:`upgrade_8_to_9`.

Keys added later with a default (``variant``, ``axes``, ``hosts``, ``cell``, ``knobs``,
``interrupted``, ``handshake``, ``Side.pid``) may be absent from a stored version 2 record;
the model fills their defaults. From now on any change bumps the version (see
:mod:`interop_runner.storage.schema`).

:func:`read_run` returns the upgraded plain dict (the analysis reads those, fast and
tolerant of damaged values); :func:`load_run` returns the validated :class:`RunRecord`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from interop_runner.errors import StoreError
from interop_runner.storage.layout import write_json_atomic
from interop_runner.storage.schema import (
    DocumentSchema,
    first_error,
    read_document,
    read_document_versioned,
)

RUN_SCHEMA_VERSION = 9
Status = Literal["ok", "failed", "unsupported", "timeout"]
# how a flow's bytes were verified: every file by its digest, a stopped one as a prefix of its
# source, or (kernel TCP) by iperf3's report
Verified = Literal["hash", "prefix", "iperf3"]
STATUSES: tuple[str, ...] = ("ok", "failed", "unsupported", "timeout")
# the main host facts a record keeps per role (``hosts``), for comparisons across testbeds
HOST_KEYS = ("hostname", "cpu_model", "cores", "sockets", "numa_nodes", "kernel", "nic_driver",
             "nic_speed_mbps", "mtu")


class Side(BaseModel):
    """One side of a pair as it ran."""

    model_config = ConfigDict(extra="forbid")

    implementation: str
    version: str | None = None
    source_hash: str | None = None
    node: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    # standard parameters as this side runs them, requests it could not honour, and what the
    # library itself reported after the handshake (QIR_NEGOTIATED line; None: not reported)
    effective: dict[str, Any] = Field(default_factory=dict)
    unhonoured: list[dict[str, Any]] = Field(default_factory=list)
    negotiated: dict[str, Any] | None = None
    exit_code: int | None = None
    cpu_user_s: float | None = None
    cpu_system_s: float | None = None
    pid: int | None = None
    # set when the side ran as a container image: image, container id, network ("host") and
    # what became of the image's network set-up ("prevented"); None: it ran natively
    container: dict[str, Any] | None = None


class TransferRecord(BaseModel):
    """One file one stream of one connection moved, checked where it landed."""

    model_config = ConfigDict(extra="forbid")
    direction: Literal["download", "upload"]
    connection: int
    stream: int
    name: str
    size_bytes: int  # planned: the source's size
    node: Literal["server", "client"]  # where it landed and was hashed
    bytes: int | None = None  # landed (None: no file)
    digest: str | None = None  # of the landed bytes
    verified: Literal["hash", "prefix"] | None = None  # None: not verified (see reason)
    reason: str | None = None


class FlowRecord(BaseModel):
    """One flow of an attempt of several flows: what it was and how it went."""

    model_config = ConfigDict(extra="forbid")

    index: int
    label: str  # unique within the attempt
    kind: Literal["quic", "tcp"]  # tcp: a kernel TCP reference flow (iperf3)
    server: str | None = None  # implementations (None for a tcp flow)
    client: str | None = None
    congestion_control: str | None = None
    link: str | None = None  # "0", "1" or "both" on a two-link path
    port: int  # the server's port: the flow's packets at the bottleneck come from it
    start_offset_s: float = 0.0  # planned, after the attempt's first flow
    duration_s: float | None = None  # planned; None: the whole size
    size_bytes: int | None = None  # planned
    status: Status = "failed"
    reason: str | None = None
    start_ns: int | None = None  # on the client node's clock
    end_ns: int | None = None
    bytes_received: int | None = None  # by its receiver (both, bidirectional), by its end
    verified: Verified | None = None
    stopped_at_duration: bool = False
    goodput_mbps: float | None = None
    client_cpu_s: float | None = None  # user + system CPU of the flow's client process
    server_version: str | None = None
    client_version: str | None = None
    # what it moved (as the attempt's ``workload``) and, for a QUIC flow, each stream's file
    workload: dict[str, Any] | None = None
    transfers: list[TransferRecord] | None = None


class RunRecord(BaseModel):
    """Everything known about one attempt. Unmeasured values stay None, never 0."""

    model_config = ConfigDict(extra="forbid")

    campaign: str
    testcase: str
    repetition: int
    attempt: int
    server: Side
    client: Side
    status: Status = "failed"
    reason: str | None = None
    alpn: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    # sweep: the variant's id ("" without axes) and its axis values (label -> value)
    variant: str = ""
    axes: dict[str, Any] = Field(default_factory=dict)
    # the nodes' main host facts (HOST_KEYS per role), for comparisons across testbeds
    hosts: dict[str, Any] = Field(default_factory=dict)
    # the pair as written in the campaign ({"server", "client"}); differs from the sides'
    # implementations when `impl` substitutes a variant (A/B comparisons group by it)
    cell: dict[str, str] | None = None
    # host knobs per node: {"server": {"before", "applied", "after", "notes", "pin"}, ...}
    knobs: dict[str, Any] = Field(default_factory=dict)
    interrupted: bool = False  # stopped by Ctrl-C/SIGTERM: resume runs this repetition again
    # from the client's capture of the QUIC Initial packets (monitor "handshake")
    handshake: dict[str, Any] | None = None
    file_size: int | None = None
    bytes_received: int | None = None
    # versions 1-3 only (SHA-256 was the one hash); version 4 writes the three keys below
    sha256_expected: str | None = None
    sha256_received: str | None = None
    # the download's hash: "blake3" or "sha256", hex digests of the served and received file
    hash_algorithm: str | None = None
    digest_expected: str | None = None
    digest_received: str | None = None
    hash_ok: bool | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    duration_s: float | None = None
    goodput_mbps: float | None = None
    # each direction's goodput (None: the workload moved nothing that way, or not ok)
    goodput_down_mbps: float | None = None
    goodput_up_mbps: float | None = None
    # what the attempt moved: {"kind", "size_bytes", "streams", "connections"}
    workload: dict[str, Any] | None = None
    transfers: list[TransferRecord] | None = None  # None: an attempt of flows
    stopped_at_duration: bool = False  # the workload's duration ended the client
    started_at: str | None = None
    finished_at: str | None = None
    testbed: str | None = None
    monitors: dict[str, dict[str, str]] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)
    # the emulated path of the attempt (docs/paths.md); None: the direct link
    path: dict[str, Any] | None = None
    # the flows of an attempt of several flows (docs/flows.md); None: one pair
    flows: list[FlowRecord] | None = None
    # how busy each host was over the attempt ({"nodes": {name: {...}}, "thresholds"}), and
    # whether any was (docs/paths.md, "A busy host"); None: not read
    host_load: dict[str, Any] | None = None
    host_busy: bool | None = None
    schema_version: int = RUN_SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        """The ``run.json`` contents (plain JSON-serialisable dict, keys in field order)."""
        return self.model_dump()

    @staticmethod
    def from_dict(data: dict[str, Any], source: Path | str = "run.json") -> "RunRecord":
        """The record of stored ``run.json`` contents of any readable version."""
        upgraded = RUN_SCHEMA.upgrade(data, source)
        try:
            return RunRecord.model_validate(upgraded)
        except ValidationError as exc:
            raise StoreError(f"{source}: not a valid run.json: {first_error(exc)}") from None


# -- upgrade steps: version n -> n + 1, on the parsed dict ------------------------------------
def upgrade_1_to_2(data: dict[str, Any]) -> dict[str, Any]:
    """Standard parameters: a version 1 runner asked for none, so none were unhonoured, and
    no library reported anything."""
    data.setdefault("params", {})
    for role in ("server", "client"):
        side = data.get(role)
        if isinstance(side, dict):
            side = data[role] = dict(side)
            side.setdefault("effective", {})
            side.setdefault("unhonoured", [])
            side.setdefault("negotiated", None)
    return data


def upgrade_2_to_3(data: dict[str, Any]) -> dict[str, Any]:
    """Container images: every side of a version 2 runner ran natively."""
    for role in ("server", "client"):
        side = data.get(role)
        if isinstance(side, dict):
            side = data[role] = dict(side)
            side.setdefault("container", None)
    return data


def upgrade_3_to_4(data: dict[str, Any]) -> dict[str, Any]:
    """A choice of hash: every version 3 runner verified with SHA-256 (its digests are kept
    under their old keys too, so no stored value changes)."""
    if data.get("sha256_expected") is not None or data.get("sha256_received") is not None:
        data.setdefault("hash_algorithm", "sha256")
    data.setdefault("hash_algorithm", None)
    data.setdefault("digest_expected", data.get("sha256_expected"))
    data.setdefault("digest_received", data.get("sha256_received"))
    return data


def upgrade_4_to_5(data: dict[str, Any]) -> dict[str, Any]:
    """Emulated paths: every version 4 attempt ran over the direct link."""
    data.setdefault("path", None)
    return data


def upgrade_5_to_6(data: dict[str, Any]) -> dict[str, Any]:
    """Competing flows: every version 5 attempt ran one pair."""
    data.setdefault("flows", None)
    return data


def upgrade_6_to_7(data: dict[str, Any]) -> dict[str, Any]:
    """Busy hosts: a version 6 runner did not read the hosts' load (unknown, not idle)."""
    data.setdefault("host_load", None)
    data.setdefault("host_busy", None)
    return data


def upgrade_7_to_8(data: dict[str, Any]) -> dict[str, Any]:
    """Workloads: a version 7 attempt downloaded ``file_size`` on one stream of one
    connection, so its goodput is the download's; its transfer is the record's own fields
    (not repeated as ``transfers``)."""
    data.setdefault("workload", {"kind": "download", "size_bytes": data.get("file_size"),
                                 "duration_s": None, "streams": 1, "connections": 1})
    data.setdefault("transfers", None)
    data.setdefault("goodput_down_mbps", data.get("goodput_mbps"))
    data.setdefault("goodput_up_mbps", None)
    return data


def upgrade_8_to_9(data: dict[str, Any]) -> dict[str, Any]:
    """A workload per flow: every flow of a version 8 attempt downloaded on one stream of one
    connection (its transfers were not kept per flow)."""
    for flow in data.get("flows") or []:
        if isinstance(flow, dict):
            flow.setdefault("workload", {"kind": "download", "size_bytes": flow.get("size_bytes"),
                                         "duration_s": flow.get("duration_s"), "streams": 1,
                                         "connections": 1})
            flow.setdefault("transfers", None)
    return data


RUN_SCHEMA = DocumentSchema("run.json", RUN_SCHEMA_VERSION, {1: upgrade_1_to_2,
                                                             2: upgrade_2_to_3,
                                                             3: upgrade_3_to_4,
                                                             4: upgrade_4_to_5,
                                                             5: upgrade_5_to_6,
                                                             6: upgrade_6_to_7,
                                                             7: upgrade_7_to_8,
                                                             8: upgrade_8_to_9})


# -- files ------------------------------------------------------------------------------------
def read_run(path: Path) -> dict[str, Any]:
    """One ``run.json`` as a plain dict of the current version (upgraded, not validated).

    Raises OSError (unreadable), ValueError (not JSON, not an object) or
    :class:`~interop_runner.errors.SchemaError` (a newer or unknown version; one line naming
    the file and the versions).
    """
    return read_document(path, RUN_SCHEMA)


def read_run_versioned(path: Path) -> tuple[dict[str, Any], int]:
    """As :func:`read_run`, with the schema version the record was written with."""
    return read_document_versioned(path, RUN_SCHEMA)


def load_run(path: Path) -> RunRecord:
    """One ``run.json`` as a validated :class:`RunRecord` (StoreError when it does not fit)."""
    return RunRecord.from_dict(read_run(path), path)


def write_run(directory: Path, record: RunRecord) -> Path:
    """Store a run record as ``run.json`` in its attempt directory; never overwrites."""
    path = directory / "run.json"
    write_json_atomic(path, record.to_dict())
    return path


def stored_attempts(rep_dir: Path) -> list[tuple[int, dict[str, Any]]]:
    """(attempt number, upgraded run.json contents) of the attempts stored for one repetition.

    Unreadable records are left out (resume runs the repetition again); a record of a newer
    version raises :class:`~interop_runner.errors.SchemaError`.
    """
    out = []
    for p in rep_dir.glob("attempt-*/run.json") if rep_dir.is_dir() else []:
        number = p.parent.name.split("-", 1)[1]
        if number.isdigit():
            try:
                out.append((int(number), read_run(p)))
            except (OSError, ValueError):
                continue
    return sorted(out, key=lambda item: item[0])
