"""Turn a results tree into a tidy pandas DataFrame: one row per attempt, failed ones too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from ..store import STATUSES, iter_run_files, read_run

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


def _row(data: dict[str, Any], path: Path) -> dict[str, Any]:
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
    return row


def load_results(*paths: Path | str) -> pd.DataFrame:
    """Load every ``run.json`` below the given campaign or results directories.

    Returns one row per attempt with the typed columns of :data:`COLUMNS`, sorted by
    campaign, pair, repetition and attempt.
    """
    rows = []
    for root in paths:
        root = Path(root)
        if not root.exists():
            raise FileNotFoundError(f"{root}: no such results directory")
        rows += [_row(read_run(p), p) for p in iter_run_files(root)]
    # object first: int64 nanosecond timestamps must not pass through float64
    frame = pd.DataFrame(rows, columns=list(COLUMNS), dtype=object)
    for col, dtype in COLUMNS.items():
        if dtype.startswith("datetime"):
            frame[col] = pd.to_datetime(frame[col], utc=True, format="ISO8601")
        elif dtype == "category":
            frame[col] = pd.Categorical(frame[col], categories=list(STATUSES))
        else:
            frame[col] = frame[col].astype(dtype)
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
            "median_mbps": ok.median() if len(ok) else pd.NA,
            "min_mbps": ok.min() if len(ok) else pd.NA,
            "max_mbps": ok.max() if len(ok) else pd.NA,
        })
    table = pd.DataFrame(out, columns=["server", "client", "attempts", "ok", "failed", "timeout",
                                       "unsupported", "median_mbps", "min_mbps", "max_mbps"])
    for col in ("median_mbps", "min_mbps", "max_mbps"):
        table[col] = table[col].astype("Float64")
    return table
