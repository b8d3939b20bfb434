"""One function per figure of the paper's evaluation (section 4), each returning the DataFrame
it plots and a matplotlib ``Figure`` (no pyplot state; safe under the Agg backend).

Input is the frame of :func:`~interop_runner.analysis.load_results` (one row per attempt), or
campaign paths for the views on long frames. A view whose data is missing returns an empty
frame and a figure saying "no data for ...", never an exception.

=====================  ===========================================================  ========
view                   what it plots                                                paper
=====================  ===========================================================  ========
``buffer_sweep``       goodput, client packets sent, receive-buffer drops vs          Fig. 3-4
                       buffer multiple, with the knee and its bootstrap interval
``crypto``             goodput per cipher / AES acceleration, QUIC and TCP/TLS       Fig. 5
``interop_heatmap``    server x client median goodput, failures in the cells          Fig. 6
``perf_categories``    perf category shares per implementation and role              Fig. 7
``hardware``           goodput per testbed, and normalised to CPU max frequency      Fig. 8
``offloads``           goodput per offload preset with client/server CPU             Fig. 9
``pinning``            client core x server core: mean goodput, deviation from mean  Fig. 11
``bottlenecks``        bottleneck labels per cell                                     -
``goodput_over_time``  client receive rate per second (ifstat)                        -
``ab_comparison``      A/B campaigns: change of B against A per cell with its CI      -
``path_buffer_sweep``  emulated paths: goodput / bottleneck rate vs buffer in BDP,    -
                       a panel per path; tables: ``path_calibration_frame``
                       (configured vs calibrated), ``path_counters_frame``
``flow_timeline``      competing flows: throughput and queueing delay per flow over   -
                       one attempt (trimmed bins dotted)
``flow_fairness_sweep``  Jain's index against the swept parameter, t interval        -
``flow_share_matrix``  bandwidth share of one flow against another, per label pair   -
``flow_quic_vs_tcp``   QUIC flows against TCP per path condition, Welch's t-test     -
``conformance_heatmap``  implementation/CC x buffer: Conformance, Conformance-T and   000
                       the translation vector, a panel per RTT (table:             Fig. 6
                       ``conformance_cells``)
``conformance_envelopes``  a tested flow's and its kernel reference's clouds with      000
                       their envelopes' hulls, the translated test dashed           Fig. 1, 7
``conformance_envelope_grid``  the envelopes of the report's selection of cells      -
``history_series``     one history series over its campaigns, change points marked   -
                       (input: the points and change points of analysis.history)
``ack_ratio_sweep``    goodput and the client's datagrams sent / received against    003
                       the ACK ratio asked for, a line per pair and RTT              Fig. 7
                       (frame: ``ack_ratio_frame``)
``closed_form``        goodput against loss and RTT under each pair's closed-form    003
                       ceiling curve (link, Mathis, window / RTT), flagged runs      Fig. 3-5
                       crossed (table: ``closed_form_frame``)
``upload_vs_download``  workloads: goodput per pair and direction, with the sending   -
                       and receiving side's CPU per GiB (table: ``direction_frame``)
``goodput_vs_streams``  goodput against streams per connection, a line per number of  -
                       connections, a panel per pair and direction
                       (table: ``streams_frame``)
=====================  ===========================================================  ========
"""

from interop_runner.analysis.views.ab import ab_comparison
from interop_runner.analysis.views.ack_ratio import (
    ack_ratio_figure,
    ack_ratio_frame,
    ack_ratio_sweep,
)
from interop_runner.analysis.views.buffers import buffer_sweep
from interop_runner.analysis.views.ceilings import (
    closed_form,
    closed_form_figure,
    closed_form_frame,
)
from interop_runner.analysis.views.conformance import (
    conformance_cells,
    conformance_envelope_grid,
    conformance_envelopes,
    conformance_envelopes_figure,
    conformance_envelopes_frame,
    conformance_heatmap,
    conformance_heatmap_figure,
    conformance_heatmap_frame,
)
from interop_runner.analysis.views.flows import (
    flow_fairness_figure,
    flow_fairness_frame,
    flow_fairness_sweep,
    flow_fairness_table,
    flow_quic_vs_tcp,
    flow_quic_vs_tcp_figure,
    flow_quic_vs_tcp_frame,
    flow_share_figure,
    flow_share_frame,
    flow_share_matrix,
    flow_timeline,
    flow_timeline_figure,
    flow_timeline_frame,
)
from interop_runner.analysis.views.hardware import hardware, host_facts
from interop_runner.analysis.views.history import history_series
from interop_runner.analysis.views.overview import bottlenecks, interop_heatmap
from interop_runner.analysis.views.paths import (
    path_buffer_figure,
    path_buffer_frame,
    path_buffer_sweep,
    path_calibration_frame,
    path_counters_frame,
)
from interop_runner.analysis.views.pinning import pinning
from interop_runner.analysis.views.settings import crypto, offloads
from interop_runner.analysis.views.timeseries import goodput_over_time, perf_categories
from interop_runner.analysis.views.workloads import (
    direction_frame,
    goodput_vs_streams,
    streams_frame,
    upload_vs_download,
)

__all__ = ["ab_comparison", "ack_ratio_figure", "ack_ratio_frame", "ack_ratio_sweep",
           "bottlenecks", "buffer_sweep", "closed_form", "closed_form_figure",
           "closed_form_frame", "conformance_cells", "conformance_envelope_grid",
           "conformance_envelopes", "conformance_envelopes_figure",
           "conformance_envelopes_frame", "conformance_heatmap", "conformance_heatmap_figure",
           "conformance_heatmap_frame", "crypto", "flow_fairness_figure",
           "flow_fairness_frame", "flow_fairness_sweep", "flow_fairness_table",
           "flow_quic_vs_tcp", "flow_quic_vs_tcp_figure", "flow_quic_vs_tcp_frame",
           "flow_share_figure", "flow_share_frame", "flow_share_matrix", "flow_timeline",
           "flow_timeline_figure", "flow_timeline_frame", "goodput_over_time",
           "hardware", "history_series", "host_facts", "interop_heatmap", "offloads",
           "path_buffer_figure", "path_buffer_frame", "path_buffer_sweep",
           "path_calibration_frame", "path_counters_frame", "perf_categories", "pinning",
           "direction_frame", "goodput_vs_streams", "streams_frame", "upload_vs_download"]
