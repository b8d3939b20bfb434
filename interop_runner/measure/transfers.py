"""The files of one flow's workload: where each transfer's source and landed file are, the
hard links that give every stream a file of its own, and the check of every landed file
against its source's digest, on the node where it landed.

A download's source is the served file in the server node's ``www``, and it lands in the
client's downloads directory; an upload's source is the upload file in the client node's
``www`` and it lands in the server's uploads directory. With several streams or connections
each transfer has its own name (:func:`~interop_runner.config.workload.transfer_names`), a
hard link to the one source file, so every stream is verified by itself. A kernel TCP flow
moves no file: its receiver's count is read from iperf3's report (:func:`iperf_received`).
"""

from __future__ import annotations

from dataclasses import dataclass

from interop_runner.config.workload import Direction, Transfer, Workload, transfers
from interop_runner.parsers.common import ParseError
from interop_runner.parsers.iperf3 import parse_iperf3
from interop_runner.storage.run_record import TransferRecord
from interop_runner.testbed.files import HASH_COMMANDS
from interop_runner.testbed.node import Node

# $0 the hash command, then files: per file one line "<size> <digest>  -", or "missing"
_HASH_EACH = ('h=$0; for f in "$@"; do if [ -f "$f" ]; then printf "%s " "$(stat -c %s -- "$f")"; '
              '"$h" <"$f"; else echo missing; fi; done')
# $0 the file, $1 the hash command, then byte counts: per count the digest of the file's
# first that many bytes, one line each
_PREFIXES = 'f=$0; h=$1; shift; for n in "$@"; do head -c "$n" -- "$f" | "$h"; done'
# files: wait (at most 5 s) until their sizes stay the same for 0.1 s: a receiver stopped at
# a duration may still write out what it buffered (the Rust servers flush a paused body after
# 10 ms of idle)
_SETTLE = ('a=$(stat -c %s -- "$@" 2>/dev/null); i=0; while [ $i -lt 50 ]; do sleep 0.1; '
           'b=$(stat -c %s -- "$@" 2>/dev/null); [ "$a" = "$b" ] && exit 0; a=$b; '
           'i=$((i + 1)); done')
# $0 the source, then link names in its directory: each a hard link to the source
_LINK = 'src=$0; d=$(dirname -- "$src"); for n in "$@"; do ln -f -- "$src" "$d/$n"; done'


@dataclass(frozen=True)
class Files:
    """Where one flow's transfers start and land (directories on their nodes)."""

    workload: Workload
    file_name: str  # the served file (downloads)
    upload_name: str  # the client's upload file ("" when the workload has no upload)
    size: int  # bytes of each transfer
    server_www: str
    client_www: str
    downloads: str  # on the client node
    uploads: str  # on the server node

    @property
    def transfers(self) -> list[Transfer]:
        """Every transfer, in the order of ``REQUESTS`` and ``UPLOAD_REQUESTS``."""
        return transfers(self.workload, self.file_name, self.upload_name)

    def of(self, direction: Direction) -> list[Transfer]:
        """The transfers of one direction."""
        return [t for t in self.transfers if t.direction == direction]

    def source(self, direction: Direction) -> str:
        """The source file of ``direction``'s transfers on its sending node."""
        return f"{self.server_www}/{self.file_name}" if direction == "download" else \
            f"{self.client_www}/{self.upload_name}"

    def landed(self, transfer: Transfer) -> str:
        """Where ``transfer``'s file lands on the receiving node."""
        return f"{self.downloads if transfer.direction == 'download' else self.uploads}/" \
               f"{transfer.name}"

    def links(self, direction: Direction) -> list[str]:
        """The names of ``direction``'s hard links to its source (none for one stream)."""
        base = self.file_name if direction == "download" else self.upload_name
        return [t.name for t in self.of(direction) if t.name != base]


def sender(direction: Direction) -> str:
    """The role that sends a direction's data."""
    return "server" if direction == "download" else "client"


def receiver(direction: Direction) -> str:
    """The role that receives a direction's data (its file is hashed there)."""
    return "client" if direction == "download" else "server"


def make_links(node: Node, files: Files, direction: Direction) -> None:
    """Hard-link every stream's name of ``direction`` to its source on the sending node."""
    names = files.links(direction)
    if names:
        node.run(["sh", "-c", _LINK, files.source(direction), *names])


def settle(node: Node, paths: list[str]) -> None:
    """Wait until the files' sizes stop changing (a receiver still writing what it held)."""
    node.run(["sh", "-c", _SETTLE, "settle", *paths], timeout=30, check=False)


def hash_landed(node: Node, paths: list[str], algorithm: str,
                timeout: float) -> list[tuple[int, str] | None]:
    """(size, digest) of each file on ``node`` (hashed there), None for a missing one."""
    out = node.run(["sh", "-c", _HASH_EACH, HASH_COMMANDS[algorithm], *paths],
                   timeout=timeout).stdout.splitlines()
    if len(out) != len(paths):
        raise ValueError(f"{node.name}: hashed {len(out)} of {len(paths)} files")
    return [None if line.strip() == "missing" else (int(line.split()[0]), line.split()[1])
            for line in out]


def check(transfer: Transfer, landed: tuple[int, str] | None, size: int, digest: str,
          algorithm: str) -> TransferRecord:
    """The record of one transfer: its landed file against the source's size and digest
    (``reason`` says what differs, as the attempt's reason says it for one transfer)."""
    rec = TransferRecord(direction=transfer.direction, connection=transfer.connection,
                         stream=transfer.stream, name=transfer.name, size_bytes=size,
                         node=receiver(transfer.direction))
    if landed is None:
        where = "" if rec.node == "client" else f" on the {rec.node} node"
        rec.reason = f"client exited 0 but {transfer.name} is missing{where}"
        return rec
    rec.bytes, rec.digest = landed
    if rec.bytes != size:
        rec.reason = f"size mismatch: expected {size} bytes, got {rec.bytes}"
    elif rec.digest != digest:
        rec.reason = f"{algorithm} mismatch: expected {digest}, got {rec.digest}"
    else:
        rec.verified = "hash"
    return rec


def check_prefixes(node: Node, source: str, batch: list[Transfer],
                   landed: list[tuple[int, str] | None], size: int, algorithm: str,
                   timeout: float) -> list[TransferRecord]:
    """The records of transfers stopped at their duration: each landed file must be the
    first bytes of ``source`` (hashed on its sending ``node``, as many bytes as landed)."""
    counts = sorted({got[0] for got in landed if got is not None})
    out = node.run(["sh", "-c", _PREFIXES, source, HASH_COMMANDS[algorithm],
                    *map(str, counts)], timeout=timeout).stdout.splitlines() if counts else []
    prefix = {n: line.split()[0] for n, line in zip(counts, out)}
    records = []
    for transfer, got in zip(batch, landed):
        rec = TransferRecord(direction=transfer.direction, connection=transfer.connection,
                             stream=transfer.stream, name=transfer.name, size_bytes=size,
                             node=receiver(transfer.direction))
        if got is None:
            rec.reason = f"stopped at its duration with no {transfer.name}"
        elif prefix.get(got[0]) == got[1]:
            rec.bytes, rec.digest, rec.verified = got[0], got[1], "prefix"
        else:
            rec.bytes, rec.digest = got
            rec.reason = (f"the {got[0]} bytes of {transfer.name} differ from its source's "
                          f"first {got[0]}")
        records.append(rec)
    return records


def failure(checked: list[TransferRecord]) -> str | None:
    """Why the transfers fail (None: every one verified): one transfer's own reason, or the
    first failed one's named, with how many failed."""
    bad = [t for t in checked if t.verified is None]
    if not bad:
        return None
    if len(checked) == 1:
        return bad[0].reason
    first = bad[0]
    return (f"{len(bad)} of {len(checked)} transfers failed; first {first.direction} "
            f"{first.name} (connection {first.connection}, stream {first.stream}): "
            f"{first.reason}")


def iperf_received(receiver: str, sender: str, asked_cc: str, stopped: bool
                   ) -> tuple[int | None, str]:
    """What a kernel TCP flow's receiver got by its iperf3 JSON report (no payload of its own
    to hash), and the reason when it cannot count: no report, no byte count, or a sender that
    ran another congestion control than ``asked_cc`` (named by either side's report). A flow
    ``stopped`` at its duration reports after an interrupt: its counts are those up to then."""
    try:
        result = parse_iperf3(receiver, interrupted=stopped)
    except ParseError as exc:
        return None, f"iperf3 printed no result: {exc}"
    if result.received_bytes is None:
        return None, "iperf3's report holds no bytes received"
    used = result.congestion or _sender_congestion(sender, stopped)
    if used is not None and used != asked_cc:
        return None, f"iperf3's sender used {used}, not {asked_cc}"
    return result.received_bytes, ""


def _sender_congestion(report: str, stopped: bool) -> str | None:
    """The congestion control the sender's own iperf3 report names, if it can be read."""
    try:
        return parse_iperf3(report, interrupted=stopped).congestion
    except ParseError:
        return None
