"""The results layout and its records.

::

    results/<campaign-id>/
        campaign.json
        <server>_<client>/<testcase>/<repetition>/attempt-<n>/
            run.json
            server/   (logs of the server side)
            client/   (logs of the client side)

``run.json`` and ``campaign.json`` are written atomically (temp file, fsync, rename). Run
records are never replaced: writing one where one exists is an error. A campaign id is unique,
so an existing campaign directory is never reused.

Results are private to the user: campaign directories are 0700, JSON records 0600, and a
running campaign sets the process umask to 077 (:func:`private_umask`), so every other file it
creates (logs fetched from the nodes, host facts, the Parquet cache) is 0600 in 0700
directories too.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Literal
from interop_runner.errors import StoreError

# 2: standard parameters (params, Side.effective/unhonoured/negotiated); version 1 files load
SCHEMA_VERSION = 2
Status = Literal["ok", "failed", "unsupported", "timeout"]
STATUSES: tuple[str, ...] = ("ok", "failed", "unsupported", "timeout")


PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
PRIVATE_UMASK = 0o077


def private_umask() -> int:
    """Add 077 to this process's umask (files 0600, directories 0700 from now on, also in the
    commands it starts); return the previous umask."""
    old = os.umask(PRIVATE_UMASK)
    os.umask(old | PRIVATE_UMASK)
    return old


def private_mkdir(path: Path) -> None:
    """Create ``path`` and its missing parents, each created level with mode 0700."""
    missing = [p for p in [path, *path.parents] if not p.exists()]
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:
            continue
        directory.chmod(PRIVATE_DIR_MODE)  # mkdir's mode is masked by the umask


@dataclass
class Side:
    """One side of a pair as it ran."""

    implementation: str
    version: str | None = None
    source_hash: str | None = None
    node: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    # standard parameters as this side runs them, requests it could not honour, and what the
    # library itself reported after the handshake (QIR_NEGOTIATED line; None: not reported)
    effective: dict[str, Any] = field(default_factory=dict)
    unhonoured: list[dict[str, Any]] = field(default_factory=list)
    negotiated: dict[str, Any] | None = None
    exit_code: int | None = None
    cpu_user_s: float | None = None
    cpu_system_s: float | None = None
    pid: int | None = None


@dataclass
class RunRecord:
    """Everything known about one attempt. Unmeasured values stay None, never 0."""

    campaign: str
    testcase: str
    repetition: int
    attempt: int
    server: Side
    client: Side
    status: Status = "failed"
    reason: str | None = None
    alpn: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    # sweep: the variant's id ("" without axes) and its axis values (label -> value)
    variant: str = ""
    axes: dict[str, Any] = field(default_factory=dict)
    # the nodes' main host facts (hostname, CPU, kernel, NIC), for comparisons across testbeds
    hosts: dict[str, Any] = field(default_factory=dict)
    # the pair as written in the campaign ({"server", "client"}); differs from the sides'
    # implementations when `impl` substitutes a variant (A/B comparisons group by it)
    cell: dict[str, str] | None = None
    # host knobs per node: {"server": {"before", "applied", "after", "notes", "pin"}, ...}
    knobs: dict[str, Any] = field(default_factory=dict)
    interrupted: bool = False  # stopped by Ctrl-C/SIGTERM: resume runs this repetition again
    # from the client's capture of the QUIC Initial packets (monitor "handshake")
    handshake: dict[str, Any] | None = None
    file_size: int | None = None
    bytes_received: int | None = None
    sha256_expected: str | None = None
    sha256_received: str | None = None
    hash_ok: bool | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    duration_s: float | None = None
    goodput_mbps: float | None = None
    started_at: str | None = None
    finished_at: str | None = None
    testbed: str | None = None
    monitors: dict[str, dict[str, str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable dict."""
        return asdict(self)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> "RunRecord":
        """Rebuild a record from ``run.json`` contents."""
        data = dict(data)
        data["server"] = Side(**data["server"])
        data["client"] = Side(**data["client"])
        return RunRecord(**data)


def utc_now() -> str:
    """The current UTC time in ISO 8601 (management node clock, for bookkeeping only)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def write_json_atomic(path: Path, data: Any, *, overwrite: bool = False) -> None:
    """Write JSON to ``path`` atomically; without ``overwrite`` an existing file is an error."""
    private_mkdir(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)  # mkstemp's default, made explicit
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=2, sort_keys=False, default=str)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        if overwrite:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)  # fails if path exists: no silent overwrite
            except FileExistsError:
                raise StoreError(f"{path}: already exists, refusing to overwrite") from None
            os.unlink(tmp)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def new_campaign_dir(results_root: Path, name: str, now: datetime | None = None) -> Path:
    """Create a fresh, uniquely named campaign directory ``<name>_<UTC timestamp>[-k]``
    (mode 0700)."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    results_root.mkdir(parents=True, exist_ok=True)
    for k in range(1, 1000):
        candidate = results_root / (f"{name}_{stamp}" + ("" if k == 1 else f"-{k}"))
        try:
            candidate.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:
            continue
        candidate.chmod(PRIVATE_DIR_MODE)  # mkdir's mode is masked by the umask
        return candidate
    raise StoreError(f"{results_root}: cannot find a free campaign directory name for {name}")


def repetition_dir(campaign_dir: Path, server: str, client: str, testcase: str,
                   repetition: int, variant: str = "") -> Path:
    """``<pair>/<testcase>/[<variant>/]<repetition>``: the attempts of one repetition."""
    base = campaign_dir / f"{server}_{client}" / testcase
    return (base / variant if variant else base) / str(repetition)


def attempt_dir(campaign_dir: Path, server: str, client: str, testcase: str,
                repetition: int, attempt: int, variant: str = "") -> Path:
    """Directory of one attempt (not created)."""
    return repetition_dir(campaign_dir, server, client, testcase, repetition,
                          variant) / f"attempt-{attempt}"


def stored_attempts(rep_dir: Path) -> list[tuple[int, dict[str, Any]]]:
    """(attempt number, run.json contents) of the attempts stored for one repetition."""
    out = []
    for p in rep_dir.glob("attempt-*/run.json") if rep_dir.is_dir() else []:
        number = p.parent.name.split("-", 1)[1]
        if number.isdigit():
            try:
                out.append((int(number), read_run(p)))
            except (OSError, ValueError):
                continue
    return sorted(out, key=lambda item: item[0])


def next_attempt(campaign_dir: Path, server: str, client: str, testcase: str,
                 repetition: int, variant: str = "") -> int:
    """The number of the next attempt for a repetition (1 when none is stored)."""
    rep = repetition_dir(campaign_dir, server, client, testcase, repetition, variant)
    used = [int(p.name.split("-", 1)[1]) for p in rep.glob("attempt-*")
            if p.name.split("-", 1)[1].isdigit()] if rep.is_dir() else []
    return max(used, default=0) + 1


def write_run(directory: Path, record: RunRecord) -> Path:
    """Store a run record as ``run.json`` in its attempt directory; never overwrites."""
    path = directory / "run.json"
    write_json_atomic(path, record.to_dict())
    return path


def iter_run_files(root: Path) -> Iterator[Path]:
    """Every ``run.json`` below ``root`` (a campaign or a results directory), sorted.

    Walks directories with ``os.scandir`` and does not descend into attempt directories
    (those holding a ``run.json``), which keeps this fast for large campaigns.
    """
    found: list[str] = []
    stack = [str(root)]
    while stack:
        top = stack.pop()
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        if any(e.name == "run.json" and e.is_file() for e in entries):
            found.append(os.path.join(top, "run.json"))
            continue
        stack += [e.path for e in entries if e.is_dir(follow_symlinks=False)
                  and not e.name.startswith(".")]
    yield from (Path(p) for p in sorted(found))


def read_run(path: Path) -> dict[str, Any]:
    """Read one ``run.json``."""
    data: dict[str, Any] = json.loads(path.read_text())
    return data
