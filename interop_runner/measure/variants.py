"""Implementation variants on the management node: source archives and their identity.

A variant with ``source`` builds the library from a local tree. The tree is packed once per
campaign on the management node (``git archive`` of ``commit`` for a git tree, else the files
as they are, without ``.git``), uploaded to each node and unpacked next to the harness; its
identity (commit, dirty flag, content hash) goes into campaign.json so two campaigns can be
told apart.
"""

from __future__ import annotations

import hashlib
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interop_runner.config.implementations import ImplementationMeta, UpstreamArchive
from interop_runner.errors import ExecutorError
from interop_runner.remote.executor import LocalExecutor
from interop_runner.testbed.sources import fetch


class VariantError(Exception):
    """A variant's source cannot be packed (one line, names the variant)."""


@dataclass
class SourceArchive:
    """A packed source tree and what identifies it."""

    path: Path
    identity: dict[str, Any]

    @property
    def is_release(self) -> bool:
        """An upstream release archive (one top-level directory), not a packed tree."""
        return "archive" in self.identity

    @property
    def label(self) -> str:
        """Short identity for version strings: the commit, else the content hash (of a
        release archive: ``release-<hash>``)."""
        if self.is_release:
            return f"release-{self.identity['sha256'][:12]}"
        commit = self.identity.get("commit")
        dirty = "+dirty" if self.identity.get("dirty") else ""
        return f"{commit[:12]}{dirty}" if commit else f"tree-{self.identity['sha256'][:12]}"


def _git(local: LocalExecutor, src: Path, *args: str) -> str | None:
    res = local.run(["git", "-C", str(src), *args], timeout=120, check=False)
    return res.stdout.strip() if res.ok else None


def pack_source(meta: ImplementationMeta, workdir: Path) -> SourceArchive:
    """Pack the variant's source tree into ``workdir``; raise VariantError on failure."""
    assert meta.variant is not None and meta.variant.source is not None
    spec, local = meta.variant, LocalExecutor("management")
    src = Path(spec.source or "").expanduser().resolve()
    if not src.is_dir():
        raise VariantError(f"{meta.name}: source: not a directory: {src}")
    out = workdir / f"{meta.name.replace('/', '_')}.tar"
    identity: dict[str, Any] = {"source": str(src), "commit": None, "dirty": None}
    try:
        inside = _git(local, src, "rev-parse", "--is-inside-work-tree") == "true"
        if spec.commit is not None or inside:
            ref = spec.commit or "HEAD"
            commit = _git(local, src, "rev-parse", "--verify", f"{ref}^{{commit}}")
            if commit is None:
                raise VariantError(f"{meta.name}: source {src}: no commit {ref!r} there")
            identity["commit"] = commit
            if spec.commit is None:  # the work tree as it is: say whether it differs
                status = _git(local, src, "status", "--porcelain", "--untracked-files=no")
                identity["dirty"] = bool(status)
                if identity["dirty"]:
                    _tar_tree(src, out)
                else:
                    local.run(["git", "-C", str(src), "archive", "--format=tar", "-o", str(out),
                               commit], timeout=600)
            else:
                local.run(["git", "-C", str(src), "archive", "--format=tar", "-o", str(out),
                           commit], timeout=600)
        else:
            _tar_tree(src, out)
    except ExecutorError as exc:
        raise VariantError(f"{meta.name}: packing {src} failed: {exc}") from None
    identity["sha256"] = _members_hash(out)
    return SourceArchive(out, identity)


def _tar_tree(src: Path, out: Path) -> None:
    with tarfile.open(out, "w") as tar:
        for path in sorted(src.rglob("*")):
            rel = path.relative_to(src)
            if ".git" in rel.parts or not path.is_file():
                continue
            tar.add(path, arcname=rel.as_posix(), recursive=False)


def _members_hash(archive: Path) -> str:
    """SHA-256 over member names and contents (independent of tar metadata such as mtimes)."""
    digest = hashlib.sha256()
    with tarfile.open(archive) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            if not member.isfile():
                continue
            digest.update(member.name.encode() + b"\0")
            fh = tar.extractfile(member)
            if fh is not None:
                digest.update(hashlib.sha256(fh.read()).digest())
    return digest.hexdigest()


def release_source(archive: UpstreamArchive) -> SourceArchive:
    """Another release of a library, for a version variant: its upstream archive from the
    management cache (fetched and SHA-256 checked like the pinned ones), unpacked on the node
    as the variant's source tree."""
    fetched = fetch(archive)
    return SourceArchive(fetched.path, {"archive": archive.file, "sha256": archive.sha256,
                                        "url": archive.url})


def variant_source(meta: ImplementationMeta, workdir: Path) -> SourceArchive | None:
    """What replaces the library's pinned source for a variant: its packed source tree, its
    release archive, or nothing (a registry version or build options)."""
    spec = meta.variant
    if spec is not None and spec.source:
        return pack_source(meta, workdir)
    if spec is not None and spec.archive:
        return release_source(spec.archive)
    return None
