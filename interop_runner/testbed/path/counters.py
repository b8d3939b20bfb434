"""What the path did during one attempt: the difference of its counters after and before
the transfer (pure; the counters come from :meth:`~.node.PathNode.counters`).

* the bottleneck qdisc (``tc -s -j qdisc show``): bytes and packets sent, drops,
  overlimits, and its backlog when the transfer ended;
* the iptables rules of the path's chain: packets dropped by the random-loss rule;
* each delay line's stats: packets received, delivered, dropped (loss, buffer), reordered.
"""

from __future__ import annotations

import re
from typing import Any

QDISC_COUNTERS = {"sent_bytes": "bytes", "sent_packets": "packets", "drops": "drops",
                  "overlimits": "overlimits"}
LINE_COUNTERS = ("received", "delivered", "dropped_loss", "dropped_buffer", "reordered",
                 "reorder_timeouts", "bytes_received", "bytes_delivered", "nfq_enobufs")
_RULE = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\S+)\s+")


def bottleneck_qdisc(qdiscs: list[dict[str, Any]], handle: str) -> dict[str, Any] | None:
    """The qdisc with ``handle`` (``"1:"``) in ``tc -j`` output."""
    for qdisc in qdiscs:
        if qdisc.get("handle") == handle:
            return qdisc
    return None


def _delta(after: dict[str, Any] | None, before: dict[str, Any] | None, key: str
           ) -> int | None:
    if after is None or not isinstance(after.get(key), int):
        return None
    start = before.get(key) if before is not None else 0
    return int(after[key]) - (int(start) if isinstance(start, int) else 0)


def loss_rule_drops(rules: str) -> int | None:
    """Packets dropped by the random-loss rule (``iptables -L -v -x`` of the chain)."""
    for line in rules.splitlines():
        match = _RULE.match(line)
        if match and match.group(3) == "DROP" and "statistic" in line:
            return int(match.group(1))
    return None


def attempt_counters(before: dict[str, Any], after: dict[str, Any],
                     bottleneck: str | None) -> dict[str, Any]:
    """The path's counters over one attempt (None where the path has no such part)."""
    out: dict[str, Any] = {}
    if bottleneck is not None:
        handle = bottleneck.split()[-1]
        q0 = bottleneck_qdisc(before.get("qdisc", []), handle)
        q1 = bottleneck_qdisc(after.get("qdisc", []), handle)
        out["bottleneck"] = {name: _delta(q1, q0, key) for name, key in QDISC_COUNTERS.items()}
        out["bottleneck"]["backlog_end_bytes"] = (q1 or {}).get("backlog")
    drops0 = loss_rule_drops(before.get("iptables", ""))
    drops1 = loss_rule_drops(after.get("iptables", ""))
    out["loss_rule_drops"] = None if drops1 is None else drops1 - (drops0 or 0)
    lines0, lines1 = before.get("delay_lines") or {}, after.get("delay_lines") or {}
    out["delay_lines"] = {
        direction: {**{k: _delta(stats, lines0.get(direction), k) for k in LINE_COUNTERS},
                    "held_max": stats.get("held_max"),
                    "cpu_s": _cpu(stats) - _cpu(lines0.get(direction)),
                    "links": _link_deltas(stats.get("links"),
                                          (lines0.get(direction) or {}).get("links"))}
        for direction, stats in lines1.items() if isinstance(stats, dict)}
    return out


def _link_deltas(after: Any, before: Any) -> list[dict[str, int | None]] | None:
    """Each link's counters over the attempt (the delay line counts since it started)."""
    if not isinstance(after, list):
        return None
    start = before if isinstance(before, list) and len(before) == len(after) else [{}] * len(after)
    return [{k: _delta(a, b, k) for k in a} for a, b in zip(after, start) if isinstance(a, dict)]


def _cpu(stats: dict[str, Any] | None) -> float:
    if not isinstance(stats, dict):
        return 0.0
    return float(stats.get("cpu_user_s") or 0.0) + float(stats.get("cpu_sys_s") or 0.0)
