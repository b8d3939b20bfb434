"""Classic pcap files (``tcpdump -w``): per-direction packet/byte counts and size distribution.

Unlike the other parsers this one reads a file: captures of a large download hold millions
of records, so :func:`summarize_pcap` streams the file in big chunks and decodes only the
few header fields it needs (``struct.unpack_from`` on a memoryview) instead of taking the
whole text. A gzip-compressed capture is read transparently (detected by its magic bytes,
not by the file name).

Supported: classic pcap in both byte orders with micro- or nanosecond timestamps; link
types Ethernet (1, with 802.1Q/802.1ad VLAN tags), Linux cooked capture SLL (113) and SLL2
(276, what ``tcpdump -i any`` writes with libpcap >= 1.10), raw IP (101, 228, 229) and BSD
loopback (0, 108); IPv4 and IPv6 (extension headers are skipped when captured); UDP and TCP.
pcapng (``dumpcap``/Wireshark's default) is recognised and refused with a :class:`ParseError`.
"""

from __future__ import annotations

import gzip
import io
import ipaddress
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from interop_runner.parsers.common import ParseError

__all__ = ["PcapSummary", "summarize_pcap", "SIZE_BUCKETS"]

#: Labels of :attr:`PcapSummary.size_histogram`, by IP length (header included), in order.
SIZE_BUCKETS: tuple[str, ...] = ("<=100", "101-500", "501-1000", "1001-1300", "1301-1500", ">1500")


@dataclass(slots=True)
class PcapSummary:
    """What one capture holds.

    Directions are relative to the ``local_ip`` given to :func:`summarize_pcap`: ``out``
    when the packet's source address is local, ``in`` when its destination is, ``other``
    for everything else (other hosts, non-IP frames such as ARP). The ``bytes_*`` counters
    add up each record's ORIGINAL length (``orig_len``: the frame as the capture point saw
    it, link header included; a Linux cooked header counts 16 (SLL) or 20 (SLL2) bytes
    instead of Ethernet's 14), not the snap-length-truncated bytes stored in the file.

    ``udp_packets``/``tcp_packets``/``other_packets`` split all records by transport
    protocol (``other`` includes ICMP, ARP and anything non-IP); they add up to ``packets``.
    ``size_histogram`` (keys :data:`SIZE_BUCKETS`), ``merged_packets`` and
    ``max_ip_length`` use the IP length (IPv4 total length, IPv6 payload length + 40) of
    IP packets only. An IP packet longer than the MTU cannot have been on the wire as
    such: segmentation offload (GSO/TSO on the sending host, GRO on the receiving one)
    showed the capture point a merged super-packet, and the packet counts are then lower
    than the wire's. ``first_ts``/``last_ts`` are the epoch seconds of the first and last
    record (None for a capture without records).
    """

    packets_in: int = 0
    packets_out: int = 0
    packets_other: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    bytes_other: int = 0
    udp_packets: int = 0
    tcp_packets: int = 0
    other_packets: int = 0
    first_ts: float | None = None
    last_ts: float | None = None
    size_histogram: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SIZE_BUCKETS, 0))
    merged_packets: int = 0
    max_ip_length: int = 0
    mtu: int = 1500
    link_type: int = 0
    snaplen: int = 0
    nanosecond: bool = False
    truncated_records: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def packets(self) -> int:
        """All records in the capture."""
        return self.packets_in + self.packets_out + self.packets_other

    @property
    def duration_s(self) -> float | None:
        """Seconds from the first to the last record (None without records)."""
        if self.first_ts is None or self.last_ts is None:
            return None
        return self.last_ts - self.first_ts


_CHUNK = 4 << 20
#: Largest captured length we accept in a record (libpcap's MAXIMUM_SNAPLEN); a bigger
#: value means the file is corrupt, not that the packet was big.
_MAX_INCL = 262144

_MAGIC_US = 0xA1B2C3D4
_MAGIC_NS = 0xA1B23C4D
_MAGIC_MODIFIED = 0xA1B2CD34
_PCAPNG_SHB = 0x0A0D0D0A

_LINK_NULL = 0
_LINK_ETHERNET = 1
_LINK_RAW = 101
_LINK_LOOP = 108
_LINK_SLL = 113
_LINK_IPV4 = 228
_LINK_IPV6 = 229
_LINK_SLL2 = 276
_LINK_NAMES = {
    _LINK_NULL: "BSD loopback",
    _LINK_ETHERNET: "Ethernet",
    _LINK_RAW: "raw IP",
    _LINK_LOOP: "OpenBSD loopback",
    _LINK_SLL: "Linux cooked (SLL)",
    _LINK_IPV4: "raw IPv4",
    _LINK_IPV6: "raw IPv6",
    _LINK_SLL2: "Linux cooked v2 (SLL2)",
}

# How a record's link header is decoded (one small int, so the hot loop branches cheaply):
# the ethertype sits at a fixed offset (Ethernet, SLL, SLL2), or the IP version is read
# from the first nibble (raw IP), or a 4-byte address family precedes IP (loopback).
_K_ETHERTYPE = 0
_K_RAW = 1
_K_AF = 2

_ETH_IPV4 = 0x0800
_ETH_IPV6 = 0x86DD
_ETH_VLAN = (0x8100, 0x88A8, 0x9100)
# BSD address families for IPv6 (NetBSD/OpenBSD 24, FreeBSD 28, Darwin 30).
_AF_INET6 = (24, 28, 30)
# IPv6 extension headers with the generic (next header, length in 8-octet units) layout.
_IPV6_EXT = (0, 43, 60)
_IPV6_FRAGMENT = 44
_IPV6_AH = 51


def _open(path: Path) -> io.BufferedIOBase:
    f: io.BufferedIOBase = open(path, "rb")
    try:
        magic = f.read(2)
    except BaseException:
        f.close()
        raise
    if magic == b"\x1f\x8b":
        f.close()
        return gzip.open(path, "rb")
    f.seek(0)
    return f


def _read_full(f: io.BufferedIOBase, n: int) -> bytes:
    """Read ``n`` bytes (fewer only at end of file)."""
    data = f.read(n)
    if len(data) >= n or not data:
        return data
    parts = [data]
    got = len(data)
    while got < n:
        more = f.read(n - got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def _bucket(ip_len: int) -> int:
    if ip_len <= 100:
        return 0
    if ip_len <= 500:
        return 1
    if ip_len <= 1000:
        return 2
    if ip_len <= 1300:
        return 3
    if ip_len <= 1500:
        return 4
    return 5


def summarize_pcap(path: str | Path, local_ip: str, mtu: int = 1500) -> PcapSummary:
    """Read a classic pcap file (optionally gzip-compressed) and summarise it.

    ``local_ip`` (IPv4 or IPv6, e.g. the capturing node's test address) decides the
    direction of each packet; ``mtu`` is the capture interface's MTU for the merged-packet
    check. A last record cut short (tcpdump killed while writing, a copy in progress) is
    ignored and reported in ``warnings``/``truncated_records``.

    Raises :class:`ParseError` for a file that is not classic pcap (pcapng, garbage, empty)
    or whose records are corrupt, and ``ValueError`` for a malformed ``local_ip``.
    """
    local = ipaddress.ip_address(local_ip).packed
    path = Path(path)
    with _open(path) as f:
        try:
            return _summarize(f, local, mtu)
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            raise ParseError(f"corrupt gzip stream: {exc}") from exc


def _parse_global_header(head: bytes) -> tuple[str, bool, int, int]:
    """Return (struct byte-order prefix, nanosecond, snaplen, link type)."""
    if not head:
        raise ParseError("empty file: not a pcap capture")
    if len(head) >= 4:
        (magic_le,) = struct.unpack_from("<I", head)
        if magic_le == _PCAPNG_SHB:
            raise ParseError(
                "pcapng format is not supported: write classic pcap (tcpdump -w) "
                "or convert it (editcap -F pcap in.pcapng out.pcap)"
            )
        for order in ("<", ">"):
            (magic,) = struct.unpack_from(order + "I", head)
            if magic in (_MAGIC_US, _MAGIC_NS):
                break
            if magic == _MAGIC_MODIFIED:
                raise ParseError("Kuznetzov's modified pcap format is not supported")
        else:
            raise ParseError(f"not a pcap file (magic {head[:4].hex()})")
    else:
        raise ParseError(f"not a pcap file ({len(head)} bytes)")
    if len(head) < 24:
        raise ParseError(f"pcap global header truncated ({len(head)} of 24 bytes)")
    major, _minor, _zone, _sigfigs, snaplen, linktype = struct.unpack_from(
        order + "HHiIII", head, 4)
    if major != 2:
        raise ParseError(f"unsupported pcap version {major}")
    # The upper bits of the link-type field may carry FCS information (pcap spec).
    return order, magic == _MAGIC_NS, snaplen, linktype & 0xFFFF


def _summarize(f: io.BufferedIOBase, local: bytes, mtu: int) -> PcapSummary:
    head = _read_full(f, 24)
    order, nano, snaplen, linktype = _parse_global_header(head)
    if linktype == _LINK_ETHERNET:
        kind, et_off, l3_off = _K_ETHERTYPE, 12, 14
    elif linktype == _LINK_SLL:
        kind, et_off, l3_off = _K_ETHERTYPE, 14, 16
    elif linktype == _LINK_SLL2:
        kind, et_off, l3_off = _K_ETHERTYPE, 0, 20
    elif linktype in (_LINK_RAW, _LINK_IPV4, _LINK_IPV6):
        kind, et_off, l3_off = _K_RAW, 0, 0
    elif linktype in (_LINK_NULL, _LINK_LOOP):
        kind, et_off, l3_off = _K_AF, 0, 4
    else:
        known = ", ".join(f"{k} {v}" for k, v in sorted(_LINK_NAMES.items()))
        raise ParseError(f"unsupported pcap link type {linktype} (supported: {known})")
    # Loopback's family is in the writer's byte order (NULL) or network order (LOOP).
    af_fmt = (order if linktype == _LINK_NULL else ">") + "I"

    rec_hdr = struct.Struct(order + "IIII").unpack_from
    u16 = struct.Struct(">H").unpack_from
    af_unpack = struct.Struct(af_fmt).unpack_from
    # IPv4: total length, protocol, source, destination as 4-byte strings.
    ip4 = struct.Struct(">2xH5xB2x4s4s").unpack_from
    # IPv6: payload length, next header, source, destination.
    ip6 = struct.Struct(">4xHB1x16s16s").unpack_from
    if kind == _K_ETHERTYPE:
        fast4 = struct.Struct(f">{et_off}xH{l3_off - et_off - 2}x2xH5xB2x4s4s").unpack_from
        fast_min = l3_off + 20
    else:
        fast4 = ip4  # never called
        fast_min = 1 << 62
    max_incl = max(snaplen, _MAX_INCL)

    # Counters are locals (the loop runs per packet); index 0 in, 1 out, 2 other.
    n_pk = [0, 0, 0]
    n_by = [0, 0, 0]
    hist = [0, 0, 0, 0, 0, 0]
    n_udp = n_tcp = n_oth = 0
    merged = 0
    max_ip = 0
    first: tuple[int, int] | None = None
    last_s = last_f = 0
    records = 0

    leftover = b""
    eof = False
    truncated = 0
    while not eof:
        chunk = f.read(_CHUNK)
        if not chunk:
            eof = True
            data = leftover
        else:
            data = leftover + chunk if leftover else chunk
        n = len(data)
        mv = memoryview(data)
        pos = 0
        while pos + 16 <= n:
            ts_s, ts_f, incl, orig = rec_hdr(mv, pos)
            if incl > max_incl:
                raise ParseError(
                    f"record {records + 1} (after {records} records): captured length "
                    f"{incl} exceeds the maximum {max_incl}; the file is corrupt"
                )
            end = pos + 16 + incl
            if end > n:
                break
            records += 1
            if first is None:
                first = (ts_s, ts_f)
            last_s = ts_s
            last_f = ts_f
            p = pos + 16
            pos = end

            if incl >= fast_min:
                # Fast path, link header with an ethertype followed by an IPv4 header.
                et, ip_len, proto, src, dst = fast4(mv, p)
                if et == _ETH_IPV4:
                    if ip_len == 0:  # TSO/GRO packet over 64 KiB (BIG TCP): length from the frame
                        ip_len = orig - l3_off
                    ver = 4
                else:
                    ver = 0
            else:
                ver = 0
            if ver == 0:
                # Link layer -> IP version (4, 6 or 0 for non-IP) and the IP header offset.
                l3 = p + l3_off
                if kind == _K_ETHERTYPE:
                    if incl >= l3_off:
                        (et,) = u16(mv, p + et_off)
                        if et == _ETH_IPV4:
                            ver = 4
                        elif et == _ETH_IPV6:
                            ver = 6
                        elif et in _ETH_VLAN and linktype == _LINK_ETHERNET:
                            off = 12
                            while et in _ETH_VLAN and off + 6 <= incl:
                                off += 4
                                (et,) = u16(mv, p + off)
                            l3 = p + off + 2
                            ver = 4 if et == _ETH_IPV4 else 6 if et == _ETH_IPV6 else 0
                elif kind == _K_RAW:
                    if incl >= 1:
                        ver = mv[p] >> 4
                elif incl >= 4:
                    (af,) = af_unpack(mv, p)
                    ver = 4 if af == 2 else 6 if af in _AF_INET6 else 0

                stored = end - l3  # IP bytes present in the file
                if ver == 4 and stored >= 20:
                    ip_len, proto, src, dst = ip4(mv, l3)
                    if ip_len == 0:
                        ip_len = orig - (l3 - p)
                elif ver == 6 and stored >= 40:
                    ip_len, proto, src, dst = ip6(mv, l3)
                    if ip_len == 0:  # jumbogram / BIG TCP
                        ip_len = orig - (l3 - p)
                    else:
                        ip_len += 40
                    if proto in _IPV6_EXT or proto == _IPV6_FRAGMENT or proto == _IPV6_AH:
                        proto = _ipv6_upper(mv, l3 + 40, end, proto)
                else:
                    # Non-IP frame, or an IP header the snap length cut short.
                    if ver == 4 or ver == 6:
                        ip_len = orig - (l3 - p)
                        if ip_len > max_ip:
                            max_ip = ip_len
                        if ip_len > mtu:
                            merged += 1
                        hist[_bucket(ip_len)] += 1
                    n_oth += 1
                    n_pk[2] += 1
                    n_by[2] += orig
                    continue

            if proto == 17:
                n_udp += 1
            elif proto == 6:
                n_tcp += 1
            else:
                n_oth += 1
            if src == local:
                d = 1
            elif dst == local:
                d = 0
            else:
                d = 2
            n_pk[d] += 1
            n_by[d] += orig
            if ip_len <= 100:
                hist[0] += 1
            elif ip_len <= 500:
                hist[1] += 1
            elif ip_len <= 1000:
                hist[2] += 1
            elif ip_len <= 1300:
                hist[3] += 1
            elif ip_len <= 1500:
                hist[4] += 1
            else:
                hist[5] += 1
            if ip_len > mtu:
                merged += 1
            if ip_len > max_ip:
                max_ip = ip_len
        mv.release()
        leftover = data[pos:]
        if eof and leftover:
            truncated = 1

    scale = 1e-9 if nano else 1e-6
    s = PcapSummary(
        packets_in=n_pk[0],
        packets_out=n_pk[1],
        packets_other=n_pk[2],
        bytes_in=n_by[0],
        bytes_out=n_by[1],
        bytes_other=n_by[2],
        udp_packets=n_udp,
        tcp_packets=n_tcp,
        other_packets=n_oth,
        first_ts=None if first is None else first[0] + first[1] * scale,
        last_ts=None if first is None else last_s + last_f * scale,
        size_histogram=dict(zip(SIZE_BUCKETS, hist)),
        merged_packets=merged,
        max_ip_length=max_ip,
        mtu=mtu,
        link_type=linktype,
        snaplen=snaplen,
        nanosecond=nano,
        truncated_records=truncated,
    )
    if truncated:
        s.warnings.append(
            f"last record truncated ({len(leftover)} bytes at the end of the file) and ignored: "
            "the capture was cut short (tcpdump killed, or the file copied while written)"
        )
    if merged:
        s.warnings.append(
            f"{merged} packets larger than the MTU {mtu} (largest IP length {max_ip}): "
            "segmentation offload (GSO/GRO/TSO) merged packets at the capture point; "
            "packet counts are not wire counts"
        )
    if records and n_pk[0] == 0 and n_pk[1] == 0:
        s.warnings.append(
            f"none of the {records} packets has the local address {ipaddress.ip_address(local)} "
            "as source or destination"
        )
    return s


def _ipv6_upper(mv: memoryview, off: int, end: int, nh: int) -> int:
    """Follow IPv6 extension headers from ``off``; the upper-layer protocol, or -1 if unseen."""
    for _ in range(8):
        if nh in _IPV6_EXT:
            step = 0
        elif nh == _IPV6_FRAGMENT:
            step = 1
        elif nh == _IPV6_AH:
            step = 2
        else:
            return nh
        if off + 2 > end:
            return -1  # the snap length cut the extension header
        nxt = mv[off]
        if step == 0:
            off += 8 + mv[off + 1] * 8
        elif step == 1:
            off += 8
        else:
            off += (mv[off + 1] + 2) * 4
        nh = nxt
    return -1
