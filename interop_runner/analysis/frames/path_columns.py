"""The emulated path's columns of the results frame: what the path was configured to be,
how it was built, what its calibration measured, and what its bottleneck and delay lines
counted during the attempt (run.json ``path``; docs/paths.md).

Every column exists in every frame; over the direct link (no path) its values are <NA>, and
so is a counter the path's backend does not have (netem has no delay line).
"""

from __future__ import annotations

from typing import Any

# column -> (pandas dtype, unit, meaning)
PATH_COLUMNS: dict[str, tuple[str, str, str]] = {
    "path_key": ("string", "", "the path's key (campaign.json paths.<key>)"),
    "path_backend": ("string", "", "netem or nfqueue (tbf, iptables and the delay line)"),
    "path_placement": ("string", "", "router, or server-egress (no router in the testbed)"),
    "path_rate_mbps": ("Float64", "Mbit/s (SI)", "configured bottleneck rate (two links: what "
                       "the split ratio lets through, min(rate_i / share_i), or their sum "
                       "with flows pinned to a link)"),
    "path_rtt_ms": ("Float64", "ms", "configured base round-trip time"),
    "path_buffer_bytes": ("Int64", "bytes", "bottleneck buffer (tbf limit)"),
    "path_buffer_bdp": ("Float64", "BDP", "bottleneck buffer / (rate x base RTT)"),
    "path_loss": ("Float64", "", "configured random loss of the data direction"),
    "path_jitter": ("Float64", "", "configured CV of the data direction's delay"),
    "path_links": ("Int64", "", "links the data direction is split over (1 or 2)"),
    "path_calibration_ok": ("boolean", "", "every calibration check of the path passed"),
    "path_cal_rtt_ms": ("Float64", "ms", "calibrated base RTT (median of 50 pings)"),
    "path_cal_rate_mbps": ("Float64", "Mbit/s (SI)", "calibrated bottleneck rate at the wire"),
    "path_cal_queue_ms": ("Float64", "ms", "calibrated queueing delay of a full buffer"),
    "path_cal_loss": ("Float64", "", "calibrated loss rate (pings)"),
    "goodput_fraction": ("Float64", "", "goodput / configured bottleneck rate"),
    "bottleneck_sent_bytes": ("Int64", "bytes", "bytes the bottleneck qdisc sent (attempt)"),
    "bottleneck_sent_packets": ("Int64", "packets", "packets the bottleneck qdisc sent"),
    "bottleneck_drops": ("Int64", "packets", "packets the bottleneck qdisc dropped"),
    "bottleneck_overlimits": ("Int64", "", "tbf overlimits (packets that had to wait)"),
    "bottleneck_backlog_peak_bytes": ("Int64", "bytes",
                                      "largest bottleneck backlog sampled (every 50 ms)"),
    "path_loss_drops": ("Int64", "packets", "packets the random-loss rule dropped (router)"),
    "delayline_received": ("Int64", "packets", "packets the data delay line received"),
    "delayline_delivered": ("Int64", "packets", "packets the data delay line delivered"),
    "delayline_dropped": ("Int64", "packets", "packets the data delay line dropped (loss, "
                          "buffer; server-egress: the path's random loss too)"),
    "delayline_reordered": ("Int64", "packets", "delivered out of their arrival order"),
    "delayline_cpu_s": ("Float64", "s", "CPU time of every delay line during the attempt"),
}


def _mbps(bps: Any) -> float | None:
    return bps / 1e6 if isinstance(bps, (int, float)) else None


def path_values(record: dict[str, Any], goodput_mbps: Any) -> dict[str, Any]:
    """The path columns of one run.json (all <NA> without a path)."""
    row: dict[str, Any] = dict.fromkeys(PATH_COLUMNS)
    path = record.get("path")
    if not isinstance(path, dict):
        return row
    resolved = path.get("resolved") or {}
    rate, rtt, buffer = resolved.get("rate_bps"), resolved.get("rtt_ms"), resolved.get(
        "buffer_bytes")
    rate = _split_rate(record, rate)
    row.update(path_key=path.get("key"), path_backend=path.get("backend"),
               path_placement=path.get("placement"), path_rate_mbps=_mbps(rate),
               path_rtt_ms=rtt, path_buffer_bytes=buffer, path_loss=resolved.get("loss"),
               path_jitter=resolved.get("jitter"),
               path_links=len(resolved["links"]) if resolved.get("links") else 1)
    if buffer and rate and rtt:
        row["path_buffer_bdp"] = buffer * 8000.0 / (rate * rtt)
    if isinstance(goodput_mbps, (int, float)) and rate:
        row["goodput_fraction"] = goodput_mbps * 1e6 / rate
    row.update(_calibration(path.get("calibration")))
    row.update(_counters(path.get("counters") or {}))
    return row


def _split_rate(record: dict[str, Any], rate: Any) -> Any:
    """The rate the data direction can carry: on two links split ``a:b`` per batch, the
    first link carries a/(a+b) of the packets, so it fills at rate_0 / share_0 and the path
    at min(rate_i / share_i) (their sum only at the links' own ratio). Flows pinned to a
    link bypass the split, and then the links together carry their sum."""
    path = record["path"]
    links = (path.get("resolved") or {}).get("links") or []
    ratio = ((path.get("config") or {}).get("split") or {}).get("ratio")
    pinned = any(f.get("link") in ("0", "1") for f in record.get("flows") or [])
    if len(links) != 2 or not isinstance(ratio, str) or pinned:
        return rate
    shares = [int(part) for part in ratio.split(":")]
    rates = [link.get("rate_bps") for link in links]
    if not all(isinstance(r, (int, float)) for r in rates):
        return rate
    return min(r * sum(shares) / share for r, share in zip(rates, shares))


def _calibration(cal: Any) -> dict[str, Any]:
    if not isinstance(cal, dict):
        return {}
    return {"path_calibration_ok": cal.get("ok"), "path_cal_rtt_ms": cal.get("rtt_ms"),
            "path_cal_rate_mbps": _mbps(cal.get("rate_wire_bps")),
            "path_cal_queue_ms": cal.get("queue_ms"), "path_cal_loss": cal.get("loss")}


def _counters(counters: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    bottleneck = counters.get("bottleneck") or {}
    for name in ("sent_bytes", "sent_packets", "drops", "overlimits", "backlog_peak_bytes"):
        out[f"bottleneck_{name}"] = bottleneck.get(name)
    out["path_loss_drops"] = counters.get("loss_rule_drops")
    lines = counters.get("delay_lines") or {}
    data = lines.get("data") or {}
    out.update(delayline_received=data.get("received"), delayline_delivered=data.get("delivered"),
               delayline_reordered=data.get("reordered"))
    dropped = [data.get(k) for k in ("dropped_loss", "dropped_buffer")]
    out["delayline_dropped"] = sum(d for d in dropped if isinstance(d, int)) if data else None
    cpu = [line.get("cpu_s") for line in lines.values() if isinstance(line, dict)]
    out["delayline_cpu_s"] = sum(c for c in cpu if isinstance(c, (int, float))) if cpu else None
    return out
