"""Per-attempt monitor columns: parse the raw files of one attempt into flat, typed values.

Column names are role-prefixed and unit-suffixed where the unit is not in the counter's own
name: ``client_cpu_pct``, ``client_udp_rcvbuf_errors``, ``server_tx_bytes`` (sysfs),
``server_nic_<counter>`` (every ethtool -S total, delta), ``client_nstat_<Counter>`` (every
nstat counter, delta), ``server_qdisc_rate_mbps``. A monitor whose files are missing or not
understood contributes no columns and a reason in ``monitors_missing``; it never stops loading.
"""

from __future__ import annotations

import functools
import json
import statistics
from pathlib import Path
from typing import Any, Callable

from interop_runner.parsers.folded import read_folded
from interop_runner.parsers.perf import Rules, categorize, load_rules
from interop_runner.parsers import (ParseError, counter_delta, cpu_pct, ethtool_totals_delta,
                       nstat_delta, parse_mpstat_json, parse_proc_times, pidstat_cpu_summary,
                       parse_sysfs_stats, parse_tc_qdisc)

ROLES = ("server", "client")

# nstat counters that get a friendly column name (the rest keep their nstat name).
NSTAT_NAMES = {
    "UdpInDatagrams": "udp_in_datagrams",
    "UdpOutDatagrams": "udp_out_datagrams",
    "UdpRcvbufErrors": "udp_rcvbuf_errors",
    "UdpSndbufErrors": "udp_sndbuf_errors",
    "UdpInErrors": "udp_in_errors",
    "UdpNoPorts": "udp_no_ports",
    "TcpRetransSegs": "tcp_retrans_segs",
    "TcpOutSegs": "tcp_out_segs",
    "TcpInSegs": "tcp_in_segs",
}


# counter name -> column name, per role (the same few hundred names recur in every attempt)
_NSTAT_COLUMNS: dict[str, dict[str, str]] = {role: {} for role in ROLES}
_NIC_COLUMNS: dict[str, dict[str, str]] = {role: {} for role in ROLES}


def _read(path: Path) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def _pair(side: Path, name: str) -> tuple[str, str]:
    """The before/after snapshot texts of a monitor; ParseError when one is missing."""
    before, after = _read(side / f"{name}-before.txt"), _read(side / f"{name}-after.txt")
    if before is None or after is None:
        raise ParseError(f"{name} snapshot files missing")
    return before, after


class _Collector:
    """Accumulates columns and missing-monitor reasons for one attempt."""

    def __init__(self, requested: dict[str, dict[str, str]]) -> None:
        self.cols: dict[str, Any] = {}
        self.missing: list[str] = []
        self.requested = requested

    def wanted(self, role: str, monitor: str) -> bool:
        status = self.requested.get(role, {}).get(monitor)
        if status is None:
            return False
        if status != "ok":
            self.missing.append(f"{role}.{monitor}: {status}")
            return False
        return True

    def attempt(self, role: str, monitor: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except ParseError as exc:
            self.missing.append(f"{role}.{monitor}: {exc}")
        except (OSError, ValueError, KeyError, IndexError) as exc:
            self.missing.append(f"{role}.{monitor}: {type(exc).__name__}: {exc}")


def monitor_columns(attempt: Path, run: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Monitor-derived columns of one attempt and the reasons for what is missing."""
    col = _Collector(run.get("monitors") or {})
    start_ns, end_ns = run.get("start_ns"), run.get("end_ns")
    window = (start_ns / 1e9, end_ns / 1e9) if start_ns and end_ns else None
    measured = run.get("status") == "ok" or start_ns is not None
    for role in ROLES:
        side = attempt / role
        p = f"{role}_"
        cols = col.cols

        if role == "client":
            c = run.get("client") or {}
            if c.get("cpu_user_s") is not None and run.get("duration_s"):
                cols[p + "cpu_pct"] = 100.0 * (c["cpu_user_s"] + c["cpu_system_s"]) / \
                    run["duration_s"]
        elif measured:
            def server_cpu() -> None:
                pair = _pair(side, "proc")
                value = cpu_pct(parse_proc_times(pair[0]), parse_proc_times(pair[1]))
                if value is not None:
                    cols[p + "cpu_pct"] = value
            col.attempt(role, "cpu", server_cpu)

        if not measured:
            continue

        if col.wanted(role, "sysfs"):
            def sysfs() -> None:
                pair = _pair(side, "sysfs")
                for key, value in counter_delta(parse_sysfs_stats(pair[0]),
                                                parse_sysfs_stats(pair[1])).items():
                    cols[p + key] = value
            col.attempt(role, "sysfs", sysfs)

        if col.wanted(role, "ethtool"):
            def ethtool() -> None:
                pair = _pair(side, "ethtool")
                names = _NIC_COLUMNS[role]
                for key, value in ethtool_totals_delta(pair[0], pair[1]).items():
                    name = names.get(key)
                    if name is None:
                        name = names[key] = p + "nic_" + key
                    cols[name] = value
            col.attempt(role, "ethtool", ethtool)

        if col.wanted(role, "nstat"):
            def nstat() -> None:
                pair = _pair(side, "nstat")
                names = _NSTAT_COLUMNS[role]
                for key, value in nstat_delta(pair[0], pair[1]).items():
                    name = names.get(key)
                    if name is None:
                        name = names[key] = p + NSTAT_NAMES.get(key, "nstat_" + key)
                    cols[name] = value
            col.attempt(role, "nstat", nstat)

        if col.wanted(role, "tc"):
            def tc() -> None:
                pair = _pair(side, "tc")
                before, after = parse_tc_qdisc(pair[0]), parse_tc_qdisc(pair[1])
                rates = [q.rate_bit_s for q in after if q.rate_bit_s]
                if rates:
                    cols[p + "qdisc_rate_mbps"] = min(rates) / 1e6
                drops_before = sum(q.dropped or 0 for q in before if q.entity == "qdisc")
                drops_after = sum(q.dropped or 0 for q in after if q.entity == "qdisc")
                if drops_after >= drops_before:
                    cols[p + "qdisc_dropped"] = drops_after - drops_before
            col.attempt(role, "tc", tc)

        if col.wanted(role, "pidstat"):
            def pidstat() -> None:
                text = _read(side / "pidstat.txt")
                if text is None:
                    raise ParseError("pidstat.txt missing")
                lo, hi = window if window else (None, None)
                mean, top = pidstat_cpu_summary(text, lo, hi)
                if mean is not None:
                    cols[p + "pidstat_cpu_pct"] = mean
                if top is not None:
                    cols[p + "max_thread_cpu_pct"] = top
            col.attempt(role, "pidstat", pidstat)

        if col.wanted(role, "mpstat"):
            def mpstat() -> None:
                text = _read(side / "mpstat.txt")
                if text is None:
                    raise ParseError("mpstat.txt missing")
                per_cpu: dict[int | str, list[tuple[float, float]]] = {}
                for s in parse_mpstat_json(text):
                    if s.idle is not None and s.timestamp is not None:
                        per_cpu.setdefault(s.cpu, []).append((s.timestamp, 100.0 - s.idle))
                busy = _in_window(per_cpu.pop("all", []), window)
                if busy:
                    cols[p + "cores_busy_pct"] = statistics.median(busy)
                cores = [statistics.median(v) for v in
                         (_in_window(samples, window) for samples in per_cpu.values()) if v]
                if cores:
                    cols[p + "max_core_busy_pct"] = max(cores)
            col.attempt(role, "mpstat", mpstat)
        if col.wanted(role, "perf"):
            def perf() -> None:
                if not (side / "perf-process.folded").exists():
                    raise ParseError("perf-process.folded missing")
                impl = (run.get(role) or {}).get("implementation")
                for category, share in perf_shares(side / "perf-process.folded", impl).items():
                    cols[f"{p}perf_{_slug(category)}_share"] = share
            col.attempt(role, "perf", perf)

        if col.wanted(role, "tcpdump"):
            def tcpdump() -> None:
                text = _read(side / "pcap-summary.json")
                if text is None:
                    raise ParseError("pcap-summary.json missing")
                summary = json.loads(text)
                for key in ("packets_in", "packets_out", "bytes_in", "bytes_out",
                            "merged_packets", "max_ip_length"):
                    if summary.get(key) is not None:
                        cols[f"{p}pcap_{key}"] = summary[key]
            col.attempt(role, "tcpdump", tcpdump)
    return col.cols, col.missing


def _slug(category: str) -> str:
    return category.lower().replace(" ", "_").replace("/", "")


@functools.lru_cache(maxsize=1)
def _rules() -> Rules:
    return load_rules()


def perf_shares(folded: Path, implementation: str | None) -> dict[str, float]:
    """Shares of the perf categories (paper Fig. 7) in a folded-stacks file."""
    return categorize(read_folded(folded), _rules(), implementation)


def _in_window(samples: list[tuple[float, float]],
               window: tuple[float, float] | None) -> list[float]:
    """Values of 1 s samples (stamped at the interval's end) inside the transfer window:
    the intervals lying wholly inside it, or, for transfers shorter than that, those
    overlapping it."""
    if window is None:
        return [v for _, v in samples]
    lo, hi = window
    inside = [v for t, v in samples if t - 1 >= lo and t <= hi]
    return inside or [v for t, v in samples if t >= lo and t - 1 <= hi]


def link_rate_mbps(cols: dict[str, Any], hosts: dict[str, Any]) -> float | None:
    """Narrowest rate on the path: qdisc rate limits of either node, NIC speeds from facts."""
    rates = [cols[k] for k in ("server_qdisc_rate_mbps", "client_qdisc_rate_mbps") if k in cols]
    for facts in hosts.values():
        speed = facts.get("nic_speed_mbps") if isinstance(facts, dict) else None
        if speed:
            rates.append(float(speed))
    return min(rates) if rates else None
