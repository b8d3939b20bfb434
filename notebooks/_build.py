#!/usr/bin/env python3
"""Generate the analysis notebooks (one per view of the paper's section 4) with nbformat.

Run ``.venv/bin/python notebooks/_build.py`` after changing a notebook's text here; the
notebooks are written without outputs. Every notebook has the same structure:

1. a markdown introduction: what the view shows and what to look for (Kempf et al., sec. 4);
2. the parameter cell ``RESULTS = [...]`` (tagged ``parameters``);
3. setup: ``QIR_RESULTS`` (``:``-separated paths) overrides ``RESULTS``, then ``load_results``;
4. the summary statistics per cell (``cell_stats``);
5. per view: the figure, the frame it plots, and a check that the figure has data (or a
   one-line "no data for this view" when the results hold none for it); a table without a
   figure (``TableCell``) is shown with its row count (or "no data for this table").

A view of the report (``report_view``) is called as the report calls it: with the results
frame or with the campaign paths ``RESULTS``, as its ``View.takes`` in
``interop_runner.report.views.VIEWS`` says, so that a notebook and the report agree on which
views have data (tests/test_notebooks.py checks it on every stored sample).
"""

# mypy: disable-error-code="no-untyped-call, no-any-return"
# (nbformat has no type annotations; everything else here is checked strictly)
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # this checkout's package, not another one installed
DEFAULT_RESULTS = '["../results"]'
# what a view of the report's catalogue is given, by its View.takes: the notebook's names
ARGUMENTS = {"frame": "frame", "paths": "RESULTS"}


@dataclasses.dataclass(frozen=True)
class ViewCell:
    """One view in a notebook: its call and the prose shown before it."""

    call: str  # e.g. "views.buffer_sweep(frame)"
    name: str  # variable suffix: data_<name>, fig_<name>
    text: str


def report_view(function: str, name: str, text: str) -> ViewCell:
    """The cell of the report's view ``function`` (in ``analysis.views``), called with what
    the report gives it (``View.takes``: the frame, or the paths)."""
    from interop_runner.report.views import VIEWS

    (view,) = [v for v in VIEWS if v.function == function]
    return ViewCell(f"views.{function}({ARGUMENTS[view.takes]})", name, text)


@dataclasses.dataclass(frozen=True)
class TableCell:
    """A table in a notebook (a frame without a figure): its call and the prose before it."""

    call: str  # e.g. "views.path_calibration_frame(frame)"
    name: str  # variable: table_<name>
    text: str


@dataclasses.dataclass(frozen=True)
class Book:
    """One notebook."""

    file: str
    title: str
    intro: str
    views: tuple[ViewCell | TableCell, ...]
    results: str = DEFAULT_RESULTS
    imports: str = ""  # more imports for this notebook's setup cell


SETUP = '''\
import os
import sys
from pathlib import Path

if os.environ.get("QIR_RESULTS"):  # e.g. QIR_RESULTS=results/a:results/b (tests use this)
    RESULTS = [p for p in os.environ["QIR_RESULTS"].split(":") if p]
ROOT = next((p for p in (Path.cwd(), *Path.cwd().parents) if (p / "interop_runner").is_dir()),
            Path.cwd().parent)
sys.path.insert(0, str(ROOT))  # the repository, also when the kernel was started elsewhere

%matplotlib inline
import pandas as pd
from IPython.display import display

from interop_runner.analysis import load_results, views
from interop_runner.analysis.theories.stats import cell_stats

pd.set_option("display.max_columns", 60)
pd.set_option("display.width", 200)
frame = load_results(*RESULTS)
campaigns = sorted(frame["campaign"].dropna().unique())
print(f"{len(frame)} attempt(s) from {len(campaigns)} campaign(s): {', '.join(campaigns)}")'''

SUMMARY_MD = """\
## Summary per cell

`cell_stats`: per pair (and sweep variant) the attempts, `n` successful ones, `failures`
(failed, timeout, unsupported: counted, never averaged in as zeros), median with quartiles,
mean and standard deviation, the bootstrap 95 % interval of the median and the number of
Tukey outliers (flagged, not dropped)."""

SUMMARY = '''\
by = ["server", "client"] + (["variant"] if frame["variant"].notna().any() else [])
cell_stats(frame, by)'''


def setup(book: Book) -> str:
    """The setup cell: SETUP with the notebook's own imports after the analysis import."""
    if not book.imports:
        return SETUP
    anchor = "from interop_runner.analysis.theories.stats import cell_stats\n"
    return SETUP.replace(anchor, anchor + book.imports + "\n")


def view_cells(view: ViewCell) -> list[nbformat.NotebookNode]:
    """Markdown, figure, frame and check cells of one view."""
    data, fig = f"data_{view.name}", f"fig_{view.name}"
    return [
        new_markdown_cell(view.text),
        new_code_cell(f"{data}, {fig} = {view.call}\n{fig}"),
        new_code_cell(f"{data}"),
        new_code_cell(
            f"if {data}.empty:\n"
            f"    print(f\"no data for this view in {{RESULTS}}\")\n"
            f"else:  # the figure must show something\n"
            f"    assert any(ax.has_data() for ax in {fig}.axes), \"the figure is empty\"\n"
            f"    print(f\"{view.name}: {{len({fig}.axes)}} axes, {{len({data})}} row(s)\")"),
    ]


def table_cells(table: TableCell) -> list[nbformat.NotebookNode]:
    """Markdown and table cells of a table; an empty one says that it has no data."""
    name = f"table_{table.name}"
    return [
        new_markdown_cell(table.text),
        new_code_cell(
            f"{name} = {table.call}\n"
            f"if {name}.empty:\n"
            f"    print(f\"no data for this table in {{RESULTS}}\")\n"
            f"print(f\"table {table.name}: {{len({name})}} row(s)\")\n"
            f"{name}"),
    ]


def notebook(book: Book) -> nbformat.NotebookNode:
    """The notebook of one Book."""
    params = new_code_cell(
        "# Parameters: campaign directories or results directories holding campaigns\n"
        "# (relative to notebooks/). The environment variable QIR_RESULTS overrides them.\n"
        f"RESULTS = {book.results}")
    params.metadata["tags"] = ["parameters"]
    cells = [new_markdown_cell(f"# {book.title}\n\n{book.intro}"), params,
             new_code_cell(setup(book)), new_markdown_cell(SUMMARY_MD), new_code_cell(SUMMARY)]
    for item in book.views:
        cells += view_cells(item) if isinstance(item, ViewCell) else table_cells(item)
    stem = book.file.removesuffix(".ipynb")
    for i, cell in enumerate(cells):  # stable ids: a rebuild changes nothing it need not
        cell["id"] = f"{stem}-{i:02d}"
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                 "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


LOCAL_NOTE = ("On the local testbed both nodes share one CPU and the link is a veth pair, so "
              "absolute numbers are not those of the paper's 10 Gbit/s hosts; the shapes and "
              "the counters are what to compare.")

BOOKS = (
    Book("buffers.ipynb", "Socket buffers (paper Fig. 3 and 4)",
         "Goodput, packets sent by the client (almost all of them ACKs) and UDP receive-buffer "
         "drops against the receive buffer size, in multiples of Linux's 208 KiB default "
         "(`configs/buffers.yml` sweeps `knobs.rmem`).\n\n"
         "**What to look for** (paper section 4.1):\n\n"
         "- **The knee**: goodput rises with the buffer and levels off; in the paper after a "
         "16-fold increase. The view marks the smallest buffer reaching 95 % of the best "
         "median, with its bootstrap interval; a wide interval means the repetitions do not "
         "pin it down.\n"
         "- **Drops**: with the default buffer the client's socket drops datagrams "
         "(`UdpRcvbufErrors`; 0.1-0.2 % in the paper) because the library reads slower than "
         "packets arrive; larger buffers cut them by an order of magnitude. Ring-buffer "
         "drops (ethtool) should stay at zero.\n"
         "- **ACK counts**: fewer drops mean fewer retransmissions and, for some stacks "
         "(LSQUIC: 180k to 46k), far fewer ACKs; others (quiche) do not change. Fewer ACKs "
         "move CPU load from the client to the server.\n"
         "- Buffers *below* the default hurt most (quiche lost 40 %).\n\n" + LOCAL_NOTE,
         (report_view("buffer_sweep", "buffers",
                   "## Goodput, client packets and drops per buffer size"),)),
    Book("crypto.ipynb", "Ciphers and AES hardware (paper Fig. 5)",
         "Goodput with AES-128-GCM using AES-NI, AES-128-GCM without hardware AES "
         "(`params.aes_hw: false`) and ChaCha20-Poly1305 (`configs/crypto.yml`), for QUIC "
         "stacks and TCP/TLS.\n\n"
         "**What to look for** (paper section 4.2):\n\n"
         "- For QUIC, ChaCha20 reaches about the goodput of AES-NI; without AES-NI the "
         "loss differs by stack (11 % for LSQUIC, 51 % for quiche): a client sending many "
         "ACKs makes the server decrypt more.\n"
         "- TCP/TLS reacts much more: AES-NI is about three times faster than ChaCha20 and "
         "close to the link rate.\n"
         "- Check what really ran: `wire_cipher` (from the handshake capture) and the "
         "negotiated cipher columns; `*_unhonoured` lists requests a stack could not follow "
         "(e.g. no AES-NI switch in ring), such cells are not a crypto comparison.\n\n"
         + LOCAL_NOTE,
         (report_view("crypto", "crypto", "## Goodput per cipher and AES mode"),)),
    Book("interop.ipynb", "Interop matrix (paper Fig. 6)",
         "Median goodput of every server x client pair (`configs/interop.yml`), failures "
         "and unsupported pairs marked in their cells.\n\n"
         "**What to look for** (paper section 4.3):\n\n"
         "- Goodput varies widely between implementations (57 to 4819 Mbit/s in the paper); "
         "the interpreted aioquic is far behind.\n"
         "- Rows versus columns: a server can be fast with its own client and slow with "
         "others. Heterogeneous pairs were rarely CPU-bound: flow control and ACK behaviour "
         "of two libraries are not tuned to each other. Compare the client's packet counts "
         "(ACKs) of fast and slow cells.\n"
         "- Cells that failed or are unsupported (no common ALPN) are interoperability "
         "results too; the reasons are in the `reason` column.\n\n" + LOCAL_NOTE,
         (report_view("interop_heatmap", "interop",
                   "## Server x client goodput"),)),
    Book("perf.ipynb", "CPU profile categories (paper Fig. 7)",
         "Share of perf samples per category (packet I/O, I/O, crypto, connection "
         "management, uncategorized) per implementation and role; needs the `perf` monitor "
         "(`configs/profile.yml`).\n\n"
         "**What to look for** (paper section 4.4):\n\n"
         "- **Packet I/O** (sendmsg/recvmsg and the kernel below) takes the largest share "
         "for every library: moving packets between user space, kernel and NIC is the main "
         "cost.\n"
         "- Crypto is visible but not the main bottleneck.\n"
         "- A large *uncategorized* share means missing symbols or call stacks (the paper "
         "saw this for quiche); the flame graphs next to each attempt show where it goes.",
         (report_view("perf_categories", "perf",
                   "## perf sample shares per category"),)),
    Book("hardware.ipynb", "Hardware (paper Fig. 8)",
         "The same pairs on several host pairs (`configs/hardware.yml`, one testbed per host "
         "pair), as measured and normalised to the lowest maximum CPU frequency.\n\n"
         "**What to look for** (paper section 4.6):\n\n"
         "- Newer CPUs (instruction sets, clock, process) raise goodput for QUIC and TCP, "
         "but not equally: QUIC in user space and TCP in the kernel profit differently "
         "(Intel-2 vs AMD-2: QUIC +11-27 %, TCP -3 %).\n"
         "- The frequency-normalised panel separates clock from microarchitecture.\n"
         "- Check the host facts below the figure (CPU model, max MHz, NIC, kernel): a "
         "difference there is the explanation to test.\n\n"
         "Locally the two testbeds (`local`, `local-b`) share one CPU: the view shows the "
         "mechanism, not a hardware comparison.",
         (report_view("hardware", "hardware", "## Goodput per testbed"),)),
    Book("offloads.ipynb", "Segmentation offloads (paper Fig. 9)",
         "Goodput per ethtool offload preset (`off`, `udp-only`, `all-on`) and the stacks' "
         "own UDP GSO (`params.gso`), with client and server CPU (`configs/offload.yml`).\n\n"
         "**What to look for** (paper section 4.5):\n\n"
         "- Only stacks that use GSO/GRO profit (MsQuic: +35-50 %); LSQUIC and quiche did "
         "not change in the paper. TCP/TLS gains a lot from TSO/GRO.\n"
         "- When goodput does not change, the CPU columns may: offloads cost client CPU "
         "for stacks that do not use them.\n"
         "- `*_unhonoured` and the ethtool notes in run.json say which requests a stack or "
         "the NIC could not follow (veth has no LRO).\n\n" + LOCAL_NOTE,
         (report_view("offloads", "offloads",
                   "## Goodput per offload setting"),)),
    Book("pinning.ipynb", "Core pinning and NUMA (paper Fig. 11)",
         "Mean goodput per server core x client core (`configs/pinning.yml`, taskset via "
         "`server_knobs.pin` / `client_knobs.pin`) and its deviation from the pair's mean "
         "over all core combinations.\n\n"
         "**What to look for** (paper section 4.7):\n\n"
         "- **NUMA effects**: cores on the NIC's NUMA node are faster (the paper: server on "
         "core 16, next to the 10G NIC; with the 100G NIC on another node, core 8). Use the "
         "`nic-local` / `nic-remote` presets on multi-node hosts.\n"
         "- **Row or column patterns**: if only the server's core matters the server is the "
         "bottleneck (LSQUIC), if only the client's core matters the client is (quiche, "
         "MsQuic); pinning the other side changes little.\n"
         "- Pinning the wrong side can be worse than no pinning, but pinned runs vary "
         "less: compare the spread of the cells.\n\n"
         "The local testbed has one NUMA node, so only per-core effects (shared caches, "
         "interrupts) can show.",
         (report_view("pinning", "pinning", "## Goodput per core pair"),)),
    Book("overview.ipynb", "Overview: bottlenecks and goodput over time",
         "What limited each successful attempt, and how the receive rate evolved during "
         "the transfers; useful for every campaign.\n\n"
         "**What to look for**:\n\n"
         "- **Bottleneck labels** (rules in `docs/diagnosis.md`): `link_rate`, "
         "`receive_buffer_drops`, `server_cpu`, `client_cpu` or `undetermined`. The paper's "
         "homogeneous LSQUIC and quiche pairs were server-CPU bound (>99 %); heterogeneous "
         "pairs were not CPU bound at all (section 4.3). A cell whose label changes between "
         "repetitions sits at a boundary.\n"
         "- **Goodput over time** (needs the `ifstat` monitor): slow starts, stalls and "
         "drift between repetitions; repetitions are interleaved over the variants so that "
         "drift does not look like an effect of one setting.",
         (report_view("bottlenecks", "bottlenecks", "## Bottleneck labels per cell"),
          report_view("goodput_over_time", "timeline",
                   "## Receive rate over time"))),
    Book("paths.ipynb", "Emulated paths: goodput against the bottleneck buffer",
         "Campaigns over an emulated path (`path:` block, docs/paths.md): a bottleneck rate, "
         "a base round-trip time and a droptail buffer, swept in multiples of the "
         "bandwidth-delay product (BDP = rate x base RTT; e.g. 0.5, 1, 3 and 5 BDP at "
         "20 Mbit/s and 50 ms). Goodput is shown as a fraction of the configured bottleneck "
         "rate (`goodput_fraction`), so paths of different rates share one scale.\n\n"
         "**What to look for**:\n\n"
         "- **Calibration first**: before its first attempt the runner measured each path "
         "(base RTT by ping, rate by one kernel TCP flow, the queueing delay of a full "
         "buffer, loss). A path whose measurement missed its configuration is not the path "
         "in the figure's title; `calibration_ok` says so and the panel is marked.\n"
         "- **The buffer**: one loss-based flow needs about one BDP of buffer to keep the "
         "link busy after a loss (Reno halves its window; CUBIC backs off less and needs "
         "less); below that goodput falls short of the rate, above it only the queueing "
         "delay grows. Compare QUIC stacks (congestion control in user space, pacing) with "
         "TCP/TLS (the kernel's) at 0.5 BDP.\n"
         "- **The bottleneck's counters** per attempt: `bottleneck_drops` (the buffer "
         "overflowing), `bottleneck_overlimits` (packets that waited for tokens) and, on the "
         "nfqueue backend, the delay lines' counters (`delayline_*`: dropped, reordered).\n\n"
         "Goodput counts only the file's bytes over the whole transfer, so even a fully "
         "used link stays a few percent below 1 (packet headers, retransmissions, the "
         "handshake and slow start).",
         (TableCell("views.path_calibration_frame(frame)", "calibration",
                    "## Calibration: configured against measured, per path"),
          report_view("path_buffer_sweep", "paths",
                   "## Goodput fraction per bottleneck buffer"),
          TableCell("views.path_counters_frame(frame)", "counters",
                    "## Bottleneck and delay-line counters per attempt"))),
    Book("workloads.ipynb", "Workloads: upload, download, streams and connections",
         "Campaigns whose workload is more than one download (docs/workloads.md): "
         "`workload: {kind: download|upload|bidirectional, streams: N, connections: M}`, "
         "set per campaign or swept (`configs/workloads.yml`, `configs/streams.yml`). Every "
         "stream's bytes are hashed where they landed; goodput is of the workload's data "
         "direction (`goodput_up_mbps` and `goodput_down_mbps` for a bidirectional one).\n\n"
         "**What to look for**:\n\n"
         "- **Direction**: the same pair upload against download; the side that receives "
         "does more work per byte in most stacks (decryption, reassembly, ACKs), so compare "
         "the sending and the receiving side's CPU per GiB.\n"
         "- **Streams and connections**: streams of one connection share its window; "
         "connections add windows. A line rising with connections but flat with streams "
         "points at one connection's flow-control or congestion window.\n\n" + LOCAL_NOTE,
         (report_view("upload_vs_download", "direction",
                      "## Goodput and CPU per GiB per pair and direction"),
          TableCell("views.direction_frame(frame)", "directions",
                    "## Per pair and direction"),
          report_view("goodput_vs_streams", "streams",
                      "## Goodput against streams and connections"),
          TableCell("views.streams_frame(frame)", "stream_cells",
                    "## Per pair, direction, connections and streams"))),
    Book("flows.ipynb", "Competing flows: throughput, shares and fairness",
         "Campaigns of competing flows (docs/flows.md): several flows, QUIC implementations "
         "and kernel TCP (iperf3) with their congestion controls, share one emulated "
         "bottleneck. With `path.record_packets` the router captures both sides of the "
         "bottleneck's queue, and each flow's throughput and queueing delay is binned over "
         "time (10 base RTTs a bin; 500 ms when the RTT is unknown); the first and last "
         "10 % of each flow's active time are trimmed from every statistic.\n\n"
         "**What to look for**:\n\n"
         "- **Throughput over time** (paper 002, Fig. 5b): does one flow take the link, "
         "and how long does an unfair split persist after a flow joins?\n"
         "- **Jain's index** (002, Figs. 8 and 10): (Σx)²/(n·Σx²) of the flows' mean "
         "throughputs, 1 for an equal split, 1/n for one flow taking all; the mean over the "
         "repetitions with its 95 % t interval against the swept parameter, and the lowest "
         "index in sliding windows of 5 s (the worst stretch).\n"
         "- **Bandwidth share** between two flows (000, Figs. 12-13): 0.5 is fair; BBR "
         "against loss-based CUBIC or Reno at a shallow buffer typically takes most.\n"
         "- **QUIC against TCP** (004): each implementation's share against the kernel TCP "
         "flows per path condition, Welch's t-test, Hedges' g and a significance mark.\n\n"
         "Without captures the series' values are NA with the reason in `series_missing`, "
         "and shares and Jain's index fall back to the flows' goodput (`share_basis`, "
         "`fairness_basis`).",
         (report_view("flow_timeline", "flowtime",
                   "## Throughput and queueing delay per flow over one attempt"),
          report_view("flow_fairness_sweep", "fairness",
                   "## Jain's index against the swept parameter"),
          TableCell("fairness_summary(frame)", "fairness_cells",
                    "## Jain's index per cell: mean with its t interval, median with its "
                    "bootstrap interval"),
          report_view("flow_share_matrix", "share",
                   "## Bandwidth share of one flow against another"),
          TableCell("flow_share_summary(flow_results)", "shares",
                    "## Each flow's share per cell over the repetitions"),
          report_view("flow_quic_vs_tcp", "quictcp",
                   "## QUIC against TCP per path condition (Welch's t-test)"),
          TableCell("flow_results", "flow_results", "## Every flow of every attempt")),
         imports="from interop_runner.analysis import fairness_summary, flow_share_summary, "
                 "load_flow_results\n\nflow_results = load_flow_results(*RESULTS)"),
    Book("conformance.ipynb", "Conformance of congestion controls against the kernel "
         "(paper 000)",
         "Campaigns that run each QUIC implementation's congestion control against a kernel "
         "TCP flow of the same algorithm through one bottleneck (`configs/conformance.yml`, "
         "docs/conformance.md), with `path.record_packets` on: each flow's (queueing delay, "
         "throughput) per bin of 10 base RTTs is a point, one cloud per flow and attempt "
         "(trial). A cell of two kernel flows of one congestion control (`tcp/cubic#2`) is "
         "the kernel against itself: the testbed's noise floor.\n\n"
         "**What to look for** (Mishra & Leong, IMC 2023):\n\n"
         "- **Conformance** (§3.1, Fig. 6): the share of both clouds' points inside both "
         "performance envelopes (per trial the convex hulls of k-means clusters, intersected "
         "over the trials). 1: the implementation behaves like the kernel's; the noise "
         "floor says how high a conformant one gets on this testbed. The paper found "
         "conformance much lower in deep (5 BDP) buffers than in shallow (1 BDP) ones.\n"
         "- **Conformance-T and the translation vector** (§3.3): the conformance after "
         "moving the test envelope to where it overlaps the reference most, and that move "
         "as (Δ-throughput, Δ-delay), test minus kernel. Low Conformance with high "
         "Conformance-T is a shifted copy: more throughput at the same delay points at a "
         "higher pacing rate (mvfst BBR), more of both at a larger cwnd gain.\n"
         "- **Envelopes** (Figs. 1, 7): red the tested flow, blue the kernel's, dashed the "
         "test envelope moved by -Δ; crosses are points outside their own envelope "
         "(outliers of one trial).\n"
         "- **Transitivity** (§6): if A beats B and B beats C (bandwidth share above 0.5 + "
         "a margin, significantly when there are repetitions), does A beat C? The paper "
         "found it holds within a congestion control but not across them. A campaign of "
         "each stack against the kernel only has no (A, C) pair: those triples are "
         "\"not measured\".",
         (report_view("conformance_heatmap", "heatmap",
                   "## Conformance per tested flow and buffer, a panel per RTT"),
          TableCell("views.conformance_cells(RESULTS)", "cells",
                    "## Every cell: figures, k, trials and why some are missing"),
          report_view("conformance_envelope_grid", "envelopes",
                   "## Envelopes: the kernel against itself, then the least conformant "
                   "cells"),
          ViewCell("views.conformance_envelopes((flows, flow_results), LABEL)", "envelope",
                   "## One flow's envelopes (set `LABEL`, e.g. `\"quiche/cubic\"`; None: "
                   "the first QUIC flow; a cell by its columns: "
                   "`views.conformance_envelopes(..., LABEL, axis_buffer=\"5bdp\")`)"),
          TableCell("pairwise_shares(flow_results)", "pairs",
                    "## Bandwidth share per pair of flows and path condition"),
          TableCell("check_transitivity(flow_results)", "transitivity",
                    "## Triples with A beats B and B beats C: does A beat C?")),
         imports="from interop_runner.analysis import check_transitivity, load_flow_results, "
                 "load_flows, pairwise_shares\n\n"
                 "LABEL = None  # the flow of the single-envelope figure\n"
                 "flows, flow_results = load_flows(*RESULTS), load_flow_results(*RESULTS)"),
)


def main(argv: list[str]) -> int:
    """Write every notebook (or check they are up to date with ``--check``)."""
    stale = []
    for book in BOOKS:
        path = HERE / book.file
        text = nbformat.writes(notebook(book)) + "\n"
        nbformat.validate(nbformat.reads(text, as_version=4))
        if "--check" in argv:
            if not path.exists() or path.read_text() != text:
                stale.append(book.file)
            continue
        path.write_text(text)
        print(path.relative_to(HERE.parent))
    if stale:
        print(f"out of date (run notebooks/_build.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
