"""Classic pcap summary (interop_runner.parsers.pcap)."""

from __future__ import annotations

import gzip
import ipaddress
import struct
import time
from pathlib import Path

import pytest

from interop_runner.parsers import pcap as pcap_mod
from interop_runner.parsers.common import ParseError
from interop_runner.parsers.pcap import SIZE_BUCKETS, PcapSummary, summarize_pcap

DATA = Path(__file__).parent / "data" / "pcap"

LOCAL4 = "198.18.100.2"
PEER4 = "198.18.100.1"
LOCAL6 = "fd00:100::2"
PEER6 = "fd00:100::1"


# ---------------------------------------------------------------- hand-built captures


def ipv4(src: str, dst: str, proto: int, total_len: int) -> bytes:
    """A 20-byte IPv4 header (only the header: the payload is never stored, as with -s)."""
    s = bytes(int(x) for x in src.split("."))
    d = bytes(int(x) for x in dst.split("."))
    return struct.pack(">BBHHHBBH4s4s", 0x45, 0, total_len, 1, 0x4000, 64, proto, 0, s, d)


def ipv6(src: str, dst: str, nh: int, payload_len: int) -> bytes:
    s = ipaddress.IPv6Address(src).packed
    d = ipaddress.IPv6Address(dst).packed
    return struct.pack(">IHBB16s16s", 0x60000000, payload_len, nh, 64, s, d)


def l4(proto: int) -> bytes:
    return b"\x11\x51\x22\x22" + b"\x00" * 4 if proto == 17 else b"\x1f\x90\xa2\x14" + b"\x00" * 16


def eth(ethertype: int, payload: bytes) -> bytes:
    return b"\x02" * 6 + b"\x04" * 6 + struct.pack(">H", ethertype) + payload


def sll(ethertype: int, payload: bytes) -> bytes:
    return struct.pack(">HHH8sH", 0, 1, 6, b"\x02" * 6, ethertype) + payload


def sll2(ethertype: int, payload: bytes) -> bytes:
    return struct.pack(">HHIHBB8s", ethertype, 0, 3, 1, 0, 6, b"\x02" * 6) + payload


def null(family: int, payload: bytes, order: str) -> bytes:
    return struct.pack(order + "I", family) + payload


def build(records: list[tuple[int, int, bytes, int]], *, order: str = "<", nano: bool = False,
          linktype: int = 1, snaplen: int = 96) -> bytes:
    """A classic pcap: records are (ts_sec, ts_frac, stored bytes, orig_len)."""
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    out = [struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)]
    for sec, frac, data, orig in records:
        out.append(struct.pack(order + "IIII", sec, frac, len(data), orig) + data)
    return b"".join(out)


def write(tmp_path: Path, data: bytes, name: str = "c.pcap") -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


# One download-like packet mix, as (IP header + transport bytes, IP length): in = to LOCAL4.
def packet_mix(v6: bool = False) -> list[tuple[bytes, int, int]]:
    """(IP packet bytes as captured, IP length, ethertype)."""
    pk: list[tuple[bytes, int, int]] = []
    if v6:
        for nh, plen, src, dst in [(17, 1212, PEER6, LOCAL6), (6, 32, LOCAL6, PEER6),
                                   (17, 1460, PEER6, LOCAL6), (58, 24, PEER6, "ff02::1")]:
            pk.append((ipv6(src, dst, nh, plen) + l4(nh)[: 8], plen + 40, 0x86DD))
    else:
        for proto, ln, src, dst in [(17, 1252, PEER4, LOCAL4), (6, 52, LOCAL4, PEER4),
                                    (17, 1500, PEER4, LOCAL4), (1, 84, PEER4, "198.18.100.9")]:
            pk.append((ipv4(src, dst, proto, ln) + l4(proto)[:8], ln, 0x0800))
    return pk


LINKS = {
    1: (eth, 14),
    113: (sll, 16),
    276: (sll2, 20),
}


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("nano", [False, True])
@pytest.mark.parametrize("linktype", [1, 113, 276, 101, 0])
@pytest.mark.parametrize("v6", [False, True])
def test_variants_agree(tmp_path: Path, order: str, nano: bool, linktype: int, v6: bool) -> None:
    frac = 123456789 if nano else 123456
    records = []
    hdr_len = 0
    for i, (ip, ip_len, et) in enumerate(packet_mix(v6)):
        if linktype in LINKS:
            wrap, hdr_len = LINKS[linktype]
            frame = wrap(et, ip)
        elif linktype == 101:
            frame, hdr_len = ip, 0
        else:
            frame, hdr_len = null(30 if v6 else 2, ip, order), 4
        records.append((1_700_000_000 + i, frac, frame, ip_len + hdr_len))
    s = summarize_pcap(write(tmp_path, build(records, order=order, nano=nano, linktype=linktype)),
                       LOCAL6 if v6 else LOCAL4)
    assert (s.packets_in, s.packets_out, s.packets_other) == (2, 1, 1)
    lens = [ln for _, ln, _ in packet_mix(v6)]
    assert s.bytes_in == lens[0] + lens[2] + 2 * hdr_len
    assert s.bytes_out == lens[1] + hdr_len
    assert s.bytes_other == lens[3] + hdr_len
    assert (s.udp_packets, s.tcp_packets, s.other_packets) == (2, 1, 1)
    assert s.first_ts == pytest.approx(1_700_000_000.123456789 if nano else 1_700_000_000.123456,
                                       abs=1e-7)
    assert s.last_ts == pytest.approx(s.first_ts + 3, abs=1e-7)
    assert s.duration_s == pytest.approx(3)
    assert s.size_histogram == {"<=100": 2, "101-500": 0, "501-1000": 0, "1001-1300": 1,
                                "1301-1500": 1, ">1500": 0}
    assert (s.merged_packets, s.max_ip_length) == (0, 1500)
    assert (s.link_type, s.nanosecond, s.snaplen, s.truncated_records) == (linktype, nano, 96, 0)
    assert s.warnings == []
    assert s.packets == 4


def test_histogram_buckets_merged_and_orig_len(tmp_path: Path) -> None:
    lens = [40, 100, 101, 500, 501, 1000, 1001, 1300, 1301, 1500, 1501, 65212]
    records = [(1, 0, eth(0x0800, ipv4(PEER4, LOCAL4, 6, ln) + l4(6))[:96], ln + 14) for ln in lens]
    s = summarize_pcap(write(tmp_path, build(records)), LOCAL4)
    assert list(s.size_histogram) == list(SIZE_BUCKETS)
    assert s.size_histogram == {"<=100": 2, "101-500": 2, "501-1000": 2, "1001-1300": 2,
                                "1301-1500": 2, ">1500": 2}
    # Byte counts use orig_len, not the 54..96 stored bytes.
    assert s.bytes_in == sum(lens) + 14 * len(lens)
    assert (s.merged_packets, s.max_ip_length) == (2, 65212)
    assert s.warnings == [
        "2 packets larger than the MTU 1500 (largest IP length 65212): segmentation offload "
        "(GSO/GRO/TSO) merged packets at the capture point; packet counts are not wire counts"
    ]
    # A jumbo-frame interface: 1501 is no longer merged, but stays in the >1500 bucket.
    s9k = summarize_pcap(write(tmp_path, build(records)), LOCAL4, mtu=9000)
    assert (s9k.merged_packets, s9k.size_histogram[">1500"], s9k.mtu) == (1, 2, 9000)
    assert "MTU 9000" in s9k.warnings[0]


def test_big_tcp_zero_length_vlan_and_short_snap(tmp_path: Path) -> None:
    vlan = b"\x02" * 12 + b"\x81\x00\x00\x64" + b"\x86\xdd" + ipv6(PEER6, LOCAL6, 17, 1000) + l4(17)
    qinq = (b"\x02" * 12 + b"\x88\xa8\x00\x0a\x81\x00\x00\x64\x08\x00"
            + ipv4(LOCAL4, PEER4, 17, 1200) + l4(17))
    records = [
        # BIG TCP: a GRO packet over 64 KiB has IPv4 total length 0; the length is the frame's.
        (1, 0, eth(0x0800, ipv4(PEER4, LOCAL4, 6, 0) + l4(6)), 185_014),
        # ... and IPv6 payload length 0.
        (2, 0, eth(0x86DD, ipv6(PEER6, LOCAL6, 6, 0) + l4(6)), 150_054),
        (3, 0, vlan, 1058),
        (4, 0, qinq, 1222),
        # Snap length so short the IP header is cut: counted as "other", length from the frame.
        (5, 0, eth(0x0800, ipv4(PEER4, LOCAL4, 17, 1400)[:10]), 1414),
        # ARP.
        (6, 0, eth(0x0806, b"\x00\x01\x08\x00\x06\x04\x00\x01" + b"\x00" * 20), 42),
    ]
    s = summarize_pcap(write(tmp_path, build(records, snaplen=262144)), LOCAL6)
    assert s.max_ip_length == 185_000
    assert s.merged_packets == 2
    assert s.size_histogram == {"<=100": 0, "101-500": 0, "501-1000": 0, "1001-1300": 2,
                                "1301-1500": 1, ">1500": 2}
    assert (s.udp_packets, s.tcp_packets, s.other_packets) == (2, 2, 2)
    # Local is IPv6 here: both IPv6 packets are "in", the IPv4 ones and ARP "other".
    assert (s.packets_in, s.packets_out, s.packets_other) == (2, 0, 4)
    assert s.bytes_in == 150_054 + 1058


def test_ipv6_extension_headers(tmp_path: Path) -> None:
    hop_by_hop = bytes([17, 0]) + b"\x00" * 6  # next header UDP, 8 bytes
    frag = bytes([6, 0]) + b"\x00" * 6  # fragment header, next TCP
    cut = ipv6(PEER6, LOCAL6, 0, 500)  # hop-by-hop announced, but the snap length ends here
    records = [
        (1, 0, eth(0x86DD, ipv6(PEER6, LOCAL6, 0, 1008) + hop_by_hop + l4(17)), 1062),
        (1, 0, eth(0x86DD, ipv6(LOCAL6, PEER6, 44, 1008) + frag + l4(6)), 1062),
        (1, 0, eth(0x86DD, cut), 554),
    ]
    s = summarize_pcap(write(tmp_path, build(records)), LOCAL6)
    assert (s.udp_packets, s.tcp_packets, s.other_packets) == (1, 1, 1)
    assert (s.packets_in, s.packets_out) == (2, 1)


def test_linktype_fcs_bits_are_masked(tmp_path: Path) -> None:
    records = [(1, 0, eth(0x0800, ipv4(PEER4, LOCAL4, 17, 100) + l4(17)), 118)]
    s = summarize_pcap(write(tmp_path, build(records, linktype=(1 << 28) | (1 << 27) | 1)), LOCAL4)
    assert (s.link_type, s.udp_packets, s.packets_in) == (1, 1, 1)


def test_header_only_and_foreign_addresses(tmp_path: Path) -> None:
    s = summarize_pcap(write(tmp_path, build([])), LOCAL4)
    assert s == PcapSummary(link_type=1, snaplen=96)
    assert (s.first_ts, s.last_ts, s.duration_s, s.packets, s.warnings) == (None, None, None, 0, [])
    records = [(1, 0, eth(0x0800, ipv4(PEER4, "198.18.100.9", 17, 100) + l4(17)), 114)]
    s = summarize_pcap(write(tmp_path, build(records)), LOCAL4)
    assert s.packets_other == 1
    assert s.warnings == ["none of the 1 packets has the local address 198.18.100.2 as source or "
                          "destination"]


def test_truncated_last_record_is_ignored(tmp_path: Path) -> None:
    records = [(i, 0, eth(0x0800, ipv4(PEER4, LOCAL4, 17, 1252) + l4(17)), 1266) for i in range(5)]
    full = build(records)
    for cut in (1, 10, 41, 42, 50, 57):  # inside the last record's data and inside its header
        data = full[: len(full) - cut]
        for name, blob in (("t.pcap", data), ("t.pcap.gz", gzip.compress(data))):
            s = summarize_pcap(write(tmp_path, blob, name), LOCAL4)
            assert s.packets_in == 4, (cut, name)
            assert s.truncated_records == 1
            assert s.last_ts == 3
            assert len(s.warnings) == 1 and s.warnings[0].startswith("last record truncated")
    # A header cut short is not a capture.
    with pytest.raises(ParseError, match="global header truncated"):
        summarize_pcap(write(tmp_path, full[:20]), LOCAL4)


@pytest.mark.parametrize(
    "blob, message",
    [
        (b"", "empty file"),
        (b"\xd4\xc3", "not a pcap file"),
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "not a pcap file"),
        (bytes(range(256)) * 4, "not a pcap file"),
        (b"\x0a\x0d\x0d\x0a\x1c\x00\x00\x00\x4d\x3c\x2b\x1a" + b"\x00" * 16, "pcapng"),
        (struct.pack("<IHHiIII", 0xA1B2C3D4, 1, 0, 0, 0, 96, 1), "unsupported pcap version 1"),
        (struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 96, 147),
         "unsupported pcap link type 147"),
        (struct.pack("<IHHiIII", 0xA1B2CD34, 2, 4, 0, 0, 96, 1), "modified pcap"),
        (b"\x1f\x8b\x08\x00" + b"\x00" * 6 + b"garbage", "corrupt gzip"),
    ],
)
def test_garbage_raises(tmp_path: Path, blob: bytes, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        summarize_pcap(write(tmp_path, blob), LOCAL4)


def test_corrupt_record_length_raises(tmp_path: Path) -> None:
    good = build([(1, 0, eth(0x0800, ipv4(PEER4, LOCAL4, 17, 100) + l4(17)), 114)])
    bad = good + struct.pack("<IIII", 2, 0, 0x40000000, 0x40000000) + b"\x00" * 100
    with pytest.raises(ParseError, match="record 2 .*captured length 1073741824"):
        summarize_pcap(write(tmp_path, bad), LOCAL4)


def test_bad_local_ip(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        summarize_pcap(write(tmp_path, build([])), "not-an-ip")


# ---------------------------------------------------------------- real captures
# Made with tcpdump -s 96 on a veth pair between two namespaces (see data/pcap/README.md);
# the expected numbers were cross-checked against `tcpdump -nr FILE -e -v`.


def test_real_offload_on_receiver() -> None:
    """Sender TSO/GSO/UDP-GSO on, receiver GRO on: merged TCP and UDP super-packets."""
    s = summarize_pcap(DATA / "veth-rx-offload-on.pcap.gz", LOCAL4)
    assert (s.packets_in, s.packets_out, s.packets_other) == (1217, 92, 4)  # other: ARP
    assert (s.bytes_in, s.bytes_out, s.bytes_other) == (6_007_680, 6087, 168)
    assert (s.udp_packets, s.tcp_packets, s.other_packets) == (1100, 209, 4)
    assert s.size_histogram == {"<=100": 346, "101-500": 162, "501-1000": 128, "1001-1300": 379,
                                "1301-1500": 126, ">1500": 168}
    assert (s.merged_packets, s.max_ip_length) == (168, 65212)
    assert (s.link_type, s.snaplen, s.nanosecond) == (1, 96, False)
    assert s.first_ts == pytest.approx(1795263054.939166, abs=1e-6)
    assert s.last_ts == pytest.approx(1795263060.485560, abs=1e-6)
    assert len(s.warnings) == 1 and s.warnings[0].startswith("168 packets larger than the MTU 1500")


def test_real_gro_only_receiver() -> None:
    """Sender offloads off, receiver GRO on: GRO merges TCP, plain UDP stays wire-sized."""
    s = summarize_pcap(DATA / "veth-rx-gro-only.pcap.gz", LOCAL4)
    assert (s.packets_in, s.packets_out, s.packets_other) == (2130, 129, 0)
    assert (s.bytes_in, s.bytes_out) == (6_046_338, 8529)
    assert (s.udp_packets, s.tcp_packets) == (2000, 259)
    assert s.size_histogram[">1500"] == 68
    assert (s.merged_packets, s.max_ip_length) == (68, 65212)


def test_real_offload_off_nanosecond() -> None:
    """All offloads off: every packet wire-sized; tcpdump --time-stamp-precision=nano."""
    s = summarize_pcap(DATA / "veth-rx-offload-off-ns.pcap.gz", LOCAL4)
    assert (s.packets_in, s.packets_out, s.packets_other) == (3409, 385, 0)
    assert (s.bytes_in, s.bytes_out) == (4_130_740, 25433)
    assert (s.udp_packets, s.tcp_packets) == (2000, 1794)
    assert s.size_histogram == {"<=100": 640, "101-500": 155, "501-1000": 126, "1001-1300": 1375,
                                "1301-1500": 1498, ">1500": 0}
    assert (s.merged_packets, s.max_ip_length, s.nanosecond) == (0, 1500, True)
    assert s.first_ts == pytest.approx(1795263080.346431, abs=1e-6)
    assert s.warnings == []


def test_real_any_sll2_ipv6_sender() -> None:
    """tcpdump -i any (SLL2) on the sending side, IPv6, TSO and UDP GSO on."""
    s = summarize_pcap(DATA / "any-tx-sll2-ipv6.pcap.gz", PEER6)
    assert (s.packets_in, s.packets_out, s.packets_other) == (29, 451, 1)  # other: a router sol.
    assert (s.bytes_in, s.bytes_out, s.bytes_other) == (2683, 1_572_920, 76)
    assert (s.udp_packets, s.tcp_packets, s.other_packets) == (420, 58, 3)  # other: ICMPv6
    assert (s.merged_packets, s.max_ip_length, s.link_type) == (43, 64332, 276)
    assert sum(s.size_histogram.values()) == 481


def test_real_any_sll_uncompressed() -> None:
    s = summarize_pcap(str(DATA / "any-tx-sll.pcap"), PEER4)
    assert (s.packets_in, s.packets_out, s.packets_other) == (15, 221, 0)
    assert (s.bytes_in, s.bytes_out) == (1043, 420_854)
    assert (s.udp_packets, s.tcp_packets) == (205, 31)
    assert (s.merged_packets, s.max_ip_length, s.link_type) == (15, 55076, 113)
    # The same capture seen from an address that is not in it.
    s4 = summarize_pcap(DATA / "any-tx-sll.pcap", "10.0.0.1")
    assert s4.packets_other == 236 and "none of the 236 packets" in s4.warnings[-1]


def test_chunk_boundaries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Records straddling read chunks give the same summary as whole-file reads."""
    path = DATA / "veth-rx-offload-off-ns.pcap.gz"
    whole = summarize_pcap(path, LOCAL4)
    for chunk in (1, 7, 113, 4096):
        monkeypatch.setattr(pcap_mod, "_CHUNK", chunk)
        assert summarize_pcap(path, LOCAL4) == whole


def test_large_synthetic_capture(tmp_path: Path) -> None:
    """250k records (several 4 MiB chunks); prints the throughput (no timing assertion)."""
    data_pk = struct.pack("<IIII", 0, 0, 96, 1514) + eth(0x0800, ipv4(PEER4, LOCAL4, 17, 1500)
                                                        + l4(17) + b"\x00" * 54)
    ack = struct.pack("<IIII", 0, 0, 66, 66) + eth(0x0800, ipv4(LOCAL4, PEER4, 6, 52) + l4(6)
                                                   + b"\x00" * 12)
    assert len(data_pk) == 16 + 96 and len(ack) == 16 + 66
    blob = build([]) + (data_pk * 4 + ack) * 50_000
    path = write(tmp_path, blob)
    t0 = time.perf_counter()
    s = summarize_pcap(path, LOCAL4)
    dt = time.perf_counter() - t0
    print(f"\n{s.packets} packets in {dt:.3f} s: {s.packets / dt:,.0f} packets/s")
    assert (s.packets_in, s.packets_out) == (200_000, 50_000)
    assert (s.bytes_in, s.bytes_out) == (200_000 * 1514, 50_000 * 66)
    assert s.size_histogram["1301-1500"] == 200_000 and s.size_histogram["<=100"] == 50_000
