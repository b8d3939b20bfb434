"""Management-side processing of fetched attempt outputs: perf folding, flame graphs, pcap
summaries. Runs after the logs are fetched, on this machine; never on a node."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from interop_runner.config.params import CIPHERS
from interop_runner.measure.flamegraph import FlamegraphToolMissing, write_flamegraph
from interop_runner.parsers import ParseError, parse_proc_times
from interop_runner.parsers.folded import write_folded
from interop_runner.parsers.pcap import summarize_pcap
from interop_runner.parsers.perf import FoldedStacks, open_perf_script, parse_perf_script
from interop_runner.parsers.quic_initial import read_handshakes
from interop_runner.storage.run_record import RunRecord


def _server_pids(side: Path) -> set[int]:
    pids: set[int] = set()
    for phase in ("before", "after"):
        try:
            pids |= set(parse_proc_times((side / f"proc-{phase}.txt").read_text()).ticks)
        except (OSError, ParseError):
            continue
    return pids


def _watched_pids(side: Path) -> set[int]:
    """The PIDs a container ran, as recorded while it ran (``pids.txt``; empty: native)."""
    try:
        return {int(w) for w in (side / "pids.txt").read_text().split() if w.isdecimal()}
    except OSError:
        return set()


def _fold(path: Path, pids: set[int]) -> tuple[FoldedStacks, FoldedStacks]:
    """(stacks of the implementation's processes, stacks of the whole system) in one pass."""
    with open_perf_script(path) as lines:
        system = parse_perf_script(lines)
    if not pids:
        return FoldedStacks(), system
    with open_perf_script(path) as lines:
        process = parse_perf_script(lines, pid_filter=pids)
    return process, system


def process_perf(out_dir: Path, record: RunRecord) -> None:
    """perf.script.zst -> perf-process.folded, perf-system.folded and flamegraph.svg."""
    for role, side_rec in (("server", record.server), ("client", record.client)):
        side = out_dir / role
        script = side / "perf.script.zst"
        if not script.exists():
            continue
        pids = _server_pids(side) if role == "server" else (
            {side_rec.pid} if side_rec.pid else set())
        pids |= _watched_pids(side)
        try:
            process, system = _fold(script, pids)
        except (ParseError, OSError, RuntimeError) as exc:
            record.warnings.append(f"{role}: perf output not understood: {exc}")
            continue
        write_folded(system, side / "perf-system.folded")
        if not process:
            record.warnings.append(f"{role}: no perf samples of the {role} process")
            continue
        write_folded(process, side / "perf-process.folded")
        try:
            write_flamegraph(process, side / "flamegraph.svg",
                             f"{side_rec.implementation} {role} ({record.campaign}, "
                             f"repetition {record.repetition})")
        except (FlamegraphToolMissing, RuntimeError, ValueError) as exc:
            record.warnings.append(f"{role}: no flame graph: {exc}")


def process_handshake(out_dir: Path, record: RunRecord) -> None:
    """handshake.pcap (client) -> record.handshake: cipher suites offered and chosen."""
    pcap = out_dir / "client" / "handshake.pcap"
    if not pcap.exists() or pcap.stat().st_size <= 24:  # no packet at all (e.g. TCP)
        return
    try:
        found = read_handshakes(pcap)
    except (ParseError, OSError) as exc:
        record.warnings.append(f"client handshake capture not readable: {exc}")
        return
    if not found:
        record.warnings.append("handshake capture holds no decryptable QUIC v1 Initial")
        return
    hs = found[-1]
    record.handshake = {"client": hs.client, "server": hs.server, "offered": hs.offered,
                        "selected": hs.selected, "alpn_offered": hs.alpn_offered,
                        "connections": len(found)}
    for role, side in (("server", record.server), ("client", record.client)):
        want = side.effective.get("cipher")
        if want in CIPHERS and hs.selected != want:
            record.warnings.append(f"{role} ({side.implementation}) was asked for {want}, "
                                   f"but the handshake on the wire chose {hs.selected}")


def process_pcaps(out_dir: Path, record: RunRecord, ips: dict[str, str], mtu: int) -> None:
    """capture.pcap -> pcap-summary.json; segmentation-offload warnings go to the record."""
    for role in ("server", "client"):
        pcap = out_dir / role / "capture.pcap"
        if not pcap.exists():
            continue
        try:
            summary = summarize_pcap(pcap, ips[role], mtu)
        except (ParseError, OSError, ValueError) as exc:
            record.warnings.append(f"{role}: capture not readable: {exc}")
            continue
        data = dataclasses.asdict(summary)
        data["kernel_dropped"], data["not_captured"] = _tcpdump_losses(
            out_dir / role / "tcpdump.err")
        (out_dir / role / "pcap-summary.json").write_text(json.dumps(data, indent=1) + "\n")
        record.warnings += [f"{role} capture: {w}" for w in summary.warnings]
        lost = (data["kernel_dropped"] or 0) + (data["not_captured"] or 0)
        if lost:
            record.warnings.append(f"{role} capture: tcpdump lost {lost} packets (dropped by "
                                   "the kernel or not written): the capture is incomplete")


def _tcpdump_losses(err_file: Path) -> tuple[int | None, int | None]:
    """(dropped by kernel, received by filter but not captured) from tcpdump's exit
    statistics; None where it printed nothing."""
    try:
        text = err_file.read_text(errors="replace")
    except OSError:
        return None, None
    numbers = {key: int(n) for n, key in re.findall(
        r"(\d+) packets? (captured|received by filter|dropped by kernel)", text)}
    dropped = numbers.get("dropped by kernel")
    if "captured" in numbers and "received by filter" in numbers:
        return dropped, max(0, numbers["received by filter"] - numbers["captured"])
    return dropped, None
