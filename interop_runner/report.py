"""One self-contained HTML page about one or more campaigns (``run.py report``).

The page has, per campaign: its run bookkeeping, a summary table (:func:`cell_stats` per pair
and sweep variant, failures counted), every analysis view that has data (figures embedded as
base64 SVG, the data behind each figure in a collapsed table), the failed attempts with their
reasons, the implementation versions, the host facts and the resolved configuration. A notice
at the top says when TLS key logs are stored in the results. No external resources and no
JavaScript: the file can be mailed or archived as it is. Every figure is also written as PNG
and SVG to ``<out>/figures/``.

HTML is assembled with :func:`html.escape` by small functions (no template engine).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import html
import io
import json
import math
import numbers
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

# Names of TLS key log files: the orchestrator sets SSLKEYLOGFILE=<logs>/keys.log for each side
# (only with campaign keylog: true); anything else with "keylog" or
# "sslkey" in its name is reported too.
KEYLOG_NAME = re.compile(r"^keys\.log$|keylog|sslkey", re.IGNORECASE)
MAX_TABLE_ROWS = 200  # rows shown of a figure's data table (the rest is counted)
TALL_ROWS = 30  # longer tables scroll inside a box (headers stay visible)
WIDE_PX = 820  # figures wider than a grid column (CSS px) span the whole row


class ReportError(ValueError):
    """A problem with the input (missing or not a results directory): one line for the user."""


@dataclasses.dataclass(frozen=True)
class View:
    """One analysis view: a function of :mod:`interop_runner.analysis.views` and its prose."""

    name: str  # figure file stem and HTML anchor
    title: str
    function: str
    takes: str  # "frame" or "paths" (the campaign directory)
    about: str  # what to look for (paper section 4)
    needs_testbeds: int = 1  # fewer testbeds in the campaign: nothing to compare, skipped
    needs_pairs: int = 1  # likewise for server/client pairs


VIEWS: tuple[View, ...] = (
    View("interop", "Interop matrix (Fig. 6)", "interop_heatmap", "frame",
         "Median goodput of every server x client pair. Compare rows (servers) and columns "
         "(clients): heterogeneous pairs are often slower than homogeneous ones, because the "
         "flow control and ACK behaviour of two libraries are not tuned to each other.",
         needs_pairs=2),
    View("buffers", "Socket buffer sweep (Fig. 3-4)", "buffer_sweep", "frame",
         "Goodput against the UDP receive buffer (multiples of 208 KiB). Look for the knee "
         "where goodput stops rising, and for receive-buffer drops and ACK counts falling "
         "with larger buffers."),
    View("crypto", "Ciphers and AES hardware (Fig. 5)", "crypto", "frame",
         "AES-GCM with and without AES-NI against ChaCha20-Poly1305. QUIC usually loses less "
         "than TCP/TLS without hardware AES (small records, encrypted ACKs)."),
    View("perf", "CPU profile categories (Fig. 7)", "perf_categories", "paths",
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


@dataclasses.dataclass
class RenderedFigure:
    """A rendered view: its figure as SVG text, the data it plots, and the files written."""

    view: View
    svg: str
    data: "pd.DataFrame"
    files: list[Path]
    stem: str  # <campaign slug>__<view name>: file name stem and HTML id


@dataclasses.dataclass
class Skipped:
    """A view that was not drawn, and why (no data, or the view failed)."""

    view: View
    reason: str
    error: bool = False


@dataclasses.dataclass
class Campaign:
    """What the report needs of one campaign directory."""

    directory: Path
    meta: dict[str, Any]
    frame: "pd.DataFrame"
    figures: list[RenderedFigure] = dataclasses.field(default_factory=list)
    skipped: list[Skipped] = dataclasses.field(default_factory=list)

    slug: str = ""  # unique among the report's campaigns: HTML id and figure file prefix

    @property
    def name(self) -> str:
        """The campaign id (directory name)."""
        return str(self.meta.get("campaign") or self.directory.name)

    @property
    def anchor(self) -> str:
        """An HTML id for the campaign's section."""
        return "c-" + self.slug


@dataclasses.dataclass
class Report:
    """The result of :func:`build_report`."""

    html_file: Path
    figure_files: list[Path]
    campaigns: list[Campaign]
    keylogs: list[Path]

    @property
    def view_errors(self) -> list[str]:
        """Views that raised an exception (as one line each)."""
        return [f"{c.name}: {s.view.name}: {s.reason}" for c in self.campaigns
                for s in c.skipped if s.error]


# ----------------------------------------------------------------------------- inputs

def find_campaigns(paths: Sequence[Path | str]) -> list[Path]:
    """Campaign directories named by ``paths``: a campaign directory (with campaign.json) or a
    results directory holding campaigns. Raises :class:`ReportError` for anything else."""
    if not paths:
        raise ReportError("no results directory given")
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise ReportError(f"{path}: no such directory")
        if not path.is_dir():
            raise ReportError(f"{path}: not a directory")
        if (path / "campaign.json").is_file():
            found.append(path)
            continue
        inner = sorted(d for d in path.iterdir() if (d / "campaign.json").is_file())
        if not inner:  # a predecessor (QIR 10G) tree: one section per experiment directory
            from .analysis.qir10g import find_qir10g_experiments

            inner = find_qir10g_experiments(path)
        if not inner:
            raise ReportError(f"{path}: not a results directory (no campaign.json in it or "
                              f"in its subdirectories, and no predecessor result.json)")
        found += inner
    unique: dict[Path, None] = dict.fromkeys(p.resolve() for p in found)
    return list(unique)


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from a file; ReportError if it is missing or not JSON."""
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ReportError(f"{path}: cannot read: {exc.strerror}") from None
    except ValueError as exc:
        raise ReportError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ReportError(f"{path}: not a JSON object")
    return data


def find_keylogs(directories: Iterable[Path]) -> list[Path]:
    """TLS key log files stored below the campaign directories (``keys.log`` per side)."""
    hits: list[Path] = []
    for directory in directories:
        for parent, dirs, files in os.walk(directory):
            dirs[:] = [d for d in dirs if d != ".cache"]  # load_results' Parquet cache
            hits += [Path(parent) / f for f in files if KEYLOG_NAME.search(f)]
    return sorted(hits)


def testbed_documents(campaign: Campaign) -> dict[str, dict[str, Any]]:
    """Per testbed, the document holding its ``hosts`` and ``implementations``: campaign.json
    itself, or ``testbed-<name>.json`` for campaigns over several testbeds."""
    files = campaign.meta.get("testbed_files")
    if not files:
        name = str((campaign.meta.get("testbed") or {}).get("name") or "testbed")
        return {name: campaign.meta}
    docs: dict[str, dict[str, Any]] = {}
    for name, file in sorted(files.items()):
        try:
            docs[str(name)] = read_json(campaign.directory / str(file))
        except ReportError as exc:
            docs[str(name)] = {"error": str(exc)}
    return docs


# ----------------------------------------------------------------------------- views

def _views_module() -> Any:
    from .analysis import views

    return views


def _no_data(data: Any, fig: Any) -> bool:
    if fig is None or data is None:
        return True
    if getattr(data, "empty", False):
        return True
    axes = getattr(fig, "axes", None)
    return axes is not None and not axes


def render_views(campaign: Campaign, figures_dir: Path,
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
        function: Callable[[Any], tuple[Any, Any]] | None = getattr(module, view.function, None)
        if function is None:
            campaign.skipped.append(Skipped(view, f"not available ({view.function} missing)"))
            continue
        reason = _not_applicable(view, campaign.frame)
        if reason is not None:
            campaign.skipped.append(Skipped(view, reason))
            continue
        predecessor = not (campaign.directory / "campaign.json").is_file()
        # predecessor trees have no run.json files to read paths from: their frame has it all
        arg: Any = campaign.frame if view.takes == "frame" or predecessor \
            else [campaign.directory]
        try:
            data, fig = function(arg)
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
        files = save_figure(fig, figures_dir, stem)
        campaign.figures.append(RenderedFigure(view, figure_svg(fig), data, files, stem))
        plt.close(fig)


def _not_applicable(view: View, frame: "pd.DataFrame") -> str | None:
    """Why a view says nothing about this campaign (too few testbeds or pairs), else None."""
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


def save_figure(fig: "Figure", directory: Path, stem: str) -> list[Path]:
    """Write ``<stem>.png`` and ``<stem>.svg``; returns both paths."""
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for suffix, extra in ((".png", {"dpi": 150}), (".svg", {})):
        path = directory / f"{stem}{suffix}"
        fig.savefig(path, bbox_inches="tight", **extra)  # type: ignore[arg-type]
        out.append(path)
    return out


# ----------------------------------------------------------------------------- tables

def summary_table(frame: "pd.DataFrame") -> "pd.DataFrame":
    """:func:`cell_stats` per pair, testbed (when several) and sweep axis value (one column
    per axis that varies, in the axis' own order: 1x, 2x, ..., 16x), else per variant."""
    from .analysis.stats import axis_order, cell_stats

    by = ["server", "client"]
    if "testbed" in frame.columns and frame["testbed"].nunique(dropna=True) > 1:
        by.append("testbed")
    axes = [c for c in frame.columns if c.startswith("axis_") and c != "axis_testbed"
            and frame[c].nunique(dropna=True) > 1]
    if axes:
        by += axes
    elif "variant" in frame.columns and frame["variant"].nunique(dropna=True) > 1:
        by.append("variant")
    table: pd.DataFrame = cell_stats(frame, by)
    if axes and not table.empty:
        rank = {c: {v: i for i, v in enumerate(axis_order(frame[c]))} for c in axes}
        table = table.sort_values(
            by, key=lambda col: col.map(rank[str(col.name)]) if col.name in rank else col,
            kind="stable", ignore_index=True)
    return table.rename(columns={c: c.removeprefix("axis_") for c in axes})


def failures_table(campaign: Campaign) -> "pd.DataFrame":
    """One row per attempt that did not succeed: who, when, status and reason."""
    frame = campaign.frame
    if frame.empty:
        return frame
    bad = frame[frame["status"].astype("string") != "ok"].copy()
    cols = [c for c in ("server", "client", "testbed", "variant", "repetition", "attempt",
                        "status", "reason") if c in bad.columns]
    if "testbed" in cols and bad["testbed"].nunique(dropna=True) <= 1:
        cols.remove("testbed")
    if "variant" in cols and not bad["variant"].notna().any():
        cols.remove("variant")
    out = bad[cols].copy()
    if "path" in bad.columns:
        out["record"] = [_relative(p, campaign.directory) for p in bad["path"]]
    return out.reset_index(drop=True)


def versions_table(campaign: Campaign) -> "pd.DataFrame":
    """Implementation versions per testbed, role and node (from the prepare step)."""
    import pandas as pd

    rows = []
    for testbed, doc in testbed_documents(campaign).items():
        for key, entry in sorted((doc.get("implementations") or {}).items()):
            role, _, name = str(key).partition(":")
            entry = entry if isinstance(entry, dict) else {}
            rows.append({"testbed": testbed, "implementation": name, "role": role,
                         "node": entry.get("node"), "version": entry.get("version"),
                         "declared": entry.get("declared_version"),
                         "source": str(entry.get("source_hash") or "")[:12] or None,
                         "setup error": entry.get("setup_error")})
    table = pd.DataFrame(rows)
    if not table.empty:
        if table["testbed"].nunique() <= 1:
            table = table.drop(columns="testbed")
        if not table["setup error"].notna().any():
            table = table.drop(columns="setup error")
    return table


def _relative(path: Any, base: Path) -> str:
    try:
        return str(Path(str(path)).resolve().relative_to(base.resolve()))
    except ValueError:
        return str(path)


# ----------------------------------------------------------------------------- HTML

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
ul.skipped { color: var(--muted); margin: 8px 0; }
ul.skipped li.error { color: #c0392b; }
details { margin: 6px 0; }
summary { cursor: pointer; color: var(--accent); }
pre { background: var(--band); padding: 10px; overflow-x: auto; font-size: 12px; }
"""


def esc(value: Any) -> str:
    """Escape a value for HTML text and attributes."""
    return html.escape("" if value is None else str(value), quote=True)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "x"


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
    if isinstance(value, bool) or type(value).__name__ == "bool_":
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


def hosts_section(campaign: Campaign) -> str:
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
    and the data it plots in a collapsed table."""
    data = base64.b64encode(fig.svg.encode()).decode()
    files = ", ".join(f"figures/{p.name}" for p in fig.files)
    wide = ' class="wide"' if svg_width_px(fig.svg) > WIDE_PX else ""
    return (f'<figure id="{esc(fig.stem)}"{wide}><img class="fig" alt="{esc(fig.view.title)}" '
            f'src="data:image/svg+xml;base64,{data}">'
            f"<figcaption><b>{esc(fig.view.title)}</b>{esc(fig.view.about)} "
            f'<span class="muted">({esc(files)})</span>'
            f"<details><summary>data ({len(fig.data)} row(s))</summary>"
            f"{html_table(fig.data, max_rows=MAX_TABLE_ROWS)}</details>"
            "</figcaption></figure>")


def svg_width_px(svg: str) -> float:
    """The width of a matplotlib SVG in CSS pixels (its ``width="..pt"``), 0 if unknown."""
    match = re.search(r'<svg[^>]*\swidth="([\d.]+)(pt|px)?"', svg)
    if match is None:
        return 0.0
    return float(match.group(1)) * (4 / 3 if match.group(2) in (None, "pt") else 1)


def bookkeeping(campaign: Campaign) -> dict[str, Any]:
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
        "order / seed": f"{plan.get('order', '-')} / {plan.get('seed', '-')}" if plan else None,
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
    from .units import format_iec

    return f"{format_iec(value)} ({value} bytes)"


def campaign_section(campaign: Campaign) -> str:
    """The whole section of one campaign."""
    parts = [f'<section id="{esc(campaign.anchor)}"><h2>{esc(campaign.name)}</h2>',
             facts_list({k: v for k, v in bookkeeping(campaign).items() if v is not None})]
    parts.append("<h3>Summary</h3>")
    if campaign.frame.empty:
        parts.append('<p class="muted">No attempts recorded.</p>')
    else:
        parts.append('<p class="muted">Goodput in Mbit/s of the successful attempts per cell; '
                     "n = successful attempts of all attempts, failures = attempts that did "
                     "not succeed (failed, timeout, unsupported: counted, never averaged in); "
                     "ci_low/ci_high = bootstrap 95 % interval of the median; "
                     "outliers = Tukey outliers (counted, not dropped).</p>")
        parts.append(html_table(summary_table(campaign.frame)))
    parts.append("<h3>Views</h3>")
    if campaign.figures:
        parts.append('<div class="grid">' + "".join(figure_html(f) for f in campaign.figures)
                     + "</div>")
    else:
        parts.append('<p class="muted">No view has data for this campaign.</p>')
    if campaign.skipped:
        items = "".join(
            f'<li{" class=error" if s.error else ""}>{esc(s.view.title)}: '
            f"{'failed: ' if s.error else 'skipped, '}{esc(s.reason)}</li>"
            for s in campaign.skipped)
        parts.append(f'<ul class="skipped">{items}</ul>')
    failures = failures_table(campaign)
    parts.append(f"<h3>Failures ({len(failures)})</h3>")
    parts.append(html_table(failures) if len(failures) else
                 '<p class="muted">Every attempt succeeded.</p>')
    parts.append("<h3>Implementations</h3>" + html_table(versions_table(campaign)))
    parts.append("<h3>Hosts</h3>" + hosts_section(campaign))
    config = json.dumps(campaign.meta.get("config") or {}, indent=2, sort_keys=False)
    parts.append("<h3>Configuration</h3><details><summary>resolved campaign configuration "
                 f"(campaign.json)</summary><pre>{esc(config)}</pre></details></section>")
    return "".join(parts)


def page(campaigns: Sequence[Campaign], keylogs: Sequence[Path], roots: Sequence[Path]) -> str:
    """The complete HTML document."""
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    title = "QIR report: " + ", ".join(c.name for c in campaigns)
    toc = "".join(f'<li><a href="#{esc(c.anchor)}">{esc(c.name)}</a> – '
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
        + f"<nav><b>Campaigns</b><ul>{toc}</ul></nav>"
        + "".join(campaign_section(c) for c in campaigns)
        + "</body></html>\n")


# ----------------------------------------------------------------------------- entry point

def load_campaign(directory: Path) -> Campaign:
    """Read one campaign directory (its campaign.json and all its attempts)."""
    from .analysis import load_results

    if not (directory / "campaign.json").is_file():
        return _load_qir10g_experiment(directory)
    meta = read_json(directory / "campaign.json")
    return Campaign(directory, meta, load_results(directory), slug=_slug(directory.name))


def _load_qir10g_experiment(directory: Path) -> Campaign:
    """A predecessor experiment directory (result.json + repetition trees) as a section."""
    from .analysis.qir10g import load_qir10g

    frame = load_qir10g(directory)
    result = read_json(directory / "result.json")
    name = "/".join(directory.parts[-3:])
    meta: dict[str, Any] = {
        "campaign": name, "status": "predecessor (QIR 10G) result tree",
        "config": {"args": result.get("args"), "servers": result.get("servers"),
                   "clients": result.get("clients")},
        "hosts": {}, "implementations": {},
    }
    return Campaign(directory, meta, frame, slug=_slug(name))


def build_report(paths: Sequence[Path | str], out_dir: Path | str,
                 views: Sequence[View] = VIEWS) -> Report:
    """Write ``<out_dir>/report.html`` and ``<out_dir>/figures/*.{png,svg}`` for the campaigns
    below ``paths``. Raises :class:`ReportError` for unusable input."""
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
        slug, n = _slug(campaign.name), 1
        while slug in used:
            n += 1
            slug = f"{_slug(campaign.name)}-{n}"
        used.add(slug)
        campaign.slug = slug
    for campaign in campaigns:
        render_views(campaign, figures_dir, views)
    keylogs = find_keylogs(directories)
    html_file = out / "report.html"
    html_file.write_text(page(campaigns, keylogs, directories), encoding="utf-8")
    files = [p for c in campaigns for f in c.figures for p in f.files]
    return Report(html_file, files, campaigns, keylogs)
