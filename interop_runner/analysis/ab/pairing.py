"""Pairing the two arms of an A/B campaign run in ``order: paired``.

A and B of one cell and repetition ran back to back; :func:`with_pair_ids` gives every
attempt the id of that block and :func:`pair_up` aligns the ok attempts of both arms.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from interop_runner.errors import StoreError
from interop_runner.storage.campaign_record import read_campaign

# Where with_pair_ids() keeps the block of order: paired an attempt ran in.
PAIR_COLUMN = "pair_id"


# the columns that identify a comparison cell (besides axis_* columns)
BASE_KEYS: tuple[str, ...] = ("server", "client", "testcase", "variant")


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _texts(frame: pd.DataFrame, column: str, fallback: str | None = None) -> list[str]:
    """A column as strings (missing: ``""``), missing values taken from ``fallback``."""
    if column not in frame.columns:
        column, fallback = (fallback, None) if fallback else (column, None)
    if column not in frame.columns:
        return [""] * len(frame)
    values = frame[column].astype(object).tolist()
    if fallback is not None and fallback in frame.columns:
        values = [f if _missing(v) else v
                  for v, f in zip(values, frame[fallback].astype(object).tolist())]
    return [_text(v) for v in values]


def _text(value: Any) -> str:
    """A value as a string, ``""`` when missing; a float holding an integer (a repetition
    from a column with gaps) as that integer."""
    if _missing(value):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def with_pair_ids(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with a :data:`PAIR_COLUMN`: the block of ``order: paired`` an attempt ran
    in, ``[campaign, testbed, testcase, written server, written client, repetition]`` as
    JSON (the written pair: ``cell_server``/``cell_client``, else ``server``/``client``);
    ``""`` without a repetition. The two arms of a cell that ran back to back share it.
    A frame that has the column already is returned as it is."""
    if PAIR_COLUMN in frame.columns:
        return frame
    parts = [_texts(frame, "campaign"), _texts(frame, "testbed"), _texts(frame, "testcase"),
             _texts(frame, "cell_server", "server"), _texts(frame, "cell_client", "client")]
    reps = _texts(frame, "repetition")
    ids = [json.dumps([*fields, rep]) if rep else "" for *fields, rep in zip(*parts, reps)]
    return frame.assign(**{PAIR_COLUMN: ids})


class Pairs(NamedTuple):
    """The pairs of one cell: goodputs of A and B aligned (element ``i`` is one pair), and
    the ok attempts per side that are in no pair."""

    a: np.ndarray
    b: np.ndarray
    unpaired_a: int
    unpaired_b: int


def _ok_by_pair(group: pd.DataFrame | None, positive: bool = True
                ) -> tuple[dict[str, float], int]:
    """The ok attempts' goodputs per pair id (the latest attempt of a repetition wins) and
    the number of ok attempts with a finite goodput; ``positive``: only positive values pair
    (a ratio needs them; a difference does not)."""
    if group is None or group.empty:
        return {}, 0
    ok = group["status"].astype(str) == "ok"
    values = pd.to_numeric(group["goodput_mbps"], errors="coerce").astype(float)
    usable = group.assign(goodput_mbps=values)[(ok & np.isfinite(values)).to_numpy(dtype=bool)]
    if "attempt" in usable.columns:
        usable = usable.sort_values("attempt", kind="stable", na_position="first")
    ids = with_pair_ids(usable)[PAIR_COLUMN].astype(str).tolist()
    goodputs = usable["goodput_mbps"].tolist()
    out = {pid: value for pid, value in zip(ids, goodputs)
           if pid and (value > 0 or not positive)}
    return out, len(usable)


def pair_up(group_a: pd.DataFrame | None, group_b: pd.DataFrame | None,
            positive: bool = True) -> Pairs:
    """Pair the attempts of one cell: an ok attempt of A and an ok attempt of B with the
    same pair id (:func:`with_pair_ids`: same campaign, testbed, written pair, repetition).

    Only pairs where both attempts are ok (and have a positive goodput; with ``positive``
    False any finite value) count; when a
    repetition has several ok attempts on one side (a rerun), the latest is used. Every
    other ok attempt of a side (its partner failed or is missing, a rerun replaced it, no
    repetition is known) is counted in ``unpaired_a``/``unpaired_b``, never dropped
    silently. Pairs are ordered by pair id.
    """
    by_a, ok_a = _ok_by_pair(group_a, positive)
    by_b, ok_b = _ok_by_pair(group_b, positive)
    common = sorted(set(by_a) & set(by_b))
    a = np.array([by_a[p] for p in common], dtype=float)
    b = np.array([by_b[p] for p in common], dtype=float)
    return Pairs(a, b, ok_a - len(common), ok_b - len(common))


def sweep_order(frame: pd.DataFrame) -> str | None:
    """The run order (``paired``, ``shuffled``, ``sequential``) of the one campaign the
    frame's attempts come from, read from its campaign.json (found above the ``path`` of an
    attempt; ``plan.order``, else ``config.sweep.order`` when the sweep has axes, else
    ``sequential``). None when the attempts come from several campaigns or none is found."""
    if "campaign" not in frame.columns or "path" not in frame.columns:
        return None
    names = {str(v) for v in frame["campaign"].dropna()}
    paths = frame["path"].dropna()
    if len(names) != 1 or paths.empty:
        return None
    directory = next((p for p in Path(str(paths.iloc[0])).parents
                      if (p / "campaign.json").is_file()), None)
    if directory is None:
        return None
    try:
        meta = read_campaign(directory / "campaign.json")
    except (OSError, ValueError, StoreError):
        return None
    order = (meta.get("plan") or {}).get("order")
    if order:
        return str(order)
    sweep = (meta.get("config") or {}).get("sweep") or {}
    return str(sweep.get("order") or "shuffled") if sweep.get("axes") else "sequential"
