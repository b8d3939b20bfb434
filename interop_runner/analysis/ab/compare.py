"""A/B comparison of goodput that holds up to noise (issue 8).

Two sets of attempts (two campaigns, or two variants of one campaign) are split into *cells*:
the same server, client, testcase and sweep parameters on both sides. Per cell the ok attempts'
goodputs of side A (the baseline) and side B (the candidate) are compared in one of two ways
(the statistics themselves are in :mod:`.stats`):

``unpaired`` (two campaigns, or arms that did not run back to back)
    the medians of each side and the relative difference ``median_b / median_a - 1``, a
    percentile bootstrap CI of it (both sides resampled independently), the two-sided
    Mann-Whitney U test;
``paired`` (two arms of one campaign run in ``order: paired``: :func:`compare_variants`
chooses it when the attempts pair up)
    per pair (same cell, same repetition, both attempts ok) the log ratio ``log(b / a)``;
    the relative change ``exp(median log ratio) - 1``, a percentile bootstrap CI resampling
    pairs, the Wilcoxon signed-rank test of the log ratios. Drift of the host between pairs
    cancels in the ratio. Ok attempts without an ok partner are counted, not used.

Both report Cliff's delta of B over A over all ok attempts and the same :func:`verdict`:

``faster`` / ``slower``
    the CI excludes 0, the relative difference is at least ``min_effect`` in size and the
    p-value is below ``alpha``; the sign of the difference decides which.
``no change``
    the whole CI lies inside ``[-min_effect, +min_effect]``: whatever the difference is, it
    is smaller than the effect that matters (an equivalence test by confidence interval).
``inconclusive``
    anything else, and always with fewer than ``min_samples`` ok attempts per side (pairs).

Bootstrap resamples are seeded per cell, so a cell's numbers do not depend on which other
cells exist. Nothing here opens SSH connections; :func:`compare_campaigns` only reads result
directories.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from interop_runner.analysis.ab.hostdiff import (
    FACT_KEYS,
    FACT_SYSCTLS,
    campaign_hosts,
    facts_differences,
    facts_message,
)
from interop_runner.analysis.ab.pairing import (
    BASE_KEYS,
    PAIR_COLUMN,
    Pairs,
    _missing,
    pair_up,
    sweep_order,
    with_pair_ids,
)
from interop_runner.analysis.ab.plot import VERDICT_COLOURS, cell_label, forest_plot
from interop_runner.analysis.ab.stats import (
    MWU_ARE,
    VERDICTS,
    _cell_rng,
    bootstrap_ci,
    cliffs_delta,
    log_ratios,
    mann_whitney_p,
    min_pairs,
    pair_noise,
    paired_bootstrap_ci,
    paired_change,
    required_n,
    required_pairs,
    robust_cv,
    verdict,
    wilcoxon_p,
)
from interop_runner.config.workload import DEFAULT_WORKLOAD_LABEL

if TYPE_CHECKING:
    from interop_runner.config.campaign import CampaignConfig

__all__ = ["FACT_KEYS", "FACT_SYSCTLS", "VERDICT_COLOURS", "MWU_ARE", "VERDICTS",
           "bootstrap_ci", "cliffs_delta", "log_ratios",
           "mann_whitney_p", "min_pairs", "pair_noise", "paired_bootstrap_ci",
           "paired_change", "required_n", "required_pairs", "robust_cv", "verdict",
           "wilcoxon_p", "NotComparableError", "Pairs", "CompareSettings", "METHODS", "PAIR_COLUMN",
           "SUBJECT", "as_written", "campaign_hosts", "cell_attempts", "cell_keys",
           "cell_label", "compare", "compare_campaigns", "compare_variants",
           "facts_differences", "facts_message", "find_column", "forest_plot", "pair_up",
           "plan", "setting_differences", "split_variants", "summary", "sweep_order",
           "undecided_cells", "variant_values", "with_pair_ids"]

# Columns that describe a cell (held fixed between A and B) besides the axis_* columns.
# Settings reported when they differ between the sides (what A -> B changed).
SETTING_COLUMNS: tuple[str, ...] = ("server_version", "client_version", "file_size",
                                    "congestion_control", "cipher", "socket_rcvbuf",
                                    "socket_sndbuf", "gso", "gro", "server_params",
                                    "client_params", "alpn", "testbed")
# Placeholder for the compared implementation in compare_variants(column="server"/...).
SUBJECT = "[A/B]"
IMPLEMENTATION_COLUMNS = ("server", "client", "implementation")


METHODS: tuple[str, ...] = ("paired", "unpaired")
# How a change is measured: a ratio (goodput, CPU cost) or a difference (a conformance).
CHANGES: tuple[str, ...] = ("relative", "absolute")
# The columns of a compare() result after the key columns.
RESULT_COLUMNS: tuple[str, ...] = (
    "n_a", "n_b", "failed_a", "failed_b", "n_pairs", "unpaired_a", "unpaired_b", "median_a",
    "median_b", "rel_diff", "ci_low", "ci_high", "p_value", "cliffs_delta", "verdict",
    "method", "versions_a", "versions_b", "note")


class NotComparableError(ValueError):
    """The two sides cannot be compared as asked (one-line message)."""


# -------------------------------------------------------------------------------- the cells ----


def cell_keys(*frames: pd.DataFrame, exclude: Iterable[str] = ()) -> list[str]:
    """The columns that identify a cell: server, client, testcase, variant, every
    ``axis_*`` column present in any of the frames and ``workload`` where some attempt ran
    another workload than the default download (an upload is never compared with a
    download), minus ``exclude``."""
    skip = set(exclude)
    present: dict[str, None] = {}
    for frame in frames:
        present.update(dict.fromkeys(c for c in frame.columns
                                     if c in BASE_KEYS or str(c).startswith("axis_")))
        if _other_workload(frame):
            present["workload"] = None
    ordered = [c for c in BASE_KEYS if c in present]
    ordered += sorted(c for c in present if c not in BASE_KEYS)
    return [c for c in ordered if c not in skip]


def _other_workload(frame: pd.DataFrame) -> bool:
    if "workload" not in frame.columns:
        return False
    labels = frame["workload"].dropna().astype(str)
    return bool((labels != DEFAULT_WORKLOAD_LABEL).any())


def as_written(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with ``server``/``client`` holding the pair as the campaign wrote it.

    A/B campaigns record which implementation played a written name (``impl`` axis: the
    written ``quic-go`` ran as ``quic-go@v0.64.0``) in ``cell_server``/``cell_client``; a
    cell is the written pair, and the implementations that ran are kept as ``ran_server``/
    ``ran_client``. Frames without those columns are returned as they are.
    """
    if "cell_server" not in frame.columns and "cell_client" not in frame.columns:
        return frame
    out = frame.copy()
    for role in ("server", "client"):
        out[f"ran_{role}"] = out[role]
        if f"cell_{role}" in out.columns:
            written = out[f"cell_{role}"].astype(object)
            out[role] = written.where(written.notna(), out[role].astype(object))
    return out.drop(columns=[c for c in ("cell_server", "cell_client") if c in out.columns])


def _normalized(frame: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """The frame as written (:func:`as_written`) with its key columns as plain strings
    (missing: ``""``)."""
    out = as_written(frame)
    out = out.copy() if out is frame else out
    for key in keys:
        if key not in out.columns:
            out[key] = ""
        else:
            out[key] = ["" if _missing(v) else str(v) for v in out[key].astype(object)]
    return out


def _samples(group: pd.DataFrame) -> tuple[np.ndarray, int]:
    """Goodputs of the ok attempts, and the number of attempts that were not ok."""
    ok = group["status"].astype(str) == "ok"
    values = pd.to_numeric(group.loc[ok, "goodput_mbps"], errors="coerce").astype(float)
    values = values[np.isfinite(values)]
    return values.to_numpy(dtype=float), int((~ok).sum())


def _versions(group: pd.DataFrame | None) -> str:
    """``server version / client version`` of a cell's attempts (several: comma-joined),
    each preceded by the implementation that ran when it is not the written name."""
    if group is None or group.empty:
        return ""
    parts = []
    for role in ("server", "client"):
        col = f"{role}_version"
        if col not in group.columns:
            continue
        names = set()
        if f"ran_{role}" in group.columns:
            written = set(group[role].dropna().astype(str))
            names = {str(v) for v in group[f"ran_{role}"].dropna()} - written
        values = sorted({str(v) for v in group[col].dropna()})
        parts.append(" ".join([*sorted(names), ",".join(values) or "?"]))
    return " / ".join(parts)


def _groups(frame: pd.DataFrame, keys: Sequence[str]) -> dict[tuple[Any, ...], pd.DataFrame]:
    """The frame's rows per cell key (a tuple, also for one key)."""
    if not len(frame):
        return {}
    if not keys:
        return {(): frame}
    return {k if isinstance(k, tuple) else (k,): g
            for k, g in frame.groupby(list(keys), sort=True, observed=True)}


def _medians(x: np.ndarray) -> float:
    return float(np.median(x)) if x.size else math.nan


# ---------------------------------------------------------------------------------- pairs ----


def _pair_keys(frame: pd.DataFrame, keys: Sequence[str]) -> set[tuple[str, ...]]:
    """(cell key..., pair id) of the ok attempts that have a pair id."""
    normal = _normalized(with_pair_ids(frame), keys)
    normal = normal[(normal["status"].astype(str) == "ok").to_numpy(dtype=bool)]
    columns = [normal[k].tolist() for k in keys] + [normal[PAIR_COLUMN].astype(str).tolist()]
    return {row for row in zip(*columns) if row[-1]}


# ---------------------------------------------------------------------------- comparison ----


def _cell_stats(x: np.ndarray, y: np.ndarray, pairs: Pairs | None, s: "CompareSettings",
                rng: np.random.Generator) -> tuple[float, float, float, float]:
    """(rel_diff, ci_low, ci_high, p_value) of one cell, paired when ``pairs`` is given;
    with ``s.change`` ``absolute`` the change is a difference, not a ratio."""
    absolute = s.change == "absolute"
    if pairs is not None:
        if not pairs.a.size:
            return (math.nan, math.nan, math.nan, math.nan)
        low, high = paired_bootstrap_ci(pairs.a, pairs.b, confidence=s.confidence,
                                        n_boot=s.n_boot, rng=rng, absolute=absolute)
        return (paired_change(pairs.a, pairs.b, absolute), low, high,
                wilcoxon_p(pairs.a, pairs.b, absolute))
    if not (x.size and y.size):
        return (math.nan, math.nan, math.nan, mann_whitney_p(x, y))
    med_a, med_b = _medians(x), _medians(y)
    rel = med_b - med_a if absolute else med_b / med_a - 1 if med_a > 0 else math.nan
    low, high = bootstrap_ci(x, y, confidence=s.confidence, n_boot=s.n_boot, rng=rng,
                             absolute=absolute)
    return (rel, low, high, mann_whitney_p(x, y))


def compare(frame_a: pd.DataFrame, frame_b: pd.DataFrame, *, min_effect: float = 0.02,
            confidence: float = 0.95, n_boot: int = 10_000, seed: int = 0,
            alpha: float = 0.05, by: Sequence[str] | None = None,
            min_samples: int = 5, paired: bool = False,
            change: str = "relative") -> pd.DataFrame:
    """Compare the goodput of side B against side A per cell.

    ``frame_a``/``frame_b`` are results frames
    (:func:`~interop_runner.analysis.frames.results.load_results`, or any frame
    with ``status``, ``goodput_mbps`` and the key columns). ``by`` overrides the key columns
    (default :func:`cell_keys`). Returns one row per cell, sorted by the keys, with the keys
    and ``n_a, n_b`` (ok attempts), ``failed_a, failed_b`` (attempts not ok: failed, timeout,
    unsupported), ``n_pairs, unpaired_a, unpaired_b`` (paired only, else <NA>: the pairs and
    the ok attempts without an ok partner), ``median_a, median_b`` (Mbit/s, all ok
    attempts), ``rel_diff``, ``ci_low, ci_high`` (bootstrap CI of rel_diff at
    ``confidence``), ``p_value``, ``cliffs_delta`` (B over A, all ok attempts),
    ``verdict``, ``method`` (``paired``/``unpaired``), ``versions_a, versions_b`` (server /
    client version) and ``note``. A cell on one side only is ``inconclusive``.

    Unpaired: ``rel_diff = median_b / median_a - 1``, both sides resampled, Mann-Whitney U.
    ``paired=True`` (both frames from one campaign in ``order: paired``; see
    :func:`compare_variants`): the attempts are matched by :func:`pair_up`, ``rel_diff`` is
    :func:`~.stats.paired_change`, the CI resamples pairs, the p-value is the Wilcoxon
    signed-rank test and ``min_samples`` counts pairs. ``change="absolute"``: ``rel_diff``,
    the CI and ``min_effect`` are differences in the value's unit (``median_b - median_a``;
    paired: the median pair difference, Wilcoxon on the differences), for values that may be
    0 or negative (a conformance). The settings are kept in ``result.attrs``.
    """
    _check_settings(confidence, min_effect)
    if change not in CHANGES:
        raise ValueError(f"change must be one of {', '.join(CHANGES)}, not {change!r}")
    keys = list(by) if by is not None else cell_keys(frame_a, frame_b)
    settings = CompareSettings(min_effect, confidence, alpha, n_boot, seed, min_samples,
                               "paired" if paired else "unpaired", change)
    a = _normalized(with_pair_ids(frame_a) if paired else frame_a, keys)
    b = _normalized(with_pair_ids(frame_b) if paired else frame_b, keys)
    groups_a, groups_b = _groups(a, keys), _groups(b, keys)
    rows = [_cell_row(key, groups_a.get(key), groups_b.get(key), keys, settings)
            for key in sorted(set(groups_a) | set(groups_b))]
    result = _result_frame(rows, keys)
    result.attrs.update(keys=keys, min_effect=min_effect, confidence=confidence, alpha=alpha,
                        n_boot=n_boot, seed=seed, min_samples=min_samples,
                        method=settings.method, change=change,
                        settings=setting_differences(frame_a, frame_b))
    return result


def _check_settings(confidence: float, min_effect: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")
    if min_effect < 0:
        raise ValueError(f"min_effect must not be negative, not {min_effect}")


def _cell_row(key: tuple[Any, ...], ga: pd.DataFrame | None, gb: pd.DataFrame | None,
              keys: Sequence[str], s: "CompareSettings") -> dict[str, Any]:
    """One row of a :func:`compare` result: the cell ``key`` with its attempts on side A
    (``ga``) and side B (``gb``; None: the cell is not on that side)."""
    x, failed_a = _samples(ga) if ga is not None else (np.empty(0), 0)
    y, failed_b = _samples(gb) if gb is not None else (np.empty(0), 0)
    pairs = pair_up(ga, gb, positive=s.change == "relative") if s.method == "paired" else None
    rel, low, high, p = _cell_stats(x, y, pairs, s, _cell_rng(s.seed, key))
    n_a, n_b = (pairs.a.size, pairs.a.size) if pairs is not None else (x.size, y.size)
    notes = _cell_notes(gb is None, ga is None, x.size, y.size, pairs, s)
    if failed_b > failed_a:
        notes.append(f"more failures in B ({failed_b} vs {failed_a})")
    return {
        **dict(zip(keys, key)),
        "n_a": int(x.size), "n_b": int(y.size), "failed_a": failed_a, "failed_b": failed_b,
        "n_pairs": None if pairs is None else int(pairs.a.size),
        "unpaired_a": None if pairs is None else pairs.unpaired_a,
        "unpaired_b": None if pairs is None else pairs.unpaired_b,
        "median_a": _medians(x), "median_b": _medians(y), "rel_diff": rel, "ci_low": low,
        "ci_high": high, "p_value": p, "cliffs_delta": cliffs_delta(x, y),
        "verdict": verdict(rel, low, high, p, int(n_a), int(n_b), min_effect=s.min_effect,
                           alpha=s.alpha, min_samples=s.min_samples),
        "method": s.method, "versions_a": _versions(ga), "versions_b": _versions(gb),
        "note": "; ".join(notes),
    }


def _cell_notes(only_a: bool, only_b: bool, n_x: int, n_y: int, pairs: Pairs | None,
                s: "CompareSettings") -> list[str]:
    """Why a cell's verdict may be weak: one side missing, too few samples or pairs, ok
    attempts left without a partner."""
    notes = []
    if only_a or only_b:
        notes.append(f"only in {'A' if only_a else 'B'}")
    elif pairs is not None and pairs.a.size < s.min_samples:
        notes.append(f"too few pairs with both attempts ok (need {s.min_samples})")
    elif pairs is not None and pairs.a.size < min_pairs(s.alpha):
        notes.append(f"the signed-rank test needs {min_pairs(s.alpha)} pairs for "
                     f"p < {s.alpha:g}")
    elif n_x < s.min_samples or n_y < s.min_samples:
        notes.append(f"too few ok attempts (need {s.min_samples} per side)")
    if pairs is not None and (pairs.unpaired_a or pairs.unpaired_b):
        notes.append(f"{pairs.unpaired_a + pairs.unpaired_b} ok attempts without an ok "
                     f"partner left out (A {pairs.unpaired_a}, B {pairs.unpaired_b})")
    return notes


def _result_frame(rows: list[dict[str, Any]], keys: Sequence[str]) -> pd.DataFrame:
    """The rows as a frame with the result columns' dtypes (also when there are none)."""
    result = pd.DataFrame(rows, columns=[*keys, *RESULT_COLUMNS])
    for col in ("n_a", "n_b", "failed_a", "failed_b"):
        result[col] = result[col].astype("int64")
    for col in ("n_pairs", "unpaired_a", "unpaired_b"):
        result[col] = result[col].astype("Int64")
    for col in ("median_a", "median_b", "rel_diff", "ci_low", "ci_high", "p_value",
                "cliffs_delta"):
        result[col] = result[col].astype("float64")
    return result


def cell_attempts(frame: pd.DataFrame, keys: Sequence[str],
                  cell: "Mapping[str, Any] | pd.Series[Any]") -> pd.DataFrame:
    """The attempts of ``frame`` in one cell (a row of a :func:`compare` result, or a mapping
    of the key values), with the key columns as :func:`compare` sees them."""
    normal = _normalized(frame, keys)
    mask = pd.Series(True, index=normal.index)
    for key in keys:
        mask &= normal[key] == str(cell[key])
    return normal[mask]


def setting_differences(frame_a: pd.DataFrame, frame_b: pd.DataFrame) -> dict[str, list[str]]:
    """Settings (versions, file size, standard parameters, ...) whose values differ between
    the sides: ``{column: [values in A, values in B]}`` (values comma-joined). The pseudo
    column ``implementations`` lists the implementations that ran (server and client)."""
    out = {}
    names = [sorted({str(v) for col in ("server", "client") if col in f.columns
                     for v in f[col].dropna()}) for f in (frame_a, frame_b)]
    if names[0] != names[1]:
        out["implementations"] = [", ".join(n) or "-" for n in names]
    for col in SETTING_COLUMNS:
        if col not in frame_a.columns and col not in frame_b.columns:
            continue
        va = sorted({str(v) for v in frame_a[col].dropna()}) if col in frame_a.columns else []
        vb = sorted({str(v) for v in frame_b[col].dropna()}) if col in frame_b.columns else []
        if va != vb:
            out[col] = [", ".join(va) or "-", ", ".join(vb) or "-"]
    return out


def summary(result: pd.DataFrame) -> dict[str, int]:
    """Number of cells per verdict (every verdict listed, slower first)."""
    counts = result["verdict"].value_counts() if len(result) else pd.Series(dtype="int64")
    return {v: int(counts.get(v, 0)) for v in VERDICTS}


# ----------------------------------------------------------------------- variants and plans ----


def variant_values(frame: pd.DataFrame, column: str) -> list[str]:
    """The distinct values of ``column`` as strings (``implementation``: server and client)."""
    if column == "implementation":
        values = set(frame["server"].dropna().astype(str)) | set(
            frame["client"].dropna().astype(str))
        return sorted(values)
    if column not in frame.columns:
        return []
    return sorted({str(v) for v in frame[column].dropna()})


def find_column(frame: pd.DataFrame, a: str, b: str) -> str:
    """The column holding both values ``a`` and ``b``, looked for in this order: ``variant``,
    the ``axis_*`` columns, ``implementation`` (server or client names), the version columns,
    ``testbed``, ``campaign``; else :class:`NotComparableError`."""
    candidates = ["variant", *sorted(c for c in frame.columns if str(c).startswith("axis_")),
                  "implementation", "server_version", "client_version", "testbed", "campaign"]
    for column in candidates:
        values = variant_values(frame, column)
        if a in values and b in values:
            return column
    raise NotComparableError(f"no column holds both {a!r} and {b!r} (looked in "
                             f"{', '.join(candidates)}); name it with --column")


def split_variants(frame: pd.DataFrame, column: str, a: str,
                   b: str) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """The rows of variant ``a`` and of variant ``b`` and the cell keys to compare them by.

    ``column`` is any column of the frame (compared as strings), or ``server``, ``client`` or
    ``implementation`` for implementation names: then side A is every attempt whose server
    (``server``), client (``client``) or either (``implementation``) is ``a``, and in both
    roles the compared name is replaced by ``[A/B]``, so the pair ``a -> a`` is compared with
    ``b -> b`` and ``a -> quiche`` with ``b -> quiche``. Attempts involving both names are
    left out. Cells are keyed by :func:`cell_keys` without ``column`` and without the keys
    whose values on the two sides do not overlap (they change with the compared thing: the
    variant id when comparing an axis, the ``axis_*`` columns making up two variant ids, an
    ``impl`` axis when comparing implementation names). Both sides carry the pair ids of
    :func:`with_pair_ids` (column :data:`PAIR_COLUMN`).
    """
    frame = with_pair_ids(frame)  # before the written pair is dropped below
    if column in IMPLEMENTATION_COLUMNS:
        roles = ("server", "client") if column == "implementation" else (column,)
        server = frame["server"].astype("string")
        client = frame["client"].astype("string")
        sides = []
        for mine, other in ((a, b), (b, a)):
            chosen = pd.Series(False, index=frame.index)
            for role in roles:
                chosen |= (server if role == "server" else client) == mine
            chosen &= ~((server == other) | (client == other))
            part = frame[chosen.fillna(False).astype(bool)].copy()
            for role in ("server", "client"):
                part[role] = part[role].astype("string").mask(part[role] == mine, SUBJECT)
            # the implementations that ran are the cell here, not the names as written
            sides.append(part.drop(columns=[c for c in ("cell_server", "cell_client")
                                            if c in part.columns]))
        return sides[0], sides[1], _held_fixed(sides[0], sides[1], cell_keys(frame))
    if column not in frame.columns:
        raise NotComparableError(f"no column {column!r} in the results (columns: server, "
                                 f"client, implementation, variant, "
                                 f"{', '.join(c for c in frame.columns if c.startswith('axis_'))})"
                                 .replace(", )", ")"))
    values = frame[column].astype("string")
    side_a = frame[(values == a).fillna(False).astype(bool)]
    side_b = frame[(values == b).fillna(False).astype(bool)]
    return side_a, side_b, _held_fixed(side_a, side_b, cell_keys(frame, exclude={column}))


def _held_fixed(side_a: pd.DataFrame, side_b: pd.DataFrame, keys: list[str]) -> list[str]:
    """The keys minus those that go with the compared thing: a key (other than server and
    client) whose values on the two sides have nothing in common, like the variant id when
    comparing one of its axes, or the ``impl`` axis when comparing implementation names."""
    a, b = _normalized(side_a, keys), _normalized(side_b, keys)
    out = []
    for key in keys:
        va, vb = set(a[key]), set(b[key])
        if key in ("server", "client") or not va or not vb or va & vb:
            out.append(key)
    return out


def compare_variants(frame: pd.DataFrame, column: str, a: str, b: str, *,
                     paired: bool | None = None, **kwargs: Any) -> pd.DataFrame:
    """Compare two variants within one results frame: ``a`` (baseline) against ``b``.

    ``column`` as in :func:`split_variants` (e.g. ``implementation`` with
    ``quic-go@v0.48.0`` and ``quic-go@v0.49.0``, ``variant`` with two variant ids, or
    ``axis_rmem`` with ``1x`` and ``4x``). Keyword arguments go to :func:`compare`.

    ``paired``: None (default) chooses the paired statistics when the attempts come from one
    campaign run in ``order: paired`` (:func:`sweep_order`) and at least one ok attempt of
    A has an ok partner in B (:func:`pair_up`); ``False`` forces the unpaired ones, ``True``
    the paired ones. ``result.attrs["method_reason"]`` says why. Raises
    :class:`NotComparableError` when a value does not occur.
    """
    for value in (a, b):
        if value not in variant_values(frame, column):
            known = ", ".join(variant_values(frame, column)[:12]) or "none"
            raise NotComparableError(f"{value!r} does not occur in column {column!r} "
                                     f"(values: {known})")
    side_a, side_b, keys = split_variants(frame, column, a, b)
    kwargs.setdefault("by", keys)
    if paired is None:
        paired, reason = _pairing(frame, side_a, side_b, list(kwargs["by"]))
    else:
        reason = "asked for"
    result = compare(side_a, side_b, paired=paired, **kwargs)
    result.attrs.update(column=column, a=a, b=b, method_reason=reason,
                        settings={column: [a, b], **result.attrs["settings"]})
    return result


def undecided_cells(cfg: CampaignConfig) -> Callable[[Path], set[tuple[str, str]]]:
    """For an adaptive A/B campaign (``sweep.adaptive``): a function from its directory to
    the cells (server, client as written) whose verdict is still ``inconclusive``."""
    from interop_runner.analysis.frames.results import load_results
    from interop_runner.config.sweep import variants

    assert cfg.sweep.adaptive is not None
    arm_a, arm_b = (v.id for v in variants(cfg.sweep))
    min_effect = cfg.sweep.adaptive.min_effect

    def undecided(directory: Path) -> set[tuple[str, str]]:
        frame = load_results(directory, cache=False)
        result = compare_variants(frame, "variant", arm_a, arm_b, min_effect=min_effect)
        open_ = result[result["verdict"] == "inconclusive"]
        return {(str(s), str(c)) for s, c in zip(open_["server"], open_["client"])}

    return undecided


def _pairing(frame: pd.DataFrame, side_a: pd.DataFrame, side_b: pd.DataFrame,
             keys: list[str]) -> tuple[bool, str]:
    """Whether the two sides are paired, and why (or why not)."""
    order = sweep_order(frame)
    if order != "paired":
        return False, (f"the campaign ran in order {order}, not paired" if order else
                       "not one campaign with a known run order")
    if not _pair_keys(side_a, keys) & _pair_keys(side_b, keys):
        return False, "order paired, but no ok attempt of A has an ok partner in B"
    return True, "order paired: A and B of a repetition ran back to back"


def plan(frame: pd.DataFrame, effect: float = 0.02, power: float = 0.8, alpha: float = 0.05,
         *, by: Sequence[str] | None = None, other: pd.DataFrame | None = None,
         min_samples: int = 5, paired: bool = False) -> pd.DataFrame:
    """How many repetitions per side each cell needs to detect a relative change ``effect``.

    Unpaired: per cell the noise is the :func:`robust_cv` of the ok goodputs (with
    ``other``, e.g. the B side, the larger of the two sides' values per cell); ``n_needed``
    is :func:`required_n` rounded up, at least ``min_samples`` (the verdict's minimum).
    ``n_more`` is how many more ok attempts per side that is than the cell has (``n``: the
    fewer of the two sides). Cells with fewer than two ok attempts have no estimate (<NA>).

    ``paired=True`` (``other`` is side B, the attempts pair up as in :func:`compare`): the
    noise is the :func:`pair_noise` of the cell's pair log ratios, ``n`` the number of
    pairs, ``n_needed`` the pairs (repetitions per arm) from :func:`required_pairs`, at
    least ``min_samples`` and :func:`min_pairs`. Column ``method`` says which.

    Caveat: the ``faster``/``slower`` verdict also asks for ``|rel_diff| >= min_effect``; a
    true change exactly at ``min_effect`` reaches that only half of the time. To gate on 2 %
    with good power, plan for a somewhat larger effect (e.g. 3 %).
    """
    if paired and other is None:
        raise ValueError("a paired plan needs both sides (other=...)")
    keys = list(by) if by is not None else cell_keys(frame, *([other] if other is not None
                                                               else []))
    sides = [_normalized(with_pair_ids(f) if paired else f, keys)
             for f in ([frame] if other is None else [frame, other])]
    groups = [_groups(side, keys) for side in sides]
    rows = []
    for key in sorted(set().union(*groups)):
        parts = [g.get(key) for g in groups]
        samples = [_samples(p)[0] if p is not None else np.empty(0) for p in parts]
        if paired:
            pairs = pair_up(parts[0], parts[1])
            cv, n = pair_noise(log_ratios(pairs.a, pairs.b)), int(pairs.a.size)
            floor = max(min_samples, min_pairs(alpha))
            needed = max(floor, math.ceil(required_pairs(cv, effect, power, alpha) - 1e-9)) \
                if math.isfinite(cv) else None
        else:
            cvs = [robust_cv(s) for s in samples]
            cv = math.nan if any(math.isnan(c) for c in cvs) else max(cvs)
            n = min(s.size for s in samples)
            needed = max(min_samples, math.ceil(required_n(cv, effect, power, alpha) - 1e-9)) \
                if math.isfinite(cv) else None
        rows.append({**dict(zip(keys, key)), "n": n, "median": _medians(samples[0]), "cv": cv,
                     "n_needed": needed,
                     "n_more": None if needed is None else max(0, needed - n),
                     "method": "paired" if paired else "unpaired"})
    result = pd.DataFrame(rows, columns=[*keys, "n", "median", "cv", "n_needed", "n_more",
                                         "method"])
    for col in ("n_needed", "n_more"):
        result[col] = result[col].astype("Int64")
    result["n"] = result["n"].astype("int64")
    result.attrs.update(effect=effect, power=power, alpha=alpha,
                        method="paired" if paired else "unpaired")
    return result


def compare_campaigns(dir_a: Path | str, dir_b: Path | str, *, force: bool = False,
                      **kwargs: Any) -> pd.DataFrame:
    """Load two campaign directories and :func:`compare` them (A: baseline, B: candidate).

    Refuses (:class:`NotComparableError`, one line) when their host facts differ
    (:func:`facts_differences`), unless ``force``; a forced comparison records the
    differences in ``result.attrs["host_differences"]`` and ``attrs["forced"] = True``.
    """
    from interop_runner.analysis.frames.results import load_results

    differences = facts_differences(campaign_hosts(dir_a), campaign_hosts(dir_b))
    if differences and not force:
        raise NotComparableError(f"{facts_message(differences)}: the campaigns ran on "
                                 f"different hosts or settings; --force (force=True) "
                                 f"compares them anyway")
    result = compare(load_results(dir_a), load_results(dir_b), **kwargs)
    result.attrs.update(a=str(dir_a), b=str(dir_b), forced=bool(differences),
                        host_differences=differences)
    return result


@dataclass(frozen=True)
class CompareSettings:
    """The statistical settings of a comparison, for reports."""

    min_effect: float
    confidence: float
    alpha: float
    n_boot: int
    seed: int
    min_samples: int
    method: str = "unpaired"  # "paired" or "unpaired"
    change: str = "relative"  # "relative" (ratio) or "absolute" (difference)

    @staticmethod
    def of(result: pd.DataFrame) -> "CompareSettings":
        """The settings stored in a :func:`compare` result's ``attrs``."""
        attrs = result.attrs
        return CompareSettings(float(attrs.get("min_effect", 0.02)),
                               float(attrs.get("confidence", 0.95)),
                               float(attrs.get("alpha", 0.05)),
                               int(attrs.get("n_boot", 10_000)), int(attrs.get("seed", 0)),
                               int(attrs.get("min_samples", 5)),
                               str(attrs.get("method", "unpaired")),
                               str(attrs.get("change", "relative")))
