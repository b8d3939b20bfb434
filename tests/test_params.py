"""Standard parameters: resolution against what an implementation supports, negotiated reports."""

import pytest
from pydantic import ValidationError

from interop_runner.config.implementations import load_registry
from interop_runner.config.params import (
    LIBRARY_DEFAULT,
    StandardParams,
    Supports,
    check_negotiated,
    normalise_cc,
    parse_negotiated,
    resolve,
)

FULL = Supports(congestion_control=["cubic", "reno", "bbr"],
                cipher=["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                        "TLS_CHACHA20_POLY1305_SHA256"],
                socket_buffers=True, gso=True, gro=True, qlog=True, keylog=True,
                aes_hw_off=True, ack_ratio=True, max_ack_delay=True, flow_control_window=True)


def test_defaults_are_the_papers():
    p = StandardParams()
    assert p.congestion_control == "cubic" and p.cipher is None
    assert p.gso is True and p.gro is True and p.socket_rcvbuf is None


def test_sizes_and_bad_values():
    assert StandardParams(socket_rcvbuf="8MiB").socket_rcvbuf == 8 * 2**20
    with pytest.raises(ValidationError):
        StandardParams(congestion_control="vegas")
    with pytest.raises(ValidationError):
        StandardParams(cipher="TLS_AES_128_CCM_SHA256")
    with pytest.raises(ValidationError):
        StandardParams(socket_sndbuf=0)
    with pytest.raises(ValidationError):
        StandardParams(pacing=True)


def test_everything_supported_is_honoured():
    p = StandardParams(congestion_control="bbr", cipher="TLS_CHACHA20_POLY1305_SHA256",
                       socket_rcvbuf=2**22, socket_sndbuf=2**21, gso=False, gro=False,
                       aes_hw=False, ack_ratio=10, max_ack_delay=5,
                       flow_control_window="64KiB")
    res = resolve(p, FULL, "x", keylog=True, qlog=True)
    assert res.unhonoured == []
    assert res.env == {"CONGESTION_CONTROL": "bbr", "CIPHER": "TLS_CHACHA20_POLY1305_SHA256",
                       "SOCKET_RCVBUF": str(2**22), "SOCKET_SNDBUF": str(2**21), "GSO": "0",
                       "GRO": "0", "AES_HW": "0", "OPENSSL_ia32cap": "~0x200000200000000",
                       "GODEBUG": "cpu.aes=off,cpu.pclmulqdq=off",
                       "GNUTLS_CPUID_OVERRIDE": "0x1", "ACK_RATIO": "10",
                       "MAX_ACK_DELAY_MS": "5", "FLOW_CONTROL_WINDOW": "65536"}
    assert res.effective == {"congestion_control": "bbr",
                             "cipher": "TLS_CHACHA20_POLY1305_SHA256",
                             "socket_rcvbuf": 2**22, "socket_sndbuf": 2**21, "gso": False,
                             "gro": False, "aes_hw": False, "keylog": True, "qlog": True,
                             "ack_ratio": 10, "max_ack_delay": 5,
                             "flow_control_window": 65536}


def test_unsupported_requests_are_recorded_with_what_is_used():
    p = StandardParams(congestion_control="cubic", cipher="TLS_AES_256_GCM_SHA384",
                       socket_sndbuf=2**20, gso=False)
    res = resolve(p, Supports(congestion_control=["reno"]), "lib", keylog=True, qlog=False)
    by = {u["param"]: u for u in res.unhonoured}
    assert set(by) == {"congestion_control", "cipher", "socket_sndbuf", "gso", "keylog"}
    # the paper's rule: Reno where CUBIC is missing
    assert by["congestion_control"]["used"] == "reno"
    assert res.effective["congestion_control"] == "reno"
    assert "lib cannot run cubic (it offers: reno)" == by["congestion_control"]["reason"]
    assert by["cipher"]["used"] == LIBRARY_DEFAULT
    assert res.effective["gso"] == LIBRARY_DEFAULT and res.effective["keylog"] is False
    # the environment still says what was asked
    assert res.env["CONGESTION_CONTROL"] == "cubic"


def test_default_requests_are_not_flagged():
    """GSO/GRO "use if offered" and the library-default cipher are no requests to refuse."""
    res = resolve(StandardParams(congestion_control="reno"), Supports(congestion_control=["reno"]),
                  "lib", keylog=False, qlog=False)
    assert res.unhonoured == []


def test_every_registered_implementation_declares_supports():
    for name, meta in load_registry().items():
        res = resolve(StandardParams(), meta.supports, name, keylog=False, qlog=False)
        assert res.effective["congestion_control"] in ("cubic", "reno", "bbr", LIBRARY_DEFAULT)


def test_parse_negotiated_takes_the_last_valid_line():
    text = ("start\nQIR_NEGOTIATED {\"alpn\": \"h3\", \"cipher\": \"TLS_AES_128_GCM_SHA256\"}\n"
            "2026/11/21 prefix: QIR_NEGOTIATED {\"alpn\": \"h3\", \"cipher\": "
            "\"TLS_AES_256_GCM_SHA384\", \"congestion_control\": \"\"}\n"
            "QIR_NEGOTIATED {broken\n")
    assert parse_negotiated(text) == {"alpn": "h3", "cipher": "TLS_AES_256_GCM_SHA384"}
    assert parse_negotiated("nothing here") is None


def test_check_negotiated_flags_mismatches_only():
    eff = {"cipher": "TLS_AES_256_GCM_SHA384", "congestion_control": "reno"}
    assert check_negotiated(eff, {"alpn": "h3", "cipher": "TLS_AES_256_GCM_SHA384",
                                  "congestion_control": "NewReno"}, "h3") == []
    problems = check_negotiated(eff, {"alpn": "hq-interop", "cipher": "TLS_AES_128_GCM_SHA256"},
                                "h3")
    assert problems == ["ALPN 'hq-interop' instead of 'h3'",
                        "cipher 'TLS_AES_128_GCM_SHA256' instead of 'TLS_AES_256_GCM_SHA384'"]
    assert check_negotiated({"cipher": LIBRARY_DEFAULT}, {"cipher": "TLS_AES_128_GCM_SHA256"},
                            None) == []


def test_normalise_cc():
    assert [normalise_cc(n) for n in ("NewReno", "bbr2", "CUBIC", "Bbr", "vegas")] == \
        ["reno", "bbr", "cubic", "bbr", "vegas"]


def test_aes_hw_off_is_unhonoured_without_a_switch():
    res = resolve(StandardParams(aes_hw=False), Supports(congestion_control=["cubic"]), "ringy",
                  keylog=False, qlog=False)
    assert [u["param"] for u in res.unhonoured] == ["aes_hw"]
    assert res.effective["aes_hw"] is True and res.env["OPENSSL_ia32cap"].startswith("~")
