"""``tc -s qdisc show dev <iface>`` (and ``tc -s class show``): queueing statistics."""

from __future__ import annotations

import re
from dataclasses import dataclass

from interop_runner.parsers.common import ParseError, excerpt

__all__ = ["BacklogSample", "QdiscStats", "parse_qdisc_samples", "parse_tc_qdisc", "tc_rate_bit_s",
           "tc_size_bytes"]


@dataclass(slots=True)
class QdiscStats:
    """One qdisc (or class) with its counters since it was created.

    ``entity`` is ``"qdisc"`` or ``"class"``; ``handle`` is the qdisc handle (``"8001:"``)
    or the class id (``"1:10"``); ``parent`` is ``"root"`` or a handle/class id.
    ``rate_bit_s``/``ceil_bit_s``: the configured shaping rate in bit/s (SI), where the
    header shows one (tbf qdisc, htb class). ``backlog_bytes`` is exact below 1 KiB; tc
    prints larger backlogs rounded (``32Kb`` = 32 KiB).
    """

    entity: str
    kind: str
    handle: str
    parent: str | None
    dev: str | None = None
    rate_bit_s: float | None = None
    ceil_bit_s: float | None = None
    sent_bytes: int | None = None
    sent_packets: int | None = None
    dropped: int | None = None
    overlimits: int | None = None
    requeues: int | None = None
    backlog_bytes: int | None = None
    backlog_packets: int | None = None


_RATE = re.compile(r"^(\d+(?:\.\d+)?)([KMGT]i?|[kmgt])?(bit|bps)$")
_PREFIX = {
    None: 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
    "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12,
    "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40,
}
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([KMG]?)b$")
_SIZE_FACTOR = {"": 1, "K": 1024, "M": 1024 * 1024, "G": 1024 * 1024 * 1024}


def tc_rate_bit_s(text: str) -> float | None:
    """Convert a tc rate (``100Mbit``, ``1Gbit``, ``10Mibit``, ``12500Kbps``) to bit/s.

    ``bit`` units are bits, ``bps`` units BYTES per second (tc's convention); plain
    prefixes are SI, ``Ki``/``Mi``... binary. Returns None if ``text`` is not a rate.
    """
    m = _RATE.match(text)
    if not m:
        return None
    value = float(m[1]) * _PREFIX[m[2]]
    return value * 8 if m[3] == "bps" else value


def tc_size_bytes(text: str) -> int | None:
    """Convert a tc size (``6056b``, ``32Kb``, ``1Mb``; K/M are 1024-based bytes) to bytes."""
    m = _SIZE.match(text)
    if not m:
        return None
    return int(round(float(m[1]) * _SIZE_FACTOR[m[2]]))


def _int(tokens: list[str], i: int) -> int | None:
    if i < len(tokens):
        t = tokens[i].rstrip("p,")
        if t.isdecimal():
            return int(t)
    return None


def _header(tokens: list[str]) -> QdiscStats:
    entity, kind, handle = tokens[0], tokens[1], tokens[2]
    rec = QdiscStats(entity=entity, kind=kind, handle=handle, parent=None)
    i = 3
    n = len(tokens)
    while i < n:
        t = tokens[i]
        if t == "root":
            rec.parent = "root"
        elif t == "parent" and i + 1 < n:
            rec.parent = tokens[i + 1]
            i += 1
        elif t == "dev" and i + 1 < n:
            rec.dev = tokens[i + 1]
            i += 1
        elif t == "rate" and i + 1 < n and rec.rate_bit_s is None:
            rec.rate_bit_s = tc_rate_bit_s(tokens[i + 1])
            i += 1
        elif t == "ceil" and i + 1 < n:
            rec.ceil_bit_s = tc_rate_bit_s(tokens[i + 1])
            i += 1
        i += 1
    return rec


def _stats(rec: QdiscStats, tokens: list[str]) -> None:
    for i, t in enumerate(tokens):
        if t == "Sent" and rec.sent_bytes is None:
            rec.sent_bytes = _int(tokens, i + 1)
            rec.sent_packets = _int(tokens, i + 3)
        elif t == "(dropped" or t == "dropped":
            rec.dropped = _int(tokens, i + 1)
        elif t == "overlimits":
            rec.overlimits = _int(tokens, i + 1)
        elif t == "requeues" and rec.requeues is None:
            rec.requeues = _int(tokens, i + 1)
        elif t == "backlog" and i + 2 < len(tokens) and rec.backlog_bytes is None:
            rec.backlog_bytes = tc_size_bytes(tokens[i + 1])
            rec.backlog_packets = _int(tokens, i + 2)


def parse_tc_qdisc(text: str) -> list[QdiscStats]:
    """Parse ``tc -s qdisc show [dev X]`` (``tc -s class show`` too) into one record per block.

    A block starts with a ``qdisc <kind> <handle> ...`` (or ``class``) line; the statistics
    lines below it (``Sent ... bytes ... pkt (dropped D, overlimits O requeues R)``,
    ``backlog Bb Pp requeues R``) fill the counters. Kind-specific lines (fq_codel's
    ``maxpacket ...``, htb's ``lended: ...``) are ignored. Counters not shown stay None.

    Raises ParseError for empty output (tc prints nothing for a device without a qdisc
    table, e.g. a down ifb) or output without a qdisc/class line.
    """
    out: list[QdiscStats] = []
    current: QdiscStats | None = None
    for line in text.splitlines():
        tokens = line.split()
        if not tokens:
            continue
        if tokens[0] in ("qdisc", "class") and len(tokens) >= 3 and line[0] not in " \t":
            current = _header(tokens)
            out.append(current)
        elif current is not None:
            _stats(current, tokens)
    if not out:
        if not text.strip():
            raise ParseError("empty tc output")
        raise ParseError(f"no qdisc in tc output ({excerpt(text)!r})")
    return out


@dataclass(frozen=True, slots=True)
class BacklogSample:
    """One sample of a qdisc's queue: when (s since the epoch, on the node), bytes and
    packets waiting, and its drop counter so far."""

    time_s: float
    backlog_bytes: int
    backlog_packets: int
    drops: int


def parse_qdisc_samples(text: str, handle: str) -> list[BacklogSample]:
    """The path sampler's file: a line ``$EPOCHREALTIME`` before each ``tc -s -j qdisc show``
    JSON array; the samples of the qdisc ``handle`` (``"1:"``). A sample cut off by the
    sampler's stop is skipped."""
    import json  # only this reader needs it

    samples: list[BacklogSample] = []
    stamp: float | None = None
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line[0] != "[":
            try:
                stamp = float(line)
            except ValueError:
                stamp = None
            continue
        try:
            qdiscs = json.loads(line)
        except ValueError:
            continue
        if stamp is None or not isinstance(qdiscs, list):
            continue
        for q in qdiscs:
            if isinstance(q, dict) and q.get("handle") == handle:
                samples.append(BacklogSample(stamp, int(q.get("backlog", 0)),
                                             int(q.get("qlen", 0)), int(q.get("drops", 0))))
    return samples
