"""Per-flow time series of one attempt of competing flows, from its bottleneck captures.

An attempt with ``flows`` in its record (run.json schema 6, docs/flows.md) names each flow's
server port. With ``path.record_packets`` the attempt directory holds the captures on both
sides of the bottleneck's queue (:mod:`~interop_runner.analysis.frames.bottleneck`); a packet
belongs to flow ``i`` when it leaves the server from flow ``i``'s port over its transport
(``udp`` for QUIC, ``tcp`` for kernel TCP): the data direction. The reverse direction
(ACKs) never crosses these captures' queue and unrelated packets are left out.

The series (:func:`attempt_flow_series`) has one row per flow and time bin, on one time grid
for all flows of the attempt (``t_s``: seconds since the first data packet of any flow
entered the bottleneck). Bins are ``bin_ms`` wide: by default 10 x the path's base RTT
(``path.resolved.rtt_ms``), at least :data:`MIN_BIN_MS`, :data:`UNKNOWN_RTT_BIN_MS` when the
RTT is unknown. Each flow's active time (its first to its last packet leaving the
bottleneck) is trimmed: the first and last 10 % are marked ``trimmed`` (start-up and the
end of the transfer), and only whole bins inside the rest are kept for the statistics.

:func:`cached_flow_series` keeps the series of the default options as ``flows.parquet`` in
the attempt directory: a derived cache keyed by the SHA-256 of the record and the captures
it was made from (not their times: a copied tree keeps it), rewritten when one of them
changed or the format did, never written over the record. An attempt kept without its captures (an
archived campaign: they are most of its size) is read from that cache alone.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from interop_runner.analysis.frames.bottleneck import (
    IN_FILE,
    OUT_FILE,
    bottleneck_packets,
    flow_series,
)
from interop_runner.errors import StoreError
from interop_runner.storage.layout import content_key, stale_sources
from interop_runner.storage.run_record import read_run

__all__ = ["FLOW_SERIES_COLUMNS", "SERIES_FILE", "SeriesOptions", "attempt_flow_series",
           "bin_width_ms", "cached_flow_series", "flow_packets", "flows_of"]

#: The cache file in an attempt directory.
SERIES_FILE = "flows.parquet"
#: Bump when the series or its metadata change: older caches are rewritten.
# 2: packets matched without their transport checksums; 3: a pair flow over TCP too;
# 4: keyed by the SHA-256 of its sources (``sources``), not by file times
SERIES_FORMAT = 4
RTT_BINS = 10  # a bin is this many base RTTs by default
MIN_BIN_MS = 100.0  # below this a bin holds too few packets to say anything
UNKNOWN_RTT_BIN_MS = 500.0
DEFAULT_TRIM = 0.1  # of each flow's active time, at its start and at its end

#: The series' columns and their dtypes (explicit units).
FLOW_SERIES_COLUMNS: dict[str, str] = {
    "flow": "Int64", "label": "string", "t_s": "Float64", "bin_ms": "Float64",
    "throughput_mbps": "Float64", "queue_delay_ms_mean": "Float64",
    "queue_delay_ms_p95": "Float64", "drops": "Int64", "trimmed": "boolean"}
# a pair flow's transport is its stack's (QUIC over UDP; tcp-tls over TCP); a kernel TCP
# reference flow's is TCP
_TRANSPORTS = {"quic": ("udp", "tcp"), "tcp": ("tcp",)}
_PORTS = re.compile(r"^(\w+) (?:\[[^\]]*\]|[^:>\s]+):(\d+)>(?:\[[^\]]*\]|[^:>\s]+):(\d+)")


@dataclass(frozen=True)
class SeriesOptions:
    """How an attempt's series is cut: the bin width (None: from the path's base RTT) and
    the fractions of each flow's active time trimmed at its start and at its end."""

    bin_ms: float | None = None
    trim_start: float = DEFAULT_TRIM
    trim_end: float = DEFAULT_TRIM

    def __post_init__(self) -> None:
        if self.bin_ms is not None and not self.bin_ms > 0:
            raise ValueError(f"bin_ms must be positive, not {self.bin_ms}")
        if not (0 <= self.trim_start and 0 <= self.trim_end
                and self.trim_start + self.trim_end < 1):
            raise ValueError(f"trims {self.trim_start} + {self.trim_end}: each >= 0, "
                             "together below 1")


def flows_of(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's flows (``[]`` for a classic one-pair attempt or a damaged value)."""
    flows = record.get("flows")
    return [f for f in flows if isinstance(f, dict)] if isinstance(flows, list) else []


def bin_width_ms(record: dict[str, Any], bin_ms: float | None = None) -> float:
    """The bin width: ``bin_ms`` when given, else :data:`RTT_BINS` x the path's base RTT
    (at least :data:`MIN_BIN_MS`), :data:`UNKNOWN_RTT_BIN_MS` without a known RTT."""
    if bin_ms is not None:
        return float(bin_ms)
    path = record.get("path")
    rtt = ((path.get("resolved") or {}).get("rtt_ms") if isinstance(path, dict) else None)
    if isinstance(rtt, (int, float)) and rtt > 0:
        return max(RTT_BINS * float(rtt), MIN_BIN_MS)
    return UNKNOWN_RTT_BIN_MS


def flow_packets(packets: pd.DataFrame, flows: list[dict[str, Any]]) -> pd.DataFrame:
    """The data packets of the flows among a capture's packets (``bottleneck_packets``):
    those that leave a flow's server port over its transport (an upload's: that go to it),
    with ``flow`` replaced by the flow's index as text (``"0"``); every other packet left
    out."""
    ports = {(proto, _data_end(f), int(f["port"])): str(f.get("index", i))
             for i, f in enumerate(flows) if isinstance(f.get("port"), int)
             for proto in _TRANSPORTS.get(str(f.get("kind")), ())}
    names = pd.Series(packets["flow"].unique(), dtype=object)
    found = names.str.extract(_PORTS)
    index = {name: ports.get((proto, "source", int(source))) or
             ports.get((proto, "destination", int(destination)))
             for name, proto, source, destination in zip(names, found[0], found[1], found[2])
             if isinstance(source, str)}
    flow = packets["flow"].map(index)
    data = packets[flow.notna().to_numpy()].copy()
    data["flow"] = flow[flow.notna()].astype("string")
    return data


def _data_end(flow: dict[str, Any]) -> str:
    """Which port of a flow's data packets is its server's: the source (the server sends:
    a download) or the destination (an upload: the client sends to it)."""
    workload = flow.get("workload")
    upload = isinstance(workload, dict) and workload.get("kind") == "upload"
    return "destination" if upload else "source"


def attempt_flow_series(attempt_dir: Path | str, record: dict[str, Any] | None = None,
                        options: SeriesOptions = SeriesOptions()) -> pd.DataFrame:
    """The per-flow series of one attempt (columns :data:`FLOW_SERIES_COLUMNS`), sorted by
    flow and time: ``throughput_mbps`` (IP bytes that left the bottleneck in the bin x 8 /
    the bin, Mbit/s), the queueing delay (mean, 95th percentile) of those packets (<NA> in
    a bin where none left), ``drops`` (packets that entered in the bin and never left) and
    ``trimmed`` (the bin is not wholly inside the flow's window after the trim). A flow
    without a packet has no rows.

    ``attrs``: ``bin_ms``, ``trim_start``, ``trim_end``, ``origin_ns`` (t_s = 0: the first
    data packet entering, capture clock) and ``flows``: per flow its ``index``, ``label``,
    ``packets_left`` and ``ip_bytes_left`` (whole series), ``window_s`` (kept, after the
    trim), ``mean_throughput_mbps`` and ``queue_delay_p95_ms`` (its packets in the kept
    window). Raises :class:`StoreError` when a capture is missing or unreadable."""
    attempt_dir = Path(attempt_dir)
    record = read_run(attempt_dir / "run.json") if record is None else record
    flows = flows_of(record)
    width = bin_width_ms(record, options.bin_ms)
    data = flow_packets(bottleneck_packets(attempt_dir), flows)
    series = flow_series(data, width)
    origin = int(data["enqueue_ns"].min()) if len(data) else None
    labels = {str(f.get("index", i)): f.get("label") for i, f in enumerate(flows)}
    frame = pd.DataFrame({
        "flow": series["flow"].astype(int).astype("Int64") if len(series) else
        pd.Series(dtype="Int64"),
        "label": series["flow"].map(labels).astype("string"),
        "t_s": series["time_s"], "bin_ms": float(width),
        "throughput_mbps": series["throughput_mbps"],
        "queue_delay_ms_mean": series["queue_delay_ms_mean"],
        "queue_delay_ms_p95": series["queue_delay_ms_p95"], "drops": series["drops"]})
    windows = _windows(data, origin, options)
    frame["trimmed"] = _trimmed(frame, windows, width)
    frame = frame.astype(FLOW_SERIES_COLUMNS).sort_values(["flow", "t_s"], ignore_index=True)
    frame.attrs.update(bin_ms=float(width), trim_start=options.trim_start,
                       trim_end=options.trim_end, origin_ns=origin,
                       flows=_flow_summaries(frame, data, windows, origin, labels))
    return frame


def _windows(data: pd.DataFrame, origin: int | None,
             options: SeriesOptions) -> dict[int, tuple[float, float]]:
    """Per flow its kept window (s since the origin): its first to last packet leaving the
    bottleneck, less the trims."""
    left = data[~data["dropped"].to_numpy(dtype=bool, na_value=False)]
    if origin is None or left.empty:
        return {}
    seconds = (left["dequeue_ns"].astype("int64") - origin) / 1e9
    spans = seconds.groupby(left["flow"].astype(int).to_numpy()).agg(["min", "max"])
    out = {}
    for flow, first, last in zip(spans.index.to_numpy(dtype=int), spans["min"], spans["max"]):
        span = last - first
        out[int(flow)] = (first + options.trim_start * span, last - options.trim_end * span)
    return out


def _trimmed(frame: pd.DataFrame, windows: dict[int, tuple[float, float]],
             width_ms: float) -> "pd.Series[bool]":
    """True for a bin not wholly inside its flow's kept window."""
    lo = frame["flow"].map(lambda f: windows.get(int(f), (math.inf, -math.inf))[0])
    hi = frame["flow"].map(lambda f: windows.get(int(f), (math.inf, -math.inf))[1])
    start = frame["t_s"].astype(float)
    inside = (start >= lo.astype(float) - 1e-9) & (start + width_ms / 1e3 <= hi.astype(float)
                                                  + 1e-9)
    return ~inside


def _flow_summaries(frame: pd.DataFrame, data: pd.DataFrame,
                    windows: dict[int, tuple[float, float]], origin: int | None,
                    labels: dict[str, Any]) -> list[dict[str, Any]]:
    """Per flow with packets: what :func:`attempt_flow_series` puts in ``attrs["flows"]``."""
    out = []
    left = data[~data["dropped"].to_numpy(dtype=bool, na_value=False)]
    for key, packets in left.groupby(left["flow"].astype(int).to_numpy(), sort=True):
        flow = int(str(key))
        kept = frame[(frame["flow"] == flow) & ~frame["trimmed"].astype(bool)]
        seconds = (packets["dequeue_ns"].astype("int64") - (origin or 0)) / 1e9
        lo, hi = windows[flow]
        delays = packets.loc[((seconds >= lo) & (seconds <= hi)).to_numpy(), "queue_delay_ms"]
        out.append({
            "index": flow, "label": labels.get(str(flow)), "packets_left": len(packets),
            "ip_bytes_left": int(packets["size_bytes"].sum()),
            "window_s": len(kept) * float(frame["bin_ms"].iloc[0]) / 1e3,
            "mean_throughput_mbps": _number(kept["throughput_mbps"].mean()),
            "queue_delay_p95_ms": _number(delays.astype(float).quantile(0.95))})
    return out


def _number(value: Any) -> float | None:
    """A finite float, None for NaN/<NA> (JSON-safe)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


#: The files a series is made of (the record and the two captures), relative to the
#: attempt directory: the cache's key is their content (storage/layout.py, content_key).
SOURCES = ("run.json", IN_FILE, OUT_FILE, IN_FILE + ".gz", OUT_FILE + ".gz")


def _has_captures(attempt_dir: Path) -> bool:
    return all((attempt_dir / n).is_file() or (attempt_dir / (n + ".gz")).is_file()
               for n in (IN_FILE, OUT_FILE))


def cached_flow_series(attempt_dir: Path | str, record: dict[str, Any] | None = None,
                       options: SeriesOptions = SeriesOptions()
                       ) -> tuple[pd.DataFrame | None, str | None]:
    """The attempt's series and None, or None and why there is none (no flows; no captures:
    ``path.record_packets`` off, or on and the captures not in this copy of the results
    without a cache that stands in; unreadable captures). The default options' series is
    read from ``flows.parquet`` when it was made from the bytes of the record and the
    captures there now (SHA-256, whatever the files' times: a copied tree keeps it; an
    archived attempt may keep the cache alone) and is of this format, else made and written
    there (not when the directory is read-only); other options' series are made each
    time."""
    attempt_dir = Path(attempt_dir)
    try:
        record = read_run(attempt_dir / "run.json") if record is None else record
    except (OSError, ValueError, StoreError) as exc:
        return None, f"run.json unreadable: {exc}"
    if not flows_of(record):
        return None, "no flows in the record"
    cache = attempt_dir / SERIES_FILE
    default = options == SeriesOptions()
    key = content_key(attempt_dir, SOURCES) if default else {}
    why = "a series of other options is made from them"
    if default:
        cached, why = _read_cache(cache, key, options)
        if cached is not None:
            return cached, None
    if not _has_captures(attempt_dir):
        return None, _no_captures(record, why)
    try:
        series = attempt_flow_series(attempt_dir, record, options)
    except StoreError as exc:
        return None, f"captures unreadable: {str(exc).splitlines()[0][:200]}"
    if default:
        _write_cache(cache, series, options, key)
    return series, None


def _no_captures(record: dict[str, Any], why: str) -> str:
    """Why an attempt without its captures has no series: they were never recorded, or the
    record says they were (``path.record_packets``) and they are not in this copy of the
    results, nor a cache that stands in for them (``why`` not)."""
    path = record.get("path")
    config = path.get("config") if isinstance(path, dict) else None
    if not (isinstance(config, dict) and config.get("record_packets") is True):
        return "no bottleneck captures (path.record_packets off)"
    return (f"bottleneck captures not in this copy of the results (path.record_packets was "
            f"on) and {why}")


_META = b"qir.flow_series"


def _read_cache(cache: Path, key: dict[str, str], options: SeriesOptions
                ) -> tuple[pd.DataFrame | None, str]:
    """The cached series when it was made from the sources of ``key`` (their bytes now),
    in this format and with these options; else None and why it is not (for a reason)."""
    import pyarrow.parquet as pq

    if not cache.is_file():
        return None, f"no {SERIES_FILE}"
    try:
        table = pq.read_table(cache)
        meta = json.loads(table.schema.metadata[_META])
    except (OSError, ValueError, KeyError, TypeError):
        meta = None
    if not isinstance(meta, dict):
        return None, f"{SERIES_FILE} unreadable"
    if meta.get("format") != SERIES_FORMAT or meta.get("options") != asdict(options):
        return None, (f"{SERIES_FILE} of format {meta.get('format')!r}, not {SERIES_FORMAT}, "
                      f"or of other options")
    stored = meta.get("sources")
    stale = stale_sources(stored if isinstance(stored, dict) else {}, key)
    if stale:
        return None, f"{SERIES_FILE} not made from these bytes of {', '.join(stale)}"
    frame: pd.DataFrame = table.to_pandas().astype(FLOW_SERIES_COLUMNS)
    frame.attrs.update(meta["attrs"])
    return frame, ""


def _write_cache(cache: Path, series: pd.DataFrame, options: SeriesOptions,
                 key: dict[str, str]) -> None:
    """Store the series keyed by its sources' content (a temporary file renamed into
    place); a read-only tree: nothing."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    meta = {"format": SERIES_FORMAT, "options": asdict(options), "sources": key,
            "attrs": series.attrs}
    table = pa.Table.from_pandas(series, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                           _META: json.dumps(meta).encode()})
    tmp = cache.with_name(f".{cache.name}.{os.getpid()}.tmp")
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, cache)
    except OSError:
        tmp.unlink(missing_ok=True)
