"""Per-attempt monitor columns: the registered monitors' extractors over one attempt's files.

Column names are role-prefixed and unit-suffixed where the unit is not in the counter's own
name: ``client_cpu_pct``, ``client_udp_rcvbuf_errors``, ``server_tx_bytes`` (sysfs),
``server_nic_<counter>`` (every ethtool -S total, delta), ``client_nstat_<Counter>`` (every
nstat counter, delta), ``server_qdisc_rate_mbps``; docs/columns.md lists them all. A monitor
whose files are missing, not understood or empty contributes no values and a reason in
``monitors_missing``; it never stops loading, and its columns still exist in the frame
(:func:`interop_runner.monitors.declared_columns`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from interop_runner.monitors import ROLES, Monitor, NoValue, SideInput
from interop_runner.monitors.registry import ALWAYS, MONITORS
from interop_runner.parsers import ParseError

__all__ = ["ROLES", "DirectoryFiles", "extract_role", "link_rate_mbps", "monitor_columns"]

# the order columns appear in the frame (as before the registry existed)
EXTRACTION_ORDER = ("cpu", "sysfs", "ethtool", "nstat", "tc", "pidstat", "mpstat", "perf",
                    "tcpdump")
_ORDERED: list[Monitor] = [{**ALWAYS, **MONITORS}[n] for n in EXTRACTION_ORDER]
# column name -> role-prefixed name, per role (the same few hundred names recur every attempt)
_FULL_NAMES: dict[str, dict[str, str]] = {role: {} for role in ROLES}


class DirectoryFiles:
    """One role's files of an attempt: ``<attempt>/<role>/<name>``."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = str(directory)

    def path(self, name: str) -> str:
        """Where the file is."""
        return os.path.join(self.directory, name)

    def text(self, name: str) -> str | None:
        """The file's text (undecodable bytes replaced), ``None`` when missing."""
        try:
            with open(self.path(name), encoding="utf-8", errors="replace") as fh:
                return fh.read()
        except OSError:
            return None

    def exists(self, name: str) -> bool:
        """True when the file exists."""
        return os.path.exists(self.path(name))


def extract_role(monitor: Monitor, inp: SideInput, cols: dict[str, Any], missing: list[str],
                 label: str | None = None) -> None:
    """Run one monitor's extractor for one role: values into ``cols`` (role-prefixed), the
    reason into ``missing`` when it yields nothing usable."""
    assert monitor.extract is not None
    where = f"{inp.role}.{label or monitor.name}"
    try:
        values = monitor.extract(inp)
    except (ParseError, NoValue) as exc:
        missing.append(f"{where}: {exc}")
        return
    except (OSError, ValueError, KeyError, IndexError) as exc:
        missing.append(f"{where}: {type(exc).__name__}: {exc}")
        return
    names = _FULL_NAMES[inp.role]
    for name, value in values.items():
        full = names.get(name)
        if full is None:
            full = names[name] = f"{inp.role}_{name}"
        cols[full] = value


def _status(run: dict[str, Any], role: str, monitor: str) -> str | None:
    return ((run.get("monitors") or {}).get(role) or {}).get(monitor)


def monitor_columns(attempt: Path, run: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Monitor-derived columns of one attempt and the reasons for what is missing."""
    cols: dict[str, Any] = {}
    missing: list[str] = []
    start_ns, end_ns = run.get("start_ns"), run.get("end_ns")
    window = (start_ns / 1e9, end_ns / 1e9) if start_ns and end_ns else None
    measured = run.get("status") == "ok" or start_ns is not None
    for role in ROLES:
        files = DirectoryFiles(attempt / role)
        impl = (run.get(role) or {}).get("implementation")
        inp = SideInput(role, files, window, impl, run)
        for monitor in _ORDERED:
            if role not in monitor.roles:
                continue
            if monitor.always:
                # the client's CPU comes from the record itself, the server's from files
                if measured or role == "client":
                    extract_role(monitor, inp, cols, missing)
                continue
            if not measured:
                continue
            status = _status(run, role, monitor.name)
            if status is None:
                continue
            if status != "ok":
                missing.append(f"{role}.{monitor.name}: {status}")
                continue
            extract_role(monitor, inp, cols, missing)
    return cols, missing


def requested_monitors(run: dict[str, Any]) -> set[str]:
    """The monitors an attempt's record says were asked for, on any role."""
    return {name for side in (run.get("monitors") or {}).values() if isinstance(side, dict)
            for name in side}


def link_rate_mbps(cols: dict[str, Any], hosts: dict[str, Any]) -> float | None:
    """Narrowest rate on the path: qdisc rate limits of either node, NIC speeds from facts."""
    rates = [cols[k] for k in ("server_qdisc_rate_mbps", "client_qdisc_rate_mbps") if k in cols]
    for facts in hosts.values():
        speed = facts.get("nic_speed_mbps") if isinstance(facts, dict) else None
        if speed:
            rates.append(float(speed))
    return min(rates) if rates else None
