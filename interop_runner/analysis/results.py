"""Turn a results tree into a tidy pandas DataFrame: one row per attempt, failed ones too."""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from interop_runner.analysis.columns import link_rate_mbps, monitor_columns, requested_monitors
from interop_runner.analysis.diagnosis import add_bottleneck
from interop_runner.analysis.importers.qir10g import find_qir10g_experiments, load_qir10g
from interop_runner.analysis.frame import BASE_KEYS, COLUMNS, Chunk, pooled_chunks, split_rows
from interop_runner.monitors import declared_columns
from interop_runner.errors import StoreError
from interop_runner.storage.campaign_record import hosts_of_campaign, read_campaign
from interop_runner.storage.run_record import read_run_versioned
from interop_runner.storage.store import STATUSES, iter_run_files, write_json_atomic

__all__ = ["COLUMNS", "load_results", "summarize"]

CACHE_DIR = ".cache"
CACHE_VERSION = 4


@dataclass(frozen=True)
class _Context:
    """What every attempt of a campaign shares: host facts, the monitors it asked for."""

    hosts: dict[str, Any] = field(default_factory=dict)
    monitors: tuple[str, ...] = ()


def _row(data: dict[str, Any], path: Path, hosts: dict[str, Any]) -> dict[str, Any]:
    if "by_testbed" in hosts:
        hosts = hosts["by_testbed"].get(data.get("testbed"), {})
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
    for key in ("congestion_control", "cipher", "socket_rcvbuf", "socket_sndbuf", "gso", "gro"):
        row[key] = (data.get("params") or {}).get(key)
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
    cols, missing = monitor_columns(path.parent, data)
    row["link_rate_mbps"] = link_rate_mbps(cols, hosts)
    row["monitors_missing"] = "; ".join(missing) or None
    row.update(cols)
    return row


def _rows(files: list[Path], hosts: dict[str, Any]) -> tuple[list[dict[str, Any]], set[str]]:
    """One row per record, and the monitors any of them asked for."""
    rows, requested = [], set()
    for path in files:
        try:
            data, stored_version = read_run_versioned(path)
        except (OSError, ValueError, StoreError) as exc:  # a damaged record stays a row
            rows.append(_unreadable_row(path, exc))
            continue
        requested |= requested_monitors(data)
        row = _row(data, path, hosts)
        row["schema_version"] = stored_version  # as written, not as upgraded
        rows.append(row)
    return rows, requested


def _unreadable_row(path: Path, exc: Exception) -> dict[str, Any]:
    """The row of a run.json that cannot be read: its place in the tree and why, no values."""
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    parts = path.parent.parts  # .../<server>_<client>/<testcase>/[<variant>/]<rep>/attempt-<n>
    row.update(path=str(path.parent), status=None,
               reason=f"unreadable run.json: {str(exc).splitlines()[0][:200]}",
               monitors_missing="run.json unreadable")
    if len(parts) >= 3 and parts[-1].startswith("attempt-") and parts[-2].isdecimal():
        row["repetition"], row["attempt"] = int(parts[-2]), int(parts[-1][8:] or 0)
    return row


def _chunk(files: list[Path], ctx: _Context) -> Chunk:
    """Rows split into base values and one float64 matrix of monitor values (cheap to pickle),
    with every column of the monitors that ran."""
    rows, requested = _rows(files, ctx.hosts)
    return split_rows(rows, declared_columns(sorted(requested | set(ctx.monitors))))


def _parse(files: list[Path], ctx: _Context) -> pd.DataFrame:
    """Parse attempts (in a process pool for large campaigns) into the results frame."""
    return _frame(*pooled_chunks(_chunk, files, ctx))


def _frame(rows: list[dict[str, Any]], numeric: list[str], matrix: np.ndarray) -> pd.DataFrame:
    # object first: int64 nanosecond timestamps must not pass through float64
    base = pd.DataFrame({name: pd.Series([row.get(name) for row in rows], dtype=object)
                         for name in BASE_KEYS})
    # Monitor values: one float64 block, NaN for "not measured" (exact below 2^53).
    frame = pd.concat([base, pd.DataFrame(matrix, columns=numeric)], axis=1) if numeric \
        else base
    for col, dtype in COLUMNS.items():
        if dtype.startswith("datetime"):
            frame[col] = pd.to_datetime(frame[col], utc=True, format="ISO8601")
        elif dtype == "category":
            frame[col] = pd.Categorical(frame[col], categories=list(STATUSES))
        else:
            frame[col] = frame[col].astype(dtype)
    frame["monitors_missing"] = frame["monitors_missing"].astype("string")
    frame = add_bottleneck(frame)
    return frame.sort_values(["campaign", "server", "client", "repetition", "attempt"],
                             ignore_index=True)


@functools.lru_cache(maxsize=1)
def _code_version() -> str:
    """Hash of the analysis and parser sources: a changed parser invalidates every cache."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parent.parent
    for path in sorted([*package.glob("analysis/**/*.py"), *package.glob("parsers/*.py"),
                        *package.glob("monitors/*.py"), *package.glob("storage/*.py")]):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _campaign_signature(campaign_dir: Path) -> dict[str, Any] | None:
    """What the cache is valid for: campaign.json of a campaign that is no longer running,
    and the code that parsed it."""
    meta_file = campaign_dir / "campaign.json"
    try:
        stat = meta_file.stat()
        meta = read_campaign(meta_file)
    except (OSError, ValueError, StoreError):
        return None
    if meta.get("status") == "running":
        return None
    return {"version": CACHE_VERSION, "code": _code_version(), "mtime_ns": stat.st_mtime_ns,
            "size": stat.st_size}


def _campaign_context(campaign_dir: Path) -> _Context:
    """Host facts (per testbed when there were several) and the monitors of campaign.json."""
    try:
        meta = read_campaign(campaign_dir / "campaign.json")
    except (OSError, ValueError, StoreError):
        return _Context()
    monitors = (meta.get("config") or {}).get("monitors") or []
    return _Context(hosts_of_campaign(meta, campaign_dir),
                    tuple(m for m in monitors if isinstance(m, str)))


def _load_campaign(campaign_dir: Path, use_cache: bool) -> pd.DataFrame:
    cache = campaign_dir / CACHE_DIR / "attempts.parquet"
    sig_file = campaign_dir / CACHE_DIR / "attempts.json"
    signature = _campaign_signature(campaign_dir) if use_cache else None
    if signature is not None and cache.exists():
        try:
            if json.loads(sig_file.read_text()) == signature:
                return pd.read_parquet(cache)
        except (OSError, ValueError):
            pass
    files = [p for p in iter_run_files(campaign_dir) if CACHE_DIR not in p.parts]
    frame = _parse(files, _campaign_context(campaign_dir))
    if signature is not None:
        try:
            (campaign_dir / CACHE_DIR).mkdir(exist_ok=True)
            tmp = cache.with_suffix(".tmp")
            frame.to_parquet(tmp, index=False)
            os.replace(tmp, cache)
            write_json_atomic(sig_file, signature, overwrite=True)
        except OSError:
            pass  # a read-only results tree is fine: no cache
    return frame


def load_results(*paths: Path | str, cache: bool = True) -> pd.DataFrame:
    """Load every attempt below the given campaign or results directories.

    Returns one row per attempt: the typed columns of :data:`COLUMNS`, monitor columns
    (role-prefixed, see :mod:`interop_runner.analysis.columns`), ``link_rate_mbps``,
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
            loose = [p for p in iter_run_files(root) if CACHE_DIR not in p.parts]
            if loose:
                frames.append(_parse(loose, _Context()))
    if not frames:
        return _parse([], _Context())
    if len(frames) == 1:
        return _with_axes(frames[0])  # already sorted by _frame (or as cached)
    return _with_axes(pd.concat(frames, ignore_index=True).sort_values(
        ["campaign", "server", "client", "repetition", "attempt"], ignore_index=True))


def _with_axes(frame: pd.DataFrame) -> pd.DataFrame:
    """One column ``axis_<name>`` per sweep axis (values as the config gave them)."""
    if "axes" not in frame.columns or not frame["axes"].notna().any():
        return frame
    values = [json.loads(a) if isinstance(a, str) else {} for a in frame["axes"]]
    axes = pd.DataFrame(values, index=frame.index).add_prefix("axis_")
    return pd.concat([frame, axes.convert_dtypes()], axis=1)


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """Per pair (and sweep variant): attempts, counts per status, median/min/max goodput of
    the ok attempts (Mbit/s)."""
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
        })
    table = pd.DataFrame(out, columns=["server", "client", *(["variant"] if swept else []),
                                       "attempts", "ok", "failed", "timeout", "unsupported",
                                       "median_mbps", "min_mbps", "max_mbps", "bottleneck"])
    for col in ("median_mbps", "min_mbps", "max_mbps"):
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
