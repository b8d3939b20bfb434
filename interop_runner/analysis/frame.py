"""The typed columns every results frame has, and the pooled parse-and-merge of many items
into one frame (shared by our campaigns' loader and the predecessor importer)."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable, TypeVar

import numpy as np

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
    "hash_algorithm": "string",  # run.json 4; "sha256" in older records (upgraded)
    "digest_expected": "string",
    "digest_received": "string",
    "start_ns": "Int64",
    "end_ns": "Int64",
    "server_version": "string",
    "client_version": "string",
    "server_exit_code": "Int64",
    "client_exit_code": "Int64",
    "server_params": "string",
    "client_params": "string",
    # standard parameters asked for (schema 2; <NA> in older records)
    "congestion_control": "string",
    "cipher": "string",
    "socket_rcvbuf": "Int64",
    "socket_sndbuf": "Int64",
    "gso": "boolean",
    "gro": "boolean",
    # what each side ran with, requests it could not honour, what its library reported
    "server_cc": "string",
    "client_cc": "string",
    "server_unhonoured": "string",
    "client_unhonoured": "string",
    "server_negotiated_cipher": "string",
    "client_negotiated_cipher": "string",
    "server_negotiated_cc": "string",
    "wire_cipher": "string",
    "variant": "string",  # sweep variant id
    "axes": "string",  # its axis values as JSON; load_results adds them as columns axis_<name>
    "client_negotiated_cc": "string",
    # the pair as written in the campaign: equals server/client unless `impl` substituted a
    # variant (A/B campaigns compare the variants of one cell)
    "cell_server": "string",
    "cell_client": "string",
    "started_at": "datetime64[ns, UTC]",
    "finished_at": "datetime64[ns, UTC]",
    "schema_version": "Int64",
    "path": "string",
}

BASE_KEYS = (*COLUMNS, "monitors_missing")
PARALLEL_MIN = 200  # items; below this a process pool costs more than it saves
Chunk = tuple[list[dict[str, Any]], list[str], np.ndarray]
"""Base rows, the numeric column names and one float64 matrix of their values."""
T = TypeVar("T")
C = TypeVar("C")


def split_rows(rows: list[dict[str, Any]], declared: list[str]) -> Chunk:
    """Rows split into base values and one float64 matrix of monitor values (cheap to
    pickle); every ``declared`` column is there, NaN where no row has a value."""
    names: dict[str, None] = {}
    for row in rows:
        names.update(dict.fromkeys(row))
    names.update(dict.fromkeys(declared))
    numeric = [n for n in names if n not in BASE_KEYS]
    nan = float("nan")
    matrix = np.array([[row.get(n, nan) for n in numeric] for row in rows], dtype=np.float64)
    base = [{k: row.get(k) for k in BASE_KEYS} for row in rows]
    return base, numeric, matrix.reshape(len(rows), len(numeric))


def pooled_chunks(chunk: Callable[[list[T], C], Chunk], items: list[T], context: C
                  ) -> tuple[list[dict[str, Any]], list[str], np.ndarray]:
    """Run ``chunk(items, context)`` (in a process pool for many items) and merge the parts:
    the base rows, the numeric column names and one float64 matrix of their values."""
    parts: list[Chunk]
    workers = min(os.cpu_count() or 1, 8)
    if len(items) < PARALLEL_MIN or workers < 2:
        parts = [chunk(items, context)]
    else:
        chunks = [items[i::workers] for i in range(workers)]
        ctx = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
            parts = list(pool.map(chunk, chunks, [context] * workers))
    names: dict[str, None] = {}
    for _, numeric, _ in parts:
        names.update(dict.fromkeys(numeric))
    index = {name: i for i, name in enumerate(names)}
    total = sum(len(base) for base, _, _ in parts)
    matrix = np.full((total, len(names)), np.nan)
    base_rows: list[dict[str, Any]] = []
    for base, numeric, values in parts:
        if numeric:
            matrix[len(base_rows):len(base_rows) + len(base),
                   [index[n] for n in numeric]] = values
        base_rows += base
    return base_rows, list(names), matrix
