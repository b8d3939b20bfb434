"""Analysis of stored results: DataFrames and summaries. Never runs commands or opens SSH."""

from .diagnosis import add_bottleneck, diagnose
from .matrix import goodput_matrix, plot_matrix, status_matrix
from .results import COLUMNS, load_results, summarize
from .series import (load_core_usage, load_cpu_series, load_interface_rates, load_nic_queues,
                     load_perf_categories)

__all__ = ["COLUMNS", "add_bottleneck", "diagnose", "goodput_matrix", "plot_matrix", "status_matrix", "load_core_usage", "load_cpu_series",
           "load_interface_rates", "load_nic_queues", "load_perf_categories", "load_results", "summarize"]
