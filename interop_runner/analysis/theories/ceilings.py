"""Closed-form goodput ceilings of an attempt over an emulated path (paper 003, section IV), as
columns of the results frame: what the path's rate allows (link-limited), what its random loss
allows a Reno sender (loss-limited, Mathis et al.), what the receiver's flow-control window
allows per round trip (flow-control-limited), the lowest of them, the goodput's share of it,
and a flag when the goodput is above a ceiling by more than that ceiling's tolerance: a
measurement error, not a fast stack (docs/closed-form.md).

Each ceiling is an upper bound on goodput (file bytes per second), so every header counted
is the fewest any stack here sends. Every column exists in every frame; a ceiling that does
not apply is <NA> (never 0), and ``ceiling_missing`` says why: one ``name: reason`` each, or
one reason for all of them over the direct link or a path whose calibration is off or failed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from interop_runner.config.implementations import ReceiveWindow, RenoBackoff, load_registry

__all__ = ["CEILING_COLUMNS", "asked_window", "ceiling_values", "flow_control_ceiling_mbps",
           "link_ceiling_mbps", "loss_tolerance", "mathis_ceiling_mbps", "mathis_payload",
           "payload_bytes", "receive_windows", "receiver_window", "reno_backoff",
           "reno_backoffs"]

# Bytes a full packet carries besides the file's data (docs/closed-form.md). tbf, the
# bottleneck, counts the Ethernet header but no preamble, FCS or inter-frame gap.
ETHERNET_BYTES = 14
IPV4_BYTES = 20  # the testbeds' data paths are IPv4
UDP_BYTES = 8
# first byte, a 4-byte connection ID (quic-go's; the other stacks here use 8 or more) and a
# 1-byte packet number (enough while fewer than 128 packets are unacknowledged)
QUIC_SHORT_HEADER_BYTES = 1 + 4 + 1
AEAD_TAG_BYTES = 16
# type, stream ID below 64, offset below 1 GiB (a 4-byte varint), no length field (the frame
# runs to the end of the packet); HTTP/3's DATA frame headers (per frame, not per packet),
# ACK frames and the handshake are not counted: they only lower the goodput
STREAM_FRAME_BYTES = 1 + 1 + 4
TCP_BYTES = 20 + 12  # header and timestamps (Linux's default), as the calibration counts
# a TLS 1.3 record: 5-byte header, content type and AEAD tag per 16 KiB of data
TLS_RECORD_BYTES, TLS_RECORD_PAYLOAD = 5 + 1 + 16, 16384
OVERHEAD_BYTES = {
    "quic": ETHERNET_BYTES + IPV4_BYTES + UDP_BYTES + QUIC_SHORT_HEADER_BYTES
    + AEAD_TAG_BYTES + STREAM_FRAME_BYTES,
    "tcp": ETHERNET_BYTES + IPV4_BYTES + TCP_BYTES,  # iperf3's reference flows: no TLS
    "tcp-tls": ETHERNET_BYTES + IPV4_BYTES + TCP_BYTES,  # and TLS records (payload_bytes)
}
DEFAULT_MTU = 1500  # Ethernet's, when the record has no host facts
TCP_ALPNS = ("http/1.1", "h2")

# How far above a ceiling a goodput may be before it is flagged. The link's rate is enforced
# by tbf (its bucket lets at most 1 ms of the rate through early) and the flow-control bound
# is exact for a known window: 2 % covers the timing of the transfer and the headers' spread.
LINK_TOLERANCE = 0.02
FLOW_CONTROL_TOLERANCE = 0.02
# Mathis et al. (1997): C = sqrt(3/2) for periodic loss, which the formula assumes; their
# simulations of random loss (the path's) gave C = 1.31
MATHIS_C = math.sqrt(1.5)
RANDOM_LOSS_C = 1.31
LOSS_QUANTILE = 0.01  # a transfer sees fewer losses than this quantile once in a hundred
RENO_BACKOFF = 0.5  # RFC 9002 kLossReductionFactor: the window share Reno keeps after a loss


def reno_backoffs() -> dict[str, RenoBackoff]:
    """Senders whose "Reno" backs off by less than half (``reno_backoff`` in their meta.yml),
    by implementation name; their Mathis ceiling uses their share."""
    return {name: meta.reno_backoff for name, meta in load_registry().items()
            if meta.reno_backoff is not None}


def receive_windows() -> dict[str, ReceiveWindow]:
    """Each implementation's receiver window (``receive_window`` in its meta.yml), by name.
    The receiver (the client: the data flows server -> client) decides the window; an
    attempt whose client ran the flow_control_window parameter uses that instead
    (:func:`asked_window`)."""
    return {name: meta.receive_window for name, meta in load_registry().items()
            if meta.receive_window is not None}


# column -> (pandas dtype, unit, meaning)
CEILING_COLUMNS: dict[str, tuple[str, str, str]] = {
    "ceiling_packet_bytes": ("Float64", "bytes", "a packet on the wire as the ceilings assume "
                             "it: the mean the bottleneck sent during the attempt, else the "
                             "endpoints' MTU + 14 (Ethernet)"),
    "ceiling_payload_bytes": ("Float64", "bytes", "file data one such packet carries at most "
                              "(the fewest header bytes: docs/closed-form.md)"),
    "ceiling_link_mbps": ("Float64", "Mbit/s (SI)", "link-limited goodput: path rate x "
                          "payload / packet"),
    "ceiling_loss_mbps": ("Float64", "Mbit/s (SI)", "loss-limited goodput of a Reno sender "
                          "(Mathis): 8 x payload x sqrt(M / q) / base RTT x sqrt(3 / (2 x "
                          "loss)), M the largest datagram, q the mean one; a stack whose Reno "
                          "keeps b > 1/2 of its window after a loss (quic-go: 0.7) has sqrt((1 "
                          "+ b) / (2 (1 - b) loss)) in place of sqrt(3 / (2 x loss))"),
    "ceiling_window_bytes": ("Int64", "bytes", "the receiver's largest flow-control window: "
                             "the flow_control_window parameter where the client ran it, "
                             "else its stack's window (receive_window in its meta.yml)"),
    "ceiling_flow_control_mbps": ("Float64", "Mbit/s (SI)", "flow-control-limited goodput: "
                                  "8 x window / base RTT"),
    "ceiling_mbps": ("Float64", "Mbit/s (SI)", "the lowest ceiling known"),
    "ceiling_basis": ("string", "", "which ceiling is the lowest: link, loss or flow_control"),
    "ceiling_ratio": ("Float64", "", "goodput / ceiling_mbps"),
    "ceiling_exceeded": ("boolean", "", "goodput above a ceiling by more than its tolerance: "
                         "a measurement error (bottleneck label above_ceiling)"),
    "ceiling_exceeded_by": ("string", "", "the evidence: which ceiling, goodput against "
                            "ceiling and tolerance"),
    "ceiling_missing": ("string", "", "why a ceiling is <NA>: one 'name: reason' each, or one "
                        "reason for all (no calibrated path)"),
}


def payload_bytes(packet_bytes: float, transport: str = "quic") -> float:
    """File data one packet of ``packet_bytes`` on the wire carries at most: the packet less
    the fewest header bytes of ``transport`` (quic, tcp, tcp-tls; TLS records cost their
    header, type and tag per 16 KiB)."""
    data = packet_bytes - OVERHEAD_BYTES[transport]
    if transport == "tcp-tls":
        data *= TLS_RECORD_PAYLOAD / (TLS_RECORD_PAYLOAD + TLS_RECORD_BYTES)
    return data


def link_ceiling_mbps(rate_mbps: float, payload: float, packet: float) -> float:
    """Link-limited goodput (003 eq. 1): the rate at the wire times the payload's share of a
    packet."""
    return rate_mbps * payload / packet


def mathis_ceiling_mbps(payload: float, rtt_ms: float, loss: float,
                        backoff: float = RENO_BACKOFF) -> float:
    """Loss-limited goodput of Reno (Mathis et al.; 003 eq. 2) in Mbit/s: ``payload`` bytes
    per packet, base round-trip time ``rtt_ms`` and packet loss rate ``loss`` (> 0).
    ``backoff``: the share b of its window a sender keeps after a loss (Reno's 1/2); the
    sawtooth from b W to W, one packet more per round trip, averages sqrt((1 + b) / (2 (1 -
    b) p)) packets per round trip, which is Mathis's sqrt(3 / (2 p)) for b = 1/2."""
    return 8.0 * payload / (rtt_ms * 1e3) * math.sqrt((1.0 + backoff)
                                                       / (2.0 * (1.0 - backoff) * loss))


def mathis_payload(payload: float, packet: float, mtu: float, transport: str = "quic"
                   ) -> float:
    """The payload per packet to put into Mathis's formula: ``payload`` scaled by
    sqrt(M / q). QUIC's Reno counts its window in bytes and grows it by M, the largest
    datagram (at most ``mtu`` - 28), per round trip, while the path drops packets of q bytes
    (``packet`` less the Ethernet, IP and UDP headers) on average: its sawtooth then carries
    sqrt(M / q) times the packets of M-byte ones (docs/closed-form.md). Kernel TCP counts its
    window in segments: no scaling."""
    datagram = packet - ETHERNET_BYTES - IPV4_BYTES - UDP_BYTES
    largest = mtu - IPV4_BYTES - UDP_BYTES
    if transport != "quic" or datagram <= 0 or datagram >= largest:
        return payload
    return payload * math.sqrt(largest / datagram)


def reno_backoff(implementation: Any) -> float:
    """The share of its window the implementation's Reno keeps after a loss (a variant,
    ``name@...``, as its base): its meta.yml's ``reno_backoff``, else Reno's 1/2."""
    base = str(implementation).split("@", 1)[0]
    known = reno_backoffs().get(base)
    return known.keeps if known else RENO_BACKOFF


def flow_control_ceiling_mbps(window_bytes: float, rtt_ms: float) -> float:
    """Flow-control-limited goodput (003 eq. 3) in Mbit/s: one window per round trip."""
    return 8.0 * window_bytes / (rtt_ms * 1e3)


def loss_tolerance(packets: float, loss: float) -> float | None:
    """How far above the Mathis value a transfer of ``packets`` packets may come by chance:
    random loss (C = 1.31 instead of sqrt(3/2)) and a transfer that saw as few losses as
    the :data:`LOSS_QUANTILE` quantile of Binomial(packets, loss). None when that quantile
    is no loss at all: too few losses are expected to bound anything."""
    from scipy.stats import binom  # on first use: not with every load_results

    n = max(1, math.ceil(packets))
    few = float(binom.ppf(LOSS_QUANTILE, n, loss))
    if few < 1:
        return None
    return RANDOM_LOSS_C / MATHIS_C * math.sqrt(n * loss / few) - 1.0


def receiver_window(implementation: str | None, version: str | None
                    ) -> tuple[int | None, str | None]:
    """The receiver's largest flow-control window in bytes, or None with the reason."""
    name = (implementation or "").split("@", 1)[0]  # a version variant: <name>@<version>
    window = receive_windows().get(name)
    if window is None:
        return None, f"no window known for {implementation or 'the client'}"
    if window.unknown:
        return None, f"{name}: {window.unknown}"
    if window.size is None:
        return None, f"{name} grants credit without bound ({window.source})"
    if window.versions and version not in window.versions:
        return None, (f"{name} {version}'s default window not read (read: "
                      f"{', '.join(window.versions)})")
    return window.size, None


def asked_window(client: dict[str, Any]) -> int | None:
    """The fixed window a record's client side ran (``effective.flow_control_window``: the
    standard parameter it honoured), None where it ran its own."""
    value = (client.get("effective") or {}).get("flow_control_window")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 \
        else None


@dataclass(frozen=True)
class _Ceiling:
    """One ceiling of an attempt: its value and flag tolerance, or why it has none."""

    mbps: float | None = None
    tolerance: float | None = None  # None: it cannot flag (too few losses expected)
    missing: str | None = None


@dataclass(frozen=True)
class _Attempt:
    """What the ceilings of one attempt over a calibrated path read from its record."""

    rate_mbps: float | None
    cal_rate_mbps: float | None
    rtt_ms: float | None
    loss: float
    links: int
    trace: bool
    packet: float
    payload: float
    mathis_payload: float
    sender_cc: Any
    sender: Any  # the server's implementation (its Reno's backoff: reno_backoff in meta.yml)
    receiver: Any
    receiver_version: Any
    window: int | None  # the flow_control_window the client ran (None: its own)
    flow_count: int  # competing flows (0: one pair)
    file_size: Any


def _number(value: Any) -> float | None:
    """A finite number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _unusable_path(path: Any) -> str | None:
    """Why an attempt's path gives no ceiling (None: calibrated, and it passed)."""
    if not isinstance(path, dict):
        return "no emulated path in the record (the direct link)"
    calibration = path.get("calibration")
    if not isinstance(calibration, dict):
        return "the path was not calibrated (calibrate: off)"
    if calibration.get("ok") is not True:
        return "the path's calibration failed (calibrate: warn): it is not the configured path"
    return None


def _transport(record: dict[str, Any]) -> str:
    """quic, tcp-tls, or (competing flows with a TCP one) tcp: the transport with the fewest
    header bytes among the attempt's flows."""
    flows = record.get("flows")
    if isinstance(flows, list) and flows:
        kinds = {f.get("kind") for f in flows if isinstance(f, dict)}
        return "tcp" if "tcp" in kinds else "quic"
    server = (record.get("server") or {}).get("implementation") or ""
    if record.get("alpn") in TCP_ALPNS or str(server).startswith("tcp"):
        return "tcp-tls"
    return "quic"


def _mtu(record: dict[str, Any]) -> float:
    """The endpoints' smaller MTU (Ethernet's without host facts)."""
    hosts = record.get("hosts") or {}
    mtus = [_number((hosts.get(role) or {}).get("mtu")) for role in ("server", "client")]
    known = [m for m in mtus if m]
    return min(known) if known else DEFAULT_MTU


def _packet_bytes(path: dict[str, Any], mtu: float) -> float:
    """Mean size on the wire of the packets the bottleneck sent during the attempt, else a
    full packet: the MTU plus the Ethernet header."""
    bottleneck = (path.get("counters") or {}).get("bottleneck") or {}
    sent, packets = _number(bottleneck.get("sent_bytes")), _number(bottleneck.get("sent_packets"))
    return sent / packets if sent and packets else mtu + ETHERNET_BYTES


def _attempt(record: dict[str, Any], path: dict[str, Any]) -> _Attempt:
    """The record's facts the ceilings read."""
    resolved = path.get("resolved") or {}
    rate = _number(resolved.get("rate_bps"))
    cal_rate = _number((path.get("calibration") or {}).get("rate_wire_bps"))
    mtu, transport = _mtu(record), _transport(record)
    packet = _packet_bytes(path, mtu)
    payload = payload_bytes(packet, transport)
    flows = record.get("flows")
    server, client = record.get("server") or {}, record.get("client") or {}
    # the data's sender and receiver: an upload's sender is the client, its window the server's
    sender, receiver = (client, server) if (record.get("workload") or {}).get("kind") == \
        "upload" else (server, client)
    return _Attempt(
        rate_mbps=rate / 1e6 if rate else None, cal_rate_mbps=cal_rate / 1e6 if cal_rate else None,
        rtt_ms=_number(resolved.get("rtt_ms")), loss=_number(resolved.get("loss")) or 0.0,
        links=len(resolved["links"]) if resolved.get("links") else 1,
        trace=bool(resolved.get("trace")), packet=packet, payload=payload,
        mathis_payload=mathis_payload(payload, packet, mtu, transport),
        sender_cc=(sender.get("effective") or {}).get("congestion_control"),
        sender=sender.get("implementation"),
        receiver=receiver.get("implementation"), receiver_version=receiver.get("version"),
        window=asked_window(receiver),
        flow_count=len(flows) if isinstance(flows, list) else 0,
        file_size=record.get("file_size"))


def _link(attempt: _Attempt) -> _Ceiling:
    """The path's rate times the payload's share of a packet; the tolerance grows by what
    the calibration measured above the configured rate."""
    if attempt.trace:
        return _Ceiling(missing="the rate follows a trace (its mean bounds no one transfer)")
    if attempt.rate_mbps is None:
        return _Ceiling(missing="no path rate")
    if attempt.payload <= 0:
        return _Ceiling(missing=f"packets of {attempt.packet:.0f} bytes carry no data")
    excess = (attempt.cal_rate_mbps / attempt.rate_mbps - 1.0) if attempt.cal_rate_mbps else 0.0
    return _Ceiling(link_ceiling_mbps(attempt.rate_mbps, attempt.payload, attempt.packet),
                    max(LINK_TOLERANCE, excess))


def _loss_missing(attempt: _Attempt) -> str | None:
    """Why Mathis does not apply (None: a single Reno sender over a lossy one-link path)."""
    if attempt.loss <= 0:
        return "no random loss on the path"
    if attempt.links > 1:
        return "two links: loss and delay per link"
    if attempt.flow_count:
        return f"{attempt.flow_count} competing flows (the formula is per flow)"
    if attempt.sender_cc != "reno":
        ran = attempt.sender_cc or "an unknown algorithm"
        return f"the server (the sender) ran {ran}, not reno"
    if not attempt.rtt_ms:
        return "no base RTT"
    if attempt.payload <= 0:
        return f"packets of {attempt.packet:.0f} bytes carry no data"
    return None


def _loss(attempt: _Attempt) -> _Ceiling:
    """Mathis for a single Reno sender over a lossy one-link path; its tolerance from the
    losses a transfer of the file's packets may see by chance."""
    why = _loss_missing(attempt)
    if why is not None or attempt.rtt_ms is None:  # (no base RTT is one of the reasons)
        return _Ceiling(missing=why or "no base RTT")
    size = _number(attempt.file_size)
    tolerance = loss_tolerance(size / attempt.payload, attempt.loss) if size else None
    mathis = mathis_ceiling_mbps(attempt.mathis_payload, attempt.rtt_ms, attempt.loss,
                                 reno_backoff(attempt.sender))
    return _Ceiling(mathis, tolerance)


def _flow_control(attempt: _Attempt) -> tuple[_Ceiling, int | None]:
    """One receive window per base round trip, and the window: the one the client was asked
    for (flow_control_window), else its stack's (:func:`receive_windows`)."""
    if attempt.flow_count:
        return _Ceiling(missing=f"{attempt.flow_count} competing flows (a window per flow)"), None
    if not attempt.rtt_ms:
        return _Ceiling(missing="no base RTT"), None
    window, why = (attempt.window, None) if attempt.window else \
        receiver_window(attempt.receiver, attempt.receiver_version)
    if window is None:
        return _Ceiling(missing=why), None
    ceiling = flow_control_ceiling_mbps(window, attempt.rtt_ms)
    return _Ceiling(ceiling, FLOW_CONTROL_TOLERANCE), window


def _exceeded(goodput: float, ceilings: dict[str, _Ceiling]) -> tuple[bool | None, str | None]:
    """Whether the goodput is above a ceiling by more than its tolerance, with the evidence;
    None when no ceiling can flag."""
    checked = False
    for name, ceiling in ceilings.items():
        if ceiling.mbps is None or ceiling.tolerance is None:
            continue
        checked = True
        if goodput > ceiling.mbps * (1.0 + ceiling.tolerance):
            return True, (f"goodput {goodput:.2f} Mbit/s > {name} ceiling "
                          f"{ceiling.mbps:.2f} Mbit/s + {ceiling.tolerance:.1%}")
    return (False if checked else None), None


def ceiling_values(record: dict[str, Any]) -> dict[str, Any]:
    """The ceiling columns of one run.json (all <NA> over the direct link or a path whose
    calibration is missing or failed, with the reason in ``ceiling_missing``)."""
    row: dict[str, Any] = dict.fromkeys(CEILING_COLUMNS)
    path = record.get("path")
    unusable = _unusable_path(path)
    if unusable is not None or not isinstance(path, dict):
        row["ceiling_missing"] = unusable  # the same for every ceiling
        return row
    attempt = _attempt(record, path)
    flow_control, window = _flow_control(attempt)
    ceilings = {"link": _link(attempt), "loss": _loss(attempt), "flow_control": flow_control}
    row.update(ceiling_packet_bytes=attempt.packet, ceiling_payload_bytes=attempt.payload,
               ceiling_window_bytes=window,
               **{f"ceiling_{name}_mbps": c.mbps for name, c in ceilings.items()})
    row["ceiling_missing"] = "; ".join(f"{name}: {c.missing}" for name, c in ceilings.items()
                                       if c.missing) or None
    known = {name: c.mbps for name, c in ceilings.items() if c.mbps is not None}
    if not known:
        return row
    basis = min(known, key=lambda name: known[name])
    row.update(ceiling_mbps=known[basis], ceiling_basis=basis)
    goodput = _number(record.get("goodput_mbps"))
    if goodput is not None:
        row["ceiling_ratio"] = goodput / known[basis]
        row["ceiling_exceeded"], row["ceiling_exceeded_by"] = _exceeded(goodput, ceilings)
    return row
