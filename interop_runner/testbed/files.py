"""The file the clients download: generated on the server node at memory speed, kept there
between campaigns, and never used unless its content still matches its digest.

On the server node::

    <tmpdir>/files/random-<size>.bin    the bytes: one pass of shred's ISAAC stream
    <tmpdir>/files/random-<size>.json   {"size", "content", "digests": {"blake3": ..., ...},
                                         "recorded_at"}

Before a campaign uses a cached file its BLAKE3 digest is computed anew and compared with the
one recorded when it was generated; a file that differs (or whose record is missing or
damaged) is generated again. The cache holds one file: generating another size removes the
old one (the file lives in the node's tmpfs, i.e. in its memory). ``file_cache: false`` in a
campaign skips the cache and removes it; ``run.py testbed down --purge`` removes the local
testbed's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from interop_runner.storage.campaign_record import FileInfo
from interop_runner.storage.layout import utc_now
from interop_runner.testbed.node import Node
from interop_runner.units import format_iec

# hash algorithm -> the node command that prints "<hex digest>  <file>"
HASH_COMMANDS = {"blake3": "b3sum", "sha256": "sha256sum"}
CONTENT = "random"  # the content id: shred's ISAAC stream (the only kind so far)
CACHE_CHECK = "blake3"  # the digest a cached file is checked with before each use
SPACE_MARGIN = 16 * 2**20

# $0 the file, $1 its record: "<size>" then the record's JSON, or nothing when either is gone
_PROBE = '[ -f "$0" ] && [ -f "$1" ] && stat -c %s -- "$0" && cat -- "$1"; exit 0'
# $0 the file, $1 its size: allocate it in one range per CPU at once (where the file system
# can: page allocation is most of the cost, 3.3 s instead of 4.8 s for 8 GiB on 2 vCPUs),
# then write one pass of shred's ISAAC generator over it
_GENERATE = (
    'f=$0; n=$1; : >"$f" || exit 1; p=$(nproc 2>/dev/null || echo 1); [ "$p" -gt 8 ] && p=8; '
    'part=$(( (n + p - 1) / p )); i=0; '
    'while [ $i -lt "$p" ]; do o=$(( i * part )); l=$part; '
    '  [ $(( o + l )) -gt "$n" ] && l=$(( n - o )); '
    '  [ "$l" -gt 0 ] && fallocate -o "$o" -l "$l" -- "$f" 2>/dev/null & i=$(( i + 1 )); done; '
    'wait; exec shred -n 1 -s "$n" -- "$f"'
)


@dataclass(frozen=True)
class ServedFile:
    """The file the server serves in this campaign."""

    path: str  # on the server node (a hard link into the cache, or the campaign's own file)
    size: int
    algorithm: str
    digest: str
    reused: bool  # taken from the node's cache
    note: str | None = None  # why a cached file was not used

    @property
    def name(self) -> str:
        """The file's name (what clients request)."""
        return self.path.rsplit("/", 1)[1]

    def info(self) -> FileInfo:
        """Its entry in campaign.json (``file``, ``upload_file``)."""
        return FileInfo(name=self.name, size=self.size, hash_algorithm=self.algorithm,
                        digest=self.digest, reused=self.reused, note=self.note)


def hash_argv(algorithm: str, path: str) -> list[str]:
    """The node command that hashes ``path`` with ``algorithm``."""
    return [HASH_COMMANDS[algorithm], "--", path]


def file_digest(node: Node, path: str, algorithm: str, timeout: float) -> str:
    """The hex digest of a file on the node, computed on the node."""
    return node.run(hash_argv(algorithm, path), timeout=timeout).stdout.split()[0]


def cache_dir(node: Node) -> str:
    """Where the node keeps generated files between campaigns."""
    return f"{node.cfg.tmpdir}/files"


def cached_name(size: int) -> str:
    """The cache's name for a generated file of ``size`` bytes (content id and size)."""
    return f"{CONTENT}-{size}"


def space_needed(node: Node, size: int, keep: bool) -> int:
    """Bytes a campaign's file needs free on the server node: almost none when the cache
    holds a file of that size already (checked before use by :func:`prepare_file`)."""
    if keep:
        base = f"{cache_dir(node)}/{cached_name(size)}"
        if node.run(["sh", "-c", _PROBE, f"{base}.bin", f"{base}.json"]).stdout.strip():
            return SPACE_MARGIN
    return size + SPACE_MARGIN


def prepare_file(node: Node, name: str, size: int, algorithm: str, *, keep: bool,
                 timeout: float) -> ServedFile:
    """Put a file of ``size`` random bytes at ``<www>/<name>`` on the server node and return
    its digest: the cached one when its content still matches (``keep``), else a new one
    (kept for the next campaign when ``keep``)."""
    node.run(["mkdir", "-p", node.www])
    target = f"{node.www}/{name}"
    if not keep:
        node.run(["rm", "-rf", "--", cache_dir(node)])
        _generate(node, target, size, timeout)
        return ServedFile(target, size, algorithm, file_digest(node, target, algorithm, timeout),
                          reused=False)
    base = f"{cache_dir(node)}/{cached_name(size)}"
    digests, note = _cached_digests(node, base, size, timeout)
    reused = digests is not None
    if digests is None:
        digests = _generate_cached(node, base, size, algorithm, timeout)
    if algorithm not in digests:  # content checked above: the digest of the same bytes
        digests[algorithm] = file_digest(node, f"{base}.bin", algorithm, timeout)
        _write_record(node, base, size, digests)
    node.run(["ln", "-f", "--", f"{base}.bin", target])
    return ServedFile(target, size, algorithm, digests[algorithm], reused, note)


def _cached_digests(node: Node, base: str, size: int,
                    timeout: float) -> tuple[dict[str, str] | None, str | None]:
    """The recorded digests of the cached file when its content still matches them, else
    None and why it cannot be used (None: there was none)."""
    out = node.run(["sh", "-c", _PROBE, f"{base}.bin", f"{base}.json"]).stdout
    if not out.strip():
        return None, None
    first, _, text = out.partition("\n")
    try:
        record = json.loads(text)
        digests = {str(k): str(v) for k, v in record["digests"].items()}
        recorded = digests[CACHE_CHECK]
    except (ValueError, KeyError, TypeError, AttributeError):
        return None, f"{base}.json is damaged: generated anew"
    if first.strip() != str(size) or record.get("size") != size:
        return None, f"{base}.bin is not {size} bytes: generated anew"
    now = file_digest(node, f"{base}.bin", CACHE_CHECK, timeout)
    if now != recorded:
        return None, (f"{base}.bin no longer matches its {CACHE_CHECK} digest "
                      f"({now[:16]}... instead of {recorded[:16]}...): generated anew")
    return digests, None


def _generate_cached(node: Node, base: str, size: int, algorithm: str,
                     timeout: float) -> dict[str, str]:
    """Generate the cache's file (the old cache removed first); return its digests."""
    node.run(["rm", "-rf", "--", cache_dir(node)])
    node.run(["mkdir", "-p", cache_dir(node)])
    part = f"{base}.part"
    _generate(node, part, size, timeout)
    digests = {alg: file_digest(node, part, alg, timeout) for alg in {CACHE_CHECK, algorithm}}
    node.run(["mv", "-f", "--", part, f"{base}.bin"])
    _write_record(node, base, size, digests)
    return digests


def _generate(node: Node, path: str, size: int, timeout: float) -> None:
    """``size`` random bytes at ``path``, after checking the space for them."""
    node.require_space(path.rsplit("/", 1)[0], size + SPACE_MARGIN,
                       f"the {format_iec(size)} file")
    node.run(["sh", "-c", _GENERATE, path, str(size)], timeout=timeout)


def _write_record(node: Node, base: str, size: int, digests: dict[str, str]) -> None:
    record = {"size": size, "content": CONTENT, "digests": dict(sorted(digests.items())),
              "recorded_at": utc_now()}
    node.run(["sh", "-c", 'printf "%s\\n" "$1" >"$0.tmp" && mv -f -- "$0.tmp" "$0"',
              f"{base}.json", json.dumps(record)])
