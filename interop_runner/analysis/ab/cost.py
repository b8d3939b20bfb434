"""A/B verdicts on CPU cost per byte: the goodput comparison run on each side's
``<role>_cpu_s_per_gib`` (CPU-seconds per GiB delivered), where more is worse.

The statistics are :func:`~.compare.compare`'s own (medians, bootstrap CI, rank test,
pairing); only the value compared and the names of the verdicts differ: a cost that rises
significantly by at least ``min_effect`` is ``costlier``, one that falls is ``cheaper``.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

COST_COLUMNS = {"server": "server_cpu_s_per_gib", "client": "client_cpu_s_per_gib"}
COST_VERDICTS = {"faster": "costlier", "slower": "cheaper"}
"""Goodput verdict -> cost verdict (the value rose / fell)."""
NO_VALUES = "no CPU cost measured on either side (NA)"

Comparison = Callable[[pd.DataFrame, pd.DataFrame | None], pd.DataFrame]
"""Runs the goodput comparison on the frames given (the second is None for variants of one
frame)."""


def as_value(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """The frame with ``column`` in place of ``goodput_mbps`` (all NA when it is missing), so
    that the goodput comparison compares it."""
    values = (pd.to_numeric(frame[column], errors="coerce") if column in frame.columns
              else pd.Series(np.nan, index=frame.index))
    return frame.assign(goodput_mbps=values.astype(float))


def compare_cost(compare_one: Comparison, frame_a: pd.DataFrame,
                 frame_b: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per cell and side (column ``side``: server, client) with the comparison's
    columns, verdicts renamed to ``costlier`` / ``cheaper`` / ``no change`` /
    ``inconclusive``; ``median_a``/``median_b`` in CPU-s/GiB."""
    parts = []
    for side, column in COST_COLUMNS.items():
        result = compare_one(as_value(frame_a, column),
                             None if frame_b is None else as_value(frame_b, column))
        result.insert(0, "side", side)
        result["verdict"] = result["verdict"].map(lambda v: COST_VERDICTS.get(v, v))
        unmeasured = (result["n_a"] == 0) & (result["n_b"] == 0)
        result.loc[unmeasured, "note"] = NO_VALUES
        parts.append(result)
    out = pd.concat(parts, ignore_index=True)
    out.attrs = {**parts[0].attrs, "value": "cpu_s_per_gib"}
    return out


def costlier(result: pd.DataFrame) -> bool:
    """Whether any cell of a :func:`compare_cost` result costs significantly more CPU."""
    return bool((result["verdict"] == "costlier").any())
