"""Per-packet records at a path's bottleneck, from captures on both sides of its queue.

With a campaign's ``path.record_packets``, the router captures the data direction twice
(docs/bottleneck.md): ``path/bottleneck-in.pcap`` on its interface towards the server, packets
entering (``-Q in``, about their enqueue time), and ``path/bottleneck-out.pcap`` on its
interface towards the client, packets leaving after the bottleneck's tbf queue (``-Q out``,
their dequeue time). :func:`bottleneck_packets` pairs the two: a packet is known by its flow
5-tuple and its captured transport bytes (header plus the captured start of the payload: the
router changes TTL and IP checksum, never these; encrypted QUIC bytes and TCP sequence numbers
make them unique), looked up in a hash table and compared whole, so a hash collision never
pairs two packets; equal keys pair in order. A packet that entered and never left was dropped
on the way (the tbf queue, a loss rule or a delay line).
:func:`flow_series` bins the records per flow over time.

The captures are classic pcap (micro- or nanosecond timestamps, either byte order, modified
pcap too, gzip-compressed too), read with dpkt's file and record header layouts; the records
are located in one tight loop and decoded with numpy, all at once (dpkt's Reader and
packet classes build Python objects per packet: about 25 µs a packet, against 2-3 µs here).
Link types Ethernet (VLAN tags skipped), Linux cooked SLL and SLL2, raw IP and BSD loopback;
IPv4 and IPv6 (extension headers skipped).
"""

from __future__ import annotations

import gzip
import ipaddress
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import dpkt
import numpy as np
import pandas as pd

from interop_runner.errors import StoreError

__all__ = ["IN_FILE", "OUT_FILE", "PACKET_COLUMNS", "SERIES_COLUMNS", "bottleneck_packets",
           "flow_series", "match_packets"]

#: The captures, relative to an attempt directory (a ``.gz`` beside each is read too).
IN_FILE = "path/bottleneck-in.pcap"
OUT_FILE = "path/bottleneck-out.pcap"

#: :func:`bottleneck_packets`' columns and their (nullable) dtypes.
PACKET_COLUMNS: dict[str, str] = {
    "flow": "string", "proto": "string", "size_bytes": "Int64", "enqueue_ns": "Int64",
    "dequeue_ns": "Int64", "queue_delay_ms": "Float64", "dropped": "boolean"}
#: :func:`flow_series`' columns and their dtypes.
SERIES_COLUMNS: dict[str, str] = {
    "time_s": "Float64", "flow": "string", "throughput_mbps": "Float64",
    "queue_delay_ms_mean": "Float64", "queue_delay_ms_p95": "Float64", "drops": "Int64"}

# A VLAN tag or two may sit in front of some packets of an Ethernet capture: the compared
# part of the transport bytes leaves room for them, so both sides compare the same bytes
_VLAN_ROOM = 8
_ETHERNET, _SLL, _SLL2 = dpkt.pcap.DLT_EN10MB, dpkt.pcap.DLT_LINUX_SLL, dpkt.pcap.DLT_LINUX_SLL2
_RAW = (dpkt.pcap.DLT_RAW, 12, 14, 228, 229)  # 12/14: DLT_RAW on some BSDs; 228/229: IPv4/6
_LOOPBACK = (dpkt.pcap.DLT_NULL, dpkt.pcap.DLT_LOOP)
_LINK_HEADER = {_ETHERNET: 14, _SLL: 16, _SLL2: 20, **dict.fromkeys(_LOOPBACK, 4),
                **dict.fromkeys(_RAW, 0)}
_NANO_MAGICS = (dpkt.pcap.TCPDUMP_MAGIC_NANO, dpkt.pcap.PMUDPCT_MAGIC_NANO)
_SWAPPED_MAGICS = (dpkt.pcap.PMUDPCT_MAGIC, dpkt.pcap.PMUDPCT_MAGIC_NANO, dpkt.pcap.PACPDOM_MAGIC)
_PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"
_PROTO_NAMES = {6: "tcp", 17: "udp", 1: "icmp", 58: "icmp6", 132: "sctp"}
_PORTS = (6, 17, 132)  # transports whose header starts with two ports
_IPV6_EXTENSIONS = (0, 43, 44, 60)  # hop-by-hop, routing, fragment, destination options
_ND_TYPES = (133, 134, 135, 136, 137)  # ICMPv6 router/neighbour discovery: never forwarded
# a packet's flow as bytes: version, protocol, ports, then source and destination address
# (an IPv4 address in the first 4 of its 16 bytes)
_FLOW_BYTES = 40


@dataclass(slots=True)
class _Capture:
    """One capture in memory: the file's bytes and, per record, where its frame starts
    (``start``), how much of it was captured (``caplen``) and its time in ns."""

    path: Path
    raw: bytes
    link: int
    snaplen: int
    nano: bool
    start: np.ndarray
    caplen: np.ndarray
    time_ns: np.ndarray
    torn_tail: bool = False  # the last record is cut (tcpdump killed): left out


def _read_bytes(path: Path) -> tuple[Path, bytes]:
    """The bytes of ``path`` or, if it does not exist, of ``path.gz``; a gzip stream (magic
    bytes, whatever the name) decompressed."""
    for candidate in (path, path.with_name(path.name + ".gz")):
        if candidate.is_file():
            break
    else:
        raise StoreError(f"{path}: no such capture (nor {path.name}.gz): was the attempt run "
                         "with path.record_packets?")
    try:
        raw = candidate.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:
        raise StoreError(f"{candidate}: cannot read: {exc}") from exc
    return candidate, raw


def _load(path: Path) -> _Capture:
    """A classic pcap file's records, located with dpkt's header layouts (its Reader builds
    a Python object per record: too slow for 100k-packet captures)."""
    path, raw = _read_bytes(path)
    if raw[:4] == _PCAPNG_MAGIC:
        raise StoreError(f"{path}: a pcapng file: record with tcpdump -w (classic pcap)")
    try:
        head = dpkt.pcap.FileHdr(raw[:dpkt.pcap.FileHdr.__hdr_len__])
        magic = head.magic  # as read big-endian: names the byte order too (what dpkt does)
        record = dpkt.pcap.MAGIC_TO_PKT_HDR[magic]
        if magic in _SWAPPED_MAGICS:
            head = dpkt.pcap.LEFileHdr(raw[:dpkt.pcap.FileHdr.__hdr_len__])
    except (dpkt.NeedData, dpkt.UnpackError, KeyError):
        raise StoreError(f"{path}: not a pcap file (no pcap file header)") from None
    if head.linktype not in _LINK_HEADER:
        raise StoreError(f"{path}: link type {head.linktype} is not supported (Ethernet, "
                         "Linux cooked SLL/SLL2, raw IP, loopback)")
    size, order = record.__hdr_len__, record.__hdr_fmt__[0]
    caplen_at = struct.Struct(order + "I").unpack_from  # the third field of every layout
    pos, end, heads = dpkt.pcap.FileHdr.__hdr_len__, len(raw), []
    while pos + size <= end:
        heads.append(pos)
        pos += size + caplen_at(raw, pos + 8)[0]
    if pos > end:  # the last record is cut (tcpdump killed)
        heads.pop()
    data = np.frombuffer(raw, dtype=np.uint8)
    at = np.asarray(heads, dtype=np.int64)
    sec, frac, caplen = (_u32(data, at + field, order) for field in (0, 4, 8))
    nano = magic in _NANO_MAGICS
    return _Capture(path, raw, head.linktype, head.snaplen, nano, at + size, caplen,
                    sec * 1_000_000_000 + frac * (1 if nano else 1000), torn_tail=pos != end)


def _u32(data: np.ndarray, at: np.ndarray, order: str) -> np.ndarray:
    """The unsigned 32-bit integers at ``at`` in byte order ``order`` ("<" or ">")."""
    shifts = (0, 8, 16, 24) if order == "<" else (24, 16, 8, 0)
    out = np.zeros(len(at), dtype=np.int64)
    for i, shift in enumerate(shifts):
        out |= data[at + i].astype(np.int64) << shift
    return out


# zero bytes after the last record: a header field read at a fixed offset from a short last
# frame's start stays in the array (rows that need it are masked by their captured length)
_PAD = 256


def _gather(data: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The bytes at ``idx`` (of the padded file) as int64."""
    out: np.ndarray = data[idx].astype(np.int64)
    return out


def _link(cap: _Capture, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per record: the offset of the network header in the frame and its ethertype."""
    s, n = cap.start, len(cap.start)

    def u16(at: np.ndarray) -> np.ndarray:
        value: np.ndarray = _gather(data, at) << 8 | _gather(data, at + 1)
        return value

    if cap.link == _ETHERNET:
        off, etype = np.full(n, 14, dtype=np.int64), u16(s + 12)
        for _ in range(2):  # 802.1Q / 802.1ad tags
            tagged = np.isin(etype, (0x8100, 0x88A8)) & (cap.caplen >= off + 4)
            etype = np.where(tagged, u16(s + off + 2), etype)
            off = np.where(tagged, off + 4, off)
        return off, etype
    if cap.link == _SLL:
        return np.full(n, 16, dtype=np.int64), u16(s + 14)
    if cap.link == _SLL2:
        return np.full(n, 20, dtype=np.int64), u16(s)
    off = np.full(n, _LINK_HEADER[cap.link], dtype=np.int64)
    return off, np.where(_gather(data, s + off) >> 4 == 6, 0x86DD, 0x0800)


def _ipv6_transport(frame: bytes, net: int) -> tuple[int, int] | None:
    """(next header, transport offset) of an IPv6 packet with extension headers; None for a
    non-first fragment or a header chain cut by the snap length."""
    nxt, pos = frame[net + 6], net + 40
    while nxt in _IPV6_EXTENSIONS:
        if len(frame) < pos + 8:
            return None
        if nxt == 44:
            if struct.unpack_from("!H", frame, pos + 2)[0] & 0xFFF8:
                return None
            nxt, pos = frame[pos], pos + 8
        else:
            nxt, pos = frame[pos], pos + 8 + frame[pos + 1] * 8
    return nxt, pos


def _network(cap: _Capture, data: np.ndarray) -> dict[str, np.ndarray]:
    """Per record, vectorised: IP version (0: not IP or cut), IP length, protocol, where the
    network and transport headers start (file offsets) and whether it is a first fragment."""
    off, etype = _link(cap, data)
    net = cap.start + off
    first_byte = _gather(data, net)
    nibble, ihl = first_byte >> 4, (first_byte & 15) * 4
    v4 = (etype == 0x0800) & (nibble == 4) & (ihl >= 20) & (cap.caplen >= off + ihl)
    v6 = (etype == 0x86DD) & (nibble == 6) & (cap.caplen >= off + 40)
    size = np.where(v4, _gather(data, net + 2) << 8 | _gather(data, net + 3),
                    (_gather(data, net + 4) << 8 | _gather(data, net + 5)) + 40)
    proto = np.where(v4, _gather(data, net + 9), _gather(data, net + 6))
    first = np.where(v4, (_gather(data, net + 6) & 0x1F) << 8 | _gather(data, net + 7) == 0,
                     True)
    l4 = np.where(v4, net + ihl, net + 40)
    for i in np.flatnonzero(v6 & np.isin(proto, _IPV6_EXTENSIONS)):  # rare: a Python loop
        frame = cap.raw[cap.start[i]:cap.start[i] + cap.caplen[i]]
        found = _ipv6_transport(frame, int(off[i]))
        first[i] = found is not None
        if found is not None:
            proto[i], l4[i] = found[0], cap.start[i] + found[1]
    version = np.where(v4, 4, np.where(v6, 6, 0))
    return {"version": version, "size": size, "proto": proto, "net": net, "l4": l4,
            "first": first}


def _addresses(data: np.ndarray, ip: dict[str, np.ndarray]) -> np.ndarray:
    """Per record the flow as :data:`_FLOW_BYTES` bytes (a row of a uint8 matrix)."""
    n, v4, l4 = len(ip["net"]), ip["version"] == 4, ip["l4"]
    ports = ip["first"] & np.isin(ip["proto"], _PORTS)
    flow = np.zeros((n, _FLOW_BYTES), dtype=np.uint8)
    flow[:, 0], flow[:, 1] = ip["version"], ip["proto"]
    for col in range(4):
        flow[:, 2 + col] = np.where(ports, _gather(data, l4 + col), 0)
    width = np.arange(16)
    for col, (at4, at6) in ((8, (12, 8)), (24, (16, 24))):
        at = np.where(v4, ip["net"] + at4, ip["net"] + at6)[:, None] + width
        flow[:, col:col + 16] = np.where(v4[:, None] & (width >= 4), 0, data[at])
    return flow


def _packets(cap: _Capture, window: int) -> tuple[pd.DataFrame, np.ndarray, list[bytes]]:
    """The forwarded IP packets of a capture: a frame of ``size`` and ``ts`` (ns), their flow
    bytes and, for their key, the transport bytes both captures hold (at most ``window``
    bytes of network layer, never past the IP length or the captured frame)."""
    data = np.concatenate([np.frombuffer(cap.raw, dtype=np.uint8), np.zeros(_PAD, np.uint8)])
    ip = _network(cap, data)
    dst = _gather(data, np.where(ip["version"] == 4, ip["net"] + 16, ip["net"] + 24))
    dst2 = _gather(data, ip["net"] + 25)
    link_scope = np.where(ip["version"] == 4, dst >= 224,
                          (dst == 0xFF) | ((dst == 0xFE) & (dst2 & 0xC0 == 0x80)))
    frame_end = cap.start + cap.caplen
    nd = (ip["proto"] == 58) & ip["first"] & (ip["l4"] < frame_end) & \
        np.isin(_gather(data, ip["l4"]), _ND_TYPES)
    keep = (ip["version"] > 0) & ~link_scope & ~nd & (ip["l4"] <= frame_end)
    ip = {k: v[keep] for k, v in ip.items()}
    end = ip["l4"] + np.minimum(ip["size"] - (ip["l4"] - ip["net"]),
                                window - (ip["l4"] - ip["net"]))
    end = np.clip(np.minimum(end, frame_end[keep]), ip["l4"], None)
    raw = _without_checksums(data, ip, end)
    keys = [raw[a:b] for a, b in zip(ip["l4"].tolist(), end.tolist())]
    frame = pd.DataFrame({"size": ip["size"], "ts": cap.time_ns[keep]})
    return frame, _addresses(data, ip), keys


def _without_checksums(data: np.ndarray, ip: dict[str, np.ndarray], end: np.ndarray) -> bytes:
    """The capture's bytes with the TCP and UDP checksums of the kept packets zeroed: a
    packet a delay line on NFQUEUE handled leaves with the checksum the kernel completed for
    it (the sender's veth left it partial, offloaded), so the checksum is no part of a
    packet's identity. ``data`` is changed (it is the padded copy of the capture)."""
    offset = np.where(ip["proto"] == 6, 16, np.where(ip["proto"] == 17, 6, -1))
    at = ip["l4"] + offset
    has = (offset >= 0) & ip["first"] & (at + 2 <= end)
    data[at[has]] = 0
    data[at[has] + 1] = 0
    return data.tobytes()


def _flow_name(row: bytes) -> tuple[str, str]:
    """("udp 198.19.1.1:4433>198.19.2.1:50123", "udp") of a flow's bytes (IPv6 in
    brackets; no ports but for TCP, UDP and SCTP)."""
    version, proto = row[0], row[1]
    sport, dport = struct.unpack_from("!HH", row, 2)
    size = 4 if version == 4 else 16
    a = ipaddress.ip_address(row[8:8 + size])
    b = ipaddress.ip_address(row[24:24 + size])
    name = _PROTO_NAMES.get(proto, str(proto))
    if proto not in _PORTS:
        return f"{name} {a}>{b}", name
    if version == 6:
        return f"{name} [{a}]:{sport}>[{b}]:{dport}", name
    return f"{name} {a}:{sport}>{b}:{dport}", name


def match_packets(entering: pd.DataFrame, leaving: pd.DataFrame) -> pd.DataFrame:
    """Pair the packets of two captures: both frames have ``flow`` and ``key`` (together a
    packet's identity) and ``ts`` (ns), in capture order. The n-th packet of an identity
    entering pairs with the n-th one leaving. Returns ``entering`` with ``dequeue`` (ns,
    <NA> for a packet that never left); ``attrs["unmatched_leaving"]`` counts the leaving
    packets without a partner (sent by the router itself, or entered before the capture)."""
    ids = ["flow", "key"]
    left = entering.assign(nth=entering.groupby(ids, sort=False).cumcount())
    # nullable before the merge: a float column would round ns since the epoch to 256 ns
    right = leaving[ids].assign(dequeue=leaving["ts"].astype("Int64"),
                                nth=leaving.groupby(ids, sort=False).cumcount())
    out = left.merge(right, on=[*ids, "nth"], how="left", sort=False).drop(columns="nth")
    out.attrs["unmatched_leaving"] = int(len(leaving) - out["dequeue"].notna().sum())
    return out


def bottleneck_packets(attempt_dir: Path) -> pd.DataFrame:
    """One row per packet that entered the bottleneck (``path/bottleneck-in.pcap``), paired
    with its exit (``path/bottleneck-out.pcap``), sorted by ``enqueue_ns``.

    Columns (:data:`PACKET_COLUMNS`): ``flow`` ("udp 198.19.1.1:4433>198.19.2.1:50123"),
    ``proto`` ("udp", "tcp", "icmp", ... or the protocol number), ``size_bytes`` (IP length,
    header included), ``enqueue_ns`` and ``dequeue_ns`` (capture timestamps, ns since the
    epoch; ``dequeue_ns`` <NA> if the packet never left), ``queue_delay_ms`` (their
    difference; <NA> if dropped), ``dropped``. Link-scope packets (multicast and link-local
    destinations, ICMPv6 neighbour discovery) and non-IP frames are left out: they are never
    forwarded. If one capture has microsecond timestamps, both are compared in microseconds.

    ``attrs`` holds ``unmatched_leaving`` (packets that left without having entered: the
    router's own, or entered before the ``in`` capture started), ``in_file`` and
    ``out_file`` (the files read) and ``torn_tail`` (the files whose last record was cut, as
    by a killed tcpdump; that record is left out). Raises :class:`StoreError` naming a
    missing or unreadable capture."""
    attempt_dir = Path(attempt_dir)
    caps = [_load(attempt_dir / IN_FILE), _load(attempt_dir / OUT_FILE)]
    if caps[0].nano != caps[1].nano:  # compare at the coarser precision (tcpdump truncates)
        for cap in caps:
            cap.time_ns = cap.time_ns // 1000 * 1000
    # compare the transport bytes both captures hold: the smaller snap length after the link
    # header decides (an SLL capture holds two bytes less of each packet than an Ethernet one)
    window = min(c.snaplen - _LINK_HEADER[c.link] for c in caps) - _VLAN_ROOM
    (entering, flows_in, keys_in), (leaving, flows_out, keys_out) = \
        (_packets(c, window) for c in caps)
    flows = np.concatenate([flows_in, flows_out])
    unique, flow_codes = np.unique(flows.view(np.dtype((np.void, _FLOW_BYTES))).ravel(),
                                   return_inverse=True)
    key_codes, _ = pd.factorize(np.array(keys_in + keys_out, dtype=object))
    n = len(entering)
    entering = entering.assign(flow=flow_codes[:n], key=key_codes[:n])
    leaving = leaving.assign(flow=flow_codes[n:], key=key_codes[n:])
    names = [_flow_name(bytes(u)) for u in unique.tolist()]
    frame = _packet_frame(match_packets(entering, leaving), names)
    frame.attrs.update(in_file=str(caps[0].path), out_file=str(caps[1].path),
                       torn_tail=[str(c.path) for c in caps if c.torn_tail])
    return frame


def _packet_frame(matched: pd.DataFrame, names: list[tuple[str, str]]) -> pd.DataFrame:
    flow_names = np.array([n for n, _ in names] or [""], dtype=object)
    proto_names = np.array([p for _, p in names] or [""], dtype=object)
    codes = matched["flow"].to_numpy(dtype=np.int64)
    enqueue = matched["ts"].astype("Int64")
    dequeue = matched["dequeue"]
    frame = pd.DataFrame({
        "flow": pd.array(flow_names[codes], dtype="string"),
        "proto": pd.array(proto_names[codes], dtype="string"),
        "size_bytes": matched["size"].astype("Int64"),
        "enqueue_ns": enqueue, "dequeue_ns": dequeue,
        "queue_delay_ms": (dequeue - enqueue).astype("Float64") / 1e6,
        "dropped": dequeue.isna().astype("boolean")})
    frame = frame.sort_values("enqueue_ns", kind="stable", ignore_index=True)
    frame = frame.astype(PACKET_COLUMNS)
    frame.attrs["unmatched_leaving"] = matched.attrs["unmatched_leaving"]
    return frame


def flow_series(packets: pd.DataFrame, bin_ms: float = 100.0) -> pd.DataFrame:
    """Per flow and time bin of ``bin_ms``: ``time_s`` (the bin's start, s since the first
    packet entered), ``throughput_mbps`` (IP bytes that left in the bin × 8 / the bin's
    length, Mbit/s), ``queue_delay_ms_mean`` and ``queue_delay_ms_p95`` (of the packets
    that left in the bin; <NA> in a bin where none left) and ``drops`` (packets that entered
    in the bin and never left). A flow has a row for every bin from its first packet's to
    its last one's (bins without traffic: 0 and <NA>); the last bin of the capture may be
    partly empty, which lowers its throughput. Sorted by flow, then time."""
    if bin_ms <= 0:
        raise ValueError(f"bin_ms must be positive, not {bin_ms}")
    if packets.empty:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in SERIES_COLUMNS.items()})
    bin_ns = bin_ms * 1e6
    start = int(packets["enqueue_ns"].min())
    dropped = packets["dropped"].to_numpy(dtype=bool, na_value=False)
    left = packets[~dropped]
    out_bin = ((left["dequeue_ns"].to_numpy(dtype=np.int64) - start) // bin_ns).astype(np.int64)
    sent = pd.DataFrame({"flow": left["flow"].to_numpy(dtype=object), "bin": out_bin,
                         "size": left["size_bytes"].to_numpy(dtype=np.int64),
                         "delay": left["queue_delay_ms"].to_numpy(dtype=np.float64)})
    by = sent.groupby(["flow", "bin"], sort=False)
    stats = pd.DataFrame({"bytes": by["size"].sum(), "mean": by["delay"].mean(),
                          "p95": by["delay"].quantile(0.95)})
    in_bin = ((packets["enqueue_ns"].to_numpy(dtype=np.int64) - start) // bin_ns
              ).astype(np.int64)
    lost = pd.DataFrame({"flow": packets["flow"].to_numpy(dtype=object), "bin": in_bin,
                         "drop": dropped.astype(np.int64)})
    drops = lost.groupby(["flow", "bin"], sort=False)["drop"].sum()
    return _series_frame(stats, drops, bin_ns)


def _series_frame(stats: pd.DataFrame, drops: pd.Series, bin_ns: float) -> pd.DataFrame:
    """Every bin of each flow from its first to its last, the figures joined in."""
    spans = pd.concat([stats.reset_index()[["flow", "bin"]],
                       drops.reset_index()[["flow", "bin"]]]).groupby("flow")["bin"]
    lo, hi = spans.min(), spans.max()
    counts = (hi - lo + 1).to_numpy()
    flows = np.repeat(lo.index.to_numpy(dtype=object), counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    grid = pd.MultiIndex.from_arrays([flows, np.repeat(lo.to_numpy(), counts) + offsets],
                                     names=["flow", "bin"])
    full = stats.reindex(grid).join(drops.reindex(grid).rename("drops"))
    seconds = bin_ns / 1e9
    frame = pd.DataFrame({
        "time_s": grid.get_level_values("bin").to_numpy(dtype=np.float64) * seconds,
        "flow": grid.get_level_values("flow").to_numpy(dtype=object),
        "throughput_mbps": full["bytes"].fillna(0).to_numpy(dtype=np.float64) * 8
        / seconds / 1e6,
        "queue_delay_ms_mean": full["mean"].to_numpy(dtype=np.float64),
        "queue_delay_ms_p95": full["p95"].to_numpy(dtype=np.float64),
        "drops": full["drops"].fillna(0).to_numpy(dtype=np.int64)})
    frame = frame.astype(SERIES_COLUMNS)
    for col in ("queue_delay_ms_mean", "queue_delay_ms_p95"):  # NaN -> <NA>
        frame[col] = frame[col].mask(frame[col].isna())
    return frame.sort_values(["flow", "time_s"], ignore_index=True)
