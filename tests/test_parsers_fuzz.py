"""Parser fuzzing: damaged real tool output never crashes a parser or the load.

The contract (interop_runner/parsers/__init__.py, analysis/frames/columns.py): a parser returns a
result or raises :class:`ParseError` (a short one-line ``reason`` for the record); the caller
then records the monitor as missing with that reason. Inputs are the real captures in
tests/data/ (parsers/, perf/, pcap/, results-sample/), cut at random points, with lines
deleted, duplicated or swapped, characters flipped, garbage inserted (tokens the parsers look
for, digits that ``str.isdigit`` accepts but ``int`` refuses, NUL, CR, huge numbers), or
replaced by binary junk. Deterministic (``derandomize=True``, no example database); the whole
file runs in well under a minute.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Callable
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from interop_runner.analysis import load_results
from interop_runner.analysis.frames.columns import monitor_columns
from interop_runner.parsers import (
    ParseError,
    cpu_pct,
    ethtool_totals_delta,
    mean_cpu_pct,
    nstat_delta,
    parse_ethtool_stats,
    parse_ifstat,
    parse_mpstat_json,
    parse_netstat_s,
    parse_nstat,
    parse_pidstat,
    parse_proc_times,
    parse_sysfs_stats,
    parse_tc_qdisc,
    pidstat_cpu_summary,
)
from interop_runner.parsers import quic_initial as qi
from interop_runner.parsers.folded import write_folded
from interop_runner.parsers.pcap import summarize_pcap
from interop_runner.parsers.perf import parse_perf_script

DATA = Path(__file__).resolve().parent / "data"
PARSERS = DATA / "parsers"
SAMPLE = DATA / "results-sample"
ATTEMPT = SAMPLE / "quic-go_quic-go" / "goodput" / "1" / "attempt-1"

# QIR_FUZZ_EXAMPLES=2000 QIR_FUZZ_RANDOM=1 for a longer, randomised hunt (not in the suite)
FUZZ = settings(max_examples=int(os.environ.get("QIR_FUZZ_EXAMPLES", "250")),
                derandomize=not os.environ.get("QIR_FUZZ_RANDOM"), database=None, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FUZZ_SLOW = settings(FUZZ, max_examples=max(1, FUZZ.max_examples // 3))

T = TypeVar("T")


def texts(*patterns: str, extra: tuple[Path, ...] = ()) -> tuple[str, ...]:
    files = sorted({p for pat in patterns for p in PARSERS.glob(pat)} | set(extra))
    assert files, patterns
    return tuple(p.read_text(errors="replace") for p in files)


# Tokens the parsers look for, numbers at the edges, and characters that trip str methods:
# "²" and "٣" pass str.isdigit (and "٣" str.isdecimal) but "²" makes int() fail.
TOKENS = ("", "\n", "\r\n", "\r", "\x00", "\t", " ", ":", ": ", "-", "-1", "0", "00:00:00",
          "12:00:00", "25:61:61", "99999999999999999999999999", "1e308", "nan", "NaN", "inf",
          "n/a", "|__", "#", "# Time", "Average:", "Linux", "{", "}", "[", "]", "\"", ",",
          "qdisc", "class", "Sent", "dropped", "backlog", "requeues", "rate", "PID", "TGID",
          "TID", "%CPU", "Command", "HH:MM:SS", "in", "out", "Kbps", "KB/s", "AM", "PM", "²",
          "٣", "①", "\ufffd", "\u00a0", "statistics", '"timestamp": "', '"cpu-load": [',
          "Udp:", "TcpExt:", "    ", "NIC statistics:", "rx_queue_0_packets: ", "[3]: ",
          "[", "(", ")", "cycles:", " 1234/5678 [001] 12.345: ", "\tffff sym+0x1 (dso)")
GARBAGE = st.one_of(st.sampled_from(TOKENS), st.text(max_size=24),
                    st.lists(st.sampled_from(TOKENS), min_size=1, max_size=6).map("".join))
OPS = ("truncate", "delete_line", "duplicate_line", "swap_lines", "flip", "insert", "junk",
       "empty", "odd_digit", "odd_digit")
# digits str.isdigit() accepts: int() refuses the first two and reads the others
ODD_DIGITS = ("²", "①", "٣", "𝟙")


@st.composite
def damaged(draw: st.DrawFn, corpus: tuple[str, ...]) -> str:
    """A real output with 0-4 kinds of damage."""
    text = draw(st.sampled_from(corpus))
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(OPS))
        lines = text.splitlines(keepends=True)
        if op == "truncate":
            text = text[:draw(st.integers(0, len(text)))]
        elif op in ("delete_line", "duplicate_line") and lines:
            i = draw(st.integers(0, len(lines) - 1))
            lines[i:i + 1] = [] if op == "delete_line" else [lines[i]] * draw(st.integers(2, 3))
            text = "".join(lines)
        elif op == "swap_lines" and len(lines) > 1:
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
            text = "".join(lines)
        elif op == "flip" and text:
            i = draw(st.integers(0, len(text) - 1))
            text = text[:i] + draw(st.characters()) + text[i + 1:]
        elif op == "insert":
            i = draw(st.integers(0, len(text)))
            text = text[:i] + draw(GARBAGE) + text[i:]
        elif op == "junk":
            text = draw(st.binary(max_size=200)).decode("latin-1")
        elif op == "empty":
            text = draw(st.sampled_from(("", "\n", "   \n\n", "\x00")))
        elif op == "odd_digit":
            digits = [m.start() for m in re.finditer(r"[0-9]", text)]
            if digits:
                i = draw(st.sampled_from(digits))
                text = text[:i] + draw(st.sampled_from(ODD_DIGITS)) + text[i + 1:]
    return text


def survives(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
    """Call a parser: a result, or ParseError with a short one-line reason; nothing else."""
    try:
        return fn(*args, **kwargs)
    except ParseError as exc:
        assert isinstance(exc.reason, str) and exc.reason.strip(), exc
        assert "\n" not in exc.reason and len(exc.reason) < 400, exc.reason
        return None


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# ------------------------------------------------------------------------- text parsers ----
ETHTOOL = texts("ethtool-*.txt", "qir10g-*-ethtool-*.txt",
                extra=(ATTEMPT / "server" / "ethtool-before.txt",))
SYSFS = texts("sysfs-*.txt", extra=(ATTEMPT / "server" / "sysfs-before.txt",))
NSTAT = texts("nstat-*.txt")
NETSTAT = texts("netstat-s-*.txt", "qir10g-*-netstat-*.txt")
TC = texts("tc-*.txt", extra=(ATTEMPT / "server" / "tc-before.txt",))
IFSTAT = texts("ifstat-*.txt")
PIDSTAT = texts("pidstat-*.txt", "qir10g-*-pidstat.txt",
                extra=(ATTEMPT / "server" / "pidstat.txt",))
MPSTAT = texts("mpstat-json*.txt", extra=(ATTEMPT / "server" / "mpstat.txt",))
PROC = tuple((ATTEMPT / "server" / f"proc-{p}.txt").read_text() for p in ("before", "after"))


@FUZZ
@given(damaged(ETHTOOL), damaged(ETHTOOL))
def test_ethtool(before: str, after: str) -> None:
    stats = survives(parse_ethtool_stats, after)
    if stats is not None:
        assert stats.totals or stats.per_queue
        assert all(isinstance(v, int) and v >= 0 for v in stats.totals.values())
    delta = survives(ethtool_totals_delta, before, after)
    if delta is not None:
        assert all(isinstance(v, int) and v >= 0 for v in delta.values())


@FUZZ
@given(damaged(SYSFS))
def test_sysfs(text: str) -> None:
    out = survives(parse_sysfs_stats, text)
    assert out is None or (out and all(isinstance(v, int) and v >= 0 for v in out.values()))


@FUZZ
@given(damaged(NSTAT), damaged(NSTAT))
def test_nstat(before: str, after: str) -> None:
    out = survives(parse_nstat, after)
    assert out is None or all(isinstance(v, int) for v in out.values())
    delta = survives(nstat_delta, before, after)
    assert delta is None or all(isinstance(v, int) and v >= 0 for v in delta.values())


@FUZZ
@given(damaged(NETSTAT))
def test_netstat_s(text: str) -> None:
    out = survives(parse_netstat_s, text)
    assert out is None or all(isinstance(v, int) for v in out.values())


@FUZZ
@given(damaged(TC))
def test_tc(text: str) -> None:
    out = survives(parse_tc_qdisc, text)
    if out is not None:
        assert out and all(q.entity in ("qdisc", "class") for q in out)
        assert all(q.rate_bit_s is None or is_number(q.rate_bit_s) for q in out)


@FUZZ
@given(damaged(IFSTAT), st.booleans())
def test_ifstat(text: str, with_date: bool) -> None:
    out = survives(parse_ifstat, text, date=date(2026, 11, 21) if with_date else None)
    if out is not None:
        for s in out:
            assert s.rx_kibit_s is None or is_number(s.rx_kibit_s)
            assert (s.timestamp is not None) == (with_date and s.time_of_day is not None)


@FUZZ
@given(damaged(PIDSTAT), st.sampled_from([(None, None), (0.0, 4e9), (1.7e9, 1.8e9)]))
def test_pidstat(text: str, window: tuple[float | None, float | None]) -> None:
    samples = survives(parse_pidstat, text)
    if samples is not None:
        mean = mean_cpu_pct(samples, *window)
        assert mean is None or is_number(mean)
    summary = survives(pidstat_cpu_summary, text, *window)
    if summary is not None:
        assert all(v is None or is_number(v) for v in summary)


@FUZZ
@given(damaged(MPSTAT), st.sampled_from([None, {"all"}, {0, "all"}]))
def test_mpstat(text: str, cpus: set[int | str] | None) -> None:
    out = survives(parse_mpstat_json, text, cpus=cpus)
    if out is not None:
        assert out
        for s in out:
            assert cpus is None or s.cpu in cpus
            assert s.idle is None or is_number(s.idle)
            assert len(s.time_of_day) == 8


@FUZZ
@given(damaged(PROC), damaged(PROC))
def test_proc(before: str, after: str) -> None:
    a, b = survives(parse_proc_times, before), survives(parse_proc_times, after)
    if a is not None and b is not None:
        value = cpu_pct(a, b)
        assert value is None or is_number(value)


# --------------------------------------------------------------------------------- perf ----
def _perf_texts() -> tuple[str, ...]:
    out = [(DATA / "perf" / "local-nocallchain.perf").read_text(errors="replace")]
    if shutil.which("zstd"):
        for name in ("local-fp.perf.zst", "local-dwarf.perf.zst"):
            text = subprocess.run(["zstd", "-dc", str(DATA / "perf" / name)], check=True,
                                  capture_output=True).stdout.decode(errors="replace")
            out.append("".join(text.splitlines(keepends=True)[:300]))  # a few dozen samples
    return tuple(out)


PERF = _perf_texts()


@FUZZ
@given(damaged(PERF), st.sampled_from(["samples", "period"]), st.booleans())
def test_perf_script(text: str, weight: str, by_pid: bool) -> None:
    stacks = survives(parse_perf_script, text.splitlines(keepends=True), weight=weight,
                      pid_filter={1, 2, 3} if by_pid else None)
    if stacks is not None:
        assert all(isinstance(k, str) and isinstance(v, int) and v >= 0
                   for k, v in stacks.items())


# --------------------------------------------------------------------------------- pcap ----
def _pcap_bytes() -> tuple[bytes, ...]:
    out = []
    for path in sorted((DATA / "pcap").glob("*.pcap*")):
        raw = path.read_bytes()
        if path.suffix == ".gz":
            raw = gzip.decompress(raw)
        out.append(raw[:6000])  # the global header and a few dozen records
    return tuple(out)


PCAPS = _pcap_bytes()
# values that matter in a pcap: lengths (record header), magics, link types, IP versions
INTS = (0, 1, 14, 16, 20, 24, 40, 1500, 65535, 65536, 0x7FFFFFFF, 0xFFFFFFFF, 0xA1B2C3D4,
        0xD4C3B2A1, 0x0A0D0D0A, 113, 276, 101, 228, 229, 0x45000000, 0x60000000, 0x81000000)


@st.composite
def damaged_bytes(draw: st.DrawFn, corpus: tuple[bytes, ...]) -> bytes:
    data = bytearray(draw(st.sampled_from(corpus)))
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(("truncate", "flip", "insert", "delete", "duplicate", "int",
                                   "junk")))
        n = len(data)
        i = draw(st.integers(0, n))
        if op == "truncate":
            del data[i:]
        elif op == "flip" and i < n:
            data[i] ^= draw(st.integers(1, 255))
        elif op == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=32))
        elif op == "delete":
            del data[i:i + draw(st.integers(1, 64))]
        elif op == "duplicate":
            data[i:i] = data[i:i + draw(st.integers(1, 200))]
        elif op == "int" and i + 4 <= n:
            fmt = draw(st.sampled_from(("<I", ">I", ">H", "<H")))
            value = draw(st.sampled_from(INTS)) & (0xFFFF if fmt.endswith("H") else 0xFFFFFFFF)
            struct.pack_into(fmt, data, i, value)
        elif op == "junk":
            data = bytearray(draw(st.binary(max_size=100)))
    return bytes(data)


@pytest.fixture(scope="module")
def scratch() -> Any:
    with tempfile.TemporaryDirectory(prefix="qir-fuzz-") as d:
        yield Path(d)


@FUZZ
@given(data=damaged_bytes(PCAPS), compress=st.sampled_from(["no", "gzip", "cut-gzip"]))
def test_pcap_summary(scratch: Path, data: bytes, compress: str) -> None:
    path = scratch / "capture.pcap"
    if compress != "no":
        data = gzip.compress(data)
        if compress == "cut-gzip":
            data = data[:max(2, len(data) // 2)]
    path.write_bytes(data)
    s = survives(summarize_pcap, path, "198.19.0.1")
    if s is not None:
        assert min(s.packets_in, s.packets_out, s.packets_other, s.bytes_in, s.bytes_out) >= 0
        assert sum(s.size_histogram.values()) <= s.packets_in + s.packets_out + s.packets_other
        assert all("\n" not in w for w in s.warnings)


# --------------------------------------------------------------------- QUIC Initial / TLS ----
QUIC_PCAP = (DATA / "pcap" / "quic-initial-quic-go.pcap").read_bytes()


@FUZZ
@given(data=damaged_bytes((QUIC_PCAP[:9000], QUIC_PCAP)))
def test_quic_initial_pcap(scratch: Path, data: bytes) -> None:
    path = scratch / "handshake.pcap"
    path.write_bytes(data)
    found = survives(qi.read_handshakes, path)
    if found is not None:
        for hs in found:
            assert all(isinstance(c, str) for c in hs.offered + hs.alpn_offered)
            assert hs.selected is None or isinstance(hs.selected, str)


def _hellos() -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
    """The complete ClientHello and ServerHello bodies of the fixture's connections (the
    steps of read_handshakes, keeping the handshake bytes)."""
    with tempfile.TemporaryDirectory(prefix="qir-hello-") as d:
        path = Path(d) / "h.pcap"
        path.write_bytes(QUIC_PCAP)
        datagrams = list(qi._udp_datagrams(path))
    conns: dict[tuple[str, str], tuple[Any, dict[int, bytes], dict[int, bytes]]] = {}
    for src, dst, payload in datagrams:
        pos = 0
        while (hdr := qi._initial_header(payload, pos)) is not None:
            if (src, dst) in conns:
                keys, chunks = conns[(src, dst)][0][0], conns[(src, dst)][1]
            elif (dst, src) in conns:
                keys, chunks = conns[(dst, src)][0][1], conns[(dst, src)][2]
            else:
                both = qi.initial_keys(hdr.dcid)
                if qi._decrypt(payload, pos, hdr, both[0]) is None:
                    pos = hdr.end
                    continue
                conns[(src, dst)] = (both, {}, {})
                keys, chunks = both[0], conns[(src, dst)][1]
            plain = qi._decrypt(payload, pos, hdr, keys)
            if plain is not None:
                for offset, data in qi._crypto_frames(plain):
                    chunks.setdefault(offset, data)
            pos = hdr.end
    client = [b for _, c, _ in conns.values() if (b := qi._hello(qi._assemble(c), 1))]
    server = [b for _, _, s in conns.values() if (b := qi._hello(qi._assemble(s), 2))]
    assert len(client) == len(server) == 3
    return tuple(client), tuple(server)


CLIENT_HELLOS, SERVER_HELLOS = _hellos()


def _varint(n: int) -> bytes:
    return bytes([0x40 | n >> 8, n & 0xFF]) if n >= 64 else bytes([n])


def _initial_packet(dcid: bytes, crypto: bytes, client: bool) -> bytes:
    """A correctly protected QUIC v1 Initial carrying ``crypto`` (RFC 9001 5.2-5.4): what a
    buggy or hostile peer can always send, since the Initial keys are public."""
    keys = qi.initial_keys(dcid)[0 if client else 1]
    frame = b"\x06\x00" + _varint(len(crypto)) + crypto
    frame += b"\x00" * max(0, 40 - len(frame))  # PADDING: room for the header-protection sample
    pn = b"\x00\x00\x00\x01"
    length = len(pn) + len(frame) + 16
    header = (bytes([0xC3]) + struct.pack(">I", 1) + bytes([len(dcid)]) + dcid + b"\x00"
              + b"\x00" + bytes([0x40 | length >> 8, length & 0xFF]) + pn)
    nonce = bytearray(keys.iv)
    for i, b in enumerate(pn.rjust(12, b"\0")):
        nonce[i] ^= b
    sealed = AESGCM(keys.key).encrypt(bytes(nonce), frame, header)
    packet = bytearray(header + sealed)
    pn_offset = len(header) - 4
    enc = Cipher(algorithms.AES(keys.hp), modes.ECB()).encryptor()
    mask = enc.update(bytes(packet[pn_offset + 4:pn_offset + 20])) + enc.finalize()
    packet[0] ^= mask[0] & 0x0F
    for i in range(4):
        packet[pn_offset + i] ^= mask[1 + i]
    return bytes(packet)


def _pcap(datagrams: list[tuple[int, bytes]]) -> bytes:
    """A classic pcap (LINKTYPE_RAW, IPv4) of UDP datagrams between 10.0.0.2:5555 (client)
    and 10.0.0.1:4433; ``(1, payload)`` goes client -> server, ``(0, ...)`` back."""
    out = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 101)
    for to_server, payload in datagrams:
        a, b = (b"\x0a\x00\x00\x02", b"\x0a\x00\x00\x01")
        src, dst, sport, dport = (a, b, 5555, 4433) if to_server else (b, a, 4433, 5555)
        udp = struct.pack(">HHHH", sport, dport, 8 + len(payload), 0) + payload
        ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0, src, dst)
        pkt = ip + udp
        out += struct.pack("<IIII", 1, 0, len(pkt), len(pkt)) + pkt
    return out


@FUZZ
@given(client_body=damaged_bytes(CLIENT_HELLOS), server_body=damaged_bytes(SERVER_HELLOS),
       cut_length=st.booleans())
def test_quic_initial_authenticated_garbage(scratch: Path, client_body: bytes,
                                            server_body: bytes, cut_length: bool) -> None:
    """Decryptable Initials whose ClientHello/ServerHello are damaged: the capture is still
    read (the hello that cannot be understood leaves its fields empty), never an IndexError."""
    dcid = bytes(range(8))

    def message(kind: int, body: bytes) -> bytes:
        size = len(body) if not cut_length else len(body) // 2
        return bytes([kind]) + size.to_bytes(3, "big") + body[:size] + body[size:]

    data = _pcap([(1, _initial_packet(dcid, message(1, client_body), True)),
                  (0, _initial_packet(dcid, message(2, server_body), False))])
    path = scratch / "garbage.pcap"
    path.write_bytes(data)
    found = survives(qi.read_handshakes, path)
    assert found is not None and len(found) == 1
    (hs,) = found
    assert (hs.client, hs.server) == ("10.0.0.2:5555", "10.0.0.1:4433")
    assert all(isinstance(c, str) for c in hs.offered + hs.alpn_offered)
    assert hs.selected is None or isinstance(hs.selected, str)


def test_quic_initial_builder_round_trip(scratch: Path) -> None:
    """The packet builder above is right: undamaged hellos come back as in the fixture."""
    dcid = bytes(range(8))
    body_c, body_s = CLIENT_HELLOS[0], SERVER_HELLOS[0]
    path = scratch / "roundtrip.pcap"
    path.write_bytes(_pcap([
        (1, _initial_packet(dcid, bytes([1]) + len(body_c).to_bytes(3, "big") + body_c, True)),
        (0, _initial_packet(dcid, bytes([2]) + len(body_s).to_bytes(3, "big") + body_s, False)),
    ]))
    (hs,) = qi.read_handshakes(path)
    assert hs.offered == ["TLS_CHACHA20_POLY1305_SHA256"]
    assert hs.selected == "TLS_CHACHA20_POLY1305_SHA256"


# ----------------------------------------------------------------- monitors of an attempt ----
# monitor (as in run.json / monitors_missing) -> its files on each side
MONITOR_FILES = {
    "sysfs": ("sysfs-before.txt", "sysfs-after.txt"),
    "ethtool": ("ethtool-before.txt", "ethtool-after.txt"),
    "nstat": ("nstat-before.txt", "nstat-after.txt"),
    "tc": ("tc-before.txt", "tc-after.txt"),
    "pidstat": ("pidstat.txt",),
    "mpstat": ("mpstat.txt",),
    "cpu": ("proc-before.txt", "proc-after.txt"),  # server only
    "perf": ("perf-process.folded",),  # written by postprocess from perf script
}
TARGETS = [(role, monitor, name) for monitor, names in MONITOR_FILES.items() for name in names
           for role in ("server", "client")
           if (ATTEMPT / role / name).is_file() or monitor == "perf"]
RUN = json.loads((ATTEMPT / "run.json").read_text())
for _role in ("server", "client"):
    RUN["monitors"][_role]["perf"] = "ok"
WINDOW_START = RUN["start_ns"] // 10**9 + 1  # the first whole second after the start


def enrich(attempt: Path) -> None:
    """The sample's transfer took 74 ms, too short for one pidstat or mpstat interval: give
    both sides real captures (tests/data/parsers) moved into its time window."""
    pid = (PARSERS / "pidstat-h-threads.txt").read_text()
    for i, stamp in enumerate(dict.fromkeys(re.findall(r"^(\d{10}) ", pid, re.M))):
        pid = re.sub(rf"^{stamp} ", f"{WINDOW_START + i} ", pid, flags=re.M)
    mp = (PARSERS / "mpstat-json.txt").read_text().replace('"date": "11/21/26"',
                                                           '"date": "2026-11-21"')
    for i, clock in enumerate(dict.fromkeys(re.findall(r'"timestamp": "([0-9:]{8})"', mp))):
        new = datetime.fromtimestamp(WINDOW_START + i, timezone.utc).strftime("%H:%M:%S")
        mp = mp.replace(f'"timestamp": "{clock}"', f'"timestamp": "{new}"')
    folded = parse_perf_script(PERF[-1].splitlines(keepends=True))
    for role in ("server", "client"):
        (attempt / role / "pidstat.txt").write_text(pid)
        (attempt / role / "mpstat.txt").write_text(mp)
        write_folded(folded, attempt / role / "perf-process.folded")
    run = json.loads((attempt / "run.json").read_text())
    run["monitors"] = RUN["monitors"]
    (attempt / "run.json").write_text(json.dumps(run))


def _owned(attempt: Path, baseline: dict[str, Any], role: str, monitor: str) -> set[str]:
    """Columns a monitor contributes: those that vanish when its files are removed."""
    side = attempt / role
    saved = {n: (side / n).read_bytes() for n in MONITOR_FILES[monitor] if (side / n).exists()}
    for n in saved:
        (side / n).unlink()
    try:
        cols, missing = monitor_columns(attempt, RUN)
    finally:
        for n, data in saved.items():
            (side / n).write_bytes(data)
    # (a missing perf-process.folded leaves no reason: analysis/frames/columns.py skips perf then)
    assert monitor == "perf" or [m for m in missing if m.startswith(f"{role}.{monitor}: ")]
    return set(baseline) - set(cols)


Baseline = tuple[Path, dict[str, Any], dict[tuple[str, str], set[str]]]


@pytest.fixture(scope="module")
def attempt_copy(scratch: Path) -> Baseline:
    """An enriched copy of the sample attempt, its columns, and the columns of each monitor."""
    target = scratch / "attempt"
    shutil.copytree(ATTEMPT, target)
    enrich(target)
    baseline, missing = monitor_columns(target, RUN)
    assert missing == []
    owned = {(role, monitor): _owned(target, baseline, role, monitor)
             for role, monitor, _ in TARGETS}
    return target, baseline, owned


def test_baseline_is_complete(attempt_copy: Baseline) -> None:
    _, baseline, owned = attempt_copy
    for key in ("server_cpu_pct", "client_cpu_pct", "server_udp_rcvbuf_errors",
                "client_rx_bytes", "server_pidstat_cpu_pct", "client_max_thread_cpu_pct",
                "server_cores_busy_pct", "client_max_core_busy_pct", "server_qdisc_dropped"):
        assert is_number(baseline[key]), key
    assert all(owned.values()), [k for k, v in owned.items() if not v]
    assert baseline["server_pidstat_cpu_pct"] == pytest.approx((93.07 + 89.00) / 2)
    shares = [v for k, v in baseline.items() if k.startswith("client_perf_")]
    assert shares and sum(shares) == pytest.approx(1.0)


@FUZZ_SLOW
@given(target=st.sampled_from(TARGETS), text=st.data())
def test_monitor_columns_with_a_garbled_file(attempt_copy: Baseline,
                                             target: tuple[str, str, str],
                                             text: st.DataObject) -> None:
    attempt, baseline, owned = attempt_copy
    role, monitor, name = target
    path = attempt / role / name
    original = path.read_text()
    garbled = text.draw(damaged((original,)))
    path.write_text(garbled, encoding="utf-8", errors="surrogateescape")
    try:
        cols, missing = monitor_columns(attempt, RUN)
    finally:
        path.write_text(original)
    mine = owned[(role, monitor)]
    reasons = [m for m in missing if m.startswith(f"{role}.{monitor}: ")]
    # the other monitors are untouched
    assert {k: v for k, v in cols.items() if k not in mine} == \
        {k: v for k, v in baseline.items() if k not in mine}
    assert [m for m in missing if m not in reasons] == []
    if reasons:  # not understood: no column of it, one reason
        assert len(reasons) == 1 and "\n" not in reasons[0]
        assert not mine & set(cols), mine & set(cols)
    else:  # still understood: its columns are numbers
        assert all(is_number(cols[k]) for k in mine & set(cols))


@pytest.mark.parametrize("role,monitor,name", TARGETS)
def test_garbled_file_gives_na_and_a_reason_in_the_frame(tmp_path: Path, role: str,
                                                         monitor: str, name: str) -> None:
    """load_results on a campaign whose second repetition has one unreadable monitor file:
    that attempt's columns of the monitor are <NA>, monitors_missing says why, and the first
    repetition keeps its values."""
    camp = tmp_path / "sample"
    shutil.copytree(SAMPLE, camp)
    second = camp / "quic-go_quic-go" / "goodput" / "2" / "attempt-1"
    shutil.copytree(camp / "quic-go_quic-go" / "goodput" / "1" / "attempt-1", second)
    enrich(second)
    enrich(camp / "quic-go_quic-go" / "goodput" / "1" / "attempt-1")
    run = json.loads((second / "run.json").read_text())
    run["repetition"] = 2
    (second / "run.json").write_text(json.dumps(run))
    (second / role / name).write_bytes(b"\x00\xff garbage \x80\n" * 3)
    frame = load_results(camp, cache=False)
    assert list(frame["repetition"]) == [1, 2]
    first, bad = frame.iloc[0], frame.iloc[1]
    assert pd.isna(first["monitors_missing"])
    reason = str(bad["monitors_missing"])
    assert reason.startswith(f"{role}.{monitor}: ") and "\n" not in reason, reason
    cols = [c for c in frame.columns if c.startswith(f"{role}_")
            and not pd.isna(first[c]) and pd.isna(bad[c])]
    assert cols, "the garbled monitor must have lost at least one column"
    owned = {
        "sysfs": f"{role}_rx_bytes", "ethtool": None, "nstat": f"{role}_udp_in_datagrams",
        "tc": f"{role}_qdisc_dropped", "pidstat": f"{role}_pidstat_cpu_pct",
        "mpstat": f"{role}_cores_busy_pct", "cpu": f"{role}_cpu_pct", "perf": None,
    }[monitor]
    if owned is not None:
        assert owned in cols
        assert is_number(first[owned]) and not math.isnan(float(first[owned]))
    assert bad["status"] == "ok" and bad["goodput_mbps"] == first["goodput_mbps"]
