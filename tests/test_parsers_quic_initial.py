"""QUIC Initial decryption: the cipher suites offered and chosen, read from a real capture."""

import pytest

from interop_runner.parsers.common import ParseError
from interop_runner.parsers.quic_initial import initial_keys, read_handshakes

DATA = __import__("pathlib").Path(__file__).parent / "data" / "pcap"


def test_rfc9001_appendix_a_keys():
    """The Initial keys of RFC 9001 A.1 for DCID 0x8394c8f03e515708."""
    client, server = initial_keys(bytes.fromhex("8394c8f03e515708"))
    assert client.key.hex() == "1f369613dd76d5467730efcbe3b1a22d"
    assert client.iv.hex() == "fa044b2f42a3fd3b46fb255c"
    assert client.hp.hex() == "9f50449e04a0e810283a1e9933adedd2"
    assert server.key.hex() == "cf3a5331653c364c88f0f379b6067e37"
    assert server.iv.hex() == "0ac1493ca1905853b0bba03e"
    assert server.hp.hex() == "c206b8d9b9f0f37644430b490eeaa314"


def test_quic_go_captures():
    hs = read_handshakes(DATA / "quic-initial-quic-go.pcap")
    assert [h.selected for h in hs] == ["TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_256_GCM_SHA384",
                                        "TLS_AES_128_GCM_SHA256"]
    assert hs[0].offered == ["TLS_CHACHA20_POLY1305_SHA256"]
    assert hs[1].offered == ["TLS_AES_256_GCM_SHA384"] and hs[1].alpn_offered == ["hq-interop"]
    # unrestricted crypto/tls offers all three (the ClientHello spans two Initial packets)
    assert hs[2].offered == ["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                             "TLS_CHACHA20_POLY1305_SHA256"]
    assert all(h.server == "127.0.0.1:4702" for h in hs)
    assert len({h.client for h in hs}) == 3


def test_not_a_pcap(tmp_path):
    bad = tmp_path / "x.pcap"
    bad.write_bytes(b"\x00" * 40)
    with pytest.raises(ParseError):
        read_handshakes(bad)


def test_tcp_only_capture_has_no_handshakes():
    assert read_handshakes(DATA / "any-tx-sll.pcap") == []
