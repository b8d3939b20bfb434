"""The report's figures: the catalogue of analysis views (:data:`VIEWS`), running each on a
campaign (:func:`render_views`) and writing the figures as SVG text and PNG/SVG files.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from interop_runner.report.model import RenderedFigure, ReportCampaign, Skipped, View

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

# the Flows section: only for a campaign with competing flows (docs/flows.md)
_NO_FLOWS = ("flow_count", "no competing flows in this campaign")
FLOW_VIEWS: tuple[View, ...] = (
    View("flows-time", "Flows: throughput per flow over time", "flow_timeline", "paths",
         "Each flow's throughput leaving the bottleneck (top) and its packets' mean "
         "queueing delay (bottom) in bins of 10 base RTTs over the first attempt with "
         "captures; dotted: the first and last 10 % of each flow's active time, left out "
         "of every statistic (start-up and the end of the transfer). Look for one flow "
         "taking the link from the others and for how long an unfair split persists.",
         needs_column=_NO_FLOWS),
    View("flows-fairness", "Flows: Jain's fairness index", "flow_fairness_sweep", "frame",
         "Jain's index (Σx)²/(n·Σx²) of the flows' mean throughputs over their trimmed "
         "windows: 1 is an equal split, 1/n one flow taking everything; the mean over the "
         "repetitions with its 95 % t interval against the swept parameter, dotted the "
         "mean of the lowest index in sliding windows of 5 s (the worst stretch). Without "
         "captures the index is of the flows' goodput (fairness_basis).",
         needs_column=_NO_FLOWS,
         table=("flow_fairness_table", "Jain's index per attempt")),
    View("flows-share", "Flows: bandwidth share between flows", "flow_share_matrix",
         "paths",
         "The share of the row's flow in the throughput of the row's and the column's flow "
         "in the same attempt, mean over the attempts: 0.5 is an equal split; red: the row "
         "takes more. Compare congestion controls and implementations pairwise.",
         needs_column=_NO_FLOWS),
    View("flows-quic-tcp", "Flows: QUIC against TCP", "flow_quic_vs_tcp", "paths",
         "Per path condition (flow set and variant), each QUIC implementation's share "
         "against the kernel TCP flows of the same attempts: the difference of the means, "
         "Welch's t-test (* p < 0.05, ** < 0.01, *** < 0.001, n.s.) and Hedges' g. Needs "
         "QUIC and TCP flows in one flow set.", needs_column=_NO_FLOWS),
)

# the Conformance section (paper 000, docs/conformance.md): for a campaign with competing
# flows; a view whose frame is empty (no QUIC flow against a kernel TCP flow of its congestion
# control, nor two kernel flows of one) is skipped as having no data
CONFORMANCE_VIEWS: tuple[View, ...] = (
    View("conformance", "Conformance: against the kernel (000 Fig. 6)",
         "conformance_heatmap", "paths",
         "Per tested flow (implementation/congestion control; tcp/<cc>#2 is the kernel "
         "against itself, the testbed's noise floor) and bottleneck buffer, a panel per "
         "RTT: Conformance, the share of both flows' (delay, throughput) points that lie in "
         "both performance envelopes (colour, 1 = behaves like the kernel's), Conformance-T "
         "after the best translation of the test envelope, and that translation as "
         "(Δ-throughput Mbit/s, Δ-delay ms), test minus kernel. Low Conformance with high "
         "Conformance-T: the same shape, shifted (a tuning parameter such as a pacing or "
         "cwnd gain); both low: a different behaviour. NA: no figures, the reason is in "
         "the table.", needs_column=_NO_FLOWS,
         table=("conformance_cells", "Conformance per cell")),
    View("conformance-envelopes", "Conformance: performance envelopes (000 Figs. 1, 7)",
         "conformance_envelope_grid", "paths",
         "The tested flow's (red) and the kernel's (blue) points in the delay-throughput "
         "plane, each trial's convex hulls of its k-means clusters filled lightly (the "
         "envelope is where every trial's hulls overlap; crosses: outliers outside it) and "
         "the test envelope moved by the Conformance-T translation dashed. Shown: the "
         "kernel against itself first, then the least conformant cells (at most 9).",
         needs_column=_NO_FLOWS),
)

# paper 003's closed-form checks and ACK ratio (docs/closed-form.md)
MODEL_VIEWS: tuple[View, ...] = (
    View("closed-form", "Closed-form ceilings (003 Figs. 3-5)", "closed_form", "frame",
         "Goodput of each attempt over a calibrated path under its pair's closed-form "
         "ceiling: the link's rate less headers, Mathis's loss-limited rate for a Reno "
         "sender, and window / RTT where the receiver's flow-control window is known. "
         "Points well below a curve leave the path unused for a reason the table's "
         "`basis` and the bottleneck label tell; a red cross above a curve is a "
         "measurement error, not a fast stack.",
         needs_column=("ceiling_mbps", "no closed-form ceiling (no calibrated emulated "
                                       "path in this campaign)"),
         table=("closed_form_frame", "Goodput against its ceilings per attempt")),
    View("ack-ratio", "ACK ratio (003 Fig. 7)", "ack_ratio_sweep", "frame",
         "Goodput (left) and the client's datagrams sent per datagram received (right, the "
         "ideal 1/n dotted) against the ACK ratio asked for, a line per pair and base RTT. "
         "On lossy paths ACKing less often slows loss recovery (003 Fig. 7); a stack that "
         "ACKs per receive batch or on its ACK timer lies below 1/n.",
         needs_column=("ack_ratio", "no ACK ratio asked for in this campaign"),
         table=("ack_ratio_frame", "Per pair, RTT and ACK ratio")),
)

# the Workloads section (docs/workloads.md): drawn where a campaign has more than one
# direction, or more than one count of streams or connections, to set side by side
WORKLOAD_VIEWS: tuple[View, ...] = (
    View("workload-direction", "Workloads: upload against download", "upload_vs_download",
         "frame",
         "Median goodput per pair and direction with the interval of the median, and the "
         "CPU per GiB of the sending and of the receiving side (for a download the server "
         "sends, for an upload the client). A stack that is fast one way and slow the other "
         "usually reads or writes its stream in small pieces on the slow side; compare the "
         "receiving side's CPU.",
         table=("direction_frame", "Per pair and direction")),
    View("workload-streams", "Workloads: goodput against streams and connections",
         "goodput_vs_streams", "frame",
         "Median goodput against streams per connection (log scale), a line per number of "
         "connections, a panel per pair and direction. One connection's streams share its "
         "congestion window and flow control; separate connections do not, so more "
         "connections can fill a link one connection cannot, at the cost of fairness to "
         "other traffic.",
         table=("streams_frame", "Per pair, direction, connections and streams")),
)

VIEWS: tuple[View, ...] = (
    View("interop", "Interop matrix (Fig. 6)", "interop_heatmap", "frame",
         "Median goodput of every server x client pair. Compare rows (servers) and columns "
         "(clients): heterogeneous pairs are often slower than homogeneous ones, because the "
         "flow control and ACK behaviour of two libraries are not tuned to each other.",
         needs_pairs=2),
    View("cpu", "CPU cost per GiB", "cost_heatmap", "frame",
         "CPU-seconds (user + system) of the server's and of the client's processes per GiB "
         "delivered, median over the successful attempts; both panels share one colour "
         "scale, darker is more expensive, NA = not measured. Read it next to the goodput "
         "matrix: a pair that is slow and expensive on one side points at that side.",
         needs_pairs=2, module="interop_runner.analysis.theories.matrix"),
    View("buffers", "Socket buffer sweep (Fig. 3-4)", "buffer_sweep", "frame",
         "Goodput against the UDP receive buffer (multiples of 208 KiB). Look for the knee "
         "where goodput stops rising, and for receive-buffer drops and ACK counts falling "
         "with larger buffers."),
    View("paths", "Paths: goodput against the bottleneck buffer", "path_buffer_sweep",
         "frame",
         "Goodput as a fraction of the configured bottleneck rate (dashed: 1) against the "
         "bottleneck buffer in bandwidth-delay products, one panel per emulated path, one "
         "line per pair, the repetitions' min-max as error bars (a cross at 0: no successful "
         "attempt). One loss-based flow leaves the link idle after a loss when the buffer is "
         "below about one BDP (Reno; CUBIC backs off less and needs less), larger buffers "
         "only add queueing delay. The table compares each path's configuration with what "
         "its calibration measured before the first attempt; a panel whose calibration "
         "missed says so in its title.",
         needs_column=("path_key", "no emulated path in this campaign (the direct link)"),
         table=("path_calibration_frame", "Path calibration: configured against measured")),
    *FLOW_VIEWS,
    *CONFORMANCE_VIEWS,
    *MODEL_VIEWS,
    *WORKLOAD_VIEWS,
    View("crypto", "Ciphers and AES hardware (Fig. 5)", "crypto", "frame",
         "AES-GCM with and without AES-NI against ChaCha20-Poly1305. QUIC usually loses less "
         "than TCP/TLS without hardware AES (small records, encrypted ACKs)."),
    # the results frame, not the paths: its <role>_perf_<category>_share columns are there for
    # our campaigns (the perf monitor) and for predecessor trees (load_qir10g) alike
    View("perf", "CPU profile categories (Fig. 7)", "perf_categories", "frame",
         "Share of perf samples per category. Packet I/O (sendmsg/recvmsg and the kernel "
         "below) typically dominates, crypto is visible but not the main cost."),
    View("offloads", "Segmentation offloads (Fig. 9)", "offloads", "frame",
         "Goodput per offload preset and GSO setting. Only stacks that use UDP GSO/GRO "
         "profit; TCP gains from TSO."),
    View("hardware", "Hardware / testbeds (Fig. 8)", "hardware", "frame",
         "The same pairs on different host pairs: QUIC in user space and TCP in the kernel "
         "profit differently from CPU generation and clock.", needs_testbeds=2),
    View("pinning", "Core pinning (Fig. 11)", "pinning", "frame",
         "Goodput per server core x client core. Row or column patterns show which side is "
         "the bottleneck; cores on the NIC's NUMA node are usually faster."),
    View("bottlenecks", "Bottleneck labels", "bottlenecks", "frame",
         "What limited each successful attempt (link rate, receive-buffer drops, server or "
         "client CPU), counted per pair."),
    View("ab", "A/B comparison", "ab_comparison", "frame",
         "Campaigns with one two-valued axis (A/B, docs/compare.md): per cell the change of B "
         "against A with its bootstrap CI, and the verdict (faster, slower, no change, "
         "inconclusive) at the minimum effect. The table below has p, Cliff's delta, n and "
         "failures per side."),
    View("goodput-time", "Goodput over time", "goodput_over_time", "paths",
         "Receive rate per second during the transfers: stalls, slow starts and drift between "
         "repetitions."),
)


def _views_module() -> Any:
    from interop_runner.analysis import views

    return views


def _view_function(view: View, name: str | None = None) -> Callable[[Any], Any] | None:
    """The function that draws a view (or its function ``name``: the view's table), None
    when its module does not have it."""
    import importlib

    try:
        module = importlib.import_module(view.module)
    except ImportError:
        return None
    function: Callable[[Any], Any] | None = getattr(module, name or view.function, None)
    return function


def _no_data(data: Any, fig: Any) -> bool:
    if fig is None or data is None:
        return True
    if getattr(data, "empty", False):
        return True
    axes = getattr(fig, "axes", None)
    return axes is not None and not axes


def render_views(campaign: ReportCampaign, figures_dir: Path,
                 views: Sequence[View] = VIEWS) -> None:
    """Run every view on the campaign; fill ``campaign.figures`` and ``campaign.skipped``.

    A view without data for this campaign is skipped with its reason; one that raises is
    skipped as an error (the rest of the report is still written).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    try:
        module = _views_module()
    except ImportError as exc:
        campaign.skipped += [Skipped(v, f"analysis views not available: {exc}", error=True)
                             for v in views]
        return
    no_data_errors = tuple(e for e in (getattr(module, "NoData", None),
                                       getattr(module, "NoDataError", None))
                           if isinstance(e, type) and issubclass(e, BaseException))
    for view in views:
        function = _view_function(view)
        if function is None:
            campaign.skipped.append(Skipped(view, f"not available ({view.function} missing)"))
            continue
        reason = _missing_column(view, campaign.frame)
        if reason is not None:
            campaign.skipped.append(Skipped(view, reason))
            continue
        reason = _too_few(view, campaign.frame)
        if reason is not None:
            campaign.skipped.append(Skipped(view, reason, too_few=True))
            continue
        arg = view_argument(view, campaign.frame, [campaign.directory])
        try:
            data, fig = function(arg)
            table = _view_table(view, arg)
        except no_data_errors as exc:
            campaign.skipped.append(Skipped(view, f"no data: {exc}"))
            continue
        except Exception as exc:  # noqa: BLE001 - reported in the page and by Report
            campaign.skipped.append(Skipped(view, f"{type(exc).__name__}: {exc}", error=True))
            plt.close("all")
            continue
        if _no_data(data, fig):
            campaign.skipped.append(Skipped(view, "no data in this campaign"))
            if fig is not None:
                plt.close(fig)
            continue
        stem = f"{campaign.slug}__{view.name}"
        svg = figure_svg(fig)
        files = save_figure(fig, figures_dir, stem, svg)
        campaign.figures.append(RenderedFigure(view, svg, data, files, stem, table))
        plt.close(fig)


def _view_table(view: View, arg: Any) -> "pd.DataFrame | None":
    """The view's own table (``View.table``) of the same input; None when it has none."""
    if view.table is None:
        return None
    function = _view_function(view, view.table[0])
    if function is None:
        raise LookupError(f"{view.table[0]} missing in {view.module}")
    table: pd.DataFrame = function(arg)
    return table


def view_argument(view: View, frame: "pd.DataFrame", paths: Sequence[Path]) -> Any:
    """What ``view`` is called with: the results frame (``takes == "frame"``) or the campaign
    paths. The notebooks are generated from the same ``takes`` (notebooks/_build.py), so a
    view has the same input, and the same data, in the report and in its notebook."""
    return frame if view.takes == "frame" else list(paths)


def _missing_column(view: View, frame: "pd.DataFrame") -> str | None:
    """Why a view has no data in this campaign (no value in the column it needs), else
    None."""
    if view.needs_column is not None:
        column, reason = view.needs_column
        if column not in frame.columns or not frame[column].notna().any():
            return reason
    return None


def _too_few(view: View, frame: "pd.DataFrame") -> str | None:
    """Why a view has nothing to compare in this campaign (too few testbeds or pairs), else
    None."""
    testbeds = frame["testbed"].nunique() if "testbed" in frame.columns else 0
    if testbeds < view.needs_testbeds:
        return f"needs {view.needs_testbeds} testbeds to compare, this campaign has {testbeds}"
    pairs = len(frame[["server", "client"]].drop_duplicates()) if not frame.empty else 0
    if pairs < view.needs_pairs:
        return f"needs {view.needs_pairs} server/client pairs, this campaign has {pairs}"
    return None


def figure_svg(fig: "Figure") -> str:
    """The figure as SVG text (text as paths, so no fonts are needed to show it)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    return buf.getvalue()


def save_figure(fig: "Figure", directory: Path, stem: str, svg: str) -> list[Path]:
    """Write ``<stem>.png`` and ``<stem>.svg``; returns both paths. ``svg``: the figure's
    SVG as :func:`figure_svg` rendered it for the report to embed, written as it is (the
    figure is not drawn again for the file)."""
    directory.mkdir(parents=True, exist_ok=True)
    png, svg_path = directory / f"{stem}.png", directory / f"{stem}.svg"
    fig.savefig(png, bbox_inches="tight", dpi=150)
    svg_path.write_text(svg)
    return [png, svg_path]
