"""The client's measured ACK ratio: datagrams it sent per datagram it received.

In a download nearly everything the client sends acknowledges what it received, so its UDP
datagram counters (the nstat monitor, per network namespace on the local testbed) show the ACK
frequency it really ran: about 1/n for an ACK ratio of 1:n (paper 003 section V). They count
datagrams, not QUIC packets: with GRO or GSO a datagram may carry several packets, so the
measurement is exact with ``gso: false`` and ``gro: false``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import pandas as pd

from interop_runner.analysis.frames.frame import Segment

NAME = "client_ack_ratio_measured"
SENT = "client_udp_out_datagrams"
RECEIVED = "client_udp_in_datagrams"
BASIS = "client UdpOutDatagrams / UdpInDatagrams (nstat)"


class MeasuredAckRatio(NamedTuple):
    """The column's value in one attempt's segment and ``ack_ratio_basis``: how it was
    obtained, or why it is NA."""

    segment: Segment
    basis: str | None


def ack_ratio_measured(joined: dict[str, Any]) -> MeasuredAckRatio:
    """Client datagrams sent per datagram received of one attempt, from ``joined`` (its
    ``client_udp_out_datagrams`` and ``client_udp_in_datagrams``); NA with the reason when a
    counter is missing or the client received nothing."""
    sent, received = joined.get(SENT), joined.get(RECEIVED)
    if sent is None or received is None:
        missing = " and ".join(n for n, v in ((SENT, sent), (RECEIVED, received)) if v is None)
        return MeasuredAckRatio(Segment((NAME,), [None], True),
                                f"NA: no {missing} (the nstat monitor did not run or failed)")
    if received <= 0:
        return MeasuredAckRatio(Segment((NAME,), [None], True),
                                "NA: the client received no datagrams")
    return MeasuredAckRatio(Segment((NAME,), [sent / received], True), BASIS)


SUMMARY_KEYS = ["server", "client", "path_rtt_ms", "ack_ratio"]


def ack_ratio_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per pair, base RTT and ACK ratio asked for (paper 003 Fig. 7): the ok attempts
    (``n``), their goodput (mean, standard deviation, min, max in Mbit/s), the client's
    datagrams sent and received (means) and its measured ratio (mean, min, max)."""
    ok = frame[frame["status"] == "ok"]
    keys = [k for k in SUMMARY_KEYS if k in ok and ok[k].notna().any()]
    if ok.empty or not keys:
        return pd.DataFrame()
    cols = {"n": ("goodput_mbps", "size"), "goodput_mean": ("goodput_mbps", "mean"),
            "goodput_std": ("goodput_mbps", "std"), "goodput_min": ("goodput_mbps", "min"),
            "goodput_max": ("goodput_mbps", "max")}
    if SENT in ok and RECEIVED in ok:
        cols.update(sent=(SENT, "mean"), received=(RECEIVED, "mean"), ratio=(NAME, "mean"),
                    ratio_min=(NAME, "min"), ratio_max=(NAME, "max"))
    return ok.groupby(keys, observed=True, dropna=False).agg(**cols).reset_index()
