"""Analysis of stored results: DataFrames and summaries. Never runs commands or opens SSH."""

from .results import COLUMNS, load_results, summarize

__all__ = ["COLUMNS", "load_results", "summarize"]
