"""Standard parameters: what every implementation is asked for through the script contract.

A campaign sets them once (``params:``); each implementation declares in ``meta.yml``
(``supports:``) which of them it can honour. :func:`resolve` turns both into the environment of
one side plus what that side really runs with, and a note for every request it cannot honour,
so that run.json never hides an ignored setting.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator

from interop_runner.units import positive_size

CongestionControl = Literal["cubic", "reno", "bbr"]
Cipher = Literal["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                 "TLS_CHACHA20_POLY1305_SHA256"]
CIPHERS: tuple[str, ...] = ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                            "TLS_CHACHA20_POLY1305_SHA256")
CONGESTION_CONTROLS: tuple[str, ...] = ("cubic", "reno", "bbr")
LIBRARY_DEFAULT = "library default"
NEGOTIATED_MARKER = "QIR_NEGOTIATED "


class StandardParams(BaseModel):
    """The ``params:`` block of a campaign (the same for server and client)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    congestion_control: CongestionControl = "cubic"  # the paper runs CUBIC everywhere
    cipher: Cipher | None = None  # None: the library's default choice
    socket_rcvbuf: int | None = None  # bytes; None: the library's default
    socket_sndbuf: int | None = None
    gso: bool = True  # use UDP GSO where the library offers it
    gro: bool = True
    aes_hw: bool = True  # false: hide AES-NI/PCLMULQDQ from the crypto library (paper Fig. 5)

    @field_validator("socket_rcvbuf", "socket_sndbuf", mode="before")
    @classmethod
    def _size(cls, value: Any) -> int | None:
        if value is None:
            return None
        return positive_size(value)


class Supports(BaseModel):
    """``supports:`` in meta.yml: which standard parameters an implementation honours."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    # values it can run; the first is what it uses when asked for one it lacks ([] = unknown)
    congestion_control: list[CongestionControl] = []
    cipher: list[Cipher] = []
    socket_buffers: bool = False
    gso: bool = False
    gro: bool = False
    qlog: bool = False
    keylog: bool = False
    aes_hw_off: bool = False  # its crypto library honours the AES-NI switches of AES_HW_OFF_ENV


# Environment that hides AES-NI (and carry-less multiply, which AES-GCM uses) from the crypto
# libraries: OpenSSL/BoringSSL/AWS-LC/quictls read OPENSSL_ia32cap (~ clears bits: AES-NI is
# bit 57, PCLMULQDQ bit 33 of the first word), Go reads GODEBUG cpu.*, GnuTLS reads
# GNUTLS_CPUID_OVERRIDE (0x1: no run-time detected optimisations). ring has no such switch.
AES_HW_OFF_ENV = {"OPENSSL_ia32cap": "~0x200000200000000",
                  "GODEBUG": "cpu.aes=off,cpu.pclmulqdq=off",
                  "GNUTLS_CPUID_OVERRIDE": "0x1"}


@dataclass
class Resolved:
    """One side's view of the standard parameters."""

    env: dict[str, str]
    effective: dict[str, Any]
    unhonoured: list[dict[str, Any]] = field(default_factory=list)


def resolve(params: StandardParams, supports: Supports, implementation: str, *,
            keylog: bool, qlog: bool) -> Resolved:
    """Environment, effective values and unhonoured requests for one implementation."""
    env = {
        "CONGESTION_CONTROL": params.congestion_control,
        "CIPHER": params.cipher or "",
        "SOCKET_RCVBUF": "" if params.socket_rcvbuf is None else str(params.socket_rcvbuf),
        "SOCKET_SNDBUF": "" if params.socket_sndbuf is None else str(params.socket_sndbuf),
        "GSO": "1" if params.gso else "0",
        "GRO": "1" if params.gro else "0",
        "AES_HW": "1" if params.aes_hw else "0",
    }
    if not params.aes_hw:
        env.update(AES_HW_OFF_ENV)
    out = Resolved(env=env, effective={})
    eff = out.effective

    def miss(name: str, asked: Any, used: Any, why: str) -> None:
        out.unhonoured.append({"param": name, "asked": asked, "used": used,
                               "reason": f"{implementation} {why}"})

    cc = params.congestion_control
    if cc in supports.congestion_control:
        eff["congestion_control"] = cc
    else:
        used = supports.congestion_control[0] if supports.congestion_control else LIBRARY_DEFAULT
        eff["congestion_control"] = used
        have = ", ".join(supports.congestion_control) or "no choice"
        miss("congestion_control", cc, used, f"cannot run {cc} (it offers: {have})")

    if params.cipher is None:
        eff["cipher"] = LIBRARY_DEFAULT
    elif params.cipher in supports.cipher:
        eff["cipher"] = params.cipher
    else:
        eff["cipher"] = LIBRARY_DEFAULT
        miss("cipher", params.cipher, LIBRARY_DEFAULT,
             "cannot restrict TLS to this cipher suite" if supports.cipher
             else "cannot choose the TLS cipher suite")

    for name in ("socket_rcvbuf", "socket_sndbuf"):
        value = getattr(params, name)
        if value is None:
            eff[name] = LIBRARY_DEFAULT
        elif supports.socket_buffers:
            eff[name] = value
        else:
            eff[name] = LIBRARY_DEFAULT
            miss(name, value, LIBRARY_DEFAULT, "cannot set its socket buffer sizes")

    for name in ("gso", "gro"):
        on = getattr(params, name)
        if getattr(supports, name):
            eff[name] = on
        else:
            eff[name] = LIBRARY_DEFAULT
            if not on:  # asking to switch it off is a request; "use it if offered" is not
                miss(name, False, LIBRARY_DEFAULT, f"cannot switch {name.upper()} off")

    eff["aes_hw"] = params.aes_hw if supports.aes_hw_off else True
    if not params.aes_hw and not supports.aes_hw_off:
        miss("aes_hw", False, True, "cannot run without hardware AES (its crypto library has "
             "no switch for it)")

    for name, asked in (("keylog", keylog), ("qlog", qlog)):
        eff[name] = asked and getattr(supports, name)
        if asked and not getattr(supports, name):
            miss(name, True, False, f"cannot write a {name}")
    return out


def parse_negotiated(text: str) -> dict[str, Any] | None:
    """The last ``QIR_NEGOTIATED {json}`` line an implementation printed, if any."""
    found: dict[str, Any] | None = None
    for line in text.splitlines():
        pos = line.find(NEGOTIATED_MARKER)
        if pos < 0:
            continue
        try:
            data = json.loads(line[pos + len(NEGOTIATED_MARKER):])
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict):
            found = {str(k): v for k, v in data.items() if v not in (None, "")}
    return found


def normalise_cc(name: str) -> str:
    """Library spellings (``NewReno``, ``bbr2``, ``CUBIC``) -> cubic, reno or bbr."""
    low = name.lower()
    for cc in CONGESTION_CONTROLS:
        if cc in low:
            return cc
    return low


def check_negotiated(effective: dict[str, Any], negotiated: dict[str, Any],
                     alpn: str | None) -> list[str]:
    """Differences between what was asked/expected and what the library reports."""
    problems = []
    if alpn and negotiated.get("alpn") not in (None, alpn):
        problems.append(f"ALPN {negotiated['alpn']!r} instead of {alpn!r}")
    for key in ("cipher", "congestion_control"):
        want = effective.get(key)
        got = negotiated.get(key)
        if got is None or want in (None, LIBRARY_DEFAULT):
            continue
        if key == "congestion_control":
            got, want = normalise_cc(str(got)), normalise_cc(str(want))
        if str(got).upper() != str(want).upper():
            problems.append(f"{key} {got!r} instead of {want!r}")
    return problems
