"""``ethtool -S <iface>``: NIC driver counters, totals and per queue, for any driver."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from interop_runner.parsers.common import ParseError, counter_delta, excerpt
from interop_runner.parsers.snapshots import (
    Aligned,
    AlignedCache,
    DeltaReader,
    Deltas,
    LayoutCache,
    NotThisLayout,
    changed_units,
)

__all__ = ["EthtoolStats", "parse_ethtool_stats", "ethtool_delta", "ethtool_totals_delta",
           "ethtool_totals_deltas", "QUEUE_SUM_PREFIX"]

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
    return ethtool_totals_deltas(before, after).as_dict()


def _counter_key(line: str) -> str | None:
    """The raw key of a ``key: <unsigned integer>`` line, ``None`` for any other line."""
    raw, sep, value = line.rpartition(": ")
    return raw if sep and value.isdecimal() else None


@dataclass(frozen=True, slots=True)
class _TotalsPlan:
    """How the counter lines of one layout become totals."""

    names: tuple[str, ...]
    slots: list[int]
    """Per line: its total's index in ``names``, -1 when the line sets nothing (not a
    counter, or a device-wide counter printed again further down)."""
    sums: list[bool]
    """Per line: a per-queue counter, added into its total (else it sets the total)."""
    usable: bool
    """False when there is no counter or two totals would share a name: the line-by-line
    path handles those."""


def _totals_plan(keys: list[str | None]) -> _TotalsPlan:
    """The totals of a layout: device-wide counters (the last line of a name counts), then
    per-queue sums (renamed ``queue_sum.<name>`` where the driver prints that total too)."""
    last_global: dict[str, int] = {}
    queue_lines: dict[str, list[int]] = {}
    for i, raw in enumerate(keys):
        if raw is not None:
            queue, name = _classify(raw)
            if queue < 0:
                last_global[name] = i
            else:
                queue_lines.setdefault(name, []).append(i)
    names = list(last_global)
    slots, sums = [-1] * len(keys), [False] * len(keys)
    for slot, i in enumerate(last_global.values()):
        slots[i] = slot
    for name, lines in queue_lines.items():
        for i in lines:
            slots[i], sums[i] = len(names), True
        names.append(QUEUE_SUM_PREFIX + name if name in last_global else name)
    return _TotalsPlan(tuple(names), slots, sums, 0 < len(names) == len(set(names)))


def ethtool_totals_deltas(before: str, after: str) -> Deltas:
    """:func:`ethtool_totals_delta` as :class:`Deltas` (a counter that went backwards is
    ``None``); snapshots of a layout seen before share its ``names``.

    The layout of ``after`` (which line holds which counter) is recognised by comparing it
    with a cached snapshot of that layout: byte by byte (numpy) when the texts have that
    snapshot's length, else line by line. Only lines that differ between the two snapshots
    are converted.
    """
    return _READER.deltas(before, after)


def _value_offset(raw: str | None, line: str) -> int:
    """Where a line's value begins: after ``<raw key>: `` (beyond the end of a line that is
    no counter: it may not change)."""
    return len(raw) + 2 if raw is not None else len(line) + 1


def _aligned_diffs(ref: Aligned, lines: list[int], before: str, after: str
                   ) -> Iterator[tuple[int, int]]:
    """(line, after - before) of the changed lines of snapshots that compare byte by byte
    with ``ref``: their values are at the reference's places, digits only."""
    begins, ends = ref.begins, ref.ends
    for k in lines:
        begin, end = begins[k], ends[k]
        yield k, int(after[begin:end]) - int(before[begin:end])


def _line_diffs(keys: list[str | None], b_lines: list[str], a_lines: list[str]
                ) -> Iterator[tuple[int, int]]:
    """(line, after - before) of the changed counter lines, as the line path checks them."""
    for i in changed_units(b_lines, a_lines):
        raw = keys[i]
        if raw is None:
            continue
        raw_b, _, value_b = b_lines[i].rpartition(": ")
        if raw_b != raw or not value_b.isdecimal():
            raise NotThisLayout
        yield i, int(a_lines[i][len(raw) + 2:]) - int(value_b)


def _totals(plan: _TotalsPlan, diffs: Iterable[tuple[int, int]], before: str, after: str
            ) -> Deltas:
    """The totals of a usable plan from the changes of its lines (every other line adds 0);
    a counter that went backwards is ``None``."""
    totals = [0] * len(plan.names)
    moved: dict[int, None] = {}
    slots, sums = plan.slots, plan.sums
    try:
        for i, diff in diffs:
            slot = slots[i]
            if slot >= 0:
                totals[slot] = totals[slot] + diff if sums[i] else diff
                moved[slot] = None
    except NotThisLayout:
        return Deltas.of(_full_totals_delta(before, after))
    except ValueError:  # beyond int's digit limit: raised where the line path raises it
        return Deltas.of(_line_totals_delta(before, after))
    if all(totals[slot] >= 0 for slot in moved):
        return Deltas(plan.names, totals, True, list(moved))
    return Deltas(plan.names, [v if v >= 0 else None for v in totals], False, list(moved))


def _full_totals_delta(before: str, after: str) -> dict[str, int]:
    """The totals' deltas through the full parse of both snapshots."""
    return ethtool_delta(parse_ethtool_stats(before), parse_ethtool_stats(after)).totals


def _line_totals_delta(before: str, after: str) -> dict[str, int]:
    """The totals' deltas line by line, converting only lines that differ; the full parse
    when the layouts differ. The reference of :func:`ethtool_totals_deltas`, which takes
    this path for layouts whose totals would share a name."""
    b_lines, a_lines = before.split("\n"), after.split("\n")
    if len(b_lines) != len(a_lines) or "\r" in before or "\r" in after:
        return _full_totals_delta(before, after)
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
                return _full_totals_delta(before, after)
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


_READER: DeltaReader[str] = DeltaReader(
    LayoutCache(_counter_key), AlignedCache(digits=True), _totals_plan, _value_offset,
    _aligned_diffs, _line_diffs, _totals, _line_totals_delta, _full_totals_delta,
    pairs_up=lambda before, after: "\r" not in before and "\r" not in after)


def parse_ethtool_features(text: str) -> dict[str, tuple[bool, bool]]:
    """``ethtool -k`` output -> feature name -> (on, fixed)."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^\s*([a-z0-9-]+):\s+(on|off)(\s+\[fixed\])?", line)
        if m:
            out[m.group(1)] = (m.group(2) == "on", bool(m.group(3)))
    return out
