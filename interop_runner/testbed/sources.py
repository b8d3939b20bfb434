"""Upstream source archives (meta.yml ``sources``) on the management node and on the nodes.

The management node keeps a cache (``/var/cache/qir/sources``, or ``$QIR_SOURCE_CACHE``). An
archive enters it from a local source directory when one holds the file (``$QIR_SOURCE_DIRS``,
colon-separated, else ``<checkout>/../shared/sources``) and otherwise by download from its
pinned ``url``; either way only with the SHA-256 its ``meta.yml`` names. Before a build the
runner copies the archives to ``<workdir>/sources/`` on the node (skipped when the node holds
the same bytes) and passes that directory as ``QIR_SOURCES``; nodes never download them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from interop_runner.config.implementations import ImplementationMeta, UpstreamArchive
from interop_runner.errors import UserError
from interop_runner.paths import project_root
from interop_runner.testbed.node import Node

DEFAULT_CACHE = Path("/var/cache/qir/sources")
DOWNLOAD_TIMEOUT_S = 120.0


class SourceError(UserError):
    """An archive is missing, cannot be fetched, or has the wrong SHA-256 (one line)."""


@dataclass(frozen=True)
class Fetched:
    """Where an archive is in the cache and how it got there."""

    archive: UpstreamArchive
    path: Path
    how: Literal["cached", "copied", "downloaded"]


def source_cache() -> Path:
    """The management node's archive cache."""
    return Path(os.environ.get("QIR_SOURCE_CACHE", str(DEFAULT_CACHE)))


def source_dirs() -> list[Path]:
    """Local directories searched for archives before downloading."""
    env = os.environ.get("QIR_SOURCE_DIRS")
    if env is not None:
        return [Path(p) for p in env.split(":") if p]
    return [project_root().parent / "shared" / "sources"]


def sha256_file(path: Path) -> str:
    """SHA-256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _checked(path: Path, archive: UpstreamArchive) -> None:
    got = sha256_file(path)
    if got != archive.sha256:
        raise SourceError(f"source archive {path} has SHA-256 {got}, expected "
                          f"{archive.sha256}")


def fetch(archive: UpstreamArchive, cache: Path | None = None,
          dirs: list[Path] | None = None, download: bool = True) -> Fetched:
    """Make ``archive`` present and checked in the cache: kept, copied from a local source
    directory, or downloaded from its URL. A file with another SHA-256 is refused
    (SourceError naming the file and the expected hash) and never enters the cache."""
    cache = cache or source_cache()
    target = cache / archive.file
    if target.is_file() and sha256_file(target) == archive.sha256:
        return Fetched(archive, target, "cached")
    for folder in source_dirs() if dirs is None else dirs:
        candidate = folder / archive.file
        if candidate.is_file():
            _checked(candidate, archive)
            _install(candidate, target)
            return Fetched(archive, target, "copied")
    if not download:
        raise SourceError(f"source archive {archive.file} is neither in {cache} nor in a "
                          "source directory (run pos_scripts/install.sh or "
                          "`run.py sources fetch`)")
    _download(archive, target)
    return Fetched(archive, target, "downloaded")


def _install(source: Path, target: Path) -> None:
    """Copy into the cache under a temporary name, then rename (never a half file)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=target.parent, prefix=".part-", delete=False) as tmp:
        with source.open("rb") as fh:
            shutil.copyfileobj(fh, tmp)
    os.replace(tmp.name, target)


def _download(archive: UpstreamArchive, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".dl-") as tmp:
        part = Path(tmp) / archive.file
        try:
            with urllib.request.urlopen(archive.url, timeout=DOWNLOAD_TIMEOUT_S) as resp, \
                    part.open("wb") as fh:
                shutil.copyfileobj(resp, fh)
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise SourceError(f"source archive {archive.file}: download from {archive.url} "
                              f"failed ({reason}); put the file into a source directory "
                              "($QIR_SOURCE_DIRS) instead") from None
        _checked(part, archive)
        os.replace(part, target)


def fetch_all(registry: dict[str, ImplementationMeta], cache: Path | None = None,
              dirs: list[Path] | None = None, download: bool = True) -> list[Fetched]:
    """Every archive any implementation names, each fetched once."""
    seen: dict[str, Fetched] = {}
    for meta in registry.values():
        for archive in meta.sources:
            if archive.file not in seen:
                seen[archive.file] = fetch(archive, cache, dirs, download)
    return list(seen.values())


def node_sources_dir(node: Node) -> str:
    """The node's directory of source archives (QIR_SOURCES)."""
    return f"{node.cfg.workdir}/sources"


def put_sources(node: Node, meta: ImplementationMeta) -> dict[str, str]:
    """Copy the implementation's archives to the node; the setup's extra environment
    (``QIR_SOURCES``), empty when it names none."""
    if not meta.sources:
        return {}
    remote_dir = node_sources_dir(node)
    for archive in meta.sources:
        local = fetch(archive).path
        node.upload_cached(local, archive.sha256, remote_dir)
    return {"QIR_SOURCES": remote_dir}

