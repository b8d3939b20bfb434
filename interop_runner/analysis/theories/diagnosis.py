"""What limited a run: one label per successful attempt, from the collected data.

Rules, applied in this order (the first that fires wins; see docs/monitors.md):

0. ``above_ceiling`` — not a limit but a measurement error: over a calibrated path, the goodput
   is above one of the path's closed-form ceilings by more than that ceiling's tolerance
   (``ceiling_exceeded``, :mod:`interop_runner.analysis.theories.ceilings`,
   docs/closed-form.md), so no other label can be trusted.
1. ``path_rate`` — over an emulated path (docs/paths.md): goodput (of all flows together, in
   an attempt of several) reached at least ``LINK_SHARE`` of the path's bottleneck rate.
   ``link_rate`` — goodput reached at least ``LINK_SHARE`` of the narrowest rate on the path:
   the NIC speed of either node or a tbf/htb rate limit on a data interface.
   ``delay_line_cpu`` — over a path whose delay line (a user-space process on the router)
   used at least ``CPU_BUSY_PCT`` % of a core during the transfer: the path itself was
   CPU-bound, and its numbers are not the configured path's.
2. ``receive_buffer_drops`` — a receiving UDP socket dropped datagrams because its buffer was
   full (``UdpRcvbufErrors``) on either node, at least ``DROP_MIN`` datagrams and at least
   ``DROP_SHARE`` of the datagrams that node received.
3. ``server_cpu`` / ``client_cpu`` — the busier of the two processes used at least
   ``CPU_BUSY_PCT`` % of one core, or the node's CPUs were saturated (mpstat medians over the
   transfer: one core at least ``CORE_BUSY_PCT`` % busy, or all cores together at least
   ``CORES_BUSY_PCT`` %; the network stack's softirq work is not charged to either process,
   and a multi-threaded process spreads over cores) — then the busier process is the limit.
4. ``undetermined`` — none of the above, or the data needed was not collected.

Failed attempts get no label (missing), so they never count as a diagnosis.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import pandas as pd

LABELS = ("above_ceiling", "path_rate", "link_rate", "delay_line_cpu", "receive_buffer_drops",
          "server_cpu", "client_cpu", "undetermined")
LINK_SHARE = 0.85  # goodput counts file bytes only; headers and ACKs use the rest
DROP_MIN = 10
DROP_SHARE = 0.001
CPU_BUSY_PCT = 90.0
CORE_BUSY_PCT = 90.0
CORES_BUSY_PCT = 85.0


def _num(row: Mapping[Any, Any], key: str) -> float | None:
    value = row.get(key)
    if value is None or value is pd.NA:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def _flag(row: Mapping[Any, Any], key: str) -> bool:
    """A boolean column that is set and true (<NA>, None and a missing key are not)."""
    value = row.get(key)
    return value is not None and value is not pd.NA and bool(value)


def diagnose(row: Mapping[Any, Any]) -> tuple[str | None, str | None]:
    """Label one attempt; returns ``(label, reason)``, ``(None, None)`` for failed attempts."""
    if row.get("status") != "ok":
        return None, None
    if _flag(row, "ceiling_exceeded"):
        return "above_ceiling", str(row.get("ceiling_exceeded_by") or "above a ceiling")
    goodput = _num(row, "goodput_mbps")
    link = _num(row, "link_rate_mbps")
    rated = _rate_rules(goodput, link, row)
    if rated is not None:
        return rated
    for role in ("client", "server"):
        drops = _num(row, f"{role}_udp_rcvbuf_errors")
        received = _num(row, f"{role}_udp_in_datagrams")
        if drops is not None and drops >= DROP_MIN and (
                received is None or drops >= DROP_SHARE * (received + drops)):
            share = f" ({drops / (received + drops):.2%})" if received is not None else ""
            return "receive_buffer_drops", f"{role} dropped {drops:.0f} datagrams{share}"
    cpu = _cpu_rules(row)
    if cpu is not None:
        return cpu
    if _num(row, "path_rate_mbps") is not None:
        return "undetermined", ("below the path's rate with no host limit seen: the flows' "
                                "congestion control, loss or windows")
    return "undetermined", "no rule fired (or the data was not collected)"


def _cpu_rules(row: Mapping[Any, Any]) -> tuple[str, str] | None:
    """The busier process at a core, or a saturated core or node. Without either process's
    CPU (kernel TCP flows of an attempt of several have none) the side whose node had the
    busier core is named."""
    server, client = _num(row, "server_cpu_pct"), _num(row, "client_cpu_pct")
    cores_of = {role: (_num(row, f"{role}_max_core_busy_pct"),
                       _num(row, f"{role}_cores_busy_pct")) for role in ("server", "client")}
    if server is not None or client is not None:
        side, pct = max((("server", server), ("client", client)),
                        key=lambda item: -1.0 if item[1] is None else item[1])
        assert pct is not None
        if pct >= CPU_BUSY_PCT:
            return f"{side}_cpu", f"{side} process used {pct:.0f} % of a core"
        who = f"{side} is the busier process ({pct:.0f} % of a core)"
    else:
        side = max(("client", "server"), key=lambda role: max(
            (v for v in cores_of[role] if v is not None), default=-1.0))
        who = f"the {side} node's (no process CPU measured)"
    core = max((c for c, _ in cores_of.values() if c is not None), default=None)
    cores = max((c for _, c in cores_of.values() if c is not None), default=None)
    if core is not None and core >= CORE_BUSY_PCT:
        return f"{side}_cpu", f"a core was {core:.0f} % busy; {who}"
    if cores is not None and cores >= CORES_BUSY_PCT:
        return f"{side}_cpu", f"all cores {cores:.0f} % busy; {who}"
    return None


def _rate_rules(goodput: float | None, link: float | None, row: Mapping[Any, Any]
                ) -> tuple[str, str] | None:
    """The path's or the link's rate reached, or a delay line that ran out of CPU."""
    path = _num(row, "path_rate_mbps")
    if goodput is not None and path is not None and goodput >= LINK_SHARE * path:
        return "path_rate", (f"goodput {goodput:.1f} Mbit/s >= {LINK_SHARE:.0%} of the path's "
                             f"{path:.4g} Mbit/s bottleneck")
    if goodput is not None and link is not None and goodput >= LINK_SHARE * link:
        return "link_rate", f"goodput {goodput:.0f} Mbit/s >= {LINK_SHARE:.0%} of {link:.0f} Mbit/s"
    cpu_s, seconds = _num(row, "delayline_cpu_s"), _num(row, "duration_s")
    if cpu_s is not None and seconds and 100.0 * cpu_s / seconds >= CPU_BUSY_PCT:
        return "delay_line_cpu", (f"the path's delay lines used {100.0 * cpu_s / seconds:.0f} % "
                                  "of a core: the path, not the flows, was the limit")
    return None


_INPUTS = {"status", "goodput_mbps", "link_rate_mbps", "server_cpu_pct", "client_cpu_pct",
           "path_rate_mbps", "delayline_cpu_s", "duration_s", "ceiling_exceeded",
           "ceiling_exceeded_by",
            *(f"{role}_{name}" for role in ("server", "client")
              for name in ("udp_rcvbuf_errors", "udp_in_datagrams", "max_core_busy_pct",
                           "cores_busy_pct"))}


def rule_inputs(frame: pd.DataFrame) -> pd.DataFrame:
    """The columns of ``frame`` that the bottleneck rules read."""
    return frame[[c for c in frame.columns if c in _INPUTS]]


def bottleneck_columns(inputs: pd.DataFrame) -> pd.DataFrame:
    """``bottleneck`` (category) and ``bottleneck_reason`` of each row of ``inputs`` (a
    results frame, or any frame with the columns the rules read), on its index."""
    labels = [diagnose(row) for row in rule_inputs(inputs).to_dict("records")]
    return pd.DataFrame({
        "bottleneck": pd.Categorical([lab for lab, _ in labels], categories=list(LABELS)),
        "bottleneck_reason": pd.array([why for _, why in labels], dtype="string"),
    }, index=inputs.index)


def add_bottleneck(frame: pd.DataFrame) -> pd.DataFrame:
    """Add ``bottleneck`` (category) and ``bottleneck_reason`` columns to a results frame."""
    labels = bottleneck_columns(frame)
    frame = frame.copy()
    frame["bottleneck"] = labels["bottleneck"]
    frame["bottleneck_reason"] = labels["bottleneck_reason"]
    return frame
