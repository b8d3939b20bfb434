"""``iperf3 -J``: what the receiver got, the MSS and the congestion control of a TCP test,
and the sender's and receiver's view of a UDP test."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from interop_runner.parsers.common import ParseError, excerpt

__all__ = ["IperfResult", "parse_iperf3"]


@dataclass(frozen=True)
class IperfResult:
    """One iperf3 test: bits per second at the receiver (payload), the seconds it covers, and
    for TCP the MSS and congestion control, for UDP the datagrams lost."""

    protocol: str
    received_bps: float
    seconds: float
    mss: int | None
    congestion: str | None
    lost_packets: int | None
    packets: int | None
    received_bytes: int | None = None  # payload bytes at the receiver (end.sum_received)


def _get(data: dict[str, Any], *keys: str) -> Any:
    node: Any = data
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


# what iperf3 reports when its client was interrupted (SIGINT): the client's and the server's
# words; the report still holds the counts up to then
INTERRUPTED = ("interrupt - the client has terminated", "the client has terminated")


def parse_iperf3(text: str, interrupted: bool = False) -> IperfResult:
    """Parse ``iperf3 -J`` output (ParseError on an error report or missing fields). With
    ``interrupted`` a report of a client stopped by SIGINT (a flow stopped at its duration) is
    read too: its counts are those up to the stop."""
    try:
        data = json.loads(text)
    except ValueError:
        raise ParseError(f"iperf3: not JSON: {excerpt(text)}") from None
    if not isinstance(data, dict):
        raise ParseError("iperf3: not a JSON object")
    if data.get("error") and not (interrupted and data["error"] in INTERRUPTED):
        raise ParseError(f"iperf3: {data['error']}")
    protocol = str(_get(data, "start", "test_start", "protocol") or "TCP")
    if protocol == "UDP":
        summary = _get(data, "end", "sum")
        received = _get(data, "end", "sum_received") or summary
    else:
        received = _get(data, "end", "sum_received")
    if not isinstance(received, dict) or "bits_per_second" not in received:
        raise ParseError("iperf3: no receiver summary (end.sum_received)")
    udp = protocol == "UDP"
    summary = _get(data, "end", "sum") if udp else None
    return IperfResult(
        protocol=protocol, received_bps=float(received["bits_per_second"]),
        seconds=float(received.get("seconds", 0.0)),
        mss=_get(data, "start", "tcp_mss_default"),
        congestion=_get(data, "end", "sender_tcp_congestion"),
        lost_packets=summary.get("lost_packets") if isinstance(summary, dict) else None,
        packets=summary.get("packets") if isinstance(summary, dict) else None,
        received_bytes=int(received["bytes"]) if "bytes" in received else None)
