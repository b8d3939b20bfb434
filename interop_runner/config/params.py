"""Standard parameters: what every implementation is asked for through the script contract.

A campaign sets them once (``params:``); each implementation declares in ``meta.yml``
(``supports:``) which of them it can honour. :func:`resolve` turns both into the environment of
one side plus what that side really runs with, and a note for every request it cannot honour,
so that run.json never hides an ignored setting.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from interop_runner.config.written import SIZE_UNITS, TIME_UNITS, is_bare, refuse_bare
from interop_runner.units import parse_ms, positive_size

CongestionControl = Literal["cubic", "reno", "bbr"]
Cipher = Literal["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                 "TLS_CHACHA20_POLY1305_SHA256"]
CIPHERS: tuple[str, ...] = ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                            "TLS_CHACHA20_POLY1305_SHA256")
CONGESTION_CONTROLS: tuple[str, ...] = ("cubic", "reno", "bbr")
LIBRARY_DEFAULT = "library default"
Role = Literal["server", "client"]
# RFC 9000 section 18.2: a max_ack_delay of 2^14 ms or more is invalid
MAX_ACK_DELAY_LIMIT_MS = 2**14 - 1
# the smallest flow-control window a campaign may ask for (about 11 full packets), and the
# largest a QUIC variable-length integer holds (RFC 9000 section 16)
MIN_FLOW_CONTROL_WINDOW = 16 * 1024
MAX_VARINT = 2**62 - 1
NEGOTIATED_MARKER = "QIR_NEGOTIATED "
# the largest ACK ratio a campaign may ask for: far beyond any window's packets at 100G
MAX_ACK_RATIO = 10_000
_RATIO_RE = re.compile(r"^\s*1\s*:\s*(\d+)\s*$")


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
    # ACK frequency of the data receiver (the client of a download, paper 003 section V): it
    # acknowledges every n-th ack-eliciting packet (1:n), at the latest max_ack_delay (ms)
    # after the first unacknowledged one. None: the library's own policy.
    ack_ratio: int | None = Field(None, ge=1, le=MAX_ACK_RATIO)
    max_ack_delay: int | None = Field(None, ge=1, le=MAX_ACK_DELAY_LIMIT_MS)
    # the data receiver's (the client's) flow-control window in bytes (paper 003 section
    # IV.C): its initial connection and stream credit, kept fixed (no auto-tuning beyond it).
    # None: the harness's own windows (receive_window in its meta.yml)
    flow_control_window: int | None = Field(None, ge=MIN_FLOW_CONTROL_WINDOW, le=MAX_VARINT)

    @field_validator("socket_rcvbuf", "socket_sndbuf", "flow_control_window", mode="before")
    @classmethod
    def _size(cls, value: Any, info: ValidationInfo) -> int | None:
        refuse_bare(value, info, SIZE_UNITS)
        if value is None:
            return None
        return positive_size(value)

    @field_validator("ack_ratio", mode="before")
    @classmethod
    def _ratio(cls, value: Any) -> Any:
        # the papers write an ACK ratio as 1:n (one ACK per n packets): "1:10" is 10
        if isinstance(value, bool):
            raise ValueError(f"{value!r} is not an ACK ratio (give n, or 1:n)")
        if isinstance(value, str) and (match := _RATIO_RE.match(value)):
            return int(match.group(1))
        return value

    @field_validator("max_ack_delay", mode="before")
    @classmethod
    def _delay(cls, value: Any, info: ValidationInfo) -> Any:
        refuse_bare(value, info, TIME_UNITS)
        if value is None or is_bare(value):
            return value
        ms = parse_ms(value)
        if ms != int(ms):
            raise ValueError(f"{value!r} is not a whole number of ms (QUIC's max_ack_delay "
                             "transport parameter counts ms)")
        return int(ms)


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
    # as the client (the data receiver): ACKs every ACK_RATIO-th ack-eliciting packet itself,
    # and holds an ACK at most MAX_ACK_DELAY_MS
    ack_ratio: bool = False
    max_ack_delay: bool = False
    # the ACK_FREQUENCY frame (draft-ietf-quic-ack-frequency): as the server it asks the
    # client for the ratio, as the client it obeys such a request
    ack_frequency: bool = False
    # as the client: grants FLOW_CONTROL_WINDOW bytes of credit per stream and connection,
    # with no auto-tuning beyond it
    flow_control_window: bool = False


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
    # requests that make the pair unsupported (exit 127 semantics: it is not run)
    unsupported: list[str] = field(default_factory=list)


def _env(params: StandardParams) -> dict[str, str]:
    """The contract environment of the standard parameters."""
    env = {
        "CONGESTION_CONTROL": params.congestion_control,
        "CIPHER": params.cipher or "",
        "SOCKET_RCVBUF": "" if params.socket_rcvbuf is None else str(params.socket_rcvbuf),
        "SOCKET_SNDBUF": "" if params.socket_sndbuf is None else str(params.socket_sndbuf),
        "GSO": "1" if params.gso else "0",
        "GRO": "1" if params.gro else "0",
        "AES_HW": "1" if params.aes_hw else "0",
        "ACK_RATIO": "" if params.ack_ratio is None else str(params.ack_ratio),
        "MAX_ACK_DELAY_MS": "" if params.max_ack_delay is None else str(params.max_ack_delay),
        "FLOW_CONTROL_WINDOW": ("" if params.flow_control_window is None
                                else str(params.flow_control_window)),
    }
    if not params.aes_hw:
        env.update(AES_HW_OFF_ENV)
    return env


ACK_PARAMS = ("ack_ratio", "max_ack_delay")
ASKED_BY_SERVER = "asked by the server (ACK_FREQUENCY)"


class _Resolver:
    """Fills one side's effective values and unhonoured requests, one parameter at a time."""

    def __init__(self, params: StandardParams, supports: Supports, implementation: str) -> None:
        self.params, self.supports, self.implementation = params, supports, implementation
        self.out = Resolved(env=_env(params), effective={})

    def miss(self, name: str, asked: Any, used: Any, why: str) -> None:
        self.out.unhonoured.append({"param": name, "asked": asked, "used": used,
                                    "reason": f"{self.implementation} {why}"})

    def ack_policy(self, role: Role, peer: Supports | None) -> None:
        """The client's ACK frequency: its own setting, else the server's ACK_FREQUENCY
        request when both sides speak it; one it cannot honour makes the pair unsupported (a
        run at the library's ACK policy would be mislabelled). The server's own ACKs (of the
        few packets the client sends) keep the library's policy."""
        # a server's request carries the ratio only: the delay it asks for is capped at the RTT
        requested = peer is not None and peer.ack_frequency and self.supports.ack_frequency
        for name in ACK_PARAMS:
            self.receiver(name, role, getattr(self.supports, name) or
                          (requested and name == "ack_ratio"))
        if role == "client" and requested and not self.supports.ack_ratio and \
                self.params.ack_ratio is not None:
            self.out.effective["ack_policy"] = ASKED_BY_SERVER

    def receiver(self, name: str, role: Role, honoured: bool) -> None:
        """A parameter of the data receiver (the client): the value where it is ``honoured``,
        else the library's default and the pair unsupported (a run at the library's setting
        would be mislabelled). The server keeps its library's setting and never blocks."""
        value = getattr(self.params, name)
        if role == "server" or value is None:
            self.out.effective[name] = LIBRARY_DEFAULT
        elif honoured:
            self.out.effective[name] = value
        else:
            self.out.effective[name] = LIBRARY_DEFAULT
            self.miss(name, value, LIBRARY_DEFAULT, f"cannot set {name} as the client "
                      "(the data receiver)")
            self.out.unsupported.append(self.out.unhonoured[-1]["reason"])

    def congestion_control(self) -> None:
        cc, offered = self.params.congestion_control, self.supports.congestion_control
        if cc in offered:
            self.out.effective["congestion_control"] = cc
            return
        used = offered[0] if offered else LIBRARY_DEFAULT
        self.out.effective["congestion_control"] = used
        have = ", ".join(offered) or "no choice"
        self.miss("congestion_control", cc, used, f"cannot run {cc} (it offers: {have})")

    def cipher(self) -> None:
        cipher = self.params.cipher
        if cipher is not None and cipher in self.supports.cipher:
            self.out.effective["cipher"] = cipher
            return
        self.out.effective["cipher"] = LIBRARY_DEFAULT
        if cipher is not None:
            self.miss("cipher", cipher, LIBRARY_DEFAULT,
                      "cannot restrict TLS to this cipher suite" if self.supports.cipher
                      else "cannot choose the TLS cipher suite")

    def socket_buffers(self) -> None:
        for name in ("socket_rcvbuf", "socket_sndbuf"):
            value = getattr(self.params, name)
            supported = value is not None and self.supports.socket_buffers
            self.out.effective[name] = value if supported else LIBRARY_DEFAULT
            if value is not None and not supported:
                self.miss(name, value, LIBRARY_DEFAULT, "cannot set its socket buffer sizes")

    def offloads(self) -> None:
        for name in ("gso", "gro"):
            on = getattr(self.params, name)
            supported = getattr(self.supports, name)
            self.out.effective[name] = on if supported else LIBRARY_DEFAULT
            if not supported and not on:  # switching it off is a request; "use if offered" not
                self.miss(name, False, LIBRARY_DEFAULT, f"cannot switch {name.upper()} off")

    def aes_hw(self) -> None:
        aes_hw, switch = self.params.aes_hw, self.supports.aes_hw_off
        self.out.effective["aes_hw"] = aes_hw if switch else True
        if not aes_hw and not switch:
            self.miss("aes_hw", False, True, "cannot run without hardware AES (its crypto "
                      "library has no switch for it)")

    def logs(self, keylog: bool, qlog: bool) -> None:
        for name, asked in (("keylog", keylog), ("qlog", qlog)):
            supported = getattr(self.supports, name)
            self.out.effective[name] = asked and supported
            if asked and not supported:
                self.miss(name, True, False, f"cannot write a {name}")


def resolve(params: StandardParams, supports: Supports, implementation: str, *,
            keylog: bool, qlog: bool, role: Role = "client",
            peer: Supports | None = None) -> Resolved:
    """Environment, effective values and unhonoured requests for one implementation in
    ``role``, its ``peer`` the implementation on the other side (None: unknown)."""
    resolver = _Resolver(params, supports, implementation)
    resolver.congestion_control()
    resolver.cipher()
    resolver.socket_buffers()
    resolver.offloads()
    resolver.aes_hw()
    resolver.logs(keylog, qlog)
    resolver.ack_policy(role, peer)
    resolver.receiver("flow_control_window", role, resolver.supports.flow_control_window)
    return resolver.out


def pair_unsupported(params: StandardParams, server: Supports, client: Supports,
                     client_name: str) -> str | None:
    """Why a pair cannot run with these parameters (None: it can): a request the client
    cannot honour, itself or at the server's request, that would change what is measured."""
    res = resolve(params, client, client_name, keylog=False, qlog=False, role="client",
                  peer=server)
    return "; ".join(res.unsupported) or None


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
