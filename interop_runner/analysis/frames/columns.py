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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from interop_runner.analysis.frames.frame import Segment
from interop_runner.monitors import ROLES, Monitor, NoValue, SideInput, ValueBlock
from interop_runner.monitors.registry import ALWAYS, MONITORS
from interop_runner.parsers import ParseError
from interop_runner.parsers.snapshots import NamesMemo

__all__ = ["ROLES", "DirectoryFiles", "extract_role", "link_rate_mbps", "monitor_columns",
           "monitor_segments", "joined_values", "segment_dict"]

# the order columns appear in the frame (as before the registry existed)
EXTRACTION_ORDER = ("cpu", "sysfs", "ethtool", "nstat", "tc", "pidstat", "mpstat", "perf",
                    "tcpdump")
_ORDERED: list[Monitor] = [{**ALWAYS, **MONITORS}[n] for n in EXTRACTION_ORDER]
# column name -> role-prefixed name, per role (the same few hundred names recur every attempt)
_FULL_NAMES: dict[str, dict[str, str]] = {role: {} for role in ROLES}
# values joined with the host facts when a campaign's attempts are merged (link rate, cycles),
# and the client's datagram counters (its measured ACK ratio: analysis/frames/ack_ratio.py)
_JOINED = ("server_qdisc_rate_mbps", "client_qdisc_rate_mbps", "server_cpu_s_per_gib",
           "client_cpu_s_per_gib", "client_udp_out_datagrams", "client_udp_in_datagrams")
_READ_SIZE = 1 << 16


def read_text(path: str) -> str | None:
    """A file's text as ``open(path, encoding="utf-8", errors="replace").read()`` gives it
    (universal newlines), ``None`` when it cannot be read; without the text layer's cost."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        data = os.read(fd, _READ_SIZE)
        if len(data) == _READ_SIZE:  # else that was all: result files are regular files
            chunks = [data]
            while chunk := os.read(fd, _READ_SIZE):
                chunks.append(chunk)
            data = b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return data.decode("utf-8", "replace")


class DirectoryFiles:
    """One role's files of an attempt: ``<attempt>/<role>/<name>``."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = str(directory)
        self._prefix = os.path.join(self.directory, "")

    def path(self, name: str) -> str:
        """Where the file is."""
        return self._prefix + name if name[:1] != "/" else name

    def text(self, name: str) -> str | None:
        """The file's text (undecodable bytes replaced), ``None`` when missing."""
        return read_text(self.path(name))

    def exists(self, name: str) -> bool:
        """True when the file exists."""
        return os.path.exists(self.path(name))


def _extract(monitor: Monitor, inp: SideInput, missing: list[str], label: str | None
             ) -> Mapping[str, float] | None:
    """One monitor's values for one role, ``None`` (and the reason in ``missing``) when it
    yields nothing usable."""
    assert monitor.extract is not None
    try:
        return monitor.extract(inp)
    except (ParseError, NoValue) as exc:
        reason = str(exc)
    except (OSError, ValueError, KeyError, IndexError) as exc:
        reason = f"{type(exc).__name__}: {exc}"
    missing.append(f"{inp.role}.{label or monitor.name}: {reason}")
    return None


def _full_name(role: str, name: str) -> str:
    names = _FULL_NAMES[role]
    full = names.get(name)
    if full is None:
        full = names[name] = f"{role}_{name}"
    return full


def _prefixer(role: str) -> NamesMemo[tuple[str, ...]]:
    return NamesMemo(lambda names: tuple([_full_name(role, n) for n in names]))


_PREFIXED = {role: _prefixer(role) for role in ROLES}


def _segment(role: str, values: Mapping[str, float]) -> Segment:
    """An extractor's values under their role-prefixed names."""
    if isinstance(values, ValueBlock):
        return Segment(_PREFIXED[role](values.names), values.vector, values.complete)
    return Segment(tuple([_full_name(role, n) for n in values]), list(values.values()), True)


def extract_role(monitor: Monitor, inp: SideInput, cols: dict[str, Any], missing: list[str],
                 label: str | None = None) -> None:
    """Run one monitor's extractor for one role: values into ``cols`` (role-prefixed), the
    reason into ``missing`` when it yields nothing usable."""
    values = _extract(monitor, inp, missing, label)
    if values is not None:
        for name, value in values.items():
            cols[_full_name(inp.role, name)] = value


def _status(run: dict[str, Any], role: str, monitor: str) -> str | None:
    return ((run.get("monitors") or {}).get(role) or {}).get(monitor)


def monitor_segments(attempt: Path, run: dict[str, Any]) -> tuple[list[Segment], list[str]]:
    """Monitor-derived values of one attempt, as segments in column order, and the reasons
    for what is missing."""
    segments: list[Segment] = []
    missing: list[str] = []
    start_ns, end_ns = run.get("start_ns"), run.get("end_ns")
    window = (start_ns / 1e9, end_ns / 1e9) if start_ns and end_ns else None
    measured = run.get("status") == "ok" or start_ns is not None
    for role in ROLES:
        inp = SideInput(role, DirectoryFiles(attempt / role), window,
                        (run.get(role) or {}).get("implementation"), run)
        for monitor in _ORDERED:
            if role not in monitor.roles:
                continue
            if monitor.always:
                # the client's CPU comes from the record itself, the server's from files
                if not (measured or role == "client"):
                    continue
            elif not measured or (status := _status(run, role, monitor.name)) is None:
                continue
            elif status != "ok":
                missing.append(f"{role}.{monitor.name}: {status}")
                continue
            values = _extract(monitor, inp, missing, None)
            if values is not None:
                segments.append(_segment(role, values))
    return segments, missing


def segment_dict(segments: list[Segment]) -> dict[str, Any]:
    """The values of segments as one dict, as assigning them in order would leave it."""
    cols: dict[str, Any] = {}
    for names, values, complete in segments:
        if complete:
            cols.update(zip(names, values))
        else:
            cols.update((n, v) for n, v in zip(names, values) if v is not None)
    return cols


def monitor_columns(attempt: Path, run: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Monitor-derived columns of one attempt and the reasons for what is missing."""
    segments, missing = monitor_segments(attempt, run)
    return segment_dict(segments), missing


def joined_values(segments: list[Segment]) -> dict[str, Any]:
    """The values among the segments that are joined with the host facts later: the qdisc
    rate limits (what :func:`link_rate_mbps` reads) and the CPU cost per GiB (cycles); and
    the client's datagram counters (its measured ACK ratio)."""
    found: dict[str, Any] = {}
    for names, values, complete in segments:
        for key, i in zip(_JOINED, _joined_positions(names)):
            if i >= 0 and (complete or values[i] is not None):
                found[key] = values[i]
    return {k: found[k] for k in _JOINED if k in found}


def _positions(names: tuple[str, ...]) -> tuple[int, ...]:
    index = {name: i for i, name in enumerate(names)}
    return tuple(index.get(key, -1) for key in _JOINED)


_joined_positions = NamesMemo(_positions, min_len=17)
"""Where the joined values are among a segment's names (-1: not there)."""


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
