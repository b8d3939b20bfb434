"""One self-contained HTML page about one or more campaigns (``run.py report``).

A page of several campaigns leads with one table of every campaign's cells (the table that
ended each run, :func:`~interop_runner.report.tables.campaigns_table`). The page has, per
campaign: its run bookkeeping, every analysis view that has data (figures
embedded as base64 SVG, the data behind each figure in a collapsed table), then the long
per-cell tables (folded when long): a summary (:func:`cell_stats` per pair and sweep variant,
failures counted, CPU cost per side) and the failed attempts with their
reasons, the implementation versions, the host facts and the resolved configuration. Given a
history database, a History section leads: the series of campaigns with their change points
(:mod:`interop_runner.report.history`). A notice
at the top says when TLS key logs are stored in the results. No external resources and no
JavaScript: the file can be mailed or archived as it is. Every figure is also written as PNG
and SVG to ``<out>/figures/``.

HTML is assembled with :func:`html.escape` by small functions (no template engine).

This module is the entry point (:func:`build_report`) and re-exports the report's names; the
work is split over :mod:`~interop_runner.report.model` (finding and loading campaigns, the
dataclasses), :mod:`~interop_runner.report.views` (running the analysis views, figures),
:mod:`~interop_runner.report.tables` (summary, failures and versions tables) and
:mod:`~interop_runner.report.html` (the page).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from interop_runner.errors import ReportError
from interop_runner.report.history import HistoryProvider, HistorySeries, history_section
from interop_runner.report.html import (
    CSS,
    FOLD_ROWS,
    MAX_TABLE_ROWS,
    TALL_ROWS,
    WIDE_PX,
    bookkeeping,
    campaign_section,
    esc,
    facts_list,
    figure_html,
    folded_table,
    format_cell,
    hosts_section,
    html_table,
    keylog_notice,
    page,
    svg_width_px,
)
from interop_runner.report.model import (
    KEYLOG_NAME,
    RenderedFigure,
    Report,
    ReportCampaign,
    Skipped,
    View,
    find_campaigns,
    find_keylogs,
    load_campaign,
    read_json,
    slugify,
    testbed_documents,
)
from interop_runner.report.tables import failures_table, summary_table, versions_table
from interop_runner.report.views import VIEWS, figure_svg, render_views, save_figure

__all__ = [
    "CSS", "FOLD_ROWS", "KEYLOG_NAME", "MAX_TABLE_ROWS", "TALL_ROWS", "VIEWS", "WIDE_PX",
    "ReportCampaign", "HistoryProvider", "HistorySeries", "RenderedFigure", "Report",
    "ReportError", "Skipped", "View", "bookkeeping", "build_report", "campaign_section",
    "esc", "facts_list", "failures_table", "figure_html", "figure_svg", "find_campaigns",
    "find_keylogs", "folded_table", "format_cell", "history_section", "hosts_section",
    "html_table", "keylog_notice", "load_campaign", "page", "read_json", "render_views",
    "save_figure", "slugify", "summary_table", "svg_width_px", "testbed_documents",
    "versions_table",
]


def build_report(paths: Sequence[Path | str], out_dir: Path | str,
                 views: Sequence[View] = VIEWS, *, history_db: Path | None = None,
                 history_provider: HistoryProvider | None = None) -> Report:
    """Write ``<out_dir>/report.html`` and ``<out_dir>/figures/*.{png,svg}`` for the campaigns
    below ``paths``. Raises :class:`ReportError` for unusable input.

    With ``history_db``, the page leads with a History section: the series the history
    provider reads from it (default ``interop_runner.report.history.analysis_series``), those
    with change points drawn; without it (the default), no such section.
    """
    directories = find_campaigns(paths)
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"{out}: cannot create the output directory: {exc.strerror}") \
            from None
    figures_dir = out / "figures"
    campaigns = [load_campaign(d) for d in directories]
    used: set[str] = set()
    for campaign in campaigns:  # the same campaign name below two results directories
        slug, n = slugify(campaign.name), 1
        while slug in used:
            n += 1
            slug = f"{slugify(campaign.name)}-{n}"
        used.add(slug)
        campaign.slug = slug
    for campaign in campaigns:
        render_views(campaign, figures_dir, views)
    history, history_files = history_section(history_db, figures_dir, history_provider)
    keylogs = find_keylogs(directories)
    html_file = out / "report.html"
    html_file.write_text(page(campaigns, keylogs, directories, history), encoding="utf-8")
    files = [p for c in campaigns for f in c.figures for p in f.files] + history_files
    return Report(html_file, files, campaigns, keylogs)
