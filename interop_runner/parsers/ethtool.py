"""``ethtool -S <iface>``: NIC driver counters, totals and per queue, for any driver."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from interop_runner.parsers.common import ParseError, counter_delta, excerpt

__all__ = ["EthtoolStats", "parse_ethtool_stats", "ethtool_delta", "ethtool_totals_delta",
           "QUEUE_SUM_PREFIX"]

QUEUE_SUM_PREFIX = "queue_sum."

# Queue index inside the key, per driver family: (pattern, prefix the direction?).
_KEY_STYLES = (
    # ixgbe, igb, igc, ice, ifb, older virtio_net, veth: rx_queue_3_packets, tx_queue_0_xdp_xmit
    (re.compile(r"^(rx|tx)_queue_(\d+)_(.+)$"), True),
    # mlx5, mlx4, virtio_net >= 6.x, hns3: rx3_packets, tx0_tx_timeouts, ch2_events, txq1_pktnum_rcd
    (re.compile(r"^(rx|tx|ch|rxq|txq)(\d+)_(.+)$"), True),
    # i40e, sfc: tx-3.tx_packets, rx-0.rx_bytes (the direction is usually repeated after the dot)
    (re.compile(r"^(rx|tx)-(\d+)\.(.+)$"), False),
    # ena: queue_0_tx_cnt
    (re.compile(r"^()queue_(\d+)_(.+)$"), False),
)
_DIRECTION = {"rx": "rx", "tx": "tx", "ch": "ch", "rxq": "rx", "txq": "tx", "": ""}

# Raw key text (indentation and any "[3]: " prefix included) -> (queue or -1, name).
_KEY_CACHE: dict[str, tuple[int, str]] = {}
_KEY_CACHE_MAX = 65536


def _classify(raw: str) -> tuple[int, str]:
    """(queue, normalised name) of a per-queue key, (-1, key) of a device-wide one."""
    key = raw.strip()
    head, sep, rest = key.partition(":")
    if sep and rest[:1] == " ":
        index = head[1:-1] if head[:1] == "[" and head[-1:] == "]" else head
        if index.isdecimal():
            return int(index), rest.strip()
    for style, always_prefix in _KEY_STYLES:
        m = style.match(key)
        if m:
            direction, tail = _DIRECTION[m[1]], m[3]
            if direction and (always_prefix or not tail.startswith(direction + "_")):
                tail = f"{direction}_{tail}"
            return int(m[2]), tail
    return -1, key


@dataclass(slots=True)
class EthtoolStats:
    """Counters of one ``ethtool -S`` snapshot.

    ``totals``: every device-wide counter under the driver's own name, plus each per-queue
    counter summed over the queues under its normalised name (``rx_packets``, ``tx_bytes``,
    ``rx_ucast_packets``...). When the driver itself prints a device-wide counter of that
    name, the driver's value is kept and the sum goes to ``queue_sum.<name>``.

    ``per_queue``: queue index -> normalised name -> value. rx and tx queues with the same
    index share an entry; the names keep their ``rx_``/``tx_`` prefix.
    """

    totals: dict[str, int] = field(default_factory=dict)
    per_queue: dict[int, dict[str, int]] = field(default_factory=dict)


def parse_ethtool_stats(text: str) -> EthtoolStats:
    """Parse ``ethtool -S <iface>`` output of any driver.

    Lines that are not ``key: <unsigned integer>`` (the ``NIC statistics:`` header, string
    values) are skipped. Recognised per-queue styles: ``[3]: key`` (bnxt), ``3: key``,
    ``rx3_key``/``tx3_key``/``ch3_key`` (mlx5, mlx4, virtio_net), ``rxq3_``/``txq3_`` (hns3),
    ``rx_queue_3_key``/``tx_queue_3_key`` (ixgbe, ice, igb, veth, ifb, older virtio_net),
    ``rx-3.key``/``tx-3.key`` (i40e, sfc) and ``queue_3_key`` (ena).

    Raises ParseError if the text holds no counter at all (e.g. ``no stats available``).
    """
    per_queue: dict[int, dict[str, int]] = {}
    globals_: dict[str, int] = {}
    sums: dict[str, int] = {}
    cache = _KEY_CACHE
    if "\r" in text:
        text = text.replace("\r", "")
    for line in text.split("\n"):
        raw, sep, value = line.rpartition(": ")
        cls = cache.get(raw)
        if cls is None:
            if not sep or not value.isdecimal():
                continue
            if len(cache) >= _KEY_CACHE_MAX:
                cache.clear()
            cls = cache[raw] = _classify(raw)
        if not value.isdecimal():  # also for a cached key: int() takes "-10", "+1", "1_0"
            continue
        v = int(value)
        queue, name = cls
        if queue < 0:
            globals_[name] = v
            continue
        q = per_queue.get(queue)
        if q is None:
            q = per_queue[queue] = {}
        old = q.get(name)
        q[name] = v
        sums[name] = sums.get(name, 0) + v - (old or 0)
    if not globals_ and not per_queue:
        if not text.strip():
            raise ParseError("empty ethtool output")
        raise ParseError(f"no ethtool counters ({excerpt(text)!r})")
    clashes = sums.keys() & globals_.keys()
    totals = globals_
    for name, total in sums.items():
        totals[QUEUE_SUM_PREFIX + name if name in clashes else name] = total
    return EthtoolStats(totals=totals, per_queue=per_queue)


def ethtool_delta(before: EthtoolStats, after: EthtoolStats) -> EthtoolStats:
    """Per-counter ``after - before`` of two snapshots (totals and each queue).

    Same rules as :func:`counter_delta`: only counters in both snapshots, and counters
    that went backwards (reset) are dropped. A queue present in only one snapshot is dropped.
    """
    per_queue = {
        q: counter_delta(before.per_queue[q], counters)
        for q, counters in after.per_queue.items()
        if q in before.per_queue
    }
    return EthtoolStats(totals=counter_delta(before.totals, after.totals), per_queue=per_queue)


def ethtool_totals_delta(before: str, after: str) -> dict[str, int]:
    """``ethtool_delta(parse(before), parse(after)).totals`` computed from the texts directly.

    The tool prints counters in a fixed order, so the two snapshots are compared line by line
    and only lines that differ are converted (most counters do not move during a run). Falls
    back to the full parse when the layouts differ. Same result, several times faster.
    """
    b_lines, a_lines = before.split("\n"), after.split("\n")
    if len(b_lines) != len(a_lines) or "\r" in before or "\r" in after:
        return ethtool_delta(parse_ethtool_stats(before), parse_ethtool_stats(after)).totals
    cache = _KEY_CACHE
    globals_: dict[str, int] = {}
    sums: dict[str, int] = {}
    for b, a in zip(b_lines, a_lines):
        raw, sep, value = a.rpartition(": ")
        if not sep or not value.isdecimal():
            continue
        if b == a:
            diff = 0
        else:
            raw_b, _, value_b = b.rpartition(": ")
            if raw_b != raw or not value_b.isdecimal():
                return ethtool_delta(parse_ethtool_stats(before),
                                     parse_ethtool_stats(after)).totals
            diff = int(value) - int(value_b)
        cls = cache.get(raw)
        if cls is None:
            if len(cache) >= _KEY_CACHE_MAX:
                cache.clear()
            cls = cache[raw] = _classify(raw)
        queue, name = cls
        if queue < 0:
            globals_[name] = diff
        else:
            sums[name] = sums.get(name, 0) + diff
    if not globals_ and not sums:
        parse_ethtool_stats(after)  # raises the right ParseError
    clashes = sums.keys() & globals_.keys()
    totals = {k: v for k, v in globals_.items() if v >= 0}
    for name, total in sums.items():
        if total >= 0:
            totals[QUEUE_SUM_PREFIX + name if name in clashes else name] = total
    return totals


def parse_ethtool_features(text: str) -> dict[str, tuple[bool, bool]]:
    """``ethtool -k`` output -> feature name -> (on, fixed)."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^\s*([a-z0-9-]+):\s+(on|off)(\s+\[fixed\])?", line)
        if m:
            out[m.group(1)] = (m.group(2) == "on", bool(m.group(3)))
    return out
