"""Conformance of QUIC congestion controls against the kernel's (paper 000, docs/conformance.md):
the performance envelopes of a tested flow and its kernel TCP reference with their convex
hulls (000 Figs. 1 and 7), and the heatmap of Conformance per implementation/congestion
control and bottleneck buffer with Conformance-T and the translation vector (000 Fig. 6).

Each view is a ``*_frame`` function (pure: the data it plots) and a ``*_figure`` function
(a matplotlib ``Figure``, no pyplot state); ``conformance_envelopes``,
``conformance_envelope_grid`` and ``conformance_heatmap`` return both.
``conformance_cells`` is the report's table. Input: campaign or results directories, or
the frames already loaded (a
:func:`~interop_runner.analysis.theories.flow_conformance.flow_conformance` table for the
heatmap, ``(load_flows(...), load_flow_results(...))`` for the envelopes). A campaign without
a tested flow gives empty frames and the "no data" figure; a cell whose figures are <NA>
shows NA, its reason in ``conformance_missing``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from pathlib import Path
from typing import Any, Sequence, Union

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Polygon

from interop_runner.analysis.frames.flows import load_flow_results, load_flows, path_conditions
from interop_runner.analysis.theories.conformance import Fitted, fit_conformance
from interop_runner.analysis.theories.envelope import hull_polygons
from interop_runner.analysis.theories.flow_conformance import (
    FlowClouds,
    conformance_table,
    flow_clouds,
)
from interop_runner.analysis.theories.stats import axis_number
from interop_runner.analysis.views._common import (
    PathLike,
    Source,
    as_paths,
    empty,
    figure,
    finite,
    no_data,
)
from interop_runner.storage.layout import content_key

__all__ = ["CELLS_COLUMNS", "ENVELOPE_COLUMNS", "HEATMAP_COLUMNS", "conformance_cells",
           "conformance_envelope_grid", "conformance_envelopes",
           "conformance_envelopes_figure", "conformance_envelopes_frame",
           "conformance_heatmap", "conformance_heatmap_figure", "conformance_heatmap_frame"]

#: A campaign's frames: paths, or (load_flows, load_flow_results) of them.
Frames = Union[Source, tuple[pd.DataFrame, pd.DataFrame]]

HEATMAP_COLUMNS = ["campaign", "flow_set", "variant", "row", "label", "server",
                   "congestion_control", "reference_label", "rtt", "buffer", "conformance",
                   "conformance_t", "delta_throughput", "delta_delay", "conformance_t_spread",
                   "k_test", "k_reference", "trials_test", "trials_reference",
                   "reference_runs", "reference_kernel_mismatch", "conformance_missing",
                   "conformance_same_run", "conformance_t_same_run",
                   "delta_throughput_same_run", "delta_delay_same_run",
                   "conformance_t_spread_same_run", "k_test_same_run",
                   "k_reference_same_run", "trials_test_same_run",
                   "trials_reference_same_run", "conformance_same_run_missing",
                   "conformance_floor", "conformance_t_floor"]
#: The report's table: the heatmap's cells by the names of paper 000.
CELLS_COLUMNS = {"label": "label", "congestion_control": "CC", "buffer": "buffer",
                 "rtt": "RTT", "conformance": "Conformance", "conformance_t": "Conformance-T",
                 "conformance_t_spread": "C-T seed spread",
                 "delta_throughput": "Δ-throughput [Mbit/s]", "delta_delay": "Δ-delay [ms]",
                 "k": "k (test/ref)", "trials": "trials (test/ref)",
                 "conformance_missing": "missing: why",
                 "conformance_same_run": "Conformance (same run)",
                 "conformance_t_same_run": "Conformance-T (same run)",
                 "delta_throughput_same_run": "Δ-throughput (same run) [Mbit/s]",
                 "delta_delay_same_run": "Δ-delay (same run) [ms]",
                 "conformance_floor": "noise floor C"}
ENVELOPE_COLUMNS = ["label", "reference_label", "compared_with", "part", "side", "trial",
                    "hull", "vertex", "delay_ms", "throughput_mbps", "kept", "conformance",
                    "conformance_t", "delta_throughput", "delta_delay", "k_test",
                    "k_reference"]
ONE = "-"  # the buffer or RTT of a campaign that does not sweep it
HEATMAP_TITLE = "Conformance against the kernel"
SAME_RUN = "_same_run"  # the suffix of the figures against the kernel flow of the same run
# what the drawn figures were compared with (by the suffix of their columns)
COMPARED_WITH = {"": "kernel-vs-kernel runs", SAME_RUN: "the kernel flow of the same run"}
ENVELOPE_TITLE = "Performance envelopes"
GRID_LIMIT = 9  # panels of the report's envelope grid
TEST_COLOUR, REFERENCE_COLOUR = "C3", "C0"


# ------------------------------------------------------------------------- loading, once

def _fingerprint(paths: Sequence[PathLike]) -> str:
    """What the loaded frames depend on: every campaign.json and run.json below ``paths``
    by its content (the one cache rule, storage/layout.py: an attempt added or rewritten
    changes it, a file only touched does not)."""
    digest = hashlib.sha256()
    for path in paths:
        root = Path(path).resolve()
        base = root.parent if root.is_file() else root
        files = [root] if root.is_file() else sorted(
            [*root.rglob("campaign.json"), *root.rglob("run.json")])
        key = content_key(base, [str(f.relative_to(base)) for f in files])
        digest.update(json.dumps([str(root), key], sort_keys=True).encode())
    return digest.hexdigest()


@functools.lru_cache(maxsize=2)
def _loaded_by(fingerprint: str, paths: tuple[str, ...]
               ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(flows, flow results, conformance table) of ``paths``: kept for the next view of the
    same campaigns (the report draws three from one table, each costs seconds)."""
    flows, results = load_flows(*paths), load_flow_results(*paths)
    return flows, results, conformance_table(flows, results)


def _loaded(paths: PathLike | Sequence[PathLike]
            ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    listed = [str(p) for p in as_paths(paths)]
    flows, results, table = _loaded_by(_fingerprint(listed), tuple(listed))
    return flows, results, table.copy()


def _table(source: Source) -> pd.DataFrame:
    """A :func:`~interop_runner.analysis.theories.flow_conformance.flow_conformance` table: given,
    or of campaign paths."""
    return source.copy() if isinstance(source, pd.DataFrame) else _loaded(source)[2]


def _frames(source: Frames) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(flows, flow results): given, or of campaign paths."""
    if isinstance(source, tuple):
        flows, results = source
        if isinstance(flows, pd.DataFrame) and isinstance(results, pd.DataFrame):
            return flows, results
    if isinstance(source, pd.DataFrame):  # a frame of another kind: nothing to draw
        return empty(ENVELOPE_COLUMNS), empty(HEATMAP_COLUMNS)
    flows, results, _ = _loaded(source)  # type: ignore[arg-type]
    return flows, results


# ----------------------------------------------------------------------------- heatmap

def _suffix(table: pd.DataFrame) -> str:
    """Which figures the views draw: those against the kernel-vs-kernel runs (paper 000's
    reference) when any cell has them, else (a campaign that ran none) the same-run ones,
    as the titles say."""
    has = "conformance" in table.columns and table["conformance"].notna().any()
    return "" if has or f"conformance{SAME_RUN}" not in table.columns else SAME_RUN


def _axis_values(table: pd.DataFrame, column: str) -> "pd.Series[Any]":
    """A sweep axis's values as text, :data:`ONE` where the campaign does not sweep it."""
    if column not in table.columns:
        return pd.Series(ONE, index=table.index, dtype=object)
    return table[column].astype(object).where(table[column].notna(), ONE).astype(str)


def _row_names(table: pd.DataFrame) -> "pd.Series[Any]":
    """The heatmap's row per tested flow: its label, with the other swept path conditions
    (not buffer nor RTT) and the campaign when there are several."""
    others = [c for c in path_conditions(table)
              if c.startswith("axis_") and c not in ("axis_buffer", "axis_rtt")]
    names = table["label"].astype(str)
    for column in others:
        names = names + f", {column.removeprefix('axis_')}=" + table[column].astype(str)
    if table["campaign"].nunique() > 1:
        names = names + " (" + table["campaign"].astype(str) + ")"
    return names


def conformance_heatmap_frame(source: Source) -> pd.DataFrame:
    """One row per tested flow and cell
    (:func:`~interop_runner.analysis.theories.flow_conformance.flow_conformance` of
    campaign paths, or that table): ``row`` (the heatmap's row: the label, with other
    swept conditions), ``rtt`` and ``buffer`` (:data:`ONE` when not swept), Conformance,
    Conformance-T, the translation vector (``delta_*``: Mbit/s, ms, test minus the
    kernel's), k, trials and ``conformance_missing``; ordered by RTT, buffer (numerically),
    congestion control and label. Empty without a tested flow."""
    table = _table(source)
    if table.empty or not table["label"].notna().any():
        return empty(HEATMAP_COLUMNS)
    table = table[table["label"].notna()].copy()
    table["rtt"], table["buffer"] = _axis_values(table, "axis_rtt"), _axis_values(
        table, "axis_buffer")
    table["row"] = _row_names(table)
    order = table.assign(_rtt=table["rtt"].map(axis_number),
                         _buffer=table["buffer"].map(axis_number))
    order = order.sort_values(["_rtt", "rtt", "_buffer", "buffer", "congestion_control",
                               "row"], kind="stable", na_position="last")
    return order.reindex(columns=HEATMAP_COLUMNS).reset_index(drop=True)


def _ordered(values: "pd.Series[Any]") -> list[str]:
    """Distinct values, numerically ordered where they read as numbers (ms, BDP), the
    others after them by name."""
    def key(value: str) -> tuple[bool, float, str]:
        number = axis_number(value)
        return math.isnan(number), 0.0 if math.isnan(number) else number, value

    return sorted(dict.fromkeys(values.astype(str)), key=key)


def conformance_heatmap_figure(table: pd.DataFrame) -> Figure:
    """One panel per RTT: rows the tested flows (grouped by congestion control), columns
    the buffers; the colour is Conformance (red 0 .. green 1), each cell reads
    ``C / C-T`` and ``(Δ-throughput, Δ-delay)``; grey "NA" where the figures are
    missing (the reason is in the frame)."""
    if table.empty:
        return no_data("a QUIC flow against a kernel TCP flow of its congestion control",
                       HEATMAP_TITLE)
    rtts, buffers = _ordered(table["rtt"]), _ordered(table["buffer"])
    rows = list(dict.fromkeys(table.sort_values(["congestion_control", "row"],
                                                kind="stable")["row"]))
    suffix = _suffix(table)
    fig, axes = figure(1, len(rtts), size=(max(7.0, 1.9 * len(buffers) * len(rtts) + 3.2),
                                            0.42 * len(rows) + 1.8), sharey=True)
    colours = ListedColormap(_RDYLGN).with_extremes(bad="#d9d9d9")
    for ax, rtt in zip(axes, rtts):
        cells = table[table["rtt"] == rtt].set_index(["row", "buffer"])
        values = np.array([[_value(cells, r, b, "conformance" + suffix) for b in buffers]
                           for r in rows], dtype=float)
        image = ax.imshow(np.ma.masked_invalid(values), cmap=colours, vmin=0, vmax=1,
                          aspect="auto")
        for (i, j), _ in np.ndenumerate(values):
            _heat_text(ax, cells, rows[i], buffers[j], (i, j), suffix)
        ax.set_xticks(range(len(buffers)), buffers)
        ax.set_yticks(range(len(rows)), rows)
        ax.set_xlabel("bottleneck buffer")
        ax.set_title(f"RTT {rtt}" if rtt != ONE else "", fontsize=10)
    fig.colorbar(image, ax=axes, label="Conformance", shrink=0.8)
    fig.suptitle(f"{HEATMAP_TITLE}: against {COMPARED_WITH[suffix]}\nper cell: C / C-T, "
                 "(Δ-throughput Mbit/s, Δ-delay ms)", fontsize=10)
    return fig


# matplotlib's RdYlGn, sampled: red for no conformance, green for full
_RDYLGN = ["#a50026", "#d73027", "#f46d43", "#fdae61", "#fee08b", "#ffffbf", "#d9ef8b",
           "#a6d96a", "#66bd63", "#1a9850", "#006837"]


def _value(cells: pd.DataFrame, row: str, buffer: str, column: str) -> float:
    """A cell's figure, NaN when the cell is absent or has none."""
    if (row, buffer) not in cells.index:
        return math.nan
    value: Any = cells.loc[(row, buffer), column]
    value = value.iloc[0] if isinstance(value, pd.Series) else value
    return float(value) if finite(value) else math.nan


def _heat_text(ax: Axes, cells: pd.DataFrame, row: str, buffer: str, at: tuple[int, int],
               suffix: str) -> None:
    """``0.12 / 0.84`` over ``(+3.7, -0.02)`` in a cell (the figures of ``suffix``), ``NA``
    without figures, nothing where the campaign has no such cell."""
    if (row, buffer) not in cells.index:
        return
    i, j = at
    c, ct, tput, delay = (_value(cells, row, buffer, k + suffix) for k in (
        "conformance", "conformance_t", "delta_throughput", "delta_delay"))
    if math.isnan(c):
        ax.text(j, i, "NA", ha="center", va="center", fontsize=8, color="#444444")
        return
    dark = c < 0.2 or c > 0.85
    ax.text(j, i, f"{c:.2f} / {ct:.2f}\n({_signed(tput, 1)}, {_signed(delay, 2)})",
            ha="center", va="center", fontsize=7, color="white" if dark else "black")


def _signed(value: float, digits: int) -> str:
    """``+3.7``, ``-0.12``; ``0`` for what rounds to zero (no ``-0.0``)."""
    rounded = round(value, digits)
    return f"{rounded:+.{digits}f}" if rounded else "0"


def conformance_heatmap(source: Source) -> tuple[pd.DataFrame, Figure]:
    """:func:`conformance_heatmap_frame` and :func:`conformance_heatmap_figure` (the
    report's view, paper 000 Fig. 6)."""
    table = conformance_heatmap_frame(source)
    return table, conformance_heatmap_figure(table)


def conformance_cells(source: Source) -> pd.DataFrame:
    """The heatmap's cells as the report's table (:data:`CELLS_COLUMNS`): label, CC,
    buffer, RTT, Conformance, Conformance-T and its seed spread, Δ-throughput, Δ-delay, k
    and trials (test / reference, of the figures the heatmap draws: :func:`_suffix`), why
    figures are missing, the same-run figures and the noise floor."""
    table = conformance_heatmap_frame(source)
    if table.empty:
        return empty(CELLS_COLUMNS.values())
    suffix = _suffix(table)
    table = table.assign(k=pd.array(_pairs(table, "k", suffix), dtype="string"),
                         trials=pd.array(_pairs(table, "trials", suffix), dtype="string"))
    return table.reindex(columns=list(CELLS_COLUMNS)).rename(columns=CELLS_COLUMNS)


def _pairs(table: pd.DataFrame, stem: str, suffix: str = "") -> list[str | None]:
    """``test/reference`` of the ``<stem>_test<suffix>`` and ``<stem>_reference<suffix>``
    columns."""
    return [f"{t}/{r}" if finite(t) else None for t, r in
            zip(table[f"{stem}_test{suffix}"], table[f"{stem}_reference{suffix}"])]


# --------------------------------------------------------------------------- envelopes

def _cell_of(results: pd.DataFrame, label: str | None, cell: dict[str, Any]
             ) -> tuple[str | None, dict[str, Any]]:
    """The label and cell to draw: as given, else the first tested flow (QUIC, or the
    kernel against itself) of the first cell matching ``cell``."""
    if label is not None:
        return label, cell
    quic = results[(results["kind"].astype("string") == "quic").fillna(False).to_numpy()]
    rows = quic if not quic.empty else results
    for column, value in cell.items():
        rows = rows[(rows[column].astype("string") == str(value)).fillna(False).to_numpy()]
    labels = rows.sort_values(["campaign", "flow_set", "variant"], kind="stable")["label"]
    return (str(labels.iloc[0]) if len(labels) else None), cell


def conformance_envelopes_frame(source: Frames, label: str | None = None,
                                translated: bool = True, **cell: Any) -> pd.DataFrame:
    """The clouds and envelopes of one tested flow ``label`` and its kernel reference in
    one cell (``cell``: values of ``campaign``, ``flow_set``, ``variant``,
    ``axis_<name>`` that select it; by default the first cell with that flow; no label: the
    first QUIC flow). The reference is the kernel-vs-kernel runs where the cell has them,
    else the kernel flow of the same attempts (``compared_with`` says which). Long:
    ``part`` ``point`` (``kept``: inside its own PE), ``hull`` (one row per vertex, in
    order, of each trial's hulls) or ``translated hull`` (the test's hulls moved by the
    Conformance-T translation, -Δ); ``side`` ``test`` or ``reference``; delay ms and
    throughput Mbit/s; the figures of the cell repeated on every row. Empty when there are
    no clouds (``attrs["missing"]``: why)."""
    flows, results = _frames(source)
    label, cell = _cell_of(results, label, cell) if not results.empty else (label, cell)
    if label is None:
        return _no_clouds("no tested flow in these results")
    clouds = flow_clouds(flows, results, label, **cell)
    test, reference, suffix = _compared(clouds)
    if not test:
        return _no_clouds(f"{label}: {clouds.missing}")
    # the seed's figures only: a spread over seeds is the table's, not the drawing's
    fitted = fit_conformance(test, reference, spread_seeds=())
    parts = [_points(test, fitted, "test"), _points(reference, fitted, "reference"),
             _hulls(fitted, "test", "hull"), _hulls(fitted, "reference", "hull")]
    if translated and finite(fitted.result.conformance_t):
        parts.append(_hulls(fitted, "test", "translated hull"))
    result = fitted.result
    frame = pd.concat(parts, ignore_index=True).assign(
        label=label, reference_label=clouds.reference_label,
        compared_with=COMPARED_WITH[suffix], conformance=result.conformance,
        conformance_t=result.conformance_t,
        delta_throughput=result.delta_throughput, delta_delay=result.delta_delay,
        k_test=result.k_test, k_reference=result.k_reference)
    return frame.reindex(columns=ENVELOPE_COLUMNS).assign(**{
        k: v for k, v in cell.items()})


def _compared(clouds: FlowClouds) -> tuple[list[Any], list[Any], str]:
    """The clouds a view draws: against the kernel-vs-kernel runs where there are such, else
    against the kernel flow of the same attempts (none: both empty), and the suffix of their
    figures' columns."""
    if not clouds.kernel_missing:
        return clouds.kernel_test, clouds.kernel_reference, ""
    return clouds.test, clouds.reference, SAME_RUN


def _no_clouds(reason: str) -> pd.DataFrame:
    frame = empty(ENVELOPE_COLUMNS)
    frame.attrs["missing"] = reason
    return frame


def _points(trials: list[Any], fitted: Fitted, side: str) -> pd.DataFrame:
    """A cloud's points per trial, ``kept`` when inside its own PE."""
    envelope = (fitted.test if side == "test" else fitted.reference).envelope
    parts = []
    for i, trial in enumerate(trials, start=1):
        kept = envelope.contains(np.asarray(trial, dtype=float) / fitted.units)
        parts.append(pd.DataFrame({"part": "point", "side": side, "trial": i,
                                   "delay_ms": trial[:, 0], "throughput_mbps": trial[:, 1],
                                   "kept": kept}))
    return pd.concat(parts, ignore_index=True)


def _hulls(fitted: Fitted, side: str, part: str) -> pd.DataFrame:
    """The hulls of a PE in data units, one row per vertex; ``translated hull``: moved by
    the Conformance-T translation (towards the reference: minus the Δ)."""
    envelope = (fitted.test if side == "test" else fitted.reference).envelope
    shift = np.zeros(2)
    if part == "translated hull":
        shift = -np.array([fitted.result.delta_delay, fitted.result.delta_throughput])
    rows = [{"part": part, "side": side, "trial": t, "hull": h, "vertex": v,
             "delay_ms": x + shift[0], "throughput_mbps": y + shift[1]}
            for t, hulls in enumerate(hull_polygons(envelope, tuple(fitted.units)), start=1)
            for h, corners in enumerate(hulls, start=1)
            for v, (x, y) in enumerate(corners)]
    return pd.DataFrame(rows)


def _draw_envelopes(ax: Axes, frame: pd.DataFrame, legend: bool = True) -> None:
    """Points (outliers of their own PE as crosses), each trial's hulls filled lightly
    (the PE is where every trial's hulls overlap) and the translated test hulls dashed."""
    styles = {"test": (TEST_COLOUR, frame["label"].iloc[0]),
              "reference": (REFERENCE_COLOUR, f"{frame['reference_label'].iloc[0]} "
                                              "(kernel)")}
    for side, (colour, name) in styles.items():
        points = frame[(frame["part"] == "point") & (frame["side"] == side)]
        kept = points["kept"].astype(bool)
        # rasterized: thousands of points stay one image in the report's SVG
        ax.scatter(points.loc[kept, "delay_ms"], points.loc[kept, "throughput_mbps"], s=6,
                   color=colour, alpha=0.55, label=name, rasterized=True)
        ax.scatter(points.loc[~kept, "delay_ms"], points.loc[~kept, "throughput_mbps"],
                   s=10, marker="x", color=colour, alpha=0.4, linewidths=0.7,
                   rasterized=True)
        _polygons(ax, frame[(frame["part"] == "hull") & (frame["side"] == side)], colour,
                  fill=True)
    translated = frame[frame["part"] == "translated hull"]
    if not translated.empty:
        _polygons(ax, translated, TEST_COLOUR, fill=False)
        ax.plot([], [], color=TEST_COLOUR, linestyle="--", label="test moved by -Δ")
    ax.set_xlabel("queueing delay [ms]")
    ax.set_ylabel("throughput [Mbit/s]")
    ax.grid(alpha=0.3)
    if legend:
        ax.legend(fontsize=7, loc="best")


def _polygons(ax: Axes, hulls: pd.DataFrame, colour: str, fill: bool) -> None:
    """One patch per hull (a segment hull as a line)."""
    for _, corners in hulls.groupby(["trial", "hull"], sort=True):
        xy = corners.sort_values("vertex")[["delay_ms", "throughput_mbps"]].to_numpy(float)
        if fill:
            ax.add_patch(Polygon(xy, closed=True, facecolor=colour, alpha=0.12,
                                 edgecolor=colour, linewidth=1.0))
        else:
            ax.add_patch(Polygon(xy, closed=True, fill=False, edgecolor=colour,
                                 linestyle="--", linewidth=1.2))


def _figures_text(row: Any, suffix: str = "", same_run: bool | None = None) -> str:
    """``C = 0.12, C-T = 0.84, Δ = (+3.7 Mbit/s, -0.02 ms)`` (the figures of ``suffix``),
    ``(same run)`` after them when they are (by default: when ``suffix`` is)."""
    if not finite(row["conformance" + suffix]):
        return "C = NA"
    figure_of = {k: float(row[k + suffix]) for k in ("conformance", "conformance_t",
                                                     "delta_throughput", "delta_delay")}
    return (f"C = {figure_of['conformance']:.2f}, C-T = {figure_of['conformance_t']:.2f}, "
            f"Δ = ({_signed(figure_of['delta_throughput'], 1)} Mbit/s, "
            f"{_signed(figure_of['delta_delay'], 2)} ms)"
            + (" (same run)" if (bool(suffix) if same_run is None else same_run) else ""))


def conformance_envelopes_figure(frame: pd.DataFrame) -> Figure:
    """The two clouds (delay on x, throughput on y) with their envelopes' hulls and the
    translated test envelope dashed; Conformance, Conformance-T and Δ in the title."""
    if frame.empty:
        reason = frame.attrs.get("missing", "a tested flow and its kernel reference")
        return no_data(str(reason), ENVELOPE_TITLE)
    fig, (ax,) = figure(size=(6.4, 4.6))
    _draw_envelopes(ax, frame)
    first = frame.iloc[0]
    kernel = first["compared_with"] == COMPARED_WITH[""]
    against = f"kernel-vs-kernel {first['reference_label']}" if kernel else \
        first["reference_label"]
    ax.set_title(f"{ENVELOPE_TITLE}: {first['label']} against {against}\n"
                 f"{_figures_text(first, same_run=not kernel)}",
                 fontsize=10)
    return fig


def conformance_envelopes(source: Frames, label: str | None = None,
                          translated: bool = True, **cell: Any
                          ) -> tuple[pd.DataFrame, Figure]:
    """:func:`conformance_envelopes_frame` and :func:`conformance_envelopes_figure` (paper
    000 Figs. 1 and 7)."""
    frame = conformance_envelopes_frame(source, label, translated, **cell)
    return frame, conformance_envelopes_figure(frame)


# --------------------------------------------------------------- the report's selection

def _selection(table: pd.DataFrame, limit: int) -> pd.DataFrame:
    """The cells the report draws: the kernel against itself (the noise floor) first, then
    the least conformant (by the figures :func:`_suffix` draws); cells without figures left
    out."""
    suffix = _suffix(table)
    rows = table[table["conformance" + suffix].notna()]
    kernel = rows[rows["server"].isna()].head(1)
    others = rows.drop(kernel.index).sort_values(
        ["conformance" + suffix, "conformance_t" + suffix], kind="stable")
    return pd.concat([kernel, others]).head(limit).reset_index(drop=True)


def _cell_filter(row: Any) -> dict[str, Any]:
    """The columns that select a heatmap row's cell in the flow results."""
    return {"campaign": row["campaign"], "flow_set": row["flow_set"],
            "variant": row["variant"]}


def _panel_cells(chosen: pd.DataFrame) -> list[str]:
    """What tells the grid's panels apart besides their flows, per selected cell: the other
    swept conditions of its heatmap row (the build of an A/B campaign, ``build=picoquic@pr``;
    the campaign when several), its buffer and RTT; the variant where two panels would read
    the same."""
    wheres = []
    for _, row in chosen.iterrows():
        parts = [str(row["row"]).removeprefix(str(row["label"])).lstrip(", ")]
        parts += [f"{k} {row[k]}" for k in ("buffer", "rtt") if row[k] != ONE]
        wheres.append(", ".join(p for p in parts if p))
    names = [f"{label}|{where}" for label, where in zip(chosen["label"], wheres)]
    return [f"{where}, {variant}".lstrip(", ") if names.count(name) > 1 and pd.notna(variant)
            else where for name, where, variant in zip(names, wheres, chosen["variant"])]


def conformance_envelope_grid(source: Frames, limit: int = GRID_LIMIT
                              ) -> tuple[pd.DataFrame, Figure]:
    """The envelopes of up to ``limit`` cells in one figure (:func:`_selection`: the
    kernel against itself, then the least conformant), one panel each; the frame has the
    selected cells (:data:`HEATMAP_COLUMNS`)."""
    flows, results = _frames(source)
    if isinstance(source, tuple):
        source = conformance_table(flows, results) if not results.empty else pd.DataFrame()
    table = conformance_heatmap_frame(source)
    chosen = _selection(table, limit) if not table.empty else table
    if chosen.empty:
        return chosen, no_data("a tested flow with conformance figures", ENVELOPE_TITLE)
    columns = min(3, len(chosen))
    fig, axes = figure(math.ceil(len(chosen) / columns), columns,
                       size=(4.4 * columns, 3.6 * math.ceil(len(chosen) / columns)))
    for ax, (_, row), where in zip(axes, chosen.iterrows(), _panel_cells(chosen)):
        frame = conformance_envelopes_frame((flows, results), str(row["label"]),
                                            **_cell_filter(row))
        if not frame.empty:
            _draw_envelopes(ax, frame, legend=False)
        ax.set_title(f"{row['label']} vs {row['reference_label']}"
                     f"{' (' + where + ')' if where else ''}\n"
                     f"{_figures_text(row, _suffix(chosen))}",
                     fontsize=8)
    for ax in axes[len(chosen):]:
        ax.set_axis_off()
    fig.suptitle(f"{ENVELOPE_TITLE}: red the tested flow, blue the kernel's, dashed the "
                 "test moved by -Δ (Conformance-T)", fontsize=10)
    return chosen, fig
