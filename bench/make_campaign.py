"""Generate a large, realistic campaign results tree for the parsing-speed benchmark.

Usage::

    python bench/make_campaign.py OUT_DIR [--attempts 1000] [--seed 1] [--force]

Builds ``OUT_DIR/<campaign-id>/`` in exactly the layout the runner writes (see
``interop_runner/storage/`` and ``interop_runner/measure/attempt.py``)::

    <campaign-id>/campaign.json
    <campaign-id>/hosts/{server,client}/...                     (host facts, copied)
    <campaign-id>/<server>_<client>/goodput/<rep>/attempt-1/run.json
        server/{ethtool,sysfs,nstat}-{before,after}.txt, proc-{before,after}.txt,
               pidstat.txt, mpstat.txt (+ the runner's logs, .err and .exit files)
        client/{ethtool,sysfs,nstat}-{before,after}.txt, pidstat.txt, mpstat.txt (+ logs)

Every file is made from REAL captured outputs in ``bench/data/`` (see ``bench/data/README.md``):
a campaign the runner produced on the local testbed (run.json, campaign.json, sysfs, nstat,
proc, pidstat, mpstat, logs) and bare-metal Broadcom bnxt ``ethtool -S`` snapshots from the
QIR 10G study (the veth ones hold almost no counters).

Per-attempt variation, deterministic for a given ``--seed``:

* counters (ethtool, sysfs, nstat): each node starts the campaign at the captured "before"
  values plus a random offset; counters then accumulate across the campaign: before each
  attempt a small random gap (background traffic) is added, and the attempt's delta is the
  captured delta scaled by a per-attempt factor in [0.8, 1.2] (kept >= 1 when the captured
  delta is > 0, so before < after). Counters whose captured delta is 0 stay constant (error
  counters stay 0). Integers are printed exactly as the tools do (nstat's fixed columns too).
* run.json: pairs (4 pairs x attempts/4 repetitions), goodput drawn around a per-pair level,
  start_ns/end_ns/started_at/finished_at on a consistent campaign timeline, client CPU times.
  About 3 % of the attempts fail before the transfer (server exits or never listens): their
  run.json has null goodput/timestamps and they have no monitor files, as the runner writes.
* proc-{before,after}.txt: timestamps at the attempt's edges, PIDs shifted, CPU/fault
  counters scaled like the other counters.
* pidstat/mpstat: epoch seconds (pidstat -H) and date/time (mpstat JSON) moved into the
  attempt's window, as many 1 s samples as the transfer lasts (captured samples cycled),
  PIDs shifted.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"
UTC = timezone.utc

# The generated campaign: 4 pairs (names from quic-go/tcp-tls, the others synthetic).
# name -> (alpn, version, typical goodput in Mbit/s on this setup)
IMPLS: dict[str, tuple[str, str, float]] = {
    "quic-go": ("h3", "v0.65.0", 1110.0),
    "lsquic": ("h3", "v4.2.0", 1450.0),
    "quiche": ("h3", "0.23.4", 950.0),
    "tcp-tls": ("http/1.1", "debian-12", 2300.0),
}
PAIRS = [("quic-go", "quic-go"), ("lsquic", "lsquic"), ("quiche", "quiche"),
         ("tcp-tls", "tcp-tls")]
CAMPAIGN_NAME = "bench"
CAMPAIGN_START = datetime(2026, 11, 21, 8, 0, 0, tzinfo=UTC)
FAIL_RATE = 0.03

# nstat values that are gauges or constants, never shifted (0 or absent in the capture).
NSTAT_GAUGES = {"IpForwarding", "IpDefaultTTL", "TcpRtoAlgorithm", "TcpRtoMin", "TcpRtoMax",
                "TcpMaxConn", "TcpCurrEstab", "MPTcpExtMPCurrEstab", "Ip6Forwarding"}


# --------------------------------------------------------------------------------------------
# counter files: ethtool -S, grep -r . /sys/class/net/<if>/statistics/, nstat -asz
# --------------------------------------------------------------------------------------------

_NSTAT_RE = re.compile(r"^(\S+)(\s+)(-?\d+)(\s+)(\S+)$")


def _split_counter_line(kind: str, line: str) -> tuple[str, str, int, int, str] | None:
    """(key, prefix, value, width, suffix) of a counter line, None for other lines.

    The line is rendered back as ``prefix + str(value).ljust(width) + suffix``.
    """
    if kind == "nstat":
        m = _NSTAT_RE.match(line)
        if not m:
            return None
        name, sp1, val, sp2, rate = m.groups()
        # nstat prints "%-32s%-16llu%6.1f"
        return name, name.ljust(32) if len(name) < 32 else name, int(val), 16, rate.rjust(6)
    if kind == "ethtool":
        head, sep, val = line.rpartition(": ")
        if not sep or not val.isdigit():
            return None
        return head, head + ": ", int(val), 0, ""
    if kind == "sysfs":
        head, sep, val = line.rpartition(":")
        if not sep or not val.lstrip("-").isdigit():
            return None
        return head, head + ":", int(val), 0, ""
    raise ValueError(kind)


def _render_value(v: int, width: int) -> str:
    s = str(v)
    return s.ljust(width) if width else s


@dataclass
class CounterTemplate:
    """A before/after pair of snapshots of one counter tool, split into counter slots."""

    kind: str
    lines: list[str | int]          # literal line, or index into the slots
    prefix: list[str]
    width: list[int]
    suffix: list[str]
    before: list[int]
    delta: list[int]
    gauge: list[bool]

    @classmethod
    def load(cls, kind: str, before_path: Path, after_path: Path) -> "CounterTemplate":
        btext, atext = before_path.read_text(), after_path.read_text()
        blines, alines = btext.split("\n"), atext.split("\n")
        if len(blines) != len(alines):
            raise ValueError(f"{before_path} and {after_path} differ in length")
        t = cls(kind, [], [], [], [], [], [], [])
        after_raw: list[int] = []
        for bl, al in zip(blines, alines):
            b = _split_counter_line(kind, bl)
            a = _split_counter_line(kind, al)
            if b is None or a is None or b[0] != a[0] or b[1] != a[1] or b[4] != a[4]:
                if bl != al:
                    raise ValueError(f"{kind}: cannot pair lines {bl!r} / {al!r}")
                t.lines.append(bl)
                continue
            key, prefix, bv, width, suffix = b
            t.lines.append(len(t.before))
            t.prefix.append(prefix)
            t.width.append(width)
            t.suffix.append(suffix)
            t.before.append(bv)
            after_raw.append(a[2])
            d = a[2] - bv
            gauge = d < 0 or (kind == "nstat" and key in NSTAT_GAUGES)
            t.delta.append(0 if gauge else d)
            t.gauge.append(gauge)
        # the rendering must reproduce the captured files byte for byte
        if t.render_full(t.before) != btext or t.render_full(after_raw) != atext:
            raise ValueError(f"{kind}: re-rendering {before_path.name} is not identical")
        return t

    def render_full(self, values: list[int]) -> str:
        return "\n".join(
            e if isinstance(e, str) else
            self.prefix[e] + _render_value(values[e], self.width[e]) + self.suffix[e]
            for e in self.lines)


@dataclass
class CounterNode:
    """The counters of one tool on one node over the campaign (they only grow)."""

    tpl: CounterTemplate
    cur: list[int]
    dyn: list[int] = field(default_factory=list)       # slots that change per attempt
    chunks: list[str] = field(default_factory=list)    # static text around the dynamic slots

    @classmethod
    def start(cls, tpl: CounterTemplate, rng: random.Random) -> "CounterNode":
        # the node has been up for a while: a random offset on every counter already counting
        offset = rng.uniform(0.05, 3.0)
        cur = [b if g or b == 0 else b + int(b * offset) + rng.randrange(1, 1000)
               for b, g in zip(tpl.before, tpl.gauge)]
        node = cls(tpl, cur)
        dyn_set = {i for i, d in enumerate(tpl.delta) if d > 0}
        # pre-render everything that stays constant; dynamic slots split the text into chunks
        buf: list[str] = []
        for n, e in enumerate(tpl.lines):
            if n:
                buf.append("\n")
            if isinstance(e, str):
                buf.append(e)
            elif e in dyn_set:
                buf.append(tpl.prefix[e])
                node.chunks.append("".join(buf))
                node.dyn.append(e)
                buf = [tpl.suffix[e]]
            else:
                buf.append(tpl.prefix[e] + _render_value(cur[e], tpl.width[e]) + tpl.suffix[e])
        node.chunks.append("".join(buf))
        return node

    def _render(self, values: list[int]) -> str:
        tpl, chunks = self.tpl, self.chunks
        parts = [chunks[0]]
        for k, i in enumerate(self.dyn):
            parts.append(_render_value(values[k], tpl.width[i]))
            parts.append(chunks[k + 1])
        return "".join(parts)

    def attempt(self, gap_frac: float, factor: float) -> tuple[str, str]:
        """Advance by a gap, then by the scaled delta; return (before, after) texts."""
        tpl, cur = self.tpl, self.cur
        before, after = [], []
        for i in self.dyn:
            d = tpl.delta[i]
            b = cur[i] + int(d * gap_frac)
            a = b + max(1, round(d * factor))
            cur[i] = a
            before.append(b)
            after.append(a)
        return self._render(before), self._render(after)

    def idle(self, gap_frac: float) -> None:
        """Time passes without a transfer (a failed attempt)."""
        for i in self.dyn:
            self.cur[i] += int(self.tpl.delta[i] * gap_frac)


# --------------------------------------------------------------------------------------------
# proc-{before,after}.txt: "<epoch ns> <CLK_TCK>" then /proc/<pid>/stat lines
# --------------------------------------------------------------------------------------------

# 1-based /proc/<pid>/stat fields (after the comm, index = field - 3 in `rest`)
_PID_FIELDS = (4, 5, 6)            # ppid, pgrp, session (shifted unless 0/1)
_COUNTER_FIELDS = (10, 11, 12, 13, 14, 15, 16, 17)  # minflt..cstime


@dataclass
class ProcTemplate:
    before_ns: int
    after_ns: int
    tck: str
    lines_b: list[tuple[int, str, list[str]]]
    lines_a: list[tuple[int, str, list[str]]]

    @staticmethod
    def _parse(text: str) -> tuple[int, str, list[tuple[int, str, list[str]]]]:
        first, *rest = text.rstrip("\n").split("\n")
        ns, tck = first.split()
        lines = []
        for ln in rest:
            head, _, tail = ln.rpartition(") ")
            pid, _, comm = head.partition(" (")
            lines.append((int(pid), comm, tail.split(" ")))
        return int(ns), tck, lines

    @classmethod
    def load(cls, before: Path, after: Path) -> "ProcTemplate":
        bns, tck, lb = cls._parse(before.read_text())
        ans, _, la = cls._parse(after.read_text())
        t = cls(bns, ans, tck, lb, la)
        if t.render(0, 0, 0, 1.0, 0.0)[0] != before.read_text() or \
                t.render(0, 0, 0, 1.0, 0.0)[1] != after.read_text():
            raise ValueError("proc: re-rendering is not identical")
        return t

    def render(self, before_ns: int, after_ns: int, pid_shift: int, factor: float,
               jitter: float, tick_shift: int = 0) -> tuple[str, str]:
        """(proc-before, proc-after); 0 for a timestamp keeps the captured one.

        The same processes appear in both snapshots: their counters start at the captured
        "before" values plus ``jitter`` (a fraction) and grow by the captured delta scaled
        by ``factor``.
        """
        base = {p: fields for p, _, fields in self.lines_b}

        def pid(v: str) -> str:
            n = int(v)
            return str(n + pid_shift) if n > 1 else v

        outs = []
        for ns, lines, is_after in ((before_ns or self.before_ns, self.lines_b, False),
                                    (after_ns or self.after_ns, self.lines_a, True)):
            out = [f"{ns} {self.tck}"]
            for p, comm, fields in lines:
                f = list(fields)
                for fld in _PID_FIELDS:
                    f[fld - 3] = pid(f[fld - 3])
                f[22 - 3] = str(int(f[22 - 3]) + tick_shift)    # starttime (clock ticks)
                ref = base.get(p, fields)
                for fld in _COUNTER_FIELDS:
                    b0 = int(ref[fld - 3])
                    b = b0 + int(b0 * jitter)
                    d = int(fields[fld - 3]) - b0 if is_after else 0
                    f[fld - 3] = str(b + (max(1, round(d * factor)) if d > 0 else d))
                out.append(f"{pid(str(p))} ({comm}) " + " ".join(f))
            outs.append("\n".join(out) + "\n")
        return outs[0], outs[1]


# --------------------------------------------------------------------------------------------
# pidstat -h -H -u -r -w -t (epoch seconds) and mpstat -P ALL -o JSON (ISO date/time)
# --------------------------------------------------------------------------------------------

_PIDSTAT_ROW = re.compile(r"^(\d+)(\s+\S+)(\s+)(\S+)(\s+)(\S+)(.*)$")
_PIDSTAT_DATE = re.compile(r"\t\d{4}-\d{2}-\d{2} \t")


def _cycle(n_tpl: int, n: int) -> list[int]:
    """Indices of n samples from n_tpl captured ones: first, middle ones cycled, last."""
    if n_tpl <= 2 or n <= 2:
        return [min(i, n_tpl - 1) for i in range(n)] if n <= n_tpl else \
            [i % n_tpl for i in range(n)]
    mid = n_tpl - 2
    return [0] + [1 + (j % mid) for j in range(n - 2)] + [n_tpl - 1]


def _rfield(v: int | str, width: int) -> str:
    s = str(v)
    return s.rjust(width) if len(s) < width else " " + s


@dataclass
class PidstatTemplate:
    banner: str                     # first line, the date replaced by {date}
    blocks: list[tuple[str, list[tuple[int, str, int | None, int, int | None, int, str]]]]
    first_ts: int
    trailer: str = ""               # pidstat ends with an empty line when stopped by SIGINT

    @classmethod
    def load(cls, path: Path) -> "PidstatTemplate":
        text = path.read_text()
        lines = text.split("\n")
        banner = lines[0]
        if not _PIDSTAT_DATE.search(banner):
            raise ValueError(f"{path}: no ISO date in the banner")
        blocks: list[Any] = []
        assert lines[1] == "" and text.endswith("\n")
        for ln in lines[1:-1]:
            if ln == "":
                continue
            if ln.startswith("#"):
                blocks.append((ln, []))
                continue
            m = _PIDSTAT_ROW.match(ln)
            if not m:
                raise ValueError(f"{path}: unexpected line {ln!r}")
            ts, uid, s1, tgid, s2, tid, rest = m.groups()
            blocks[-1][1].append((
                int(ts), uid,
                None if tgid == "-" else int(tgid), len(s1) + len(tgid),
                None if tid == "-" else int(tid), len(s2) + len(tid), rest))
        t = cls(banner, blocks, blocks[0][1][0][0], "\n" if text.endswith("\n\n") else "")
        if t.render(None, 0, 0, len(blocks)) != text:
            raise ValueError(f"{path}: re-rendering is not identical")
        return t

    def render(self, date: str | None, first_ts: int, pid_shift: int, n: int) -> str:
        banner = self.banner if date is None else \
            _PIDSTAT_DATE.sub(f"\t{date} \t", self.banner, count=1)
        out = [banner, "\n"]
        first_ts = first_ts or self.first_ts
        for k, b in enumerate(_cycle(len(self.blocks), n)):
            header, rows = self.blocks[b]
            ts = str(first_ts + k)
            out.append("\n" + header + "\n")
            for _, uid, tgid, w1, tid, w2, rest in rows:
                out.append(ts + uid
                           + _rfield("-" if tgid is None else tgid + pid_shift, w1)
                           + _rfield("-" if tid is None else tid + pid_shift, w2)
                           + rest + "\n")
        out.append(self.trailer)
        return "".join(out)


_MPSTAT_BLOCK = re.compile(r"\t\t\t\t\{\n\t\t\t\t\t\"timestamp\": \"(\d\d:\d\d:\d\d)\",\n.*?\n"
                           r"\t\t\t\t\}", re.S)


@dataclass
class MpstatTemplate:
    head: str                       # up to the date value
    head2: str                      # after the date, up to the first sample
    blocks: list[tuple[str, str]]   # (text before the time, text after it)
    tail: str
    first_time: datetime

    @classmethod
    def load(cls, path: Path) -> "MpstatTemplate":
        text = path.read_text()
        blocks = list(_MPSTAT_BLOCK.finditer(text))
        if not blocks:
            raise ValueError(f"{path}: no samples")
        for a, b in zip(blocks, blocks[1:]):
            if text[a.end():b.start()] != ",\n":
                raise ValueError(f"{path}: unexpected text between samples")
        m = re.search(r'"date": "(\d{4}-\d{2}-\d{2})"', text)
        assert m and m.end() < blocks[0].start()
        head, head2 = text[:m.start(1)], text[m.end(1):blocks[0].start()]
        parts = []
        for b in blocks:
            s = b.group(0)
            pos = b.start(1) - b.start()
            parts.append((s[:pos], s[pos + 8:]))
        first = datetime.fromisoformat(f"{m.group(1)}T{blocks[0].group(1)}+00:00")
        t = cls(head, head2, parts, text[blocks[-1].end():], first)
        if t.render(first, len(parts)) != text:
            raise ValueError(f"{path}: re-rendering is not identical")
        return t

    def render(self, first: datetime, n: int) -> str:
        out = [self.head, first.strftime("%Y-%m-%d"), self.head2]
        for k, b in enumerate(_cycle(len(self.blocks), n)):
            pre, post = self.blocks[b]
            if k:
                out.append(",\n")
            out.append(pre + (first + timedelta(seconds=k)).strftime("%H:%M:%S") + post)
        out.append(self.tail)
        return "".join(out)


# --------------------------------------------------------------------------------------------
# the campaign
# --------------------------------------------------------------------------------------------

def _iso_ms(dt: datetime) -> str:
    return dt.isoformat(timespec="milliseconds")


def _dt(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC)


def _go_log(ns: int) -> str:
    """Go's log timestamp (LstdFlags | Lmicroseconds), UTC."""
    return _dt(ns).strftime("%Y/%m/%d %H:%M:%S.%f")


@dataclass
class Templates:
    run: dict[str, Any]
    campaign: dict[str, Any]
    counters: dict[tuple[str, str], CounterTemplate]
    proc: ProcTemplate
    pidstat: dict[str, PidstatTemplate]
    mpstat: dict[str, MpstatTemplate]

    @classmethod
    def load(cls, data: Path = DATA) -> "Templates":
        counters = {}
        for side in ("server", "client"):
            d = data / side
            counters[(side, "ethtool")] = CounterTemplate.load(
                "ethtool", d / "ethtool-bnxt-start.txt", d / "ethtool-bnxt-stop.txt")
            for kind in ("sysfs", "nstat"):
                counters[(side, kind)] = CounterTemplate.load(
                    kind, d / f"{kind}-before.txt", d / f"{kind}-after.txt")
        return cls(
            run=json.loads((data / "run.json").read_text()),
            campaign=json.loads((data / "campaign.json").read_text()),
            counters=counters,
            proc=ProcTemplate.load(data / "server/proc-before.txt",
                                   data / "server/proc-after.txt"),
            pidstat={s: PidstatTemplate.load(data / s / "pidstat.txt")
                     for s in ("server", "client")},
            mpstat={s: MpstatTemplate.load(data / s / "mpstat.txt")
                    for s in ("server", "client")},
        )


class Writer:
    """Writes files and keeps count (plain writes: this is a generator, not the runner)."""

    def __init__(self) -> None:
        self.files = 0
        self.bytes = 0

    def write(self, path: Path, text: str) -> None:
        data = text.encode()
        with open(path, "wb") as fh:
            fh.write(data)
        self.files += 1
        self.bytes += len(data)

    def json(self, path: Path, obj: Any) -> None:
        self.write(path, json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")


def _source_hash(name: str) -> str:
    return hashlib.sha256(f"bench-source:{name}".encode()).hexdigest()


def _side(tpl: dict[str, Any], impl: str, node: str) -> dict[str, Any]:
    side = dict(tpl)
    side.update(implementation=impl, version=IMPLS[impl][1], source_hash=_source_hash(impl),
                node=node, params={}, exit_code=None, cpu_user_s=None, cpu_system_s=None)
    return side


def generate(out_dir: Path, attempts: int = 1000, seed: int = 1, force: bool = False,
             data: Path = DATA) -> tuple[Path, Writer]:
    """Write the campaign; return its directory and the writer's counts."""
    if attempts < 1:
        raise ValueError("--attempts must be >= 1")
    tpl = Templates.load(data)
    rng = random.Random(seed)
    campaign_id = f"{CAMPAIGN_NAME}_{CAMPAIGN_START:%Y%m%dT%H%M%SZ}"
    cdir = out_dir / campaign_id
    if cdir.exists():
        if not force:
            raise FileExistsError(f"{cdir} exists (use --force to replace it)")
        shutil.rmtree(cdir)
    cdir.mkdir(parents=True)
    w = Writer()

    # -- the plan: pairs x repetitions in the runner's order (pair-major) --------------------
    npairs = min(len(PAIRS), attempts)
    reps = math.ceil(attempts / npairs)
    plan = [(s, c, r) for s, c in PAIRS[:npairs] for r in range(1, reps + 1)][:attempts]

    # -- template timings (relative to the transfer) -----------------------------------------
    trun = tpl.run
    t_start, t_end = trun["start_ns"], trun["end_ns"]
    t_dur = (t_end - t_start) / 1e9
    lead_ns = t_start - int(datetime.fromisoformat(trun["started_at"]).timestamp() * 1e9)
    tail_ns = int(datetime.fromisoformat(trun["finished_at"]).timestamp() * 1e9) - t_end
    proc_lead = t_start - tpl.proc.before_ns
    proc_tail = tpl.proc.after_ns - t_end
    tcamp = tpl.campaign
    setup_ns = int((datetime.fromisoformat(trun["started_at"])
                    - datetime.fromisoformat(tcamp["started_at"])).total_seconds() * 1e9)
    pid_off = {s: tpl.pidstat[s].first_ts - t_start / 1e9 for s in ("server", "client")}
    mp_off = {s: tpl.mpstat[s].first_time.timestamp() - t_start / 1e9
              for s in ("server", "client")}
    pid_n = {s: len(tpl.pidstat[s].blocks) for s in ("server", "client")}
    mp_n = {s: len(tpl.mpstat[s].blocks) for s in ("server", "client")}
    file_size = trun["file_size"]
    file_name = tcamp["file"]["name"]
    cpu_user, cpu_sys = trun["client"]["cpu_user_s"], trun["client"]["cpu_system_s"]
    server_err_tpl = (data / "server/server.stderr.log").read_text()
    m = re.search(r"serving (\S+) on (\S+) \((\S+)\)", server_err_tpl)
    www, addr = (m.group(1), m.group(2)) if m else ("/dev/shm/qir-server/www", "198.19.0.1:4433")
    www = re.sub(r"/[^/]+_\d{8}T\d{6}Z/", f"/{campaign_id}/", www)
    host, _, port = addr.rpartition(":")
    client_ip = "198.19.0.2"

    # -- per-node state ----------------------------------------------------------------------
    nodes = {key: CounterNode.start(t, rng) for key, t in sorted(tpl.counters.items())}
    monitors = trun["monitors"]

    # host facts, as the runner copies them once per campaign
    for side in ("server", "client"):
        hdir = cdir / "hosts" / side
        hdir.mkdir(parents=True)
        for f in sorted((data / "hosts" / side).iterdir()):
            w.write(hdir / f.name, f.read_text())

    campaign_ns = int(CAMPAIGN_START.timestamp() * 1e9)
    now_ns = campaign_ns + setup_ns
    pid_shift = 0
    for idx, (srv, cli, rep) in enumerate(plan):
        adir = cdir / f"{srv}_{cli}" / "goodput" / str(rep) / "attempt-1"
        adir.mkdir(parents=True)
        alpn = IMPLS[srv][0]
        started = now_ns + rng.randrange(1_000_000, 5_000_000)
        pid_shift += rng.randrange(40, 90)
        rec: dict[str, Any] = {k: v for k, v in trun.items()}
        rec.update(campaign=campaign_id, testcase="goodput", repetition=rep, attempt=1,
                   server=_side(trun["server"], srv, "server"),
                   client=_side(trun["client"], cli, "client"),
                   alpn=alpn, file_size=file_size, testbed=trun["testbed"],
                   monitors=json.loads(json.dumps(monitors)), warnings=[])
        failed = rng.random() < FAIL_RATE
        if failed:
            gap = rng.uniform(0.001, 0.01)
            for node in nodes.values():
                node.idle(gap)
            sdir = adir / "server"
            sdir.mkdir()
            w.write(sdir / "server.stdout.log", "")
            if rng.random() < 0.5:
                t_fail = started + rng.randrange(20_000_000, 60_000_000)
                line = (f"{srv} server: {_go_log(t_fail)} server: listen udp {addr}: bind: "
                        f"cannot assign requested address")
                w.write(sdir / "server.stderr.log", line + "\n")
                w.write(sdir / "server.stdout.log.exit", "1\n")
                rec["server"]["exit_code"] = 1
                reason = f"server exited 1: {line[:300]}"
                finished = t_fail + rng.randrange(100_000_000, 300_000_000)
            else:
                w.write(sdir / "server.stderr.log", "")
                rec["server"]["exit_code"] = None    # stopped by the runner
                reason = f"server not listening on port {port} after 15 s"
                finished = started + 15_000_000_000 + rng.randrange(200_000_000, 400_000_000)
            rec.update(status="failed", reason=reason, bytes_received=None,
                       sha256_expected=trun["sha256_expected"], sha256_received=None,
                       hash_ok=None, start_ns=None, end_ns=None, duration_s=None,
                       goodput_mbps=None, started_at=_iso_ms(_dt(started)),
                       finished_at=_iso_ms(_dt(finished)))
            w.json(adir / "run.json", rec)
            now_ns = finished
            continue

        # -- a successful attempt ------------------------------------------------------------
        level = IMPLS[srv][2]
        goodput = level * rng.uniform(0.85, 1.15)
        dur_us = max(1000, round(file_size * 8 / goodput))          # Mbit/s -> us
        start_ns = (started + lead_ns + rng.randrange(-10_000_000, 10_000_000)) // 1000 * 1000
        end_ns = start_ns + dur_us * 1000
        duration = (end_ns - start_ns) / 1e9
        factor = rng.uniform(0.8, 1.2)
        gap = rng.uniform(0.001, 0.03)
        finished = end_ns + tail_ns + rng.randrange(-20_000_000, 20_000_000)
        rec["server"]["exit_code"] = trun["server"]["exit_code"]
        rec["client"].update(exit_code=0, cpu_user_s=round(cpu_user * factor, 3),
                             cpu_system_s=round(cpu_sys * factor, 3))
        rec.update(status="ok", reason=None, bytes_received=file_size,
                   sha256_expected=trun["sha256_expected"],
                   sha256_received=trun["sha256_expected"], hash_ok=True,
                   start_ns=start_ns, end_ns=end_ns, duration_s=duration,
                   goodput_mbps=8.0 * file_size / duration / 1e6,
                   started_at=_iso_ms(_dt(started)), finished_at=_iso_ms(_dt(finished)))

        start_s = start_ns / 1e9
        extra = round(duration - t_dur)
        day = _dt(start_ns).strftime("%Y-%m-%d")
        for side in ("server", "client"):
            sd = adir / side
            sd.mkdir()
            for kind in ("ethtool", "sysfs", "nstat"):
                before, after = nodes[(side, kind)].attempt(gap, factor)
                w.write(sd / f"{kind}-before.txt", before)
                w.write(sd / f"{kind}-after.txt", after)
            w.write(sd / "pidstat.txt", tpl.pidstat[side].render(
                day, math.floor(start_s + pid_off[side]), pid_shift,
                max(1, pid_n[side] + extra)))
            first = _dt(math.floor(start_s + mp_off[side]) * 1_000_000_000)
            w.write(sd / "mpstat.txt", tpl.mpstat[side].render(first, max(1, mp_n[side] + extra)))
            w.write(sd / "mpstat.err", "")
            w.write(sd / "mpstat.txt.exit", "0\n")
            w.write(sd / "monitor-errors.txt", "")
        sd = adir / "server"
        pb, pa = tpl.proc.render(start_ns - proc_lead + rng.randrange(-5_000_000, 5_000_000),
                                 end_ns + proc_tail + rng.randrange(-20_000_000, 20_000_000),
                                 pid_shift, factor, rng.uniform(0.0, 0.2),
                                 round((start_ns - campaign_ns) / 1e7))
        w.write(sd / "proc-before.txt", pb)
        w.write(sd / "proc-after.txt", pa)
        w.write(sd / "pidstat.err", "")
        w.write(sd / "pidstat.txt.exit", "0\n")
        w.write(sd / "server.stdout.log", "")
        path = f"/{file_name}"
        w.write(sd / "server.stderr.log", "".join(
            f"{srv} server: {_go_log(t)} {msg}\n" for t, msg in (
                (started + 30_000_000, f"serving {www} on {addr} ({alpn})"),
                (start_ns + 8_000_000,
                 f"GET {path} from {client_ip}:{rng.randrange(32768, 60999)}"),
                (end_ns - 16_000_000, f"GET {path} done after {duration - 0.025:.3f}s"),
                (end_ns + proc_tail + 25_000_000, "received terminated, closing"),
                (end_ns + proc_tail + 25_100_000, "stopped"))))
        cd = adir / "client"
        w.write(cd / "client.stdout.log", "")
        w.write(cd / "client.stderr.log",
                f"{cli} client: {_go_log(end_ns - 3_000_000)} GET https://{addr}{path}: "
                f"{file_size} bytes in {duration - 0.008:.3f}s "
                f"({8 * file_size / (duration - 0.008) / 1e6:.1f} Mbit/s)\n")
        w.json(adir / "run.json", rec)
        now_ns = finished

    # -- campaign.json -------------------------------------------------------------------------
    camp = json.loads(json.dumps(tcamp))
    used = PAIRS[:npairs]
    camp["campaign"] = campaign_id
    camp["config"].update(name=CAMPAIGN_NAME, repetitions=reps,
                          pairs=[{"server": s, "client": c} for s, c in used])
    camp["started_at"] = _iso_ms(CAMPAIGN_START)
    camp["finished_at"] = _iso_ms(_dt(now_ns + 150_000_000))
    camp["status"] = "finished" if len(plan) == npairs * reps else "interrupted"
    camp["planned_runs"] = npairs * reps
    tver = tcamp["implementations"]["server:quic-go"]
    camp["implementations"] = {
        f"{role}:{name}": dict(tver, version=IMPLS[name][1], declared_version=IMPLS[name][1],
                               source_hash=_source_hash(name), node=role)
        for s, c in used for role, name in (("server", s), ("client", c))}
    camp["wall_s"] = (now_ns + 150_000_000) / 1e9 - CAMPAIGN_START.timestamp()
    w.json(cdir / "campaign.json", camp)
    return cdir, w


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", type=Path, help="directory to create the campaign in")
    ap.add_argument("--attempts", type=int, default=1000, help="number of attempts (1000)")
    ap.add_argument("--seed", type=int, default=1, help="random seed (1)")
    ap.add_argument("--force", action="store_true", help="replace an existing campaign dir")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    try:
        cdir, w = generate(args.out_dir, args.attempts, args.seed, args.force)
    except (FileExistsError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    dt = time.monotonic() - t0
    print(cdir)
    print(f"{w.bytes} bytes ({w.bytes / 2**20:.1f} MiB) in {w.files} files, "
          f"{args.attempts} attempts, {dt:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
