"""Analysis of stored results: DataFrames and summaries. Never runs commands or opens SSH."""

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from interop_runner.analysis.ab.compare import (
    compare,
    compare_campaigns,
    compare_variants,
    facts_differences,
    forest_plot,
    plan,
)
from interop_runner.analysis.frames.flows import (
    fairness_summary,
    flow_share_summary,
    load_flow_results,
    load_flows,
    quic_vs_tcp,
)
from interop_runner.analysis.frames.results import COLUMNS, load_results, summarize
from interop_runner.analysis.frames.series import (
    load_core_usage,
    load_cpu_series,
    load_interface_rates,
    load_nic_queues,
    load_perf_categories,
)
from interop_runner.analysis.importers.qir10g import (
    is_qir10g_tree,
    load_qir10g,
    load_qir10g_perf_categories,
)
from interop_runner.analysis.theories.conformance import conformance
from interop_runner.analysis.theories.diagnosis import add_bottleneck, diagnose
from interop_runner.analysis.theories.flow_conformance import flow_conformance
from interop_runner.analysis.theories.matrix import goodput_matrix, plot_matrix, status_matrix
from interop_runner.analysis.theories.stats import (
    bootstrap_median_ci,
    cell_stats,
    flag_outliers,
    knee,
)
from interop_runner.analysis.theories.transitivity import (
    check_transitivity,
    pairwise_shares,
    transitivity,
)

if _TYPE_CHECKING:  # the views import matplotlib: loaded on first use, not with load_results
    # `x as x`: re-exported (listed in __all__ through _VIEWS, which linters cannot follow)
    from interop_runner.analysis.views import bottlenecks as bottlenecks
    from interop_runner.analysis.views import buffer_sweep as buffer_sweep
    from interop_runner.analysis.views import closed_form as closed_form
    from interop_runner.analysis.views import (
        conformance_envelope_grid as conformance_envelope_grid,
    )
    from interop_runner.analysis.views import conformance_envelopes as conformance_envelopes
    from interop_runner.analysis.views import conformance_heatmap as conformance_heatmap
    from interop_runner.analysis.views import crypto as crypto
    from interop_runner.analysis.views import flow_fairness_sweep as flow_fairness_sweep
    from interop_runner.analysis.views import flow_quic_vs_tcp as flow_quic_vs_tcp
    from interop_runner.analysis.views import flow_share_matrix as flow_share_matrix
    from interop_runner.analysis.views import flow_timeline as flow_timeline
    from interop_runner.analysis.views import goodput_over_time as goodput_over_time
    from interop_runner.analysis.views import hardware as hardware
    from interop_runner.analysis.views import interop_heatmap as interop_heatmap
    from interop_runner.analysis.views import offloads as offloads
    from interop_runner.analysis.views import path_buffer_sweep as path_buffer_sweep
    from interop_runner.analysis.views import perf_categories as perf_categories
    from interop_runner.analysis.views import pinning as pinning

_VIEWS = ("bottlenecks", "buffer_sweep", "closed_form", "conformance_envelope_grid",
          "conformance_envelopes", "conformance_heatmap", "crypto", "flow_fairness_sweep",
          "flow_quic_vs_tcp", "flow_share_matrix", "flow_timeline", "goodput_over_time", "hardware",
          "interop_heatmap", "offloads", "path_buffer_sweep", "perf_categories", "pinning")


def __getattr__(name: str) -> _Any:
    """The view functions of :mod:`.views`, imported when first used."""
    if name in _VIEWS:
        from interop_runner.analysis import views
        return getattr(views, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["compare", "compare_campaigns", "compare_variants", "facts_differences",
           "forest_plot", "plan", "COLUMNS", "conformance", "flow_conformance",
           "add_bottleneck", "diagnose", "goodput_matrix",
           "plot_matrix", "status_matrix", "fairness_summary", "flow_share_summary",
           "load_flow_results", "load_flows", "quic_vs_tcp", "load_core_usage", "load_cpu_series",
           "load_interface_rates", "load_nic_queues", "load_perf_categories", "load_results",
           "summarize",
           "is_qir10g_tree", "load_qir10g", "load_qir10g_perf_categories",
           "bootstrap_median_ci", "cell_stats", "flag_outliers", "knee",
           "check_transitivity", "pairwise_shares", "transitivity", *_VIEWS]
