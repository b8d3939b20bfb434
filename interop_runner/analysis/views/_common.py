"""Shared pieces of the views: figures without pyplot, the "no data" figure, finding a sweep
axis column, campaign metadata next to the attempts, grouped bars with intervals, a frame or
campaign paths as input."""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path
from typing import Any, Iterable, Sequence, Union

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from interop_runner.analysis.theories.stats import STAT_COLUMNS, ok_mask
from interop_runner.errors import StoreError
from interop_runner.storage.campaign_record import read_campaign

PAIR = ["server", "client"]
PathLike = Union[str, Path]
Source = Union[pd.DataFrame, PathLike, Sequence[PathLike]]  # a frame, or campaign paths


def as_paths(source: PathLike | Sequence[PathLike]) -> list[PathLike]:
    """One path or several as a list."""
    return [source] if isinstance(source, (str, Path)) else list(source)


def figure(nrows: int = 1, ncols: int = 1, *, size: tuple[float, float] = (7.0, 4.0),
           **kwargs: Any) -> tuple[Figure, list[Axes]]:
    """A Figure (no pyplot state, safe under the Agg backend) with its axes, flattened."""
    fig = Figure(figsize=size, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, **kwargs)
    return fig, [ax for row in axes for ax in row]


def no_data_axes(ax: Axes, what: str) -> None:
    """Write "no data for <what>" into an axes instead of a plot."""
    ax.text(0.5, 0.5, f"no data for {what}", ha="center", va="center",
            transform=ax.transAxes, fontsize=11, color="#555555")
    ax.set_xticks([])
    ax.set_yticks([])


def no_data(what: str, title: str) -> Figure:
    """A figure that says which data is missing (the view's frame is then empty)."""
    fig, (ax,) = figure(size=(6.0, 3.0))
    no_data_axes(ax, what)
    ax.set_title(title)
    return fig


def empty(columns: Iterable[str]) -> pd.DataFrame:
    """The empty frame a view returns when its data is missing."""
    return pd.DataFrame(columns=list(columns))


def has_values(frame: pd.DataFrame, column: str) -> bool:
    """The column exists and holds at least one value."""
    return column in frame.columns and bool(frame[column].notna().any())


def pair_label(server: Any, client: Any) -> str:
    """``quiche`` for a pair of one implementation, else ``server/client``."""
    return str(server) if server == client else f"{server}/{client}"


def stack_of(server: Any) -> str:
    """TCP/TLS for the baseline (``tcp-tls``; ``tls1.3`` in the predecessor's trees), else
    QUIC."""
    return "TCP/TLS" if str(server).startswith(("tcp", "tls")) else "QUIC"


@functools.lru_cache(maxsize=256)
def _campaign_meta(directory: str) -> dict[str, Any]:
    try:
        meta: dict[str, Any] = read_campaign(Path(directory) / "campaign.json")
        return meta
    except (OSError, ValueError, StoreError):
        return {}


def campaign_dir(attempt: str | Path) -> Path | None:
    """The campaign directory above an attempt directory (the one holding campaign.json)."""
    path = Path(attempt)
    for parent in (path, *path.parents[:8]):
        if (parent / "campaign.json").is_file():
            return parent
    return None


def campaign_metas(frame: pd.DataFrame) -> dict[Path, dict[str, Any]]:
    """campaign.json of every campaign the frame's attempts (``path`` column) come from."""
    if "path" not in frame.columns:
        return {}
    out: dict[Path, dict[str, Any]] = {}
    seen: set[Path] = set()
    for path in frame["path"].dropna().unique():
        parent = Path(str(path)).parent.parent  # attempt-n -> repetition: skip the stat calls
        if parent in seen:
            continue
        seen.add(parent)
        directory = campaign_dir(str(path))
        if directory is not None and directory not in out:
            out[directory] = _campaign_meta(str(directory))
    return out


def axis_column(frame: pd.DataFrame, paths: Sequence[str] = (), labels: Sequence[str] = (),
                explicit: str | None = None) -> str | None:
    """The ``axis_<label>`` column of a sweep axis.

    ``explicit`` (a column, a label or a config path) wins. Else the axes in the campaigns'
    campaign.json whose ``path`` is one of ``paths`` (their label, ``name`` or the last path
    component), then the given ``labels`` and the last components of ``paths``. Only columns
    that hold a value count. None when nothing fits.
    """
    def usable(column: str) -> bool:
        return has_values(frame, column)

    if explicit is not None:
        for column in (explicit, f"axis_{explicit}", f"axis_{explicit.rsplit('.', 1)[-1]}"):
            if usable(column):
                return column
        paths, labels = (explicit,), ()
    for meta in campaign_metas(frame).values():
        axes = ((meta.get("config") or {}).get("sweep") or {}).get("axes") or []
        for path in paths:
            for axis in axes:
                if isinstance(axis, dict) and axis.get("path") == path:
                    label = axis.get("name") or path.rsplit(".", 1)[-1]
                    if usable(f"axis_{label}"):
                        return f"axis_{label}"
    for label in (*labels, *(p.rsplit(".", 1)[-1] for p in paths)):
        if usable(f"axis_{label}"):
            return f"axis_{label}"
    return None


def cell_medians(frame: pd.DataFrame, keys: list[str],
                 columns: dict[str, str]) -> pd.DataFrame:
    """Median per cell (ok attempts) of each source column, named by ``columns``
    (output name -> source column); absent sources are left out."""
    present = {out: src for out, src in columns.items() if src in frame.columns}
    ok = frame[ok_mask(frame)]
    if not present or ok.empty:
        return pd.DataFrame(columns=[*keys, *present])
    data = ok[keys].copy()
    for out, src in present.items():
        data[out] = pd.to_numeric(ok[src], errors="coerce").astype(float)
    medians = data.groupby(keys, sort=True, dropna=False, observed=True).median()
    return medians.reset_index()


def most_common(values: "pd.Series[Any]") -> Any:
    """The most frequent non-missing value, None when there is none."""
    counts = values.dropna().astype(str).value_counts()
    return counts.index[0] if len(counts) else None


def finite(value: Any) -> bool:
    """A real number that is not NaN/<NA>."""
    try:
        return value is not None and value is not pd.NA and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def grouped_bars(ax: Axes, table: pd.DataFrame, group: str, bar: str,
                 value: str = "median", *, groups: Sequence[Any] | None = None,
                 bars: Sequence[Any] | None = None) -> dict[tuple[Any, Any], float]:
    """Bars of ``value`` per ``group`` (x ticks) and ``bar`` (colours) with the bootstrap
    interval (``ci_low``/``ci_high``) as error bars; failures are written above a bar
    (``1 failed``), a cell without an ok attempt gets a cross at zero.

    Returns the x position of every (group, bar) drawn.
    """
    groups = list(groups if groups is not None else dict.fromkeys(table[group]))
    bars = list(bars if bars is not None else dict.fromkeys(table[bar]))
    width = 0.8 / max(len(bars), 1)
    positions: dict[tuple[Any, Any], float] = {}
    for j, name in enumerate(bars):
        rows = table[table[bar] == name].set_index(group)
        color = f"C{j % 10}"
        xs, heights, low, high = [], [], [], []
        for i, key in enumerate(groups):
            if key not in rows.index:
                continue
            row = rows.loc[key]
            x = i - 0.4 + width * (j + 0.5)
            positions[(key, name)] = x
            median = float(row[value]) if finite(row[value]) else math.nan
            if math.isnan(median):
                ax.plot([x], [0], marker="x", color=color)
            else:
                xs.append(x)
                heights.append(median)
                lo = row.get(f"ci_low{value.removeprefix('median')}", math.nan)
                hi = row.get(f"ci_high{value.removeprefix('median')}", math.nan)
                low.append(median - float(lo) if finite(lo) else 0.0)
                high.append(float(hi) - median if finite(hi) else 0.0)
            failures = int(row["failures"]) if "failures" in row and finite(row["failures"]) \
                else 0
            if failures:
                top = median if not math.isnan(median) else 0.0
                ax.annotate(f"{failures} failed", (x, top), textcoords="offset points",
                            xytext=(0, 12), ha="center", fontsize=7, color="firebrick")
        if xs:
            ax.bar(xs, heights, width, label=str(name), color=color,
                   yerr=np.array([low, high]), capsize=2)
        else:  # only failures: an empty patch keeps the colour in the legend
            ax.add_patch(Rectangle((0, 0), 0, 0, color=color, label=str(name)))
    ax.set_xticks(range(len(groups)), [str(g) for g in groups], rotation=30, ha="right")
    return positions


def natural_key(text: Any) -> tuple[Any, ...]:
    """Sort key that orders ``rmem=2x`` before ``rmem=16x`` (digit runs compared as numbers)."""
    return tuple(int(part) if part.isdigit() else part
                 for part in re.split(r"(\d+)", str(text)))


def stats_columns(keys: Sequence[str]) -> list[str]:
    """The columns of a cell_stats frame for these keys."""
    return [*keys, *STAT_COLUMNS]


def finish_share_bars(ax: Axes, labels: Sequence[str], xlabel: str, title: str) -> None:
    """Axes of horizontal bars stacked to shares (0..1): one row per label, top to bottom."""
    ax.set_yticks(range(len(labels)), list(labels))
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel(xlabel)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(title)
