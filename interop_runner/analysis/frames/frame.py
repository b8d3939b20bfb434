"""The typed columns every results frame has, and the pooled parse-and-merge of many items
into one frame (shared by our campaigns' loader and the predecessor importer)."""

from __future__ import annotations

import contextlib
import gc
import mmap
import os
import pickle
import signal
from collections.abc import Sequence
from typing import Any, Callable, NamedTuple, NoReturn, TypeVar

import numpy as np

from interop_runner.analysis.frames.host_columns import HOST_COLUMNS
from interop_runner.analysis.frames.path_columns import PATH_COLUMNS
from interop_runner.analysis.theories.ceilings import CEILING_COLUMNS
from interop_runner.analysis.theories.fairness import FAIRNESS_COLUMNS
from interop_runner.parsers.snapshots import NamesMemo

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
    # the workload (run.json 8; older records downloaded on one stream of one connection)
    "goodput_down_mbps": "Float64",
    "goodput_up_mbps": "Float64",
    "workload": "string",
    "direction": "string",
    "streams": "Int64",
    "connections": "Int64",
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
    "ack_ratio": "Int64",
    "max_ack_delay": "Int64",
    "flow_control_window": "Int64",
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
    # how <role>_cycles_per_byte was obtained (analysis/frames/cpu_cost.py); <NA> without a value
    "cycles_basis": "string",
    # how client_ack_ratio_measured was obtained, or why it is NA (analysis/frames/ack_ratio.py)
    "ack_ratio_basis": "string",
    "started_at": "datetime64[ns, UTC]",
    "finished_at": "datetime64[ns, UTC]",
    "schema_version": "Int64",
    "path": "string",
    # how busy the hosts were over the attempt (analysis/frames/host_columns.py); <NA>: not read
    **{name: dtype for name, (dtype, _, _) in HOST_COLUMNS.items()},
    # the emulated path (analysis/frames/path_columns.py); <NA> over the direct link
    **{name: dtype for name, (dtype, _, _) in PATH_COLUMNS.items()},
    # competing flows and their fairness (analysis/theories/fairness.py); <NA> without flows
    **{name: dtype for name, (dtype, _, _) in FAIRNESS_COLUMNS.items()},
    # closed-form goodput ceilings of the path (analysis/theories/ceilings.py); <NA> without a
    # calibrated path, with the reason in ceiling_missing
    **{name: dtype for name, (dtype, _, _) in CEILING_COLUMNS.items()},
}

BASE_KEYS = (*COLUMNS, "monitors_missing")
PARALLEL_MIN = 200  # items; below this a process pool costs more than it saves
Chunk = tuple[list[Any], list[str], np.ndarray]
"""Base rows (a dict each, or a tuple of the values in :data:`BASE_KEYS` order), the
numeric column names and one float64 matrix of their values."""
T = TypeVar("T")
C = TypeVar("C")
_BASE = frozenset(BASE_KEYS)


class Segment(NamedTuple):
    """Numeric values of one row, as a names tuple and a parallel sequence."""

    names: tuple[str, ...]
    values: Sequence[float | None] | np.ndarray
    complete: bool
    """True: every name is in the row (a ``None`` value is NA). False: a ``None`` value
    means the name is not in the row at all."""


class NumericRows:
    """The numeric values of many rows, each given as segments, built into one float64
    matrix whose columns are in order of first appearance: the order the rows' keys would
    have if each row were one dict (later values of a name win, absent ones are not keys)."""

    def __init__(self) -> None:
        self._columns: dict[str, int] = {}
        self._known: dict[int, tuple[str, ...]] = {}
        """Names tuples (by id, held so the id stays theirs) whose names are all columns."""
        self._rows: list[list[Segment]] = []

    def add(self, segments: list[Segment]) -> None:
        """Append a row (its segments in the order their values were set)."""
        columns, known = self._columns, self._known
        for names, values, complete in segments:
            if not complete:
                names = tuple(n for n, v in zip(names, values) if v is not None)
            elif known.get(id(names)) is names:
                continue
            for name in names:
                if name not in columns:
                    columns[name] = len(columns)
            if complete and len(names) > 16:  # a layout's names, seen in many rows
                known[id(names)] = names
        self._rows.append(segments)

    def build(self, declared: list[str]) -> tuple[list[str], np.ndarray]:
        """The column names (``declared`` ones appended where no row has them) and the
        matrix, NaN where a row has no value."""
        for name in declared:
            if name not in self._columns and name not in _BASE:
                self._columns[name] = len(self._columns)
        columns = self._columns
        matrix = np.full((len(self._rows), len(columns)), np.nan)
        positions: dict[int, tuple[tuple[str, ...], np.ndarray]] = {}
        for row, segments in zip(matrix, self._rows):
            for names, values, complete in segments:
                if not complete:  # only the values there are (their names are columns)
                    present = [i for i, v in enumerate(values) if v is not None]
                    row[[columns[names[i]] for i in present]] = [values[i] for i in present]
                    continue
                hit = positions.get(id(names))
                if hit is None or hit[0] is not names:
                    hit = positions[id(names)] = (names, np.array(
                        [columns[n] for n in names], dtype=np.intp))
                row[hit[1]] = values
        return list(columns), matrix


_overlaps_base = NamesMemo(lambda names: not _BASE.isdisjoint(names), min_len=17)


def base_overlap(segments: list[Segment], row: dict[str, Any]) -> list[Segment]:
    """Segments without the names that are base columns: those values go into ``row`` (a
    monitor value named like a base column replaces it, as a dict update would)."""
    if not any(_overlaps_base(names) for names, _, _ in segments):
        return segments
    kept = []
    for names, values, complete in segments:
        for name, value in zip(names, values):
            if name in _BASE and (complete or value is not None):
                row[name] = value
        keep = [i for i, name in enumerate(names) if name not in _BASE]
        kept.append(Segment(tuple(names[i] for i in keep), [values[i] for i in keep],
                            complete))
    return kept


def chunked(items: list[T]) -> list[list[T]]:
    """How :func:`pooled_chunks` divides ``items`` among its workers (one part without a
    pool)."""
    workers = min(os.cpu_count() or 1, 8)
    if len(items) < PARALLEL_MIN or workers < 2:
        return [items]
    return [items[i::workers] for i in range(workers)]


def pooled_chunks(chunk: Callable[[list[T], C], Chunk], items: list[T], context: C
                  ) -> Chunk:
    """Run ``chunk(items, context)`` (for many items in parts, each in a forked child) and
    merge the parts: the base rows, the numeric column names and one float64 matrix of
    their values. This process only waits: parsing here too would add its memory to the
    frame's."""
    parts = chunked(items)
    if len(parts) == 1:
        return merge_chunks([chunk(parts[0], context)])
    children: list[_Child] = []
    try:
        gc.freeze()  # the children's collections skip what they inherit (no copy on write)
        try:
            for part in parts:
                children.append(_Child(chunk, part, context))
        finally:
            gc.unfreeze()
        return merge_chunks([child.result() for child in children])
    finally:
        for child in children:
            child.stop()


class _Child:
    """``chunk(part, context)`` in a forked process (a fork and a pipe cost less than a
    process pool's start and its result queue). The child pickles its chunk into memory
    shared with this process (a pipe would copy it in 64 KiB pieces) and reports on a pipe
    where it is: the length, and whether it did not fit and follows on the pipe."""

    def __init__(self, chunk: Callable[[list[T], C], Chunk], part: list[T], context: C
                 ) -> None:
        # address space only: pages exist as the child writes them (~11 KiB an attempt)
        self._shared = mmap.mmap(-1, min((16 << 20) + (32 << 10) * len(part), 1 << 28),
                                 flags=mmap.MAP_SHARED)
        read_fd, write_fd = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # pragma: no cover (the child)
            os.close(read_fd)
            _run_child(write_fd, self._shared, lambda: chunk(part, context))
        os.close(write_fd)
        self._read_fd: int | None = read_fd

    def result(self) -> Chunk:
        """The child's chunk (its exception re-raised here)."""
        assert self._read_fd is not None
        with os.fdopen(self._read_fd, "rb") as source:
            self._read_fd = None
            header = source.read(9)
            rest = source.read() if header[8:] == b"p" else b""
        os.waitpid(self.pid, 0)
        self.pid = 0
        if len(header) != 9:
            raise RuntimeError("a parsing worker process died")
        size = int.from_bytes(header[:8], "little")
        with memoryview(self._shared) as shared:
            ok, value = pickle.loads(rest or shared[:size])
        self._shared.close()
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    def stop(self) -> None:
        """Kill the child if its result was not collected (an error in this process)."""
        if self._read_fd is not None:
            os.close(self._read_fd)
            self._read_fd = None
        if self.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            self.pid = 0
        if not self._shared.closed:
            self._shared.close()


def _run_child(write_fd: int, shared: mmap.mmap, work: Callable[[], Chunk]
               ) -> NoReturn:  # pragma: no cover
    """The forked child: pickle ``(True, result)`` or ``(False, exception)`` into ``shared``
    (or, when too large, onto the pipe), then leave without running the parent's cleanup
    (atexit handlers, buffered output)."""
    status = 0
    try:
        try:
            result: tuple[bool, Any] = (True, work())
        except Exception as exc:  # noqa: BLE001 (re-raised in the parent)
            result = (False, exc)
        with os.fdopen(write_fd, "wb") as sink:
            try:  # straight into the shared memory: no second copy of the chunk
                pickle.dump(result, shared, protocol=pickle.HIGHEST_PROTOCOL)
                sink.write(shared.tell().to_bytes(8, "little") + b"s")
            except ValueError:  # larger than the shared memory
                payload = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
                sink.write(len(payload).to_bytes(8, "little") + b"p" + payload)
    except BaseException:
        status = 1
    finally:
        os._exit(status)


def merge_chunks(parts: list[Chunk]) -> Chunk:
    """The parts' rows one after the other; numeric columns in order of first appearance."""
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
