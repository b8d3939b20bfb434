"""Goodput and CPU-cost history over campaigns: a DuckDB results database and change points.

``ingest`` puts finished campaign directories into ``<results-dir>/history.duckdb``,
``load_history`` returns every stored attempt as a DataFrame (``query`` runs SQL), ``check``
finds the significant change points of every series (docs/history.md).
"""

from interop_runner.analysis.history.changepoints import (
           ChangePoint,
           ChangePointSettings,
           Point,
           change_points,
)
from interop_runner.analysis.history.db import (
           DB_NAME,
           default_db,
           load_campaigns,
           load_history,
           query,
)
from interop_runner.analysis.history.ingest import CampaignRefused, IngestReport, ingest
from interop_runner.analysis.history.series import check, open_regressions, points, series_table

__all__ = ["DB_NAME", "CampaignRefused", "ChangePoint", "ChangePointSettings", "IngestReport",
           "Point", "change_points", "check", "default_db", "ingest", "load_campaigns",
           "load_history", "open_regressions", "points", "query", "series_table"]
