"""Result trees of the predecessor framework (the "QIR 10G fork" of the QUIC Interop Runner used
for "QUIC on the Highway" / "QUIC on the Fast Lane", repository ``tumi8/quic-10g-paper``).

Layout (see ``docs/qir10g.md``)::

    <experiment>/result.json                      runner arguments, commits, nodes, measurements
    <experiment>/<server>_<client>/<testcase>/<rep>/output.txt       the runner's log (verdict)
    <experiment>/<server>_<client>/<testcase>/<rep>/{server,client}/ ethtool-start/stop.txt,
        netstat-start/stop.txt, pidstat.txt, out.perf.zst; client/time.json {"start","end"} ns

:func:`load_qir10g` turns such a tree into the DataFrame :func:`load_results` gives for the
project's own campaigns: one row per repetition DIRECTORY (``attempt`` is always 1), the typed
:data:`~interop_runner.analysis.frames.results.COLUMNS`, the same role-prefixed monitor columns as
:func:`~interop_runner.analysis.frames.columns.monitor_columns` (parsed by the same parsers), plus
columns that only this format has (``experiment``, ``qir_goodput_mbps``, ``server_node``,
``server_param_<name>``, ``qir_arg_<name>``...).

Every value is keyed by its repetition directory, never by position. The predecessor's runner
appends a repetition's goodput to ``measurements[..].details`` only when the repetition
succeeded, so ``details[i]`` is NOT repetition ``i + 1`` once one failed (the predecessor's own
``processed.csv`` made exactly that mistake). ``qir_goodput_mbps`` therefore takes the details
value that matches the goodput the runner logged in that directory's ``output.txt``.
A failed or unverifiable repetition keeps ``goodput_mbps`` <NA> (never 0).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
import pandas as pd

from interop_runner.analysis.frames.columns import ROLES, DirectoryFiles, extract_role
from interop_runner.analysis.frames.frame import COLUMNS, Chunk, pooled_chunks
from interop_runner.analysis.theories.diagnosis import add_bottleneck
from interop_runner.monitors import MONITORS, SideInput, declared_columns
from interop_runner.monitors.captures import perf_rules, perf_share_columns
from interop_runner.parsers import ParseError, mean_cpu_pct, parse_pidstat
from interop_runner.parsers.common import ClockToEpoch
from interop_runner.parsers.perf import FoldedStacks, categorize, filter_comm, read_perf_script
from interop_runner.parsers.sysstat import PidstatSample
from interop_runner.storage.run_record import STATUSES

__all__ = ["RESULT_FILE", "find_qir10g_experiments", "is_qir10g_tree", "load_qir10g",
           "load_qir10g_perf_categories"]

RESULT_FILE = "result.json"
PERF_FILES = ("out.perf.zst", "out.perf")
MAX_DEPTH = 8  # how deep below a given root experiments are searched for
_SKIP_DIRS = {"server", "client", "sim", ".cache"}

# The predecessor's verdict lines (interop.py: _run_test) and error messages.
_OK = "\u2713 Test successful"
_FAILED = "\u2620 Test failed"
_UNSUPPORTED = "? Test unsupported"
_LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) (.*)$")
_GOODPUT_LINE = re.compile(r"^\S+ \S+ Transferring .* Goodput: ([0-9.]+) Mbps", re.M)
_STARTING_CLIENT = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) Starting client", re.M)
_REASONS = ("Client expired", "Client or server expired", "Client or server failed",
            "testcase.check() threw", "does not support the test", "Failed to read time.json",
            "File size", "file size", "Hash", "hash", "mismatch", "Error", "error")

# Process names the predecessor's pidstat/perf analysis matched per implementation
# (analysis-pipeline/result-parsing/parser.py); only used when pidstat saw no process.
_NAME_RULES: dict[str, tuple[str, str]] = {  # implementation prefix -> (server, client) substring
    "quiche": ("quiche", "quiche"),
    "lsquic": ("http_server", "http_client"),
    "mvfst": ("hq", "hq"),
    "picoquic": ("picoquicdemo", "picoquicdemo"),
    "tls1.3": ("nginx", "wget"),
    "tcp+tls": ("nginx", "wget"),
    "tcp": ("nginx", "wget"),
}
# the monitors the predecessor ran in every repetition (perf only where out.perf* exists)
MONITORS_RUN = ("ethtool", "nstat", "pidstat")
# predecessor implementation name -> implementation name in perf_rules.yml
_PERF_RULE_NAMES = {"tls1.3": "tcp-tls", "tcp+tls": "tcp-tls", "tcp": "tcp-tls"}


# --------------------------------------------------------------------------------------------
# finding the tree


def _read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def _qir_meta(path: Path) -> dict[str, Any] | None:
    """The parsed ``result.json`` if it is one of the predecessor (has ``measurements``)."""
    try:
        data = _read_json(path)
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and isinstance(data.get("measurements"), list):
        return data
    return None


def find_qir10g_experiments(root: Path | str, max_depth: int = MAX_DEPTH) -> list[Path]:
    """Experiment directories (holding a predecessor ``result.json``) at or below ``root``.

    Directories of the project's own format (holding ``campaign.json`` or ``run.json``) are
    not entered, and nothing below an experiment directory is searched, so this is cheap on
    both kinds of tree. Sorted.
    """
    root = Path(root)
    found: list[Path] = []
    stack: list[tuple[str, int]] = [(str(root), 0)]
    while stack:
        top, depth = stack.pop()
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        names = {e.name for e in entries}
        if "campaign.json" in names or "run.json" in names:
            continue
        if RESULT_FILE in names and _qir_meta(Path(top) / RESULT_FILE) is not None:
            found.append(Path(top))
            continue
        if depth >= max_depth:
            continue
        for e in entries:
            if e.name in _SKIP_DIRS or e.name.startswith("."):
                continue
            try:
                if e.is_dir():
                    stack.append((e.path, depth + 1))
            except OSError:
                continue
    return sorted(found)


def is_qir10g_tree(root: Path | str) -> bool:
    """True when ``root`` is, or holds, a predecessor experiment (and is no campaign)."""
    return bool(find_qir10g_experiments(root))


# --------------------------------------------------------------------------------------------
# one experiment


@dataclass(frozen=True)
class _Experiment:
    """What one ``result.json`` says, prepared once for all its repetitions."""

    path: str
    campaign: str
    experiment: str
    variant: str | None
    servers: tuple[str, ...]
    clients: tuple[str, ...]
    base: dict[str, Any]  # columns shared by every repetition of the experiment
    versions: dict[str, dict[str, str]]  # role -> implementation -> commit
    measurements: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)


def _components(experiment: Path, root: Path) -> tuple[str, ...]:
    """Path components naming an experiment: those after the last ``results`` directory
    (the predecessor's repository layout), else relative to the parent of the loaded root."""
    parts = experiment.resolve().parts
    if "results" in parts[:-1]:
        cut = len(parts) - 1 - parts[::-1].index("results")
        rest = parts[cut + 1:]
        if rest:
            return tuple(rest)
    try:
        rel = experiment.resolve().relative_to(root.resolve().parent)
    except ValueError:
        rel = Path(experiment.name)
    return rel.parts or (experiment.name,)


def _scalar(value: Any) -> Any:
    """A column value: scalars as they are, lists/dicts as JSON text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return json.dumps(value, sort_keys=True)


def _experiment(path: Path, root: Path, meta: dict[str, Any]) -> _Experiment:
    parts = _components(path, root)
    args = meta.get("args") or {}
    servers = tuple(meta.get("server_implementations") or {})
    clients = tuple(meta.get("client_implementations") or {})
    server_node, client_node = meta.get("server_node_name"), meta.get("client_node_name")
    base: dict[str, Any] = {
        "campaign": "/".join(parts),
        "testbed": f"{server_node}-{client_node}" if server_node and client_node else None,
        "experiment": parts[0],
        "variant": "/".join(parts[1:]) or None,
        "server_node": server_node,
        "client_node": client_node,
        "qir_commit": meta.get("interop_commit_hash"),
        "qir_log_dir": meta.get("log_dir"),
        "qir_node_image": meta.get("node_image"),
        "qir_quic_version": _scalar(meta.get("quic_version")),
        "qir_start_unix": meta.get("interop_start_time_unix_timestamp"),
        "qir_end_unix": meta.get("interop_end_time_unix_timestamp"),
        "qir_repetitions": args.get("repetitions"),
        "qir_args": json.dumps(args, sort_keys=True) if args else None,
    }
    for key, value in args.items():
        if key not in ("client_implementation_params", "server_implementation_params"):
            base[f"qir_arg_{key}"] = _scalar(value)
    for role in ROLES:
        params = args.get(f"{role}_implementation_params") or {}
        base[f"{role}_params"] = json.dumps(params, sort_keys=True)
        for key, value in params.items():
            base[f"{role}_param_{key}"] = _scalar(value)
    ciphers = {(args.get(f"{r}_implementation_params") or {}).get("cipher") for r in ROLES}
    base["cipher"] = ciphers.pop() if len(ciphers) == 1 else None
    measurements: dict[tuple[str, str, str], dict[str, Any]] = {}
    for group in meta.get("measurements") or []:
        for m in group if isinstance(group, list) else []:
            if isinstance(m, dict) and m.get("server") and m.get("client"):
                measurements[(m["server"], m["client"], str(m.get("name")))] = m
    versions = {"server": dict(meta.get("server_implementations") or {}),
                "client": dict(meta.get("client_implementations") or {})}
    return _Experiment(str(path), base["campaign"], parts[0], base["variant"], servers, clients,
                       base, versions, measurements)


def _split_pair(name: str, exp: _Experiment) -> tuple[str, str]:
    """``<server>_<client>`` using the experiment's implementation names (which may hold
    ``_``), else split at the first ``_``."""
    for server in exp.servers:
        if name.startswith(server + "_") and name[len(server) + 1:] in exp.clients:
            return server, name[len(server) + 1:]
    server, _, client = name.partition("_")
    return server, client


def _repetitions(exp_dir: Path) -> list[tuple[str, str, int, str]]:
    """(pair dir name, testcase, repetition, path) of every repetition directory."""
    out: list[tuple[str, str, int, str]] = []
    try:
        pairs = [e for e in os.scandir(exp_dir) if "_" in e.name and e.is_dir()]
    except OSError:
        return out
    for pair in pairs:
        try:
            cases = [e for e in os.scandir(pair.path) if e.is_dir()]
        except OSError:
            continue
        for case in cases:
            try:
                reps = [e for e in os.scandir(case.path) if e.name.isdecimal() and e.is_dir()]
            except OSError:
                continue
            out += [(pair.name, case.name, int(r.name), r.path) for r in reps]
    return sorted(out)


# --------------------------------------------------------------------------------------------
# one repetition


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


@dataclass
class _Log:
    """What ``output.txt`` says about one repetition."""

    status: str
    reason: str | None
    goodput_mbps: float | None  # the runner's own figure (3 decimals)
    client_started: datetime | None  # management host's local clock, naive


def _parse_output(text: str | None) -> _Log:
    """Verdict, failure reason, the runner's goodput and the client start of ``output.txt``
    (only the runner's own timestamped lines count; the tools' stderr is ignored)."""
    if text is None:
        return _Log("failed", "output.txt missing: outcome not recorded", None, None)
    started: datetime | None = None
    m = _STARTING_CLIENT.search(text)
    if m is not None:
        started = datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S") + \
            timedelta(milliseconds=int(m[2]))
    goodput: float | None = None
    g = _GOODPUT_LINE.search(text)
    if g is not None:
        goodput = float(g[1])
    status: str | None = None
    verdicts = [(text.rfind(mark), name) for mark, name in (
        (_OK, "ok"), (_FAILED, "failed"), (_UNSUPPORTED, "unsupported"))]
    at, name = max(verdicts)
    if at >= 0:
        status = name
    if status == "ok":
        return _Log("ok", None, goodput, started)
    reason: str | None = None
    for line in text.splitlines():
        lm = _LOG_LINE.match(line)
        if lm is None:
            continue
        msg = lm[3]
        if any(word in msg for word in _REASONS) and \
                not msg.startswith(("Run ", "Copy ", "ssh ", "Starting", "Different filesize")):
            reason = msg.strip()
            break
    if status is None:
        return _Log("failed", "no verdict in output.txt (run interrupted?)", goodput, started)
    if status == "failed" and reason is not None and "expired" in reason:
        status = "timeout"
    return _Log(status, reason or f"predecessor runner: test {status}", goodput, started)


def _utc_offset(started: datetime | None, start_ns: int | None) -> timezone:
    """Time zone of the nodes' clocks (pidstat prints local time): the offset between the
    runner's "Starting client" log line and the client's epoch start, in quarter hours; UTC
    when either is missing."""
    if started is None or start_ns is None:
        return timezone.utc
    local = started.replace(tzinfo=timezone.utc).timestamp()
    quarters = round((local - start_ns / 1e9) / 900)
    if abs(quarters) > 56:
        return timezone.utc
    return timezone(timedelta(seconds=900 * quarters))


def _pidstat(text: str, window: tuple[float, float] | None,
             tz: timezone) -> tuple[float | None, set[str], str | None]:
    """(mean %CPU of the matched processes per 1 s interval in the transfer window, their
    command names, why missing). Samples are placed with the header's date and ``tz``."""
    samples: list[PidstatSample] = parse_pidstat(text)
    if not samples:
        return None, set(), "no samples (pidstat -G matched no process)"
    commands = {s.command for s in samples}
    day = samples[0].date
    if window is None or day is None:
        return mean_cpu_pct(samples), commands, None
    to_epoch = ClockToEpoch(date.fromisoformat(day), tz)
    for s in samples:
        if s.time_of_day is not None:
            s.timestamp = to_epoch(s.time_of_day)
    # a sample is stamped at its interval's end: ends in [start, end + 1] (as pidstat_cpu_summary)
    mean = mean_cpu_pct(samples, window[0], window[1] + 1)
    if mean is None:
        return None, commands, "no sample inside the transfer window"
    return mean, commands, None


def _perf_stacks(path: str) -> FoldedStacks:
    return read_perf_script(path)


def _comm_filter(implementation: str, role: str,
                 commands: set[str]) -> Callable[[str], bool]:
    """Which perf comms belong to the implementation's process: the command names pidstat
    matched for this role, else the predecessor's name rule."""
    if commands:
        return lambda comm: comm in commands
    for prefix, names in _NAME_RULES.items():
        if implementation.startswith(prefix):
            needle = names[0] if role == "server" else names[1]
            return lambda comm: needle in comm
    return lambda comm: implementation in comm


def _perf_file(side: str) -> str | None:
    for name in PERF_FILES:
        path = os.path.join(side, name)
        if os.path.exists(path):
            return path
    return None


def _perf_rule_name(implementation: str) -> str:
    return _PERF_RULE_NAMES.get(implementation, implementation)


def _role_columns(side: str, role: str, impl: str, window: tuple[float, float] | None,
                  tz: timezone, cols: dict[str, float], missing: list[str]) -> bool:
    """The monitor columns of one role of a repetition, by the registered extractors where
    the predecessor's files hold what ours do (ethtool, netstat -s as nstat, perf shares).
    True when perf ran for this role (a perf file is there)."""
    inp = SideInput(role, DirectoryFiles(side), window, impl, counter_format="netstat-s",
                    snapshot_names=("start", "stop"))
    extract_role(MONITORS["ethtool"], inp, cols, missing)
    extract_role(MONITORS["nstat"], inp, cols, missing, label="netstat")
    commands: set[str] = set()
    text = _read(os.path.join(side, "pidstat.txt"))
    if text is None:
        missing.append(f"{role}.pidstat: pidstat.txt missing")
    else:
        try:
            mean, commands, why = _pidstat(text, window, tz)
        except ParseError as exc:
            mean, why = None, str(exc)
        if mean is not None:
            cols[role + "_pidstat_cpu_pct"] = mean
            cols[role + "_cpu_pct"] = mean  # the only CPU figure of this format
        else:
            missing.append(f"{role}.pidstat: {why}")
    perf = _perf_file(side)
    if perf is None:
        return False
    try:
        stacks = filter_comm(_perf_stacks(perf), _comm_filter(impl, role, commands))
        shares = perf_share_columns(stacks, _perf_rule_name(impl))
        if not shares:
            missing.append(f"{role}.perf: no samples of the {role} process")
        cols.update({f"{role}_{name}": share for name, share in shares.items()})
    except (ParseError, OSError, ValueError) as exc:
        missing.append(f"{role}.perf: {exc}")
    return True


def _repetition_row(rep_dir: Path | str, exp: _Experiment, pair: str, testcase: str,
                          repetition: int) -> dict[str, Any]:
    """The row of one repetition directory (base columns, monitor columns, missing reasons)."""
    rep = str(rep_dir)
    server, client = _split_pair(pair, exp)
    row: dict[str, Any] = dict(exp.base)
    row.update(server=server, client=client, testcase=testcase, repetition=repetition,
               attempt=1, path=rep, server_version=exp.versions["server"].get(server),
               client_version=exp.versions["client"].get(client))
    missing: list[str] = []
    measurement = exp.measurements.get((server, client, testcase)) or {}
    file_size = measurement.get("filesize")
    if file_size is None and isinstance((exp.base.get("qir_arg_filesize")), int):
        file_size = exp.base["qir_arg_filesize"] * 2**20  # the runner's --filesize is MiB
    row["file_size"] = file_size

    log = _parse_output(_read(os.path.join(rep, "output.txt")))
    row["status"], row["reason"] = log.status, log.reason

    start_ns = end_ns = None
    try:
        times = _read_json(Path(rep, "client", "time.json"))
        start_ns, end_ns = int(times["start"]), int(times["end"])
    except (OSError, ValueError, KeyError, TypeError):
        missing.append("client.time: time.json missing or unreadable")
    duration = (end_ns - start_ns) / 1e9 if start_ns is not None and end_ns is not None \
        and end_ns > start_ns else None
    row.update(start_ns=start_ns, end_ns=end_ns, duration_s=duration)
    if log.status == "ok" and duration is not None and file_size:
        row["goodput_mbps"] = 8 * file_size / duration / 1e6
    elif log.status == "ok":
        row["reason"] = "ok, but no client timing (time.json) or file size: goodput unknown"

    # the runner's figure: the details value matching the goodput this directory's log reports
    details = measurement.get("details")
    if log.status == "ok" and log.goodput_mbps is not None and isinstance(details, list):
        close = [d for d in details if isinstance(d, (int, float))
                 and abs(d - log.goodput_mbps) <= 0.0005 + 1e-9 * abs(d)]
        row["qir_goodput_mbps"] = close[0] if len(set(close)) == 1 else log.goodput_mbps
    elif log.status == "ok":
        row["qir_goodput_mbps"] = log.goodput_mbps

    window = (start_ns / 1e9, end_ns / 1e9) if start_ns and end_ns else None
    tz = _utc_offset(log.client_started, start_ns)
    cols: dict[str, float] = {}
    perf = False
    for role in ROLES:
        impl = server if role == "server" else client
        perf |= _role_columns(os.path.join(rep, role), role, impl, window, tz, cols, missing)
    row["monitors_missing"] = "; ".join(missing) or None
    row["_numeric"] = cols
    row["_perf"] = perf  # which monitors ran: their columns exist in the frame
    return row


# --------------------------------------------------------------------------------------------
# the frame

_Task = tuple[int, str, str, int, str]  # experiment index, pair, testcase, repetition, path


def _chunk(tasks: list[_Task], experiments: list[_Experiment]) -> Chunk:
    """Rows of some repetitions: base values and one float64 matrix of monitor values, with
    every column of the monitors the predecessor ran."""
    rows = [_repetition_row(path, experiments[i], pair, case, rep)
            for i, pair, case, rep, path in tasks]
    names: dict[str, None] = {}
    for row in rows:
        names.update(dict.fromkeys(row["_numeric"]))
    perf = any([row.pop("_perf") for row in rows])  # a list: every row loses its flag
    names.update(dict.fromkeys(declared_columns([*MONITORS_RUN, *(["perf"] if perf else [])])))

    numeric = list(names)
    nan = float("nan")
    matrix = np.array([[row["_numeric"].get(n, nan) for n in numeric] for row in rows],
                      dtype=np.float64).reshape(len(rows), len(numeric))
    for row in rows:
        del row["_numeric"]
    return rows, numeric, matrix


def _tasks(roots: Iterable[Path | str]) -> tuple[list[_Task], list[_Experiment]]:
    experiments: list[_Experiment] = []
    tasks: list[_Task] = []
    for root in roots:
        root = Path(root)
        for path in find_qir10g_experiments(root):
            meta = _qir_meta(path / RESULT_FILE)
            if meta is None:
                continue
            experiments.append(_experiment(path, root, meta))
            index = len(experiments) - 1
            tasks += [(index, pair, case, rep, p) for pair, case, rep, p in _repetitions(path)]
    return tasks, experiments


def _frame(rows: list[dict[str, Any]], numeric: list[str], matrix: np.ndarray) -> pd.DataFrame:
    keys: dict[str, None] = dict.fromkeys(COLUMNS)
    keys["monitors_missing"] = None
    keys["link_rate_mbps"] = None
    for row in rows:
        keys.update(dict.fromkeys(row))
    data: dict[str, Any] = {}
    for name in keys:
        values = pd.Series([row.get(name) for row in rows], dtype=object)
        dtype = COLUMNS.get(name)
        if dtype is None:
            if name in ("monitors_missing",):
                data[name] = values.astype("string")
            elif name == "link_rate_mbps":
                data[name] = values.astype("Float64")
            else:
                data[name] = values.convert_dtypes() if len(values) else values.astype("string")
        elif dtype.startswith("datetime"):
            data[name] = pd.to_datetime(values, utc=True)
        elif dtype == "category":
            data[name] = pd.Categorical(values, categories=list(STATUSES))
        else:
            data[name] = values.astype(dtype)
    frame = pd.DataFrame(data)
    if numeric:
        frame = pd.concat([frame, pd.DataFrame(matrix, columns=numeric)], axis=1)
    frame = add_bottleneck(frame)
    return frame.sort_values(["campaign", "server", "client", "testcase", "repetition"],
                             ignore_index=True)


def load_qir10g(*paths: Path | str) -> pd.DataFrame:
    """Load every repetition of the predecessor result trees at or below ``paths``.

    One row per ``<server>_<client>/<testcase>/<rep>/`` directory, keyed by that directory;
    a failed, unsupported or unverifiable repetition keeps its row with ``status`` and
    ``reason`` and <NA> goodput. Columns: those of :func:`load_results` for the project's own
    results (monitor columns by the same parsers and names), plus ``experiment``,
    ``server_node``/``client_node``, ``qir_goodput_mbps`` (the runner's own figure),
    ``server_param_<name>``/``client_param_<name>`` and ``qir_arg_<name>`` (runner arguments).
    Large trees are parsed in a process pool.
    """
    tasks, experiments = _tasks(paths)
    return _frame(*pooled_chunks(_chunk, tasks, experiments))


def load_qir10g_perf_categories(*paths: Path | str) -> pd.DataFrame:
    """perf category shares (paper Fig. 7) of predecessor repetitions with ``out.perf.zst``,
    in the long format of
    :func:`~interop_runner.analysis.frames.series.load_perf_categories`: one row per
    repetition, role, scope (``process``: the implementation's processes, as named by
    pidstat; ``system``: every sample of the node, ``perf record -a``) and category."""
    tasks, experiments = _tasks(paths)
    out: list[dict[str, Any]] = []
    for i, pair, case, rep, path in tasks:
        exp = experiments[i]
        server, client = _split_pair(pair, exp)
        for role in ROLES:
            side = os.path.join(path, role)
            perf = _perf_file(side)
            if perf is None:
                continue
            impl = server if role == "server" else client
            text = _read(os.path.join(side, "pidstat.txt"))
            commands: set[str] = set()
            if text is not None:
                try:
                    commands = {s.command for s in parse_pidstat(text)}
                except ParseError:
                    pass
            try:
                system = _perf_stacks(perf)
            except (ParseError, OSError):
                continue
            ids = {"campaign": exp.campaign, "server": server, "client": client,
                   "testcase": case, "repetition": rep, "attempt": 1, "role": role}
            process = filter_comm(system, _comm_filter(impl, role, commands))
            for scope, stacks in (("process", process), ("system", system)):
                out += [{**ids, "scope": scope, "category": cat, "share": share}
                        for cat, share in categorize(stacks, perf_rules(),
                                                     _perf_rule_name(impl)).items()]
    frame = pd.DataFrame(out)
    if frame.empty:
        return pd.DataFrame(columns=["campaign", "server", "client", "testcase", "repetition",
                                     "attempt", "role", "scope", "category", "share"])
    for col in ("repetition", "attempt"):
        frame[col] = frame[col].astype("Int64")
    return frame
