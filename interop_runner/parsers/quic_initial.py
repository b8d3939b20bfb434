"""The TLS handshake as seen on the wire: decrypt QUIC v1 Initial packets from a pcap.

Initial packets are protected with keys derived from the client's first Destination
Connection ID (RFC 9001, section 5.2), so any observer can read the ClientHello and the
ServerHello in them. That tells, independently of what an implementation claims, which
cipher suites the client offered and which one the server chose.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from interop_runner.parsers.common import ParseError

QUIC_V1 = 0x00000001
INITIAL_SALT_V1 = bytes.fromhex("38762cf7f55934b34d179ae6a4c80cadccbb7f0a")
CIPHER_SUITES = {0x1301: "TLS_AES_128_GCM_SHA256", 0x1302: "TLS_AES_256_GCM_SHA384",
                 0x1303: "TLS_CHACHA20_POLY1305_SHA256", 0x1304: "TLS_AES_128_CCM_SHA256",
                 0x1305: "TLS_AES_128_CCM_8_SHA256"}
_LINK_ETHERNET, _LINK_RAW, _LINK_SLL, _LINK_IPV4, _LINK_IPV6 = 1, 101, 113, 228, 229


@dataclass
class InitialHandshake:
    """What the Initial packets of one connection show."""

    client: str  # "ip:port"
    server: str
    offered: list[str] = field(default_factory=list)  # client's cipher suites, in its order
    selected: str | None = None  # the server's choice (ServerHello)
    alpn_offered: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------- crypto ----
def _hkdf_extract(salt: bytes, ikm: bytes) -> bytes:
    return hmac.new(salt, ikm, hashlib.sha256).digest()


def _hkdf_expand_label(secret: bytes, label: str, length: int) -> bytes:
    full = b"tls13 " + label.encode()
    info = struct.pack(">HB", length, len(full)) + full + b"\x00"
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(secret, block + info + bytes([counter]), hashlib.sha256).digest()
        out += block
        counter += 1
    return out[:length]


@dataclass
class _Keys:
    key: bytes
    iv: bytes
    hp: bytes


def initial_keys(dcid: bytes) -> tuple[_Keys, _Keys]:
    """(client, server) Initial keys for the client's first Destination Connection ID."""
    initial = _hkdf_extract(INITIAL_SALT_V1, dcid)
    out = []
    for label in ("client in", "server in"):
        secret = _hkdf_expand_label(initial, label, 32)
        out.append(_Keys(_hkdf_expand_label(secret, "quic key", 16),
                         _hkdf_expand_label(secret, "quic iv", 12),
                         _hkdf_expand_label(secret, "quic hp", 16)))
    return out[0], out[1]


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    if pos >= len(buf):
        raise ParseError("truncated variable-length integer")
    first = buf[pos]
    size = 1 << (first >> 6)
    if pos + size > len(buf):
        raise ParseError("truncated variable-length integer")
    value = first & 0x3F
    for b in buf[pos + 1:pos + size]:
        value = (value << 8) | b
    return value, pos + size


@dataclass
class _LongHeader:
    dcid: bytes
    pn_offset: int
    end: int  # end of this packet inside the datagram


def _initial_header(data: bytes, pos: int) -> _LongHeader | None:
    """Parse a long-header packet at ``pos``; None unless it is a QUIC v1 Initial."""
    if len(data) - pos < 7 or not data[pos] & 0x80:
        return None
    (version,) = struct.unpack_from(">I", data, pos + 1)
    if version != QUIC_V1 or (data[pos] & 0x30) >> 4 != 0:
        return None
    p = pos + 5
    dcid = data[p + 1:p + 1 + data[p]]
    p += 1 + data[p]
    p += 1 + data[p]  # source connection id
    token_len, p = _varint(data, p)
    p += token_len
    length, p = _varint(data, p)
    return _LongHeader(dcid, p, p + length)


def _decrypt(data: bytes, pos: int, hdr: _LongHeader, keys: _Keys) -> bytes | None:
    """Remove header protection and decrypt one Initial packet; None if it does not verify."""
    sample = data[hdr.pn_offset + 4:hdr.pn_offset + 20]
    if len(sample) < 16 or hdr.end > len(data):
        return None
    enc = Cipher(algorithms.AES(keys.hp), modes.ECB()).encryptor()
    mask = enc.update(sample) + enc.finalize()
    first = data[pos] ^ (mask[0] & 0x0F)
    pn_len = (first & 0x03) + 1
    pn_bytes = bytes(b ^ m for b, m in zip(data[hdr.pn_offset:hdr.pn_offset + pn_len],
                                           mask[1:1 + pn_len]))
    header = bytes([first]) + data[pos + 1:hdr.pn_offset] + pn_bytes
    nonce = bytearray(keys.iv)
    for i, b in enumerate(pn_bytes.rjust(12, b"\0")):
        nonce[i] ^= b
    try:
        return AESGCM(keys.key).decrypt(bytes(nonce), data[hdr.pn_offset + pn_len:hdr.end],
                                        header)
    except Exception:  # cryptography raises InvalidTag: not an Initial of this connection
        return None


def _crypto_frames(payload: bytes) -> Iterator[tuple[int, bytes]]:
    """(offset, data) of the CRYPTO frames in a decrypted Initial payload."""
    p = 0
    while p < len(payload):
        ftype = payload[p]
        p += 1
        if ftype in (0x00, 0x01):  # PADDING, PING
            continue
        if ftype in (0x02, 0x03):  # ACK
            _, p = _varint(payload, p)
            _, p = _varint(payload, p)
            count, p = _varint(payload, p)
            _, p = _varint(payload, p)
            for _ in range(2 * count + (3 if ftype == 0x03 else 0)):
                _, p = _varint(payload, p)
        elif ftype == 0x06:  # CRYPTO
            offset, p = _varint(payload, p)
            length, p = _varint(payload, p)
            yield offset, payload[p:p + length]
            p += length
        else:  # CONNECTION_CLOSE or anything else ends what we need
            return


# ------------------------------------------------------------------------------ pcap ----
def _udp_datagrams(path: Path) -> Iterator[tuple[str, str, bytes]]:
    """(source "ip:port", destination "ip:port", UDP payload) of each captured datagram."""
    data = path.read_bytes()
    if len(data) < 24:
        raise ParseError(f"{path}: not a pcap file")
    for order in ("<", ">"):
        (magic,) = struct.unpack_from(order + "I", data)
        if magic in (0xA1B2C3D4, 0xA1B23C4D):
            break
    else:
        raise ParseError(f"{path}: not a classic pcap file")
    (linktype,) = struct.unpack_from(order + "I", data, 20)
    linktype &= 0xFFFF
    pos = 24
    while pos + 16 <= len(data):
        incl = struct.unpack_from(order + "I", data, pos + 8)[0]
        pkt = data[pos + 16:pos + 16 + incl]
        pos += 16 + incl
        if linktype == _LINK_ETHERNET and len(pkt) >= 14:
            ethertype, l3 = struct.unpack_from(">H", pkt, 12)[0], 14
            if ethertype == 0x8100 and len(pkt) >= 18:
                ethertype, l3 = struct.unpack_from(">H", pkt, 16)[0], 18
        elif linktype == _LINK_SLL and len(pkt) >= 16:
            ethertype, l3 = struct.unpack_from(">H", pkt, 14)[0], 16
        elif linktype in (_LINK_RAW, _LINK_IPV4, _LINK_IPV6) and pkt:
            ethertype, l3 = (0x0800 if pkt[0] >> 4 == 4 else 0x86DD), 0
        else:
            continue
        if ethertype == 0x0800 and len(pkt) >= l3 + 20 and pkt[l3 + 9] == 17:
            ihl = (pkt[l3] & 0x0F) * 4
            src, dst = pkt[l3 + 12:l3 + 16], pkt[l3 + 16:l3 + 20]
            udp = l3 + ihl
        elif ethertype == 0x86DD and len(pkt) >= l3 + 40 and pkt[l3 + 6] == 17:
            src, dst = pkt[l3 + 8:l3 + 24], pkt[l3 + 24:l3 + 40]
            udp = l3 + 40
        else:
            continue
        if len(pkt) < udp + 8:
            continue
        sport, dport = struct.unpack_from(">HH", pkt, udp)
        yield (f"{ipaddress.ip_address(src)}:{sport}", f"{ipaddress.ip_address(dst)}:{dport}",
               pkt[udp + 8:])


# --------------------------------------------------------------------------- TLS parse ----
def _hello(stream: bytes, want_type: int) -> bytes | None:
    """The body of the first handshake message if it has ``want_type`` and is complete."""
    if len(stream) < 4 or stream[0] != want_type:
        return None
    length = int.from_bytes(stream[1:4], "big")
    return stream[4:4 + length] if len(stream) >= 4 + length else None


def _client_hello(body: bytes, hs: InitialHandshake) -> None:
    p = 2 + 32
    p += 1 + body[p]  # legacy session id
    (n,) = struct.unpack_from(">H", body, p)
    suites = struct.unpack_from(f">{n // 2}H", body, p + 2)
    hs.offered = [CIPHER_SUITES.get(s, f"0x{s:04x}") for s in suites if s in CIPHER_SUITES]
    p += 2 + n
    p += 1 + body[p]  # compression methods
    if p + 2 > len(body):
        return
    (ext_total,) = struct.unpack_from(">H", body, p)
    p += 2
    end = min(len(body), p + ext_total)
    while p + 4 <= end:
        ext, length = struct.unpack_from(">HH", body, p)
        if ext == 16:  # application_layer_protocol_negotiation
            q, stop = p + 6, p + 4 + length
            while q < stop:
                size = body[q]
                hs.alpn_offered.append(body[q + 1:q + 1 + size].decode(errors="replace"))
                q += 1 + size
        p += 4 + length


def _server_hello(body: bytes) -> str | None:
    p = 2 + 32
    p += 1 + body[p]
    (suite,) = struct.unpack_from(">H", body, p)
    return CIPHER_SUITES.get(suite, f"0x{suite:04x}")


def _assemble(chunks: dict[int, bytes]) -> bytes:
    out = b""
    for offset in sorted(chunks):
        if offset > len(out):
            break
        out += chunks[offset][len(out) - offset:]
    return out


def read_handshakes(path: str | Path) -> list[InitialHandshake]:
    """Every QUIC v1 connection whose Initial packets are in the capture, in order.

    The capture must hold the Initial packets whole (snaplen >= 1500, e.g. a filter on long
    headers: ``udp[8] & 0x80 != 0``). Packets that cannot be decrypted are skipped.
    """
    conns: dict[tuple[str, str], tuple[InitialHandshake, tuple[_Keys, _Keys],
                                       dict[int, bytes], dict[int, bytes]]] = {}
    order: list[InitialHandshake] = []
    for src, dst, payload in _udp_datagrams(Path(path)):
        pos = 0
        while pos < len(payload):
            try:
                hdr = _initial_header(payload, pos)
            except (ParseError, IndexError):  # a long header cut short
                break
            if hdr is None:
                break
            if (src, dst) in conns:
                hs, keys, from_client, _ = conns[(src, dst)]
                plain, chunks = _decrypt(payload, pos, hdr, keys[0]), from_client
            elif (dst, src) in conns:
                hs, keys, _, from_server = conns[(dst, src)]
                plain, chunks = _decrypt(payload, pos, hdr, keys[1]), from_server
            else:  # the first Initial of a connection: the client's, keyed by its DCID
                keys = initial_keys(hdr.dcid)
                plain = _decrypt(payload, pos, hdr, keys[0])
                if plain is None:
                    pos = hdr.end
                    continue
                hs = InitialHandshake(client=src, server=dst)
                chunks = {}
                conns[(src, dst)] = (hs, keys, chunks, {})
                order.append(hs)
            if plain is not None:
                try:
                    for offset, data in _crypto_frames(plain):
                        chunks.setdefault(offset, data)
                except ParseError:
                    pass
            pos = hdr.end
    for hs, _, from_client, from_server in conns.values():
        # the Initial keys are public, so a decryptable hello can still be malformed (a buggy
        # peer): its fields keep what could be read
        client_hello = _hello(_assemble(from_client), 1)
        if client_hello is not None:
            try:
                _client_hello(client_hello, hs)
            except (IndexError, struct.error):
                pass
        server_hello = _hello(_assemble(from_server), 2)
        if server_hello is not None:
            try:
                hs.selected = _server_hello(server_hello)
            except (IndexError, struct.error):
                pass
    return order
