"""Profiles and captures: perf, tcpdump, the handshake capture, qlog."""

from __future__ import annotations

import functools
import json
import shlex
from pathlib import Path

from interop_runner.monitors.base import Column, Monitor, SeriesCommand, SideInput, StartContext
from interop_runner.parsers import ParseError
from interop_runner.parsers.folded import read_folded
from interop_runner.parsers.perf import CATEGORIES, FoldedStacks, Rules, categorize, load_rules

PCAP_KEYS = ("packets_in", "packets_out", "bytes_in", "bytes_out", "merged_packets",
             "max_ip_length")
_PCAP_UNITS = {"packets_in": "packets", "packets_out": "packets", "bytes_in": "bytes",
               "bytes_out": "bytes", "merged_packets": "packets", "max_ip_length": "bytes"}


def category_slug(category: str) -> str:
    """The column part of a perf category (``Packet I/O`` -> ``packet_io``)."""
    return category.lower().replace(" ", "_").replace("/", "")


@functools.lru_cache(maxsize=1)
def perf_rules() -> Rules:
    """The versioned categorisation rules (parsers/perf_rules.yml)."""
    return load_rules()


def perf_share_columns(stacks: FoldedStacks, implementation: str | None) -> dict[str, float]:
    """Category shares (paper Fig. 7) of folded stacks, by column name without role."""
    return {f"perf_{category_slug(category)}_share": share
            for category, share in categorize(stacks, perf_rules(), implementation).items()}


def perf_shares(folded: Path, implementation: str | None) -> dict[str, float]:
    """Shares of the perf categories (paper Fig. 7) in a folded-stacks file."""
    return categorize(read_folded(folded), perf_rules(), implementation)


def _perf(inp: SideInput) -> dict[str, float]:
    if not inp.files.exists("perf-process.folded"):
        raise ParseError("perf-process.folded missing")
    stacks = read_folded(inp.files.path("perf-process.folded"))
    return perf_share_columns(stacks, inp.implementation)


def _perf_series(ctx: StartContext) -> list[SeriesCommand]:
    if not ctx.perf_event:
        return []
    call_graph = ("-g",) if ctx.perf_call_graph == "fp" else ("--call-graph", "dwarf,16384")
    return [SeriesCommand(
        "perf.log", ("perf", "record", "-a", "-F", str(ctx.perf_frequency), "-e",
                     ctx.perf_event, *call_graph, "-o", "{logs}/perf.data"),
        stop_signal="INT", stderr="perf.err")]


def _tcpdump_argv(ctx: StartContext, name: str, snaplen: int, bpf: str) -> tuple[str, ...]:
    return ("tcpdump", "-i", ctx.iface, "-n", "--immediate-mode", "-B", "16384", "-s",
            str(snaplen), "-w", f"{{logs}}/{name}.pcap", *shlex.split(bpf))


def _tcpdump_series(ctx: StartContext) -> list[SeriesCommand]:
    bpf = ctx.tcpdump_filter or f"udp port {ctx.port} or tcp port {ctx.port}"
    return [SeriesCommand("tcpdump.log", _tcpdump_argv(ctx, "capture", ctx.tcpdump_snaplen, bpf),
                          stderr="tcpdump.err", ready_marker="listening on")]


def _handshake_series(ctx: StartContext) -> list[SeriesCommand]:
    # whole packets: a GSO batch is captured before segmentation, as one datagram
    bpf = f"udp port {ctx.port} and udp[8] & 0x80 != 0"
    return [SeriesCommand("handshake.log", _tcpdump_argv(ctx, "handshake", 262144, bpf),
                          stderr="handshake.err", ready_marker="listening on")]


def _tcpdump(inp: SideInput) -> dict[str, float]:
    text = inp.files.text("pcap-summary.json")
    if text is None:
        raise ParseError("pcap-summary.json missing")
    summary = json.loads(text)
    return {f"pcap_{key}": summary[key] for key in PCAP_KEYS if summary.get(key) is not None}


PERF = Monitor(
    "perf", ("perf", "zstd"),
    "system-wide CPU profile (perf record -a -g), folded stacks, categories and a flame graph",
    files=("perf.script.zst", "perf-process.folded", "perf-system.folded", "flamegraph.svg",
           "perf.log", "perf.err", "perf-script.err"),
    columns=tuple(Column(f"perf_{category_slug(c)}_share", "share (0-1)",
                         "perf record -a, folded stacks of the role's process",
                         f"share of the process's samples in the category {c!r} "
                         "(parsers/perf_rules.yml)") for c in CATEGORIES),
    series=_perf_series, extract=_perf)

TCPDUMP = Monitor(
    "tcpdump", ("tcpdump",),
    "packet capture of the measurement port (snap length configurable) with the TLS key log "
    "beside it, and a pcap summary",
    files=("capture.pcap", "tcpdump.log", "tcpdump.err", "pcap-summary.json"),
    columns=tuple(Column(f"pcap_{key}", _PCAP_UNITS[key], "tcpdump capture (pcap-summary.json)")
                  for key in PCAP_KEYS),
    series=_tcpdump_series, extract=_tcpdump)

HANDSHAKE = Monitor(
    "handshake", ("tcpdump",),
    "the QUIC long-header packets, whole, captured on the client; their Initial packets are "
    "decrypted to record the cipher suites offered and chosen (a few KiB per run); the result "
    "is run.json's handshake (column wire_cipher)",
    files=("handshake.pcap", "handshake.log", "handshake.err"),
    series=_handshake_series, roles=("client",))

QLOG = Monitor(
    "qlog", (),
    "qlog files of implementations that support QLOGDIR (compressed)",
    files=("qlog.tar.gz",))
