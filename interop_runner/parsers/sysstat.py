"""sysstat: ``pidstat`` text (per-process/per-thread samples) and ``mpstat -o JSON`` (per core)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass
from datetime import timezone, tzinfo
from operator import itemgetter
from typing import Any, TypeVar

from interop_runner.parsers import compiled
from interop_runner.parsers.common import (
    FLOATS,
    INTS,
    ClockToEpoch,
    Memo,
    ParseError,
    clock_24h,
    excerpt,
    parse_tool_date,
)

__all__ = [
    "PidstatSample",
    "parse_pidstat",
    "mean_cpu_pct",
    "MpstatSample",
    "parse_mpstat_json",
    "mpstat_busy",
]

_AMPM = frozenset({"AM", "PM", "am", "pm"})


@dataclass(slots=True)
class PidstatSample:
    """One pidstat row: a process (``tid`` None) or one of its threads during one interval.

    ``timestamp`` is epoch seconds at the END of the interval when pidstat printed it
    (``-H``), else None; ``time_of_day`` is then the printed clock, 24-hour ``HH:MM:SS``
    (local time of the node; the day is in ``date``, from the header line, ISO).
    ``pid`` is the process id (the TGID with ``-t``; for a thread row, that of its
    process). Percentages are of one CPU, so a busy multi-threaded process exceeds 100.
    Fields of report groups that were not requested (``-r``, ``-w``) are None.
    """

    timestamp: float | None
    time_of_day: str | None
    date: str | None
    uid: int | None
    pid: int
    tid: int | None
    command: str
    usr_pct: float | None = None
    system_pct: float | None = None
    guest_pct: float | None = None
    wait_pct: float | None = None
    cpu_pct: float | None = None
    cpu: int | None = None
    minflt_s: float | None = None
    majflt_s: float | None = None
    vsz_kib: int | None = None
    rss_kib: int | None = None
    mem_pct: float | None = None
    cswch_s: float | None = None
    nvcswch_s: float | None = None


# pidstat columns behind PidstatSample's numeric fields, in field order (usr_pct ... nvcswch_s).
_NUMERIC_COLUMNS: tuple[tuple[str, Memo[float] | Memo[int]], ...] = (
    ("%usr", FLOATS), ("%system", FLOATS), ("%guest", FLOATS), ("%wait", FLOATS),
    ("%CPU", FLOATS), ("CPU", INTS), ("minflt/s", FLOATS), ("majflt/s", FLOATS), ("VSZ", INTS),
    ("RSS", INTS), ("%MEM", FLOATS), ("cswch/s", FLOATS), ("nvcswch/s", FLOATS),
)


class _Header:
    """Column layout of one pidstat header line (the columns after the time)."""

    __slots__ = ("ncols", "uid", "pid", "tgid", "tid", "numeric", "present")

    def __init__(self, columns: list[str]) -> None:
        self.ncols = len(columns)
        index = {name: i for i, name in enumerate(columns)}
        self.uid = index.get("UID")
        self.pid = index.get("PID")
        self.tgid = index.get("TGID")
        self.tid = index.get("TID")
        self.numeric = [(index.get(col, -1), memo) for col, memo in _NUMERIC_COLUMNS]
        self.present = [(i, memo) for i, memo in self.numeric if i >= 0]


_HEADER_CACHE: dict[tuple[str, ...], _Header] = {}


def _header(columns: list[str]) -> _Header:
    key = tuple(columns)
    h = _HEADER_CACHE.get(key)
    if h is None:
        if len(_HEADER_CACHE) > 256:
            _HEADER_CACHE.clear()
        h = _HEADER_CACHE[key] = _Header(columns)
    return h


def parse_pidstat(text: str) -> list[PidstatSample]:
    """Parse pidstat text output into one sample per printed row.

    Handles the default layout (``pidstat -G <name> 1``: a header before every interval,
    a ``HH:MM:SS [AM|PM]`` time column, ``Average:`` rows at the end, which are skipped)
    and the one-line-per-task layout of ``pidstat -h [-H] -u -r -w -t -p <pids> 1``
    (``# Time`` header; with ``-H`` the time is epoch seconds; with ``-t`` process rows
    have TID ``-`` and thread rows TGID ``-`` and ``|__`` before the command).

    Output with headers but no rows (the process never matched) gives an empty list. A
    truncated last line (the tool was killed mid-write) is dropped. Raises ParseError on
    empty output, output without any pidstat header or banner, or a malformed row.
    """
    samples: list[PidstatSample] = []
    append = samples.append
    header: _Header | None = None
    ncols = 0
    uid_i = pid_i = tgid_i = tid_i = None
    numeric: list[tuple[int, Memo[float] | Memo[int]]] = []
    complete = False
    seen_banner = False
    day: str | None = None
    current_pid: int | None = None
    lines = text.split("\n")
    last = len(lines) - 1
    while last >= 0 and not lines[last].strip():
        last -= 1
    for n, line in enumerate(lines):
        tokens = line.split()
        if not tokens:
            continue
        first = tokens[0]
        if tokens[-1] == "Command" and ("PID" in tokens or "TGID" in tokens):
            if first == "#":
                skip = 2
            elif first == "Average:":
                header = None
                continue
            else:
                skip = 2 if len(tokens) > 1 and tokens[1] in _AMPM else 1
            header = _header(tokens[skip:])
            ncols, numeric = header.ncols, header.numeric
            uid_i, pid_i, tgid_i, tid_i = header.uid, header.pid, header.tgid, header.tid
            complete = len(header.present) == len(numeric)
            continue
        if header is None or first == "Average:":
            if first == "Linux" or (n == 0 and "(" in line):
                seen_banner = True
                parsed = parse_tool_date(line)
                day = parsed.isoformat() if parsed else None
            elif header is None and first != "Average:" and not seen_banner:
                raise ParseError(f"not pidstat output ({excerpt(line)!r})")
            continue
        try:
            if first.isdecimal():
                timestamp: float | None = float(first)
                clock = None
                values = tokens[1:]
            else:
                ampm = tokens[1] if len(tokens) > 1 and tokens[1] in _AMPM else None
                clock = clock_24h(first, ampm)
                if clock is None:
                    raise ValueError(first)
                timestamp = None
                values = tokens[2:] if ampm else tokens[1:]
            if len(values) == ncols:
                command = values[-1]
            elif len(values) > ncols:
                command = " ".join(values[ncols - 1:])
            else:
                raise ValueError("short row")
            tid: int | None = None
            if tgid_i is not None:
                tgid_text = values[tgid_i]
                if tgid_text != "-":
                    pid = current_pid = int(tgid_text)
                elif tid_i is not None and current_pid is not None:
                    tid = int(values[tid_i])
                    pid = current_pid
                    command = command.removeprefix("|__")
                else:
                    raise ValueError("thread row without process")
            elif pid_i is not None:
                pid = int(values[pid_i])
            else:
                raise ValueError("header without PID")
            uid = None
            if uid_i is not None:
                uid_text = values[uid_i]
                uid = int(uid_text) if uid_text.isdecimal() else None
            if complete:
                numbers: Any = [memo[values[i]] for i, memo in numeric]
            else:
                numbers = [memo[values[i]] if i >= 0 else None for i, memo in numeric]
        except (ValueError, IndexError) as exc:
            if n == last:
                break
            raise ParseError(f"malformed pidstat row ({excerpt(line)!r})") from exc
        append(PidstatSample(timestamp, clock, day, uid, pid, tid, command, *numbers))
    if not seen_banner and header is None and not samples:
        if not text.strip():
            raise ParseError("empty pidstat output")
        raise ParseError(f"not pidstat output ({excerpt(text)!r})")
    return samples


def mean_cpu_pct(
    samples: Iterable[PidstatSample],
    start_s: float | None = None,
    end_s: float | None = None,
    *,
    pid: int | None = None,
) -> float | None:
    """Mean process-level %CPU per interval over the samples in ``[start_s, end_s]``.

    Only process rows count (thread rows are already included in their process's row).
    When several processes are sampled, their %CPU in the same interval is added first, so
    the result is the mean total CPU of the monitored processes per interval (100 = one
    core); ``pid`` restricts it to one process. With a window, samples without an epoch
    timestamp cannot be placed and are left out; a sample's timestamp is the end of its
    interval. Returns None when no sample qualifies.
    """
    windowed = start_s is not None or end_s is not None
    per_interval: dict[float | str | None, float] = {}
    for s in samples:
        if s.tid is not None or s.cpu_pct is None or (pid is not None and s.pid != pid):
            continue
        if windowed:
            if s.timestamp is None:
                continue
            if start_s is not None and s.timestamp < start_s:
                continue
            if end_s is not None and s.timestamp > end_s:
                continue
        key: float | str | None = s.timestamp if s.timestamp is not None else s.time_of_day
        per_interval[key] = per_interval.get(key, 0.0) + s.cpu_pct
    if not per_interval:
        return None
    return sum(per_interval.values()) / len(per_interval)


@dataclass(slots=True)
class MpstatSample:
    """One CPU (``"all"`` or a core number) during one mpstat interval, in percent.

    ``timestamp`` is epoch seconds at the end of the interval (header date + sample clock,
    read in ``tz``), None if the header has no readable date; ``time_of_day`` is the
    24-hour clock as printed. Fields the mpstat version does not print are None.
    """

    timestamp: float | None
    time_of_day: str
    cpu: int | str
    usr: float | None
    nice: float | None
    sys: float | None
    iowait: float | None
    irq: float | None
    soft: float | None
    steal: float | None
    guest: float | None
    gnice: float | None
    idle: float | None


# One CPU entry, exactly as sysstat (11.x, 12.x) formats it.
_MPSTAT_CPU = re.compile(
    r'\{"cpu": "([^"]*)", "usr": ([-0-9.]+), "nice": ([-0-9.]+), "sys": ([-0-9.]+), '
    r'"iowait": ([-0-9.]+), "irq": ([-0-9.]+), "soft": ([-0-9.]+), "steal": ([-0-9.]+), '
    r'"guest": ([-0-9.]+), "gnice": ([-0-9.]+), "idle": ([-0-9.]+)\}'
)
_MPSTAT_DATE = re.compile(r'"date"\s*:\s*"([^"]*)"')
_MPSTAT_STATS = re.compile(r'"statistics"\s*:\s*\[')
_WS = " \t\r\n"


def _mpstat_statistics(text: str) -> tuple[str | None, list[Any]]:
    """(header date, statistics entries) of a complete or truncated mpstat JSON document."""
    try:
        doc = json.loads(text)
    except ValueError:
        pass
    else:
        try:
            host = doc["sysstat"]["hosts"][0]
            stats = host.get("statistics", [])
            date = host.get("date")
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ParseError("JSON is not mpstat output") from exc
        if not isinstance(stats, list):
            raise ParseError("JSON is not mpstat output")
        return (date if isinstance(date, str) else None), stats
    m = _MPSTAT_STATS.search(text)
    if not m:
        raise ParseError(f"no mpstat statistics in output ({excerpt(text)!r})")
    dm = _MPSTAT_DATE.search(text, 0, m.start())
    decoder = json.JSONDecoder()
    stats = []
    pos, end = m.end(), len(text)
    while True:
        while pos < end and text[pos] in _WS:
            pos += 1
        if pos >= end or text[pos] != "{":
            break
        try:
            obj, pos = decoder.raw_decode(text, pos)
        except ValueError:
            break
        stats.append(obj)
        while pos < end and text[pos] in _WS:
            pos += 1
        if pos >= end or text[pos] != ",":
            break
        pos += 1
    return (dm[1] if dm else None), stats


_S = TypeVar("_S")
_MPSTAT_FIELDS = ("usr", "nice", "sys", "iowait", "irq", "soft", "steal", "guest", "gnice", "idle")
_MPSTAT_GET = itemgetter(*_MPSTAT_FIELDS)


def _num(entry: dict[str, Any], key: str) -> float | None:
    v = entry.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _read_clock(stamp: str) -> str:
    parts = stamp.split()
    clock = clock_24h(parts[0], parts[1] if len(parts) > 1 else None) if parts else None
    if clock is None:
        raise ParseError(f"unreadable mpstat timestamp {stamp!r}")
    return clock


_CLOCKS: Memo[str] = Memo(_read_clock, limit=100_000)  # both nodes print the same times


def _clock_of(stamp: str) -> str:
    """The 24-hour clock of an mpstat timestamp (ParseError when it is none)."""
    return _CLOCKS[stamp]


def _mpstat_fast(
    text: str, tz: tzinfo, cpus: Container[int | str] | None,
    entries_of: Callable[[str], list[tuple[str, ...]] | None],
    make: Callable[[float | None, str, int | str, tuple[str, ...]], _S | None],
) -> list[_S] | None:
    """Regex reading of a complete document; None if some interval has no readable entry.

    ``entries_of(text)`` finds an interval's CPU entries (regex groups, cpu first; ``None``
    to give up); ``make(epoch, clock, cpu, entry)`` turns one into an item (``None``: left
    out) and raises ValueError for a value that is no number.
    """
    chunks = text.split('"timestamp": "')
    if len(chunks) < 2:
        return None
    dm = _MPSTAT_DATE.search(chunks[0])
    day = parse_tool_date(dm[1]) if dm else None
    to_epoch = ClockToEpoch(day, tz) if day else None
    out: list[_S] = []
    for chunk in chunks[1:]:
        stamp, _, rest = chunk.partition('"')
        entries = entries_of(rest)
        if not entries:
            return None
        clock = _clock_of(stamp)
        epoch = to_epoch(clock) if to_epoch else None
        for e in entries:
            cpu: int | str = INTS[e[0]] if e[0].isdecimal() else e[0]
            if cpus is not None and cpu not in cpus:
                continue
            try:
                item = make(epoch, clock, cpu, e)
            except ValueError:  # "0-.00" matches [-0-9.]+ but is no number: the JSON path
                return None
            if item is not None:
                out.append(item)
    return out


def _sample(epoch: float | None, clock: str, cpu: int | str, e: tuple[str, ...]
            ) -> MpstatSample:
    f = FLOATS
    return MpstatSample(epoch, clock, cpu, f[e[1]], f[e[2]], f[e[3]], f[e[4]], f[e[5]],
                        f[e[6]], f[e[7]], f[e[8]], f[e[9]], f[e[10]])


# sysstat's %.2f: a subset of the loose [-0-9.]+ that float() reads (possessive: the same
# matches, found without backtracking)
_F = r"-?[0-9]++\.[0-9]++"
_MPSTAT_IDLE = re.compile(
    rf'\{{"cpu": "([^"]*)", "usr": {_F}, "nice": {_F}, "sys": {_F}, "iowait": {_F}, '
    rf'"irq": {_F}, "soft": {_F}, "steal": {_F}, "guest": {_F}, "gnice": {_F}, '
    rf'"idle": ({_F})\}}')


def _idle_entries(text: str) -> list[tuple[str, ...]] | None:
    """(cpu, idle) of every CPU entry, when each one is plainly formatted: then the loose
    regex finds the same entries and every value is a number; else ``None``."""
    entries: list[tuple[str, ...]] = _MPSTAT_IDLE.findall(text)
    return entries if len(entries) == text.count('{"cpu": "') else None


def _busy(epoch: float | None, clock: str, cpu: int | str, e: tuple[str, ...]
          ) -> tuple[int | str, float, float] | None:
    return None if epoch is None else (cpu, epoch, 100.0 - FLOATS[e[1]])


def parse_mpstat_json(
    text: str,
    *,
    tz: tzinfo = timezone.utc,
    cpus: Container[int | str] | None = None,
) -> list[MpstatSample]:
    """Parse ``mpstat -P ALL -o JSON <interval>`` into one sample per CPU and interval.

    A document cut short (mpstat killed by SIGTERM/SIGKILL; SIGINT closes it properly)
    yields its complete intervals. mpstat prints local time of the node; pass that zone
    as ``tz`` (default UTC, right when the node runs in UTC or mpstat ran with ``TZ=UTC``).
    The header date is read as ISO (``S_TIME_FORMAT=ISO``) or month-first locale style.
    ``cpus`` keeps only those CPUs (e.g. ``{"all"}``), which saves time on many-core hosts.

    Raises ParseError when there is no complete interval at all.
    """
    if not text.strip():
        raise ParseError("empty mpstat output")
    if text.rstrip().endswith("}}"):
        fast = _mpstat_fast(text, tz, cpus, _MPSTAT_CPU.findall, _sample)
        if fast:
            return fast
    date_text, stats = _mpstat_statistics(text)
    day = parse_tool_date(date_text) if date_text else None
    to_epoch = ClockToEpoch(day, tz) if day else None
    out: list[MpstatSample] = []
    for stat in stats:
        if not isinstance(stat, dict):
            continue
        loads = stat.get("cpu-load")
        stamp = stat.get("timestamp")
        if not isinstance(loads, list) or not isinstance(stamp, str):
            continue
        clock = _clock_of(stamp)
        epoch = to_epoch(clock) if to_epoch else None
        for entry in loads:
            if not isinstance(entry, dict):
                continue
            raw_cpu = entry.get("cpu")
            cpu: int | str = int(raw_cpu) if isinstance(raw_cpu, str) and raw_cpu.isdecimal() \
                else str(raw_cpu)
            if cpus is not None and cpu not in cpus:
                continue
            try:
                values: Any = _MPSTAT_GET(entry)
            except KeyError:
                values = [_num(entry, k) for k in _MPSTAT_FIELDS]
            out.append(MpstatSample(epoch, clock, cpu, *values))
    if not out:
        raise ParseError("no complete mpstat interval")
    return out


def mpstat_busy(text: str, *, tz: tzinfo = timezone.utc) -> list[tuple[int | str, float, float]]:
    """(cpu, epoch timestamp, busy % = 100 - idle) of each sample of
    :func:`parse_mpstat_json` that has an idle share and a timestamp, in order; the same
    errors. Reads only what it returns from a complete document (what mpstat -o JSON
    leaves when stopped by SIGINT)."""
    if text.rstrip().endswith("}}"):
        fast = _mpstat_fast(text, tz, None, _idle_entries, _busy)
        if fast is not None:  # then parse_mpstat_json's fast path has a sample per entry
            return fast
    return [(s.cpu, s.timestamp, 100.0 - s.idle) for s in parse_mpstat_json(text, tz=tz)
            if s.idle is not None and s.timestamp is not None]


def pidstat_cpu_summary(
    text: str, start_s: float | None = None, end_s: float | None = None
) -> tuple[float | None, float | None]:
    """(mean process %CPU per interval, highest mean %CPU of one thread) in the window.

    The fast path of :func:`parse_pidstat` + :func:`mean_cpu_pct` for the runner's own
    ``pidstat -h -H -t`` output (epoch timestamps, TGID/TID columns); other layouts go
    through the full parser. A sample belongs to the window when its end lies in
    ``[start_s, end_s + 1]`` (the last interval may end up to 1 s after the transfer).
    """
    header = _runner_header(text)
    if header is None or "TGID" not in header or "TID" not in header or "%CPU" not in header:
        samples = parse_pidstat(text)
        threads: dict[int, list[float]] = {}
        for s in samples:
            if s.tid is not None and s.cpu_pct is not None and s.timestamp is not None and \
                    (start_s is None or s.timestamp >= start_s) and \
                    (end_s is None or s.timestamp <= end_s + 1):
                threads.setdefault(s.tid, []).append(s.cpu_pct)
        top = max((sum(v) / len(v) for v in threads.values()), default=None)
        return mean_cpu_pct(samples, start_s, None if end_s is None else end_s + 1), top
    ncols = len(header) - 1  # "#" is not a column
    tid_i, cpu_i = header.index("TID") - 1, header.index("%CPU") - 1
    lo = float("-inf") if start_s is None else start_s
    hi = float("inf") if end_s is None else end_s + 1
    shares = None if compiled.pidstat_shares is None else \
        compiled.pidstat_shares(text, ncols, tid_i, cpu_i, lo, hi)
    per_interval, per_thread = shares or _pidstat_shares(text, ncols, tid_i, cpu_i, lo, hi)
    mean = sum(per_interval.values()) / len(per_interval) if per_interval else None
    top = max((sum(v) / len(v) for v in per_thread.values()), default=None)
    return mean, top


def _runner_header(text: str) -> list[str] | None:
    """The tokens of the first line that begins with "# Time"."""
    if text.startswith("# Time"):
        at = 0
    else:
        at = text.find("\n# Time") + 1
        if not at:
            return None
    end = text.find("\n", at)
    return text[at:end if end >= 0 else len(text)].split()


def _pidstat_shares(text: str, ncols: int, tid_i: int, cpu_i: int, lo: float, hi: float
                    ) -> tuple[dict[str, float], dict[str, list[float]]]:
    """The loop of :func:`pidstat_cpu_summary`'s fast path: per time, the process rows'
    shares added up; per thread, its shares (:mod:`interop_runner.parsers.compiled` has this
    loop compiled, for ASCII text)."""
    per_interval: dict[str, float] = {}
    per_thread: dict[str, list[float]] = {}
    floats = FLOATS  # the same stamps and shares recur on many lines
    for line in text.split("\n"):
        if not line or line[0] in "#L":
            continue
        tokens = line.split()
        if len(tokens) < ncols:
            continue
        stamp = tokens[0]
        try:
            ts = floats[stamp]
            cpu = floats[tokens[cpu_i]]
        except ValueError:
            continue
        if ts < lo or ts > hi:  # (a NaN stamp stays in)
            continue
        tid = tokens[tid_i]
        if tid == "-":
            per_interval[stamp] = per_interval.get(stamp, 0.0) + cpu
        elif (shares := per_thread.get(tid)) is None:
            per_thread[tid] = [cpu]
        else:
            shares.append(cpu)
    return per_interval, per_thread
