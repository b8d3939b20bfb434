"""The forest plot of an A/B comparison (one row per cell, change with its CI)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import pandas as pd

from interop_runner.analysis.ab.pairing import BASE_KEYS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

VERDICT_COLOURS = {"slower": "#c0392b", "faster": "#1e8449", "no change": "#2e86c1",
                   "inconclusive": "#7f8c8d"}


def cell_label(row: "Mapping[str, Any] | pd.Series[Any]", keys: Sequence[str]) -> str:
    """``server -> client`` plus the other key values (``testcase`` only when not goodput)."""
    label = f"{row.get('server', '?')} -> {row.get('client', '?')}"
    extra = [str(row[k]) for k in keys
             if k not in ("server", "client") and row.get(k) not in (None, "")
             and not (k == "testcase" and row.get(k) == "goodput")]
    return label + (f" ({', '.join(extra)})" if extra else "")


def forest_plot(result: pd.DataFrame, *, title: str | None = None) -> "Figure":
    """Forest plot of a :func:`compare` result: one row per cell, the relative difference
    (in %) with its bootstrap CI, coloured by verdict, the ``±min_effect`` band shaded.

    Built on :class:`matplotlib.figure.Figure` (no pyplot state); save it with
    ``fig.savefig(...)`` or show it in a notebook.
    """
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch


    keys = result.attrs.get("keys") or [c for c in BASE_KEYS if c in result.columns]
    min_effect = float(result.attrs.get("min_effect", 0.02))
    fig = Figure(figsize=(8, max(2.5, 0.42 * len(result) + 1.4)))
    ax = fig.add_subplot()
    ax.axvspan(-100 * min_effect, 100 * min_effect, color="#d6eaf8", zorder=0,
               label=f"±{100 * min_effect:g} %")
    ax.axvline(0, color="black", linewidth=0.8)
    labels = []
    for i, (_, row) in enumerate(result.iloc[::-1].iterrows()):
        labels.append(cell_label(row, keys))
        colour = VERDICT_COLOURS.get(str(row["verdict"]), "black")
        rel, low, high = (100 * float(row[c]) for c in ("rel_diff", "ci_low", "ci_high"))
        if math.isfinite(low) and math.isfinite(high):
            ax.plot([low, high], [i, i], color=colour, linewidth=2)
        if math.isfinite(rel):
            ax.plot([rel], [i], marker="o", color=colour)
        else:
            ax.text(0, i, "no data", ha="center", va="center", fontsize=8, color=colour)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_ylim(-0.7, max(len(labels) - 0.3, 0.3))
    what = "median pair ratio" if result.attrs.get("method") == "paired" else "median"
    ax.set_xlabel(f"goodput change B vs A (%), {what} with "
                  f"{100 * float(result.attrs.get('confidence', 0.95)):g} % bootstrap CI")
    handles: list[Any] = [Line2D([0], [0], color=c, marker="o", label=v)
                          for v, c in VERDICT_COLOURS.items() if (result["verdict"] == v).any()]
    handles.append(Patch(color="#d6eaf8", label=f"±{100 * min_effect:g} % (min. effect)"))
    ax.legend(handles=handles, loc="best", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig
