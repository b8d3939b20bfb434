"""Kernel SNMP counters: ``nstat -asz`` and ``netstat -s``, both to nstat names.

nstat names are the section and the field of ``/proc/net/snmp``, ``/proc/net/netstat`` and
``/proc/net/snmp6`` run together: ``UdpInDatagrams``, ``TcpRetransSegs``,
``TcpExtTCPLostRetransmit``, ``IpExtInOctets``, ``Udp6InDatagrams``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from interop_runner.parsers.common import ParseError, counter_delta, excerpt
from interop_runner.parsers.snapshots import (
    Aligned,
    AlignedCache,
    DeltaReader,
    Deltas,
    LayoutCache,
    NotThisLayout,
    changed_units,
)

__all__ = ["parse_nstat", "parse_netstat_s", "nstat_delta", "nstat_deltas"]

_NSTAT_LINE = re.compile(r"^([A-Za-z][A-Za-z0-9_]*)[ \t]+(\d+)(?:[ \t]+[0-9.]+)?[ \t]*$", re.M)


def parse_nstat(text: str) -> dict[str, int]:
    """Parse ``nstat -asz`` (absolute values, zeros included) into ``{name: value}``.

    Comment lines (``#kernel``) and the rate column are ignored. Raises ParseError when no
    counter line is found.
    """
    while text.startswith("#"):
        text = text.partition("\n")[2]
    tokens = text.split()
    if tokens and len(tokens) % 3 == 0:
        # Fast path: every line is "name value rate"; int() fails if that is not so.
        try:
            return dict(zip(tokens[0::3], map(int, tokens[1::3])))
        except ValueError:
            pass
    pairs = _NSTAT_LINE.findall(text)
    if not pairs:
        if not tokens:
            raise ParseError("empty nstat output")
        raise ParseError(f"no nstat counters ({excerpt(text)!r})")
    return {name: int(value) for name, value in pairs}


# netstat -s (net-tools 2.10) prints the fields it knows as prose, with "#" for the number.
# Section -> prose -> field. Sections ending in "6" carry the full name (Udp6InDatagrams).
_PROSE: dict[str, dict[str, str]] = {
    "Ip": {
        "Default TTL is #": "DefaultTTL",
        "# forwarded": "ForwDatagrams",
        "# fragments created": "FragCreates",
        "# outgoing packets failed fragmentation": "FragFails",
        "# outgoing packets fragmented ok": "FragOKs",
        "# with invalid addresses": "InAddrErrors",
        "# incoming packets delivered": "InDelivers",
        "# incoming packets discarded": "InDiscards",
        "# with invalid headers": "InHdrErrors",
        "# total packets received": "InReceives",
        "# with unknown protocol": "InUnknownProtos",
        "# outgoing packets dropped": "OutDiscards",
        "# dropped because of missing route": "OutNoRoutes",
        "# requests sent out": "OutRequests",
        "# packet reassemblies failed": "ReasmFails",
        "# packets reassembled ok": "ReasmOKs",
        "# reassemblies required": "ReasmReqds",
        "# fragments dropped after timeout": "ReasmTimeout",
    },
    "Ip6": {
        "# fragments created": "Ip6FragCreates",
        "# outgoing packets failed fragmentation": "Ip6FragFails",
        "# outgoing packets fragmented ok": "Ip6FragOKs",
        "# with invalid addresses": "Ip6InAddrErrors",
        "# incoming packets delivered": "Ip6InDelivers",
        "# incoming packets discarded": "Ip6InDiscards",
        "# with invalid headers": "Ip6InHdrErrors",
        "# incoming multicast packets": "Ip6InMcastPkts",
        "# incoming packets with no route": "Ip6InNoRoutes",
        "# total packets received": "Ip6InReceives",
        "# with packets too big": "Ip6InTooBigErrors",
        "# with truncated packets": "Ip6InTruncatedPkts",
        "# with unknown protocol": "Ip6InUnknownProtos",
        "# outgoing packets dropped": "Ip6OutDiscards",
        "# forwarded": "Ip6OutForwDatagrams",
        "# outgoing multicast packets": "Ip6OutMcastPkts",
        "# dropped because of missing route": "Ip6OutNoRoutes",
        "# requests sent out": "Ip6OutRequests",
        "# packet reassemblies failed": "Ip6ReasmFails",
        "# packets reassembled ok": "Ip6ReasmOKs",
        "# reassemblies required": "Ip6ReasmReqds",
        "# fragments dropped after timeout": "Ip6ReasmTimeout",
    },
    "Icmp": {
        "# input ICMP message failed": "InErrors",
        "# ICMP messages received": "InMsgs",
        "# ICMP messages failed": "OutErrors",
        "# ICMP messages sent": "OutMsgs",
    },
    "Icmp6": {
        "# input ICMP message failed": "Icmp6InErrors",
        "# ICMP messages received": "Icmp6InMsgs",
        "# ICMP messages sent": "Icmp6OutMsgs",
    },
    "Tcp": {
        "# active connection openings": "ActiveOpens",
        "# failed connection attempts": "AttemptFails",
        "# connections established": "CurrEstab",
        "# connection resets received": "EstabResets",
        "# bad segments received": "InErrs",
        "# segments received": "InSegs",
        "# resets sent": "OutRsts",
        "# segments sent out": "OutSegs",
        "# passive connection openings": "PassiveOpens",
        "# segments retransmitted": "RetransSegs",
    },
    "Udp": {
        "# packets received": "InDatagrams",
        "# packet receive errors": "InErrors",
        "# packets to unknown port received": "NoPorts",
        "# packets sent": "OutDatagrams",
        "# receive buffer errors": "RcvbufErrors",
        "# send buffer errors": "SndbufErrors",
    },
    "Udp6": {
        "# packets received": "Udp6InDatagrams",
        "# packet receive errors": "Udp6InErrors",
        "# packets to unknown port received": "Udp6NoPorts",
        "# packets sent": "Udp6OutDatagrams",
    },
    "TcpExt": {
        "# delayed acks further delayed because of locked socket": "DelayedACKLocked",
        "Quick ack mode was activated # times": "DelayedACKLost",
        "# delayed acks sent": "DelayedACKs",
        "# resets received for embryonic SYN_RECV sockets": "EmbryonicRsts",
        "# SYNs to LISTEN sockets dropped": "ListenDrops",
        "# times the listen queue of a socket overflowed": "ListenOverflows",
        "# ICMP packets dropped because socket was locked": "LockDroppedIcmps",
        "# packets dropped from out-of-order queue because of socket buffer overrun":
            "OfoPruned",
        "# ICMP packets dropped because they were out-of-window": "OutOfWindowIcmps",
        "# active connections rejected because of time stamp": "PAWSActive",
        "# packets rejected in established connections because of timestamp": "PAWSEstab",
        "# passive connections rejected because of time stamp": "PAWSPassive",
        "# packets pruned from receive queue because of socket buffer overrun": "PruneCalled",
        "# packets pruned from receive queue": "RcvPruned",
        "Ran # times out of system memory during packet sending": "SockMallocOOM",
        "# invalid SYN cookies received": "SyncookiesFailed",
        "# SYN cookies received": "SyncookiesRecv",
        "# SYN cookies sent": "SyncookiesSent",
        "# times unable to send RST due to no memory": "TCPAbortFailed",
        "# connections reset due to early user close": "TCPAbortOnClose",
        "# connections reset due to unexpected data": "TCPAbortOnData",
        "# connections aborted after user close in linger timeout": "TCPAbortOnLinger",
        "# connections aborted due to memory pressure": "TCPAbortOnMemory",
        "# connections reset due to unexpected SYN": "TCPAbortOnSyn",
        "# connections aborted due to timeout": "TCPAbortOnTimeout",
        "# bytes directly in process context from backlog": "TCPDirectCopyFromBacklog",
        "# bytes directly received in process context from prequeue":
            "TCPDirectCopyFromPrequeue",
        "# DSACKs for out of order packets received": "TCPDSACKOfoRecv",
        "# DSACKs sent for out of order packets": "TCPDSACKOfoSent",
        "# DSACKs sent for old packets": "TCPDSACKOldSent",
        "# DSACKs received": "TCPDSACKRecv",
        "# congestion window recovered without slow start using DSACK": "TCPDSackUndo",
        "# congestion windows recovered without slow start by DSACK": "TCPDSACKUndo",
        "Detected reordering # times using FACK": "TCPFACKReorder",
        "# fast retransmits": "TCPFastRetrans",
        "# forward retransmits": "TCPForwardRetrans",
        "# congestion windows fully recovered without slow start": "TCPFullUndo",
        "# predicted acknowledgments": "TCPHPAcks",
        "# packet headers predicted": "TCPHPHits",
        "# packet headers predicted and directly queued to user": "TCPHPHitsToUser",
        "# timeouts in loss state": "TCPLossFailures",
        "# TCP data loss events": "TCPLoss",
        "# congestion windows recovered without slow start after partial ack": "TCPLossUndo",
        # net-tools spells it TCPLostRetransmits, the kernel TCPLostRetransmit.
        "# retransmits lost": "TCPLostRetransmit",
        "TCP ran low on memory # times": "TCPMemoryPressures",
        "# congestion windows partially recovered using Hoe heuristic": "TCPPartialUndo",
        "# packets directly queued to recvmsg prequeue": "TCPPrequeued",
        "# packets dropped from prequeue": "TCPPrequeueDropped",
        "# acknowledgments not containing data payload received": "TCPPureAcks",
        "# packets collapsed in receive queue due to low socket buffer": "TCPRcvCollapsed",
        "# timeouts after reno fast retransmit": "TCPRenoFailures",
        "# reno fast retransmits failed": "TCPRenoRecoveryFailed",
        "# classic Reno fast retransmits failed": "TCPRenoRecoveryFail",
        "# times recovered from packet loss due to fast retransmit": "TCPRenoRecovery",
        "Detected reordering # times using reno fast retransmit": "TCPRenoReorder",
        "# timeouts after SACK recovery": "TCPSackFailures",
        "# SACK retransmits failed": "TCPSackRecoveryFail",
        "# times recovered from packet loss by selective acknowledgements": "TCPSackRecovery",
        "# bad SACK blocks received": "TCPSACKReneging",
        "Detected reordering # times using SACK": "TCPSACKReorder",
        "# times receiver scheduled too late for direct processing": "TCPSchedulerFailed",
        "# retransmits in slow start": "TCPSlowStartRetrans",
        "# other TCP timeouts": "TCPTimeouts",
        "Detected reordering # times using time stamp": "TCPTSReorder",
        "# TCP sockets finished time wait in slow timer": "TWKilled",
        "# TCP sockets finished time wait in fast timer": "TW",
        "# time wait sockets recycled by time stamp": "TWRecycled",
    },
}

_ICMP_IN = {
    "address mask replies": "InAddrMaskReps",
    "address mask request": "InAddrMasks",
    "destination unreachable": "InDestUnreachs",
    "echo replies": "InEchoReps",
    "echo requests": "InEchos",
    "wrong parameters": "InParmProbs",
    "redirects": "InRedirects",
    "source quenches": "InSrcQuenchs",
    "timeout in transit": "InTimeExcds",
    "timestamp reply": "InTimestampReps",
    "timestamp request": "InTimestamps",
}
_ICMP_OUT = {
    "address mask replies": "OutAddrMaskReps",
    "address mask requests": "OutAddrMasks",
    "destination unreachable": "OutDestUnreachs",
    "echo replies": "OutEchoReps",
    "echo requests": "OutEchos",
    "wrong parameters": "OutParmProbs",
    "redirect": "OutRedirects",
    "source quench": "OutSrcQuenchs",
    "time exceeded": "OutTimeExcds",
    "timestamp replies": "OutTimestampReps",
    "timestamp requests": "OutTimestamps",
}
_ICMP6_IN = {
    "destination unreachable": "Icmp6InDestUnreachs",
    "echo replies": "Icmp6InEchoReplies",
    "echo requests": "Icmp6InEchos",
    "group member queries": "Icmp6InGroupMembQueries",
    "group member reductions": "Icmp6InGroupMembReductions",
    "group member responses": "Icmp6InGroupMembResponses",
    "neighbour advertisement": "Icmp6InNeighborAdvertisements",
    "neighbour solicits": "Icmp6InNeighborSolicits",
    "parameter problem": "Icmp6InParmProblems",
    "packets too big": "Icmp6InPktTooBigs",
    "redirects": "Icmp6InRedirects",
    "router advertisement": "Icmp6InRouterAdvertisements",
    "router solicits": "Icmp6InRouterSolicits",
    "received ICMPv6 time exceeded": "Icmp6InTimeExcds",
}
_ICMP6_OUT = {
    "destination unreachable": "Icmp6OutDestUnreachs",
    "echo replies": "Icmp6OutEchoReplies",
    "echo requests": "Icmp6OutEchos",
    "group member queries": "Icmp6OutGroupMembQueries",
    "group member reductions": "Icmp6OutGroupMembReductions",
    "group member responses": "Icmp6OutGroupMembResponses",
    "neighbor advertisements": "Icmp6OutNeighborAdvertisements",
    "neighbor solicits": "Icmp6OutNeighborSolicits",
    "parameter problem": "Icmp6OutParmProblems",
    "packets too big": "Icmp6OutPktTooBigs",
    "redirects": "Icmp6OutRedirects",
    "router advertisement": "Icmp6OutRouterAdvertisements",
    "router solicits": "Icmp6OutRouterSolicits",
    "sent ICMPv6 time exceeded": "Icmp6OutTimeExcds",
}
_HISTOGRAMS = {
    "Icmp": (_ICMP_IN, _ICMP_OUT),
    "Icmp6": (_ICMP6_IN, _ICMP6_OUT),
}

# Not counters (configuration values and gauges); nstat leaves them out as well.
_NOT_COUNTERS = frozenset({
    "IpForwarding", "IpDefaultTTL", "TcpRtoAlgorithm", "TcpRtoMin", "TcpRtoMax",
    "TcpMaxConn", "TcpCurrEstab",
})


def _full_name(section: str, field: str) -> str:
    if section.endswith("6") and field.startswith(section):
        return field
    return section + field


def parse_netstat_s(text: str) -> dict[str, int]:
    """Parse ``netstat -s`` (net-tools) into nstat-style names, e.g. ``UdpRcvbufErrors``.

    Prose lines are mapped back to their fields (``Udp: 1234 packets received`` ->
    ``UdpInDatagrams``, ``receive buffer errors`` -> ``UdpRcvbufErrors``, ``Tcp: 910 segments
    retransmitted`` -> ``TcpRetransSegs``, ``TcpExt: 655 fast retransmits`` ->
    ``TcpExtTCPFastRetrans``); ``Key: value`` lines (fields net-tools has no prose for, e.g.
    ``TCPLostRetransmit: 6``, ``InOctets: 1`` under ``IpExt``) get the section prefixed.
    Configuration values and gauges (``IpForwarding``, ``TcpCurrEstab``...) are left out, as
    nstat does.

    Beware: netstat -s omits many fields while they are 0 (every ``Key: value`` line and
    most TcpExt prose). Such fields are absent here, not 0. Lines in other languages or
    unknown prose are ignored; raises ParseError if nothing is recognised.
    """
    out: dict[str, int] = {}
    section = ""
    prose: dict[str, str] = {}
    histogram: dict[str, str] | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        if line[0] not in " \t":
            section = line.strip().rstrip(":")
            prose = _PROSE.get(section, {})
            histogram = None
            continue
        body = line.strip()
        if body == "ICMP input histogram:":
            histogram = _HISTOGRAMS.get(section, ({}, {}))[0]
            continue
        if body == "ICMP output histogram:":
            histogram = _HISTOGRAMS.get(section, ({}, {}))[1]
            continue
        head, sep, value = body.rpartition(": ")
        if sep and value.isdecimal():
            if " " in head:
                field = histogram.get(head) if histogram is not None else None
                if field is None:
                    continue
            else:
                field = head
            name = _full_name(section, field)
            if name not in _NOT_COUNTERS:
                out[name] = int(value)
            continue
        words = body.split()
        for i, word in enumerate(words):
            if word.isdecimal():
                words[i] = "#"
                field_ = prose.get(" ".join(words))
                if field_ is not None:
                    name = _full_name(section, field_)
                    if name not in _NOT_COUNTERS:
                        out[name] = int(word)
                break
    if not out:
        if not text.strip():
            raise ParseError("empty netstat output")
        raise ParseError(f"no netstat -s counters recognised ({excerpt(text)!r})")
    return out


def nstat_delta(before: str, after: str) -> dict[str, int]:
    """``counter_delta(parse_nstat(before), parse_nstat(after))`` from the texts directly.

    ``nstat -asz`` prints every counter in a fixed order, so unchanged lines are skipped
    without conversion; falls back to the full parse when the layouts differ.
    """
    return nstat_deltas(before, after).as_dict()


def _nstat_key(line: str) -> tuple[str, bool] | None:
    """(name, whether anything follows it) of a counter line, ``None`` for a comment or an
    empty line."""
    if not line or line[0] == "#":
        return None
    name, _, rest = line.partition(" ")
    return name, bool(rest)


@dataclass(frozen=True, slots=True)
class _NstatPlan:
    """The counters of one layout: names in line order, each line's index among them."""

    names: tuple[str, ...]
    slots: list[int]
    usable: bool
    """False without counters or with a name printed twice (the line-by-line path)."""


def _nstat_plan(keys: list[tuple[str, bool] | None]) -> _NstatPlan:
    """Unchanged lines count as 0 when something follows the name, as in the line path."""
    names: list[str] = []
    slots = [-1] * len(keys)
    for i, key in enumerate(keys):
        if key is not None and key[1]:
            slots[i] = len(names)
            names.append(key[0])
    return _NstatPlan(tuple(names), slots, 0 < len(names) == len(set(names)))


def nstat_deltas(before: str, after: str) -> Deltas:
    """:func:`nstat_delta` as :class:`Deltas` (a counter that went backwards is ``None``);
    snapshots of a layout seen before share its ``names``. The layout is recognised as in
    :func:`~interop_runner.parsers.ethtool.ethtool_totals_deltas` (nstat pads its columns,
    so snapshots nearly always compare byte by byte); only lines that differ between the
    two snapshots are converted."""
    return _READER.deltas(before, after)


def _value_offset(key: tuple[str, bool] | None, line: str) -> int:
    """Where a line's key ends: after the name's space (nothing of a comment line but its
    "#"; a name without anything after it may not change at all)."""
    if key is None:
        return 1
    return len(key[0]) + 1 if key[1] else len(line) + 1


def _first_int(rest: str) -> int:
    """The value of ``<value> <rate>`` (ValueError, IndexError: not a counter line)."""
    return int(rest.split(None, 1)[0])


def _aligned_diffs(ref: Aligned, lines: list[int], before: str, after: str
                   ) -> Iterator[tuple[int, int]]:
    """(line, after - before) of the changed counter lines of snapshots that compare byte
    by byte with ``ref``: each begins with the reference's name and a space (a comment
    line may change after its "#", and does not count)."""
    begins, ends, keys = ref.begins, ref.ends, ref.layout.keys
    for k in lines:
        if keys[k] is not None:
            begin, end = begins[k], ends[k]
            yield k, _first_int(after[begin:end]) - _first_int(before[begin:end])


def _line_diffs(keys: list[tuple[str, bool] | None], b_lines: list[str], a_lines: list[str]
                ) -> Iterator[tuple[int, int]]:
    """(line, after - before) of the changed counter lines, as the line path checks them."""
    for i in changed_units(b_lines, a_lines):
        key = keys[i]
        if key is None:
            continue
        name = key[0]
        b_name, _, b_rest = b_lines[i].partition(" ")
        if b_name != name:
            raise NotThisLayout
        yield i, _first_int(a_lines[i][len(name) + 1:]) - _first_int(b_rest)


def _values(plan: _NstatPlan, diffs: Iterable[tuple[int, int]], before: str, after: str
            ) -> Deltas:
    """The deltas of a usable plan from the changes of its lines (every other line is 0);
    a counter that went backwards is ``None``."""
    values: list[int | None] = [0] * len(plan.names)
    moved: list[int] = []
    dropped = 0
    try:
        for i, diff in diffs:
            slot = plan.slots[i]
            values[slot] = None if diff < 0 else diff
            dropped += diff < 0
            moved.append(slot)
    except (NotThisLayout, ValueError, IndexError):
        return Deltas.of(_full_delta(before, after))
    if dropped == len(values):
        return Deltas.of(_full_delta(before, after))
    return Deltas(plan.names, values, not dropped, moved)


def _full_delta(before: str, after: str) -> dict[str, int]:
    """The deltas through the full parse of both snapshots."""
    return counter_delta(parse_nstat(before), parse_nstat(after))


def _line_delta(before: str, after: str) -> dict[str, int]:
    """The deltas line by line, converting only lines that differ; the full parse when the
    layouts differ. The reference of :func:`nstat_deltas`, which takes this path for
    layouts that print a name twice."""
    b_lines, a_lines = before.split("\n"), after.split("\n")
    if len(b_lines) != len(a_lines):
        return _full_delta(before, after)
    out: dict[str, int] = {}
    for b, a in zip(b_lines, a_lines):
        if not a or a[0] == "#":
            continue
        name, _, rest = a.partition(" ")
        if b == a:
            if rest:
                out[name] = 0
            continue
        b_name, _, b_rest = b.partition(" ")
        if b_name != name:
            return _full_delta(before, after)
        try:
            diff = int(rest.split(None, 1)[0]) - int(b_rest.split(None, 1)[0])
        except (ValueError, IndexError):
            return _full_delta(before, after)
        if diff >= 0:
            out[name] = diff
    if not out:
        return _full_delta(before, after)
    return out


_READER: DeltaReader[tuple[str, bool]] = DeltaReader(
    LayoutCache(_nstat_key), AlignedCache(digits=False), _nstat_plan, _value_offset,
    _aligned_diffs, _line_diffs, _values, _line_delta, _full_delta)
