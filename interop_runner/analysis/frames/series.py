"""Long-format frames: per-second CPU of the processes, per-core CPU, interface rates and perf
categories, one row per sample (or category) with the attempt's identifying columns."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, Iterable

import pandas as pd

from interop_runner.monitors import ROLES
from interop_runner.monitors.captures import perf_shares
from interop_runner.parsers import (
    ParseError,
    ethtool_delta,
    parse_ethtool_stats,
    parse_ifstat,
    parse_mpstat_json,
    parse_pidstat,
)
from interop_runner.storage.layout import iter_run_files
from interop_runner.storage.run_record import read_run

ID_COLUMNS = ("campaign", "server", "client", "testcase", "repetition", "attempt", "role")


def _attempts(paths: Iterable[Path | str]) -> Iterable[tuple[Path, dict[str, Any]]]:
    for root in paths:
        for run_file in iter_run_files(Path(root)):
            yield run_file.parent, read_run(run_file)


def _ids(run: dict[str, Any], role: str) -> dict[str, Any]:
    return {"campaign": run.get("campaign"),
            "server": (run.get("server") or {}).get("implementation"),
            "client": (run.get("client") or {}).get("implementation"),
            "testcase": run.get("testcase"), "repetition": run.get("repetition"),
            "attempt": run.get("attempt"), "role": role}


def _long(paths: Iterable[Path | str], file: str,
          rows_of: Callable[[str, dict[str, Any], str], list[dict[str, Any]]]) -> pd.DataFrame:
    out: list[dict[str, Any]] = []
    for attempt, run in _attempts(paths):
        for role in ROLES:
            path = attempt / role / file
            if not path.exists():
                continue
            try:
                out += rows_of(path.read_text(errors="replace"), run, role)
            except (ParseError, ValueError):
                continue  # the wide frame's monitors_missing says why
    frame = pd.DataFrame(out)
    if frame.empty:
        return pd.DataFrame(columns=list(ID_COLUMNS))
    for col in ("repetition", "attempt"):
        frame[col] = frame[col].astype("Int64")
    return frame


def load_cpu_series(*paths: Path | str) -> pd.DataFrame:
    """pidstat samples of the server and client processes and their threads (1 s)."""
    def rows(text: str, run: dict[str, Any], role: str) -> list[dict[str, Any]]:
        return [{**_ids(run, role), "timestamp": s.timestamp, "pid": s.pid, "tid": s.tid,
                 "command": s.command, "cpu_pct": s.cpu_pct, "usr_pct": s.usr_pct,
                 "system_pct": s.system_pct, "rss_kib": s.rss_kib,
                 "cswch_s": s.cswch_s, "nvcswch_s": s.nvcswch_s}
                for s in parse_pidstat(text)]
    return _long(paths, "pidstat.txt", rows)


def load_core_usage(*paths: Path | str) -> pd.DataFrame:
    """mpstat samples per core (and ``all``), with ``busy_pct`` = 100 - idle."""
    def rows(text: str, run: dict[str, Any], role: str) -> list[dict[str, Any]]:
        out = []
        for s in parse_mpstat_json(text):
            row = {**_ids(run, role), **dataclasses.asdict(s)}
            row["cpu"] = str(s.cpu)
            row["busy_pct"] = None if s.idle is None else 100.0 - s.idle
            out.append(row)
        return out
    return _long(paths, "mpstat.txt", rows)


def load_interface_rates(*paths: Path | str) -> pd.DataFrame:
    """ifstat samples: receive/transmit rate of the data interface per second (Mbit/s, SI)."""
    def rows(text: str, run: dict[str, Any], role: str) -> list[dict[str, Any]]:
        return [{**_ids(run, role), "time_of_day": s.time_of_day, "timestamp": s.timestamp,
                 "iface": s.iface,
                 "rx_mbps": None if s.rx_kibit_s is None else s.rx_kibit_s * 1024 / 1e6,
                 "tx_mbps": None if s.tx_kibit_s is None else s.tx_kibit_s * 1024 / 1e6}
                for s in parse_ifstat(text)]
    return _long(paths, "ifstat.txt", rows)


def load_perf_categories(*paths: Path | str) -> pd.DataFrame:
    """Share of CPU samples per perf category (paper Fig. 7), per attempt and role, for the
    implementation's processes (``scope=process``) and the whole node (``scope=system``)."""
    out: list[dict[str, Any]] = []
    for attempt, run in _attempts(paths):
        for role in ROLES:
            impl = (run.get(role) or {}).get("implementation")
            for scope in ("process", "system"):
                folded = attempt / role / f"perf-{scope}.folded"
                if folded.exists():
                    out += [{**_ids(run, role), "scope": scope, "category": cat, "share": share}
                            for cat, share in perf_shares(folded, impl).items()]
    frame = pd.DataFrame(out)
    return frame if not frame.empty else pd.DataFrame(columns=[*ID_COLUMNS, "scope",
                                                               "category", "share"])


def load_nic_queues(*paths: Path | str) -> pd.DataFrame:
    """Per-queue NIC counter deltas (``ethtool -S`` before/after), one row per queue and
    counter: how traffic spread over the NIC's queues (RSS), per attempt and role."""
    out: list[dict[str, Any]] = []
    for attempt, run in _attempts(paths):
        for role in ROLES:
            side = attempt / role
            try:
                before = parse_ethtool_stats((side / "ethtool-before.txt").read_text())
                after = parse_ethtool_stats((side / "ethtool-after.txt").read_text())
            except (OSError, ParseError):
                continue
            ids = _ids(run, role)
            for queue, counters in ethtool_delta(before, after).per_queue.items():
                out += [{**ids, "queue": queue, "counter": name, "delta": value}
                        for name, value in counters.items()]
    frame = pd.DataFrame(out)
    return frame if not frame.empty else pd.DataFrame(columns=[*ID_COLUMNS, "queue",
                                                               "counter", "delta"])
