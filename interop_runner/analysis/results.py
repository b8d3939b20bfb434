"""Turn a results tree into a tidy pandas DataFrame: one row per attempt, failed ones too."""

from __future__ import annotations

import json
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd

from ..store import STATUSES, iter_run_files, read_run, write_json_atomic
from .diagnosis import add_bottleneck
from .monitors import link_rate_mbps, monitor_columns

# column -> pandas dtype (nullable types: a value a tool could not measure stays <NA>, never 0)
COLUMNS: dict[str, Any] = {
    "campaign": "string",
    "testbed": "string",
    "server": "string",
    "client": "string",
    "testcase": "string",
    "repetition": "Int64",
    "attempt": "Int64",
    "status": "category",
    "reason": "string",
    "alpn": "string",
    "goodput_mbps": "Float64",
    "duration_s": "Float64",
    "file_size": "Int64",
    "bytes_received": "Int64",
    "hash_ok": "boolean",
    "sha256_expected": "string",
    "sha256_received": "string",
    "start_ns": "Int64",
    "end_ns": "Int64",
    "server_version": "string",
    "client_version": "string",
    "server_exit_code": "Int64",
    "client_exit_code": "Int64",
    "server_params": "string",
    "client_params": "string",
    "started_at": "datetime64[ns, UTC]",
    "finished_at": "datetime64[ns, UTC]",
    "schema_version": "Int64",
    "path": "string",
}


BASE_COLUMNS = tuple(COLUMNS)
CACHE_DIR = ".cache"
CACHE_VERSION = 1
PARALLEL_MIN = 200  # attempts; below this a process pool costs more than it saves


def _row(data: dict[str, Any], path: Path, hosts: dict[str, Any]) -> dict[str, Any]:
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
    cols, missing = monitor_columns(path.parent, data)
    row["link_rate_mbps"] = link_rate_mbps(cols, hosts)
    row["monitors_missing"] = "; ".join(missing) or None
    row.update(cols)
    return row


def _rows(files: list[Path], hosts: dict[str, Any]) -> list[dict[str, Any]]:
    return [_row(read_run(p), p, hosts) for p in files]


def _parse_rows(files: list[Path], hosts: dict[str, Any]) -> list[dict[str, Any]]:
    if len(files) < PARALLEL_MIN or (os.cpu_count() or 1) < 2:
        return _rows(files, hosts)
    workers = min(os.cpu_count() or 1, 8)
    chunks = [files[i::workers] for i in range(workers)]
    ctx = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        parts = list(pool.map(_rows, chunks, [hosts] * workers))
    rows = [row for part in parts for row in part]
    rows.sort(key=lambda r: r["path"])
    return rows


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    # object first: int64 nanosecond timestamps must not pass through float64
    frame = pd.DataFrame(rows, dtype=object)
    for col in BASE_COLUMNS:
        if col not in frame:
            frame[col] = None
    for col, dtype in COLUMNS.items():
        if dtype.startswith("datetime"):
            frame[col] = pd.to_datetime(frame[col], utc=True, format="ISO8601")
        elif dtype == "category":
            frame[col] = pd.Categorical(frame[col], categories=list(STATUSES))
        else:
            frame[col] = frame[col].astype(dtype)
    extra = [c for c in frame.columns if c not in COLUMNS]
    if "monitors_missing" in extra:
        frame["monitors_missing"] = frame["monitors_missing"].astype("string")
        extra.remove("monitors_missing")
    if extra:
        # Monitor values: float64 with NaN for "not measured" (exact for counters < 2^53).
        frame[extra] = frame[extra].astype("float64")
    frame = add_bottleneck(frame)
    return frame.sort_values(["campaign", "server", "client", "repetition", "attempt"],
                             ignore_index=True)


def _campaign_signature(campaign_dir: Path) -> dict[str, Any] | None:
    """What the cache is valid for: campaign.json of a campaign that is no longer running."""
    meta_file = campaign_dir / "campaign.json"
    try:
        stat = meta_file.stat()
        meta = json.loads(meta_file.read_text())
    except (OSError, ValueError):
        return None
    if meta.get("status") == "running":
        return None
    return {"version": CACHE_VERSION, "mtime_ns": stat.st_mtime_ns, "size": stat.st_size}


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
    try:
        hosts = json.loads((campaign_dir / "campaign.json").read_text()).get("hosts", {})
    except (OSError, ValueError):
        hosts = {}
    files = [p for p in iter_run_files(campaign_dir) if CACHE_DIR not in p.parts]
    frame = _frame(_parse_rows(files, hosts))
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
    (role-prefixed, see :mod:`interop_runner.analysis.monitors`), ``link_rate_mbps``,
    ``monitors_missing`` and the ``bottleneck`` label. Parsed campaigns are cached as Parquet
    in ``<campaign>/.cache/`` (``cache=False`` re-parses).
    """
    frames = []
    for root in paths:
        root = Path(root)
        if not root.exists():
            raise FileNotFoundError(f"{root}: no such results directory")
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
                frames.append(_frame(_rows(loose, {})))
    if not frames:
        return _frame([])
    frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    return frame.sort_values(["campaign", "server", "client", "repetition", "attempt"],
                             ignore_index=True)


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """Per pair: attempts, counts per status, median/min/max goodput of ok attempts (Mbit/s)."""
    out = []
    for (server, client), group in frame.groupby(["server", "client"], sort=True):
        ok = group.loc[group["status"] == "ok", "goodput_mbps"].dropna()
        counts = group["status"].value_counts()
        out.append({
            "server": server, "client": client, "attempts": len(group),
            **{status: int(counts.get(status, 0)) for status in ("ok", "failed", "timeout",
                                                                  "unsupported")},
            "bottleneck": _most_common(group.get("bottleneck")),
            "median_mbps": ok.median() if len(ok) else pd.NA,
            "min_mbps": ok.min() if len(ok) else pd.NA,
            "max_mbps": ok.max() if len(ok) else pd.NA,
        })
    table = pd.DataFrame(out, columns=["server", "client", "attempts", "ok", "failed", "timeout",
                                       "unsupported", "median_mbps", "min_mbps", "max_mbps",
                                       "bottleneck"])
    for col in ("median_mbps", "min_mbps", "max_mbps"):
        table[col] = table[col].astype("Float64")
    return table


def _most_common(labels: "pd.Series[Any] | None") -> str | None:
    """The most frequent bottleneck label with its share, e.g. ``server_cpu (4/5)``."""
    if labels is None:
        return None
    counts = labels.dropna().value_counts()
    if counts.empty:
        return None
    return f"{counts.index[0]} ({int(counts.iloc[0])}/{int(counts.sum())})"
