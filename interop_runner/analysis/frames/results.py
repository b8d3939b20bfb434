"""Turn a results tree into a tidy pandas DataFrame: one row per attempt, failed ones too."""

from __future__ import annotations

import functools
import hashlib
import json
import operator
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from interop_runner.analysis.frames.ack_ratio import NAME as ACK_RATIO_COLUMN
from interop_runner.analysis.frames.ack_ratio import ack_ratio_measured
from interop_runner.analysis.frames.columns import (
    joined_values,
    link_rate_mbps,
    monitor_segments,
    requested_monitors,
)
from interop_runner.analysis.frames.cpu_cost import NAMES as CYCLES_COLUMNS
from interop_runner.analysis.frames.cpu_cost import cycles_per_byte
from interop_runner.analysis.frames.frame import (
    BASE_KEYS,
    COLUMNS,
    Chunk,
    NumericRows,
    Segment,
    base_overlap,
    merge_chunks,
    pooled_chunks,
)
from interop_runner.analysis.frames.host_columns import host_values
from interop_runner.analysis.frames.path_columns import path_values
from interop_runner.analysis.importers.qir10g import find_qir10g_experiments, load_qir10g
from interop_runner.analysis.theories.ceilings import ceiling_values
from interop_runner.analysis.theories.diagnosis import bottleneck_columns, rule_inputs
from interop_runner.analysis.theories.fairness import fairness_values
from interop_runner.config.sweep import slug
from interop_runner.config.workload import workload_label
from interop_runner.errors import DamagedResults, StoreError
from interop_runner.monitors import declared_columns
from interop_runner.storage.campaign_record import hosts_of_campaign, read_campaign
from interop_runner.storage.layout import content_key, iter_run_files, write_json_atomic
from interop_runner.storage.run_record import STATUSES, read_run_versioned

__all__ = ["COLUMNS", "damaged_files", "load_results", "refuse_damaged", "summarize"]

CACHE_DIR = ".cache"
CACHE_VERSION = 6  # 6: keyed by its sources' content, paths relative to the campaign
UNREADABLE = "unreadable "  # how the reason of an unreadable document's row starts
DAMAGED_SHOWN = 20  # damaged files named one by one before "and N more"


@dataclass(frozen=True)
class CampaignContext:
    """What every attempt of a campaign shares: host facts, the monitors it asked for."""

    hosts: dict[str, Any] = field(default_factory=dict)
    monitors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ParsedAttempt:
    """One attempt parsed, independent of the campaign's host facts: its base values
    (``BASE_KEYS``), its monitor values, the values joined with the host facts later (qdisc
    rate limits: ``link_rate_mbps``; CPU cost per GiB and the nodes: cycles per byte) and the
    monitors its record asked for."""

    base: dict[str, Any]
    segments: list[Segment] | None
    """``None`` for an unreadable record: the row has no numeric value at all."""
    joined: dict[str, Any]
    requested: frozenset[str]


def _base_row(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """The typed base values of a record (all but ``monitors_missing``)."""
    server, client = data.get("server", {}), data.get("client", {})
    row = {k: data.get(k) for k in COLUMNS}
    row.update(
        server=server.get("implementation"), client=client.get("implementation"),
        server_version=server.get("version"), client_version=client.get("version"),
        server_exit_code=server.get("exit_code"), client_exit_code=client.get("exit_code"),
        server_params=json.dumps(server.get("params", {}), sort_keys=True),
        client_params=json.dumps(client.get("params", {}), sort_keys=True),
        path=str(path.parent),
    )
    for key in ("congestion_control", "cipher", "socket_rcvbuf", "socket_sndbuf", "gso", "gro",
                "ack_ratio", "max_ack_delay", "flow_control_window"):
        row[key] = (data.get("params") or {}).get(key)
    row.update(workload_values(data.get("workload")))
    row["wire_cipher"] = (data.get("handshake") or {}).get("selected")
    row["variant"] = data.get("variant") or None
    cell = data.get("cell") or {}
    row["cell_server"] = cell.get("server") or row["server"]
    row["cell_client"] = cell.get("client") or row["client"]
    row["axes"] = json.dumps(data["axes"], sort_keys=True) if data.get("axes") else None
    for role, side in (("server", server), ("client", client)):
        row[f"{role}_cc"] = (side.get("effective") or {}).get("congestion_control")
        row[f"{role}_unhonoured"] = ", ".join(
            u.get("param", "?") for u in side.get("unhonoured") or []) or None
        negotiated = side.get("negotiated") or {}
        row[f"{role}_negotiated_cipher"] = negotiated.get("cipher")
        row[f"{role}_negotiated_cc"] = negotiated.get("congestion_control")
    row.update(host_values(data))
    row.update(path_values(data, data.get("goodput_mbps")))
    row.update(ceiling_values(data))  # what the path allows; read by the diagnosis
    # competing flows: their series is parsed from the captures once and kept as
    # flows.parquet in the attempt directory (analysis/frames/flow_series.py)
    row.update(fairness_values(path.parent, data))
    return row


def workload_values(workload: Any) -> dict[str, Any]:
    """The workload columns of a record's ``workload`` (upgraded: always there, unless the
    record is damaged)."""
    if not isinstance(workload, dict):
        return {"workload": None, "direction": None, "streams": None, "connections": None}
    kind, streams, conns = workload.get("kind"), workload.get("streams"), \
        workload.get("connections")
    return {"workload": workload_label(kind, streams, conns), "direction": kind,
            "streams": streams, "connections": conns}


def parse_attempt(path: Path) -> ParsedAttempt:
    """Parse one attempt (its ``run.json`` and monitor files); a damaged record stays a row."""
    try:
        data, stored_version = read_run_versioned(path)
    except (OSError, ValueError, StoreError) as exc:
        return _unreadable(path, exc)
    row = _base_row(data, path)
    segments, missing = monitor_segments(path.parent, data)
    row["monitors_missing"] = "; ".join(missing) or None
    joined = joined_values(segments)
    for role in ("server", "client"):
        joined[f"{role}_node"] = (data.get(role) or {}).get("node")
    segments = base_overlap(segments, row)  # a monitor value named like a base column wins
    row["schema_version"] = stored_version  # as written, not as upgraded
    return ParsedAttempt(row, segments, joined, frozenset(requested_monitors(data)))


def _unreadable_row(path: Path, exc: Exception) -> dict[str, Any]:
    """The row of a stored document that cannot be read, an attempt's run.json or the
    campaign's campaign.json: its place in the tree (``path``, its directory) and why
    (``reason``: ``unreadable <name>: <what is wrong>``), no status, no values
    (:func:`damaged_files`)."""
    row: dict[str, Any] = dict.fromkeys(BASE_KEYS)
    parts = path.parent.parts  # .../<server>_<client>/<testcase>/[<variant>/]<rep>/attempt-<n>
    message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    # the file is named by the row's path, not again in its reason (which a copy of the
    # tree keeps in its cache: the path column moves with the copy, the text would not)
    message = message.removeprefix(f"{path}: ")
    # 200 characters past a path still in it, so that a deep results directory never cuts
    # off why it was unreadable
    limit = 200 + (len(str(path)) if str(path) in message else 0)
    row.update(path=str(path.parent), status=None,
               reason=f"{UNREADABLE}{path.name}: {message[:limit]}",
               monitors_missing=f"{path.name} unreadable")
    if len(parts) >= 3 and parts[-1].startswith("attempt-") and parts[-2].isdecimal():
        row["repetition"], row["attempt"] = int(parts[-2]), int(parts[-1][8:] or 0)
    return row


def _unreadable(path: Path, exc: Exception) -> ParsedAttempt:
    """An unreadable document as an attempt of the frame: a row without values."""
    return ParsedAttempt(_unreadable_row(path, exc), None, {}, frozenset())


def damaged_files(frame: pd.DataFrame) -> list[str]:
    """One line per stored document below the loaded results that could not be read (a
    torn, empty or foreign run.json or campaign.json): the file and what is wrong with it.
    Such a row has no status, neither a pass nor an ordinary failure: the commands refuse a
    verdict on it (:func:`refuse_damaged`)."""
    if frame.empty or not {"reason", "status", "path"} <= set(frame.columns):
        return []
    reasons = frame["reason"].astype("string")
    damaged = (frame["status"].isna() & reasons.str.startswith(UNREADABLE).fillna(False)
               ).to_numpy(bool)
    lines = []
    for directory, reason in zip(frame["path"][damaged], reasons[damaged]):
        name, _, what = str(reason).removeprefix(UNREADABLE).partition(": ")
        lines.append(f"{Path(str(directory)) / name}: {what}")
    return lines


def refuse_damaged(*frames: pd.DataFrame) -> None:
    """Raise :class:`~interop_runner.errors.DamagedResults` when a frame holds a damaged
    document: one line each for the first :data:`DAMAGED_SHOWN`, then how many more."""
    lines = [line for frame in frames for line in damaged_files(frame)]
    if lines:
        more = len(lines) - DAMAGED_SHOWN
        raise DamagedResults(lines[:DAMAGED_SHOWN] + (
            [f"and {more} more damaged file(s)"] if more > 0 else []))


def _numeric(attempt: ParsedAttempt, hosts: dict[str, Any]) -> list[Segment]:
    """The attempt's numeric values: ``link_rate_mbps`` (from the host facts of its testbed),
    its monitor values, then the cycles per byte (CPU cost and host facts) and the client's
    measured ACK ratio; how those were obtained goes into its base values (``cycles_basis``,
    ``ack_ratio_basis``)."""
    if attempt.segments is None:
        return []
    if "by_testbed" in hosts:
        hosts = hosts["by_testbed"].get(attempt.base.get("testbed"), {})
    link = Segment(("link_rate_mbps",), [link_rate_mbps(attempt.joined, hosts)], True)
    cycles = cycles_per_byte(attempt.joined, hosts)
    attempt.base["cycles_basis"] = cycles.basis
    ack = ack_ratio_measured(attempt.joined)
    attempt.base["ack_ratio_basis"] = ack.basis
    return [link, *attempt.segments, cycles.segment, ack.segment]


def chunk_of_attempts(attempts: list[ParsedAttempt], ctx: CampaignContext) -> Chunk:
    """Parsed attempts as base rows and one float64 matrix of their numeric values (cheap to
    pickle), with every column of the monitors that ran."""
    numeric = NumericRows()
    requested: set[str] = set()
    for attempt in attempts:
        requested |= attempt.requested
        numeric.add(_numeric(attempt, ctx.hosts))
    declared = declared_columns(sorted(requested | set(ctx.monitors)))
    names, matrix = numeric.build([*declared, *CYCLES_COLUMNS, ACK_RATIO_COLUMN])
    return [_BASE_VALUES(attempt.base) for attempt in attempts], names, matrix


def _chunk(files: list[Path], ctx: CampaignContext) -> Chunk:
    return chunk_of_attempts([parse_attempt(path) for path in files], ctx)


def _parse(files: list[Path], ctx: CampaignContext,
           unreadable: list[ParsedAttempt] | None = None) -> pd.DataFrame:
    """Parse attempts (in a process pool for large campaigns) into the results frame, with
    the rows of ``unreadable`` documents (a damaged campaign.json) after them."""
    chunks = [pooled_chunks(_chunk, files, ctx)]
    if unreadable:
        chunks.append(chunk_of_attempts(unreadable, ctx))
    return results_frame(*merge_chunks(chunks))


_BASE_VALUES = operator.itemgetter(*BASE_KEYS)


def results_frame(rows: list[tuple[Any, ...]], numeric: list[str], matrix: np.ndarray
                  ) -> pd.DataFrame:
    """The typed results frame of merged chunks (rows of base values in ``BASE_KEYS``
    order), sorted by campaign, pair and attempt."""
    columns = list(zip(*rows)) if rows else [()] * len(BASE_KEYS)
    # typed before the monitor values join them: a column set in a frame of a thousand
    # columns costs more than building it
    base = pd.DataFrame({name: _typed(name, values) for name, values in zip(BASE_KEYS, columns)})
    # Monitor values: one float64 block, NaN for "not measured" (exact below 2^53).
    values = pd.DataFrame(matrix, columns=numeric)
    # labelled from the few columns the rules read, so that the wide frame is put together
    # once (adding columns to it would copy it)
    labels = bottleneck_columns(pd.concat([rule_inputs(base), rule_inputs(values)], axis=1))
    frame = pd.concat([base, values, labels] if numeric else [base, labels], axis=1)
    return frame.sort_values(["campaign", "server", "client", "repetition", "attempt"],
                             ignore_index=True)


def _typed(name: str, values: tuple[Any, ...]) -> Any:
    """A base column in its type (``COLUMNS``; ``monitors_missing`` is a string)."""
    # object first: int64 nanosecond timestamps must not pass through float64
    column = pd.Series(values, dtype=object)
    dtype = COLUMNS.get(name, "string")
    if dtype.startswith("datetime"):
        return pd.to_datetime(column, utc=True, format="ISO8601")
    if dtype == "category":
        return pd.Categorical(column, categories=list(STATUSES))
    return column.astype(dtype)


@functools.lru_cache(maxsize=1)
def _code_version() -> str:
    """Hash of the analysis and parser sources: a changed parser invalidates every cache."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parent.parent
    for path in sorted([*package.glob("analysis/**/*.py"), *package.glob("parsers/*.py"),
                        *package.glob("parsers/*.c"),
                        *package.glob("monitors/*.py"), *package.glob("storage/*.py")]):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def campaign_signature(campaign_dir: Path, records: list[str]) -> dict[str, Any] | None:
    """What the cache is valid for: the bytes of campaign.json and of the run.json files it
    is made from (``records``, relative to the campaign: :func:`record_names`) by their
    SHA-256 (storage/layout.py: a copy of the tree keeps its cache, a record damaged,
    rewritten or removed since voids it), of a campaign that is no longer running, and the
    code that parsed them. A record added without campaign.json changing is not seen (a
    resumed campaign rewrites campaign.json)."""
    try:
        meta = read_campaign(campaign_dir / "campaign.json")
    except (OSError, ValueError, StoreError):
        return None
    if meta.get("status") == "running":
        return None
    # one digest over every (file, digest): checked without walking the tree
    key = json.dumps(content_key(campaign_dir, ["campaign.json", *records]), sort_keys=True)
    return {"version": CACHE_VERSION, "code": _code_version(), "records": records,
            "sources": hashlib.sha256(key.encode()).hexdigest()}


def record_names(campaign_dir: Path, files: list[Path]) -> list[str]:
    """The run.json files of a campaign (:func:`campaign_run_files`) relative to it."""
    return [str(path.relative_to(campaign_dir)) for path in files]


def campaign_context(campaign_dir: Path) -> CampaignContext:
    """Host facts (per testbed when there were several) and the monitors of campaign.json
    (none when it is unreadable: :func:`unreadable_campaign` makes that a row)."""
    try:
        meta = read_campaign(campaign_dir / "campaign.json")
    except (OSError, ValueError, StoreError):
        return CampaignContext()
    monitors = (meta.get("config") or {}).get("monitors") or []
    return CampaignContext(hosts_of_campaign(meta, campaign_dir),
                           tuple(m for m in monitors if isinstance(m, str)))


def unreadable_campaign(campaign_dir: Path) -> list[ParsedAttempt]:
    """The row of a damaged campaign.json (``[]`` when it reads): its attempts still load,
    without the host facts, and the damage is not silent (:func:`damaged_files`)."""
    path = campaign_dir / "campaign.json"
    try:
        read_campaign(path)
    except (OSError, ValueError, StoreError) as exc:
        return [_unreadable(path, exc)]
    return []


def campaign_run_files(campaign_dir: Path) -> list[Path]:
    """Every ``run.json`` of a campaign, in the order the loader parses them."""
    return [p for p in iter_run_files(campaign_dir) if CACHE_DIR not in p.parts]


def write_cache(campaign_dir: Path, frame: pd.DataFrame, signature: dict[str, Any]) -> bool:
    """Store a campaign's frame as its cache, valid for ``signature``; False when the
    results tree cannot be written (a read-only tree is fine: no cache) or the frame is
    empty (nothing to save, and Parquet would not keep its categories)."""
    cache = campaign_dir / CACHE_DIR / "attempts.parquet"
    if frame.empty:
        return False
    try:
        (campaign_dir / CACHE_DIR).mkdir(exist_ok=True)
        tmp = cache.with_suffix(".tmp")
        _write_frame(_relocated(frame, lambda p: _below(p, campaign_dir)), tmp)
        os.replace(tmp, cache)
        write_json_atomic(cache.with_suffix(".json"), signature, overwrite=True)
    except OSError:
        return False
    return True


def _relocated(frame: pd.DataFrame, place: Callable[[str], str]) -> pd.DataFrame:
    """The frame (a shallow copy) with each attempt's ``path`` through ``place``: the cache
    keeps them relative to the campaign, so that the cache of a copied tree (kept: it is
    keyed by content) names the copy's attempts, not the original's."""
    if "path" not in frame.columns:
        return frame
    out = frame.copy(deep=False)
    out["path"] = frame["path"].map(place, na_action="ignore").astype(frame["path"].dtype)
    return out


def _below(path: str, campaign_dir: Path) -> str:
    """``path`` relative to the campaign directory (as it was, when not below it)."""
    try:
        return str(Path(path).relative_to(campaign_dir))
    except ValueError:
        return path


# The cache keeps the float64 columns (the monitor values, over a thousand) as one block:
# each row's values as one fixed-size binary cell, their names in the file's metadata. A
# column each would cost Parquet and pandas most of the time of reading the cache.
_BLOCK = "__float64_block__"
_BLOCK_NAMES = b"qir.float64_block"
_UNITS = b"qir.datetime_units"  # Parquet has no seconds: such columns come back as ms


def _write_frame(frame: pd.DataFrame, path: Path) -> None:
    """The frame as Parquet: its float64 columns (contiguous) as one block."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns, dtypes = list(frame.columns), list(frame.dtypes)
    block = [c for c, dtype in zip(columns, dtypes) if dtype == np.float64]
    if block and columns[columns.index(block[0]):][:len(block)] != block:
        block = []  # not contiguous (no frame of ours): a column each
    table = pa.Table.from_pandas(frame.drop(columns=block), preserve_index=False)
    units = {c: str(dtype) for c, dtype in zip(columns, dtypes)
             if str(dtype).startswith("datetime64[s")}
    table = table.replace_schema_metadata({**table.schema.metadata,
                                           _UNITS: json.dumps(units).encode()})
    if block:
        values = np.ascontiguousarray(frame[block].to_numpy(dtype=np.float64))
        cells = pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(8 * len(block)), len(frame), [None, pa.py_buffer(values)])
        table = table.append_column(_BLOCK, cells).replace_schema_metadata(
            {**table.schema.metadata, _BLOCK_NAMES: json.dumps(
                [columns.index(block[0]), block]).encode()})
    pq.write_table(table, path)


def _read_frame(path: Path) -> pd.DataFrame:
    """A frame :func:`_write_frame` stored."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    meta = table.schema.metadata
    if _BLOCK not in table.column_names:
        rest: pd.DataFrame = table.to_pandas()
        return _with_units(rest, meta)
    at, block = json.loads(meta[_BLOCK_NAMES])
    data = table.column(_BLOCK).combine_chunks().buffers()[1]
    values = np.frombuffer(data, dtype=np.float64, count=table.num_rows * len(block)) \
        if table.num_rows else np.empty(0)
    rest = _with_units(table.drop_columns([_BLOCK]).to_pandas(), meta)
    return pd.concat([rest.iloc[:, :at], pd.DataFrame(values.reshape(-1, len(block)),
                                                       columns=block), rest.iloc[:, at:]],
                     axis=1)


def _with_units(frame: pd.DataFrame, meta: dict[bytes, bytes]) -> pd.DataFrame:
    """Datetime columns back in the unit they were written in."""
    for column, dtype in json.loads(meta.get(_UNITS, b"{}")).items():
        frame[column] = frame[column].astype(dtype)
    return frame


def _cached(campaign_dir: Path) -> pd.DataFrame | None:
    """The campaign's cached frame when its signature holds now: the bytes of the files it
    was made from are those it was made from (no walk of the tree), else None."""
    cache = campaign_dir / CACHE_DIR / "attempts.parquet"
    try:
        stored = json.loads(cache.with_suffix(".json").read_text())
        records = stored.get("records")
        if not (isinstance(records, list) and all(isinstance(r, str) for r in records)):
            return None
        if stored == campaign_signature(campaign_dir, records) and cache.is_file():
            return _relocated(_read_frame(cache), lambda p: str(campaign_dir / p))
    except (OSError, ValueError, KeyError, IndexError, AttributeError):
        pass  # an unreadable cache is parsed again
    return None


def _load_campaign(campaign_dir: Path, use_cache: bool) -> pd.DataFrame:
    cached = _cached(campaign_dir) if use_cache else None
    if cached is not None:
        return cached
    files = campaign_run_files(campaign_dir)
    # taken before parsing: a record rewritten meanwhile voids the cache written below
    signature = campaign_signature(campaign_dir, record_names(campaign_dir, files)) \
        if use_cache else None
    frame = _parse(files, campaign_context(campaign_dir), unreadable_campaign(campaign_dir))
    if signature is not None:
        write_cache(campaign_dir, frame, signature)
    return frame


def load_results(*paths: Path | str, cache: bool = True) -> pd.DataFrame:
    """Load every attempt below the given campaign or results directories.

    Returns one row per attempt: the typed columns of :data:`COLUMNS`, monitor columns
    (role-prefixed, see :mod:`interop_runner.analysis.frames.columns`), ``link_rate_mbps``,
    ``monitors_missing`` and the ``bottleneck`` label. Parsed campaigns are cached as Parquet
    in ``<campaign>/.cache/`` (``cache=False`` re-parses).
    """
    frames = []
    for root in paths:
        root = Path(root)
        if not root.exists():
            raise FileNotFoundError(f"{root}: no such results directory")
        if not (root / "campaign.json").is_file():  # a predecessor (QIR 10G) tree: docs/qir10g.md
            if find_qir10g_experiments(root):
                frames.append(load_qir10g(root))
                if not any((d / "campaign.json").is_file() for d in root.iterdir()):
                    continue
        # A campaign directory, or a results directory holding campaigns; anything else is
        # searched for loose run.json files (no cache). No tree walk on the cached path.
        if (root / "campaign.json").is_file():
            campaigns = [root]
        else:
            campaigns = sorted(d for d in root.iterdir() if (d / "campaign.json").is_file())
        frames += [_load_campaign(c, cache) for c in campaigns]
        if not campaigns:
            loose = campaign_run_files(root)
            if loose:
                frames.append(_parse(loose, CampaignContext()))
    if not frames:
        return _parse([], CampaignContext())
    if len(frames) == 1:
        return _with_axes(frames[0])  # already sorted by results_frame (or as cached)
    return _with_axes(pd.concat(frames, ignore_index=True).sort_values(
        ["campaign", "server", "client", "repetition", "attempt"], ignore_index=True))


def _with_axes(frame: pd.DataFrame) -> pd.DataFrame:
    """One column ``axis_<name>`` per sweep axis (values as the config gave them; a list or
    mapping, such as a set of flows, as its directory name: ``quiche-quiche-cubic+cubic``)."""
    if "axes" not in frame.columns or not frame["axes"].notna().any():
        return frame
    values = [{k: slug(v) if isinstance(v, (list, dict)) else v for k, v in json.loads(a).items()}
              if isinstance(a, str) else {} for a in frame["axes"]]
    axes = pd.DataFrame(values, index=frame.index).add_prefix("axis_")
    return pd.concat([frame, axes.convert_dtypes()], axis=1)


COST_COLUMNS = ("server_cpu_s_per_gib", "client_cpu_s_per_gib")


def _median_of_ok(group: pd.DataFrame, column: str) -> Any:
    """Median of a column over the group's ok attempts (NA without any value)."""
    if column not in group.columns:
        return pd.NA
    values = group.loc[group["status"] == "ok", column].dropna()
    return values.median() if len(values) else pd.NA


FLOW_SET = "flows"  # the server of a set of flows' cell (its directories: flows_<set>)


def label_flow_sets(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with the attempts of a set of flows labelled by its flows: ``server``
    :data:`FLOW_SET` and ``client`` the set's label as the campaign named it (``cell_client``,
    e.g. ``tcp-reno+quic-go-reno``), not by the set's first QUIC pair, which its record
    names. Other attempts are left as they are."""
    if "flow_count" not in frame.columns or "cell_client" not in frame.columns:
        return frame
    sets = (frame["flow_count"].notna() & frame["cell_client"].notna()).to_numpy(dtype=bool)
    if not sets.any():
        return frame
    return frame.assign(server=frame["server"].mask(sets, FLOW_SET),
                        client=frame["client"].mask(sets, frame["cell_client"]))


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """Per pair, or set of flows (:func:`label_flow_sets`), and sweep variant: attempts,
    counts per status, median/min/max goodput of the ok attempts (Mbit/s) and their median
    CPU cost per side (CPU-s/GiB)."""
    frame = label_flow_sets(frame)
    out = []
    swept = "variant" in frame.columns and frame["variant"].notna().any()
    keys = ["server", "client"] + (["variant"] if swept else [])
    for key, group in frame.groupby(keys, sort=True, dropna=False):
        ok = group.loc[group["status"] == "ok", "goodput_mbps"].dropna()
        counts = group["status"].value_counts()
        out.append({
            "server": key[0], "client": key[1],
            **({"variant": key[2] if isinstance(key[2], str) else ""} if swept else {}),
            "attempts": len(group),
            **{status: int(counts.get(status, 0)) for status in ("ok", "failed", "timeout",
                                                                  "unsupported")},
            "bottleneck": _most_common(group.get("bottleneck")),
            "median_mbps": ok.median() if len(ok) else pd.NA,
            "min_mbps": ok.min() if len(ok) else pd.NA,
            "max_mbps": ok.max() if len(ok) else pd.NA,
            **{column: _median_of_ok(group, column) for column in COST_COLUMNS},
        })
    table = pd.DataFrame(out, columns=["server", "client", *(["variant"] if swept else []),
                                       "attempts", "ok", "failed", "timeout", "unsupported",
                                       "median_mbps", "min_mbps", "max_mbps", *COST_COLUMNS,
                                       "bottleneck"])
    for col in ("median_mbps", "min_mbps", "max_mbps", *COST_COLUMNS):
        table[col] = table[col].astype("Float64")
    return table


def _most_common(labels: "pd.Series[Any] | None") -> str | None:
    """The most frequent bottleneck label with its share, e.g. ``server_cpu (4/5)``."""
    if labels is None:
        return None
    counts = labels.dropna().value_counts()
    counts = counts[counts > 0]  # a categorical column counts its unused categories as 0
    if counts.empty:
        return None
    return f"{counts.index[0]} ({int(counts.iloc[0])}/{int(counts.sum())})"
