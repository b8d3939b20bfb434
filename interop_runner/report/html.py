"""The report page as HTML: the style sheet, tables and facts, figures (embedded as base64
SVG), one section per campaign and the complete document.

HTML is assembled with :func:`html.escape` by small functions (no template engine).
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import json
import math
import numbers
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from interop_runner.report.model import (
    RenderedFigure,
    ReportCampaign,
    Skipped,
    testbed_documents,
)
from interop_runner.report.tables import (
    campaigns_table,
    failures_table,
    summary_table,
    versions_table,
)

if TYPE_CHECKING:
    import pandas as pd

MAX_TABLE_ROWS = 200  # rows shown of a figure's data table (the rest is counted)
TALL_ROWS = 30  # longer tables scroll inside a box (headers stay visible)
FOLD_ROWS = 12  # longer per-cell tables are folded below the figures (<details>)
WIDE_PX = 820  # figures wider than a grid column (CSS px) span the whole row
HISTORY_ANCHOR = "history"  # HTML id of the History section (interop_runner.report.history)
CAMPAIGNS_ANCHOR = "campaigns"  # HTML id of the table across the campaigns

CSS = """
:root { --fg: #1d232a; --muted: #5b6670; --line: #d8dde3; --band: #f4f6f8; --accent: #1f5f99; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       margin: 0 auto; padding: 24px 32px 64px; max-width: 1500px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 21px; margin: 40px 0 8px; padding-bottom: 4px; border-bottom: 2px solid var(--accent); }
h3 { font-size: 16px; margin: 26px 0 8px; color: var(--accent); }
p.meta, .muted { color: var(--muted); }
a { color: var(--accent); }
nav ul { margin: 6px 0; padding-left: 20px; columns: 2; }
.notice { border-left: 5px solid #c0392b; background: #fdecea; padding: 10px 14px; margin: 14px 0; }
.notice.ok { border-color: #2e7d32; background: #edf7ee; }
.notice code { word-break: break-all; }
table { border-collapse: collapse; margin: 6px 0 10px; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: var(--band); font-weight: 600; position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tbody tr:nth-child(even) { background: #fafbfc; }
.scroll { overflow-x: auto; max-width: 100%; }
.scroll.tall { max-height: 70vh; overflow-y: auto; border-bottom: 1px solid var(--line); }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 6px 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 18px; }
figure.wide { grid-column: 1 / -1; }
figure { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: 10px; background: #fff; }
figure img { display: block; max-width: 100%; height: auto; margin: 0 auto; }
figcaption { margin-top: 6px; }
figcaption b { display: block; }
p.skipped { color: var(--muted); margin: 8px 0; }
p.skipped span.error { color: #c0392b; }
details { margin: 6px 0; }
summary { cursor: pointer; color: var(--accent); }
pre { background: var(--band); padding: 10px; overflow-x: auto; font-size: 12px; }
"""  # noqa: E501 - the page's stylesheet, emitted verbatim: one rule per line, kept as is


def esc(value: Any) -> str:
    """Escape a value for HTML text and attributes."""
    return html.escape("" if value is None else str(value), quote=True)


def _is_missing(value: Any) -> bool:
    import pandas as pd

    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def format_cell(value: Any) -> tuple[str, bool]:
    """A table cell's text and whether it is numeric (right-aligned)."""
    if isinstance(value, (list, tuple)):
        return ", ".join(format_cell(v)[0] for v in value), False
    if _is_missing(value):
        return "–", False
    if isinstance(value, bool) or type(value).__name__ in ("bool_", "bool"):  # numpy 1, 2
        return ("yes" if value else "no"), False
    if isinstance(value, numbers.Integral):
        return f"{int(value)}", True
    if isinstance(value, numbers.Real):
        number = float(value)
        if math.isinf(number):
            return ("∞" if number > 0 else "-∞"), True
        return (f"{number:.3g}" if 0 < abs(number) < 1 else f"{number:.1f}"), True
    return str(value), False


def html_table(frame: "pd.DataFrame", *, index: bool = False,
               max_rows: int | None = None) -> str:
    """A pandas frame as an escaped HTML table (numbers right-aligned, missing as –)."""
    if frame is None or frame.empty:
        return '<p class="muted">(empty)</p>'
    shown = frame if max_rows is None else frame.head(max_rows)
    if index:
        shown = shown.reset_index()
    head = "".join(f"<th>{esc(c)}</th>" for c in shown.columns)
    rows = []
    for record in shown.itertuples(index=False, name=None):
        cells = []
        for value in record:
            text, numeric = format_cell(value)
            cells.append(f'<td class="num">{esc(text)}</td>' if numeric
                         else f"<td>{esc(text)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    more = ""
    if max_rows is not None and len(frame) > max_rows:
        more = f'<p class="muted">{len(frame) - max_rows} more row(s) not shown.</p>'
    box = "scroll tall" if len(shown) > TALL_ROWS else "scroll"  # long: own scroll bar
    return (f'<div class="{box}"><table><thead><tr>{head}</tr></thead><tbody>'
            + "".join(rows) + "</tbody></table></div>" + more)


def folded_table(frame: "pd.DataFrame", what: str, *, fold_rows: int = FOLD_ROWS) -> str:
    """:func:`html_table`, folded into ``<details>`` whose summary says ``what`` and how many
    rows when the table is longer than ``fold_rows`` (so it never hides the figures)."""
    table = html_table(frame)
    if frame is None or len(frame) <= fold_rows:
        return table
    return (f'<details class="table"><summary>{esc(what)}: {len(frame)} rows</summary>'
            f"{table}</details>")


def facts_list(items: Mapping[str, Any]) -> str:
    """A definition list of label -> value (already plain values)."""
    body = "".join(f"<dt>{esc(k)}</dt><dd>{esc(format_cell(v)[0])}</dd>"
                   for k, v in items.items())
    return f'<dl class="facts">{body}</dl>'


def _fact_value(value: Any) -> str:
    """HTML for one host fact: scalars as text, mappings compact (collapsed when long)."""
    if not isinstance(value, dict):
        return esc(format_cell(value)[0])
    if not value:
        return "–"
    if all(isinstance(v, bool) for v in value.values()):
        on = [k for k, v in value.items() if v]
        text = f"on: {', '.join(on) or 'none'}"
        summary = f"{len(on)} of {len(value)} on"
    else:
        text = "; ".join(f"{k}={v}" for k, v in value.items())
        summary = f"{len(value)} entries"
    if len(value) <= 4:
        return esc(text)
    return f"<details><summary>{esc(summary)}</summary>{esc(text)}</details>"


def hosts_section(campaign: ReportCampaign) -> str:
    """Host facts per testbed: one row per fact, one column per node."""
    parts = []
    for testbed, doc in testbed_documents(campaign).items():
        hosts = doc.get("hosts") or {}
        if doc.get("error"):
            parts.append(f'<p class="muted">{esc(testbed)}: {esc(doc["error"])}</p>')
            continue
        if not hosts:
            parts.append(f'<p class="muted">{esc(testbed)}: no host facts recorded.</p>')
            continue
        nodes = list(hosts)
        keys: dict[str, None] = {}
        for node in nodes:
            keys.update(dict.fromkeys(hosts[node] or {}))
        head = "<th>fact</th>" + "".join(f"<th>{esc(n)}</th>" for n in nodes)
        rows = "".join(
            f"<tr><td>{esc(k)}</td>"
            + "".join(f"<td>{_fact_value((hosts[n] or {}).get(k))}</td>" for n in nodes)
            + "</tr>" for k in keys if k != "raw")
        parts.append(f"<p><b>testbed {esc(testbed)}</b></p>"
                     f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
                     f"<tbody>{rows}</tbody></table></div>")
    return "".join(parts)


def keylog_notice(keylogs: Sequence[Path], roots: Sequence[Path]) -> str:
    """The notice at the top: key logs present (with where), or none found."""
    if not keylogs:
        return ('<div class="notice ok" id="keylogs"><b>No TLS key logs</b> were found in '
                'these results.</div>')
    shown = "".join(f"<li><code>{esc(_relative_any(p, roots))}</code></li>"
                    for p in keylogs[:20])
    more = f"<li>… and {len(keylogs) - 20} more</li>" if len(keylogs) > 20 else ""
    return ('<div class="notice" id="keylogs"><b>TLS key logs present:</b> '
            f"{len(keylogs)} file(s) with TLS session secrets (SSLKEYLOGFILE output) are "
            "stored in these results. Anyone holding them can decrypt the packet captures "
            "of these runs; remove them before publishing the result directories."
            f"<ul>{shown}{more}</ul></div>")


def _relative_any(path: Path, roots: Sequence[Path]) -> str:
    for root in roots:
        try:
            return str(Path(root.name) / path.relative_to(root))
        except ValueError:
            continue
    return str(path)


def figure_html(fig: RenderedFigure) -> str:
    """One figure: the SVG as an <img> data URI (ids of several SVGs cannot clash), caption,
    the view's own table when it has one (folded when long), and the data it plots in a
    collapsed table."""
    data = base64.b64encode(fig.svg.encode()).decode()
    files = ", ".join(f"figures/{p.name}" for p in fig.files)
    wide = ' class="wide"' if svg_width_px(fig.svg) > WIDE_PX else ""
    table = ""
    if fig.table is not None and fig.view.table is not None:
        title = fig.view.table[1]
        table = f"<b>{esc(title)}</b>{folded_table(fig.table, title)}"
    return (f'<figure id="{esc(fig.stem)}"{wide}><img class="fig" alt="{esc(fig.view.title)}" '
            f'src="data:image/svg+xml;base64,{data}">'
            f"<figcaption><b>{esc(fig.view.title)}</b>{esc(fig.view.about)} "
            f'<span class="muted">({esc(files)})</span>{table}'
            f"<details><summary>data ({len(fig.data)} row(s))</summary>"
            f"{html_table(fig.data, max_rows=MAX_TABLE_ROWS)}</details>"
            "</figcaption></figure>")


def svg_width_px(svg: str) -> float:
    """The width of a matplotlib SVG in CSS pixels (its ``width="..pt"``), 0 if unknown."""
    match = re.search(r'<svg[^>]*\swidth="([\d.]+)(pt|px)?"', svg)
    if match is None:
        return 0.0
    return float(match.group(1)) * (4 / 3 if match.group(2) in (None, "pt") else 1)


# ----------------------------------------------------------------------------- sections

def bookkeeping(campaign: ReportCampaign) -> dict[str, Any]:
    """The campaign's run facts shown at the top of its section."""
    meta = campaign.meta
    cfg = meta.get("config") or {}
    runner = meta.get("runner") or {}
    frame = campaign.frame
    counts: dict[str, int] = {} if frame.empty else {
        str(k): int(v) for k, v in frame["status"].astype("string").value_counts().items()}
    testbeds = list((meta.get("testbeds") or {}).keys()) or \
        [str((meta.get("testbed") or {}).get("name", "?"))]
    plan = meta.get("plan") or {}
    commit = str(runner.get("commit") or "unknown")[:12]
    return {
        "directory": str(campaign.directory),
        "status": meta.get("status"),
        "started": meta.get("started_at"), "finished": meta.get("finished_at"),
        "wall time": f"{meta['wall_s']:.1f} s" if isinstance(meta.get("wall_s"), (int, float))
        else None,
        "testbed(s)": ", ".join(testbeds),
        "testcase": cfg.get("testcase"),
        "file": _size(cfg.get("file_size")),
        "repetitions": cfg.get("repetitions"),
        "pairs": _pairs(cfg),
        "sweep": "; ".join(f"{a.get('name') or a.get('path')}: "
                           f"{', '.join(str(v) for v in a.get('values') or [])}"
                           for a in ((cfg.get("sweep") or {}).get("axes") or [])
                           if isinstance(a, dict)) or None,
        "monitors": ", ".join(str(m) for m in cfg.get("monitors") or []) or None,
        "key logs / qlog": f"{'on' if cfg.get('keylog') else 'off'} / "
                           f"{'on' if cfg.get('qlog') else 'off'}",
        "attempts": f"{len(frame)} ({', '.join(f'{k} {v}' for k, v in counts.items() if v)})"
        if len(frame) else "0",
        "planned runs": meta.get("planned_runs"),
        # campaigns from before sweeps ran in sequence without a seed: nothing to show
        "order / seed": f"{plan.get('order', '-')} / {plan['seed']}"
        if plan and plan.get("seed") is not None else None,
        "runner": f"{runner.get('package', '?')} commit {commit}"
                  + (" (dirty)" if runner.get("dirty") else ""),
    }


def _pairs(cfg: Mapping[str, Any]) -> str | None:
    """The campaign's pairs in short: ``servers x clients`` or the explicit pair list."""
    pairs = cfg.get("pairs") or []
    servers, clients = cfg.get("servers") or [], cfg.get("clients") or []
    if servers and clients:
        return f"{len(servers)} x {len(clients)}: {', '.join(servers)} x {', '.join(clients)}"
    if pairs:
        text = ", ".join(f"{p.get('server')}/{p.get('client')}" for p in pairs
                         if isinstance(p, dict))
        return f"{len(pairs)}: {text}"
    return None


def _size(value: Any) -> str | None:
    if not isinstance(value, int):
        return None
    from interop_runner.units import format_iec

    return f"{format_iec(value)} ({value} bytes)"


SUMMARY_NOTE = ("Goodput in Mbit/s of the successful attempts per cell; n = successful "
                "attempts of all attempts, failures = attempts that did not succeed (failed, "
                "timeout, unsupported: counted, never averaged in); ci_low/ci_high = bootstrap "
                "95 % interval of the median; outliers = Tukey outliers (counted, not "
                "dropped); server/client CPU-s/GiB = median CPU-seconds (user + system) of "
                "that side's processes per GiB delivered, over the successful attempts that "
                "measured it (– : not measured).")


def campaign_section(campaign: ReportCampaign) -> str:
    """The whole section of one campaign: its run facts, then what a person looks at (the
    figures), then the long per-cell tables (folded when long), then the reference parts."""
    parts = [f'<section id="{esc(campaign.anchor)}"><h2>{esc(campaign.name)}</h2>',
             facts_list({k: v for k, v in bookkeeping(campaign).items() if v is not None}),
             views_part(campaign), summary_part(campaign), failures_part(campaign),
             "<h3>Implementations</h3>" + html_table(versions_table(campaign)),
             "<h3>Hosts</h3>" + hosts_section(campaign)]
    config = json.dumps(campaign.meta.get("config") or {}, indent=2, sort_keys=False)
    parts.append("<h3>Configuration</h3><details><summary>resolved campaign configuration "
                 f"(campaign.json)</summary><pre>{esc(config)}</pre></details></section>")
    return "".join(parts)


def views_part(campaign: ReportCampaign) -> str:
    """The figures of a campaign, and one line per view that was not drawn."""
    parts = ["<h3>Views</h3>"]
    if campaign.figures:
        parts.append('<div class="grid">' + "".join(figure_html(f) for f in campaign.figures)
                     + "</div>")
    else:
        parts.append('<p class="muted">No view has data for this campaign.</p>')
    if campaign.skipped:
        parts.append(skipped_line(campaign.skipped))
    return "".join(parts)


def skipped_line(skipped: Sequence[Skipped]) -> str:
    """The views not drawn, in one line: grouped by their reason, in the catalogue's order
    (``Socket buffer sweep (Fig. 3-4), Ciphers ...: skipped, no data in this campaign;
    ...``); failed views in red."""
    groups: dict[tuple[bool, str], list[str]] = {}
    for entry in skipped:
        groups.setdefault((entry.error, entry.reason), []).append(entry.view.title)
    items = [f'<span{" class=error" if error else ""}>{esc(", ".join(titles))}: '
             f"{'failed: ' if error else 'skipped, '}{esc(reason)}</span>"
             for (error, reason), titles in groups.items()]
    return f'<p class="skipped">{"; ".join(items)}</p>'


def summary_part(campaign: ReportCampaign) -> str:
    """The statistics per cell (folded when long)."""
    if campaign.frame.empty:
        return '<h3>Summary</h3><p class="muted">No attempts recorded.</p>'
    return (f'<h3>Summary</h3><p class="muted">{esc(SUMMARY_NOTE)}</p>'
            + folded_table(summary_table(campaign.frame), "statistics per cell"))


def failures_part(campaign: ReportCampaign) -> str:
    """The attempts that did not succeed (folded when long)."""
    failures = failures_table(campaign)
    body = folded_table(failures, "failed attempts") if len(failures) else \
        '<p class="muted">Every attempt succeeded.</p>'
    return f"<h3>Failures ({len(failures)})</h3>{body}"


CAMPAIGNS_NOTE = ("Every cell of every campaign, as the end of each run printed it (run.py "
                  "summary prints it again): attempts per status, goodput in Mbit/s of the "
                  "successful attempts (median, min, max), the median CPU-s/GiB per side and "
                  "the most common bottleneck label.")


def campaigns_part(campaigns: Sequence[ReportCampaign]) -> str:
    """The table across the campaigns of a report of several (folded when long); nothing
    for one campaign (its section has the same rows)."""
    if len(campaigns) < 2:
        return ""
    table = campaigns_table(campaigns)
    return (f'<section id="{CAMPAIGNS_ANCHOR}"><h2>Campaigns</h2>'
            f'<p class="muted">{esc(CAMPAIGNS_NOTE)}</p>'
            f"{folded_table(table, 'cells of every campaign')}</section>")


def page(campaigns: Sequence[ReportCampaign], keylogs: Sequence[Path], roots: Sequence[Path],
         history: str = "") -> str:
    """The complete HTML document; ``history`` is the History section's HTML (leads the
    campaigns when given)."""
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    title = "QIR report: " + ", ".join(c.name for c in campaigns)
    toc = (f'<li><a href="#{HISTORY_ANCHOR}">History</a> – change points over campaigns</li>'
           if history else "") + "".join(f'<li><a href="#{esc(c.anchor)}">{esc(c.name)}</a> – '
                  f"{len(c.frame)} attempt(s), {len(c.figures)} figure(s)</li>"
                  for c in campaigns)
    attempts = sum(len(c.frame) for c in campaigns)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
        "<header><h1>Extended QUIC Interop Runner – report</h1>"
        f'<p class="meta">Generated {esc(now)} from {len(campaigns)} campaign(s), '
        f"{attempts} attempt(s). Goodput = 8 × file size / transfer time on the client "
        "node, in Mbit/s.</p></header>"
        + keylog_notice(keylogs, roots)
        + f"<nav><b>Campaigns</b><ul>{toc}</ul></nav>" + campaigns_part(campaigns) + history
        + "".join(campaign_section(c) for c in campaigns)
        + "</body></html>\n")
