"""A/B comparison view: the two arms of a campaign with one two-valued axis (docs/compare.md)."""

from __future__ import annotations

from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from interop_runner.analysis.ab.compare import compare_variants, forest_plot
from interop_runner.analysis.views._common import campaign_metas, empty, no_data
from interop_runner.config.sweep import Axis, Sweep, variants

TITLE = "A/B comparison"


def ab_arms(frame: pd.DataFrame) -> tuple[str, str] | None:
    """The variant ids of arm A and arm B, in axis order, when the frame's campaign sweeps
    exactly one axis with two values (an A/B campaign); else None."""
    metas = list(campaign_metas(frame).values())
    if len(metas) != 1:
        return None
    sweep = ((metas[0].get("config") or {}).get("sweep") or {})
    axes = sweep.get("axes") or []
    if len(axes) != 1 or len(axes[0].get("values") or []) != 2:
        return None
    try:
        ids = [v.id for v in variants(Sweep(axes=[Axis.model_validate(axes[0])]))]
    except ValueError:
        return None
    present = set(frame["variant"].dropna().astype(str)) if "variant" in frame.columns else set()
    return (ids[0], ids[1]) if set(ids) <= present else None


def ab_comparison(frame: pd.DataFrame, *, min_effect: float | None = None,
                  **kwargs: Any) -> tuple[pd.DataFrame, Figure]:
    """Per cell, arm B against arm A: medians, change with bootstrap CI, p, verdict (the
    frame of :func:`~interop_runner.analysis.ab.compare.compare_variants`) and a forest plot.

    ``min_effect`` defaults to the campaign's adaptive setting, else 2 %.
    """
    arms = ab_arms(frame)
    if arms is None:
        return empty(["server", "client", "verdict"]), no_data("two arms (one two-valued axis)",
                                                               TITLE)
    if min_effect is None:
        meta = next(iter(campaign_metas(frame).values()))
        adaptive = ((meta.get("config") or {}).get("sweep") or {}).get("adaptive") or {}
        min_effect = float(adaptive.get("min_effect") or 0.02)
    result = compare_variants(frame, "variant", arms[0], arms[1], min_effect=min_effect,
                              **kwargs)
    return result, forest_plot(result, title=f"{TITLE}: {arms[1]} against {arms[0]}")
