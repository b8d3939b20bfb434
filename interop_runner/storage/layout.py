"""The results layout on disk: directories, atomic private writes, the walk over run records.

::

    results/<campaign-id>/
        campaign.json
        [testbed-<name>.json]   (a campaign over several testbeds: one per testbed)
        hosts/<node>/           (raw host facts)
        <server>_<client>/<testcase>/[<variant>/]<repetition>/attempt-<n>/
            run.json
            server/   (logs of the server side)
            client/   (logs of the client side)

JSON records are written atomically (temp file, fsync, rename). Run records are never
replaced: writing one where one exists is an error. A campaign id is unique, so an existing
campaign directory is never reused.

Results are private to the user: campaign directories are 0700, JSON records 0600, and a
running campaign sets the process umask to 077 (:func:`private_umask`), so every other file it
creates (logs fetched from the nodes, host facts, the Parquet cache) is 0600 in 0700
directories too.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from interop_runner.errors import StoreError

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


def attempt_numbers(rep_dir: Path) -> list[int]:
    """The numbers of the ``attempt-<n>`` directories of one repetition, sorted."""
    if not rep_dir.is_dir():
        return []
    return sorted(int(p.name.split("-", 1)[1]) for p in rep_dir.glob("attempt-*")
                  if p.name.split("-", 1)[1].isdigit())


def next_attempt(campaign_dir: Path, server: str, client: str, testcase: str,
                 repetition: int, variant: str = "") -> int:
    """The number of the next attempt for a repetition (1 when none is stored)."""
    rep = repetition_dir(campaign_dir, server, client, testcase, repetition, variant)
    return max(attempt_numbers(rep), default=0) + 1


def unrecorded_attempts(rep_dir: Path) -> list[int]:
    """Attempt numbers below ``rep_dir`` with a directory but no run.json (the runner died
    during them)."""
    return [n for n in attempt_numbers(rep_dir)
            if not (rep_dir / f"attempt-{n}" / "run.json").exists()]


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


# -- derived caches ---------------------------------------------------------------------------
# One rule for every cache derived from stored files (the results cache, flows.parquet, the
# views' in-memory tables): it keeps the SHA-256 of the bytes of the files it was made from,
# never their times. A copy (cp -r, a git clone, an archive) sets new times on every file and
# keeps every cache; a file rewritten within the same second is still seen.

_READ_WHOLE = 1 << 20  # bytes


def content_key(directory: Path, names: Iterable[str]) -> dict[str, str]:
    """What a cache made from the files ``names`` (relative to ``directory``) is valid for:
    the SHA-256 (hex) of each of them that exists, by name (one that does not is left out)."""
    key = {}
    for name in names:
        try:
            with open(directory / name, "rb") as fh:
                # a small record is read whole (file_digest's buffer per file costs more
                # for a thousand records), a large capture in parts
                small = os.fstat(fh.fileno()).st_size <= _READ_WHOLE
                digest = hashlib.sha256(fh.read()) if small else \
                    hashlib.file_digest(fh, "sha256")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            continue
        key[name] = digest.hexdigest()
    return key


def stale_sources(stored: Mapping[str, str], current: Mapping[str, str]) -> list[str]:
    """The files of ``current`` (a :func:`content_key` now) whose bytes are not those the
    cache keyed ``stored`` was made from, or that it was made without: [] when it is valid. A
    source that is gone does not void it: an archived campaign keeps its caches and drops the
    bulky inputs (the bottleneck captures)."""
    return [name for name, digest in current.items() if stored.get(name) != digest]
