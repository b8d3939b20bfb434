"""A/B comparison of goodput that holds up to noise (issue 8).

Two sets of attempts (two campaigns, or two variants of one campaign) are split into *cells*:
the same server, client, testcase and sweep parameters on both sides. Per cell the ok attempts'
goodputs of side A (the baseline) and side B (the candidate) are compared with

* the medians of each side and the relative difference ``median_b / median_a - 1``,
* a percentile bootstrap confidence interval of that relative difference (both sides resampled
  independently, ``n_boot`` resamples, seeded per cell so a cell's numbers do not depend on
  which other cells exist),
* the two-sided Mann-Whitney U test (:func:`scipy.stats.mannwhitneyu`, exact for small samples
  without ties, else the normal approximation with tie correction),
* Cliff's delta of B over A, ``P(B > A) - P(B < A)`` (identical to the rank-biserial
  correlation, ``2 U_B / (n_a n_b) - 1``),

and a verdict (:func:`verdict`):

``faster`` / ``slower``
    the CI excludes 0, the relative difference is at least ``min_effect`` in size and the
    Mann-Whitney p-value is below ``alpha``; the sign of the difference decides which.
``no change``
    the whole CI lies inside ``[-min_effect, +min_effect]``: whatever the difference is, it
    is smaller than the effect that matters (an equivalence test by confidence interval).
``inconclusive``
    anything else, and always when a side has fewer than ``min_samples`` ok attempts.

Nothing here opens SSH connections; :func:`compare_campaigns` only reads result directories.
"""

from __future__ import annotations

import json
import math
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from matplotlib.figure import Figure

VERDICTS: tuple[str, ...] = ("slower", "faster", "no change", "inconclusive")
# Mann-Whitney U vs the t-test for normal data (3/pi): the MWU needs 1/0.955 as many samples.
MWU_ARE = 3 / math.pi
# Host facts that make two campaigns incomparable when they differ (per node role).
FACT_KEYS: tuple[str, ...] = ("cpu_model", "cores", "kernel", "nic_driver", "nic_speed_mbps",
                              "mtu")
FACT_SYSCTLS: tuple[str, ...] = ("net.core.rmem_default", "net.core.rmem_max",
                                 "net.core.wmem_default", "net.core.wmem_max")
# Columns that describe a cell (held fixed between A and B) besides the axis_* columns.
BASE_KEYS: tuple[str, ...] = ("server", "client", "testcase", "variant")
# Settings reported when they differ between the sides (what A -> B changed).
SETTING_COLUMNS: tuple[str, ...] = ("server_version", "client_version", "file_size",
                                    "congestion_control", "cipher", "socket_rcvbuf",
                                    "socket_sndbuf", "gso", "gro", "server_params",
                                    "client_params", "alpn", "testbed")
# Placeholder for the compared implementation in compare_variants(column="server"/...).
SUBJECT = "[A/B]"
IMPLEMENTATION_COLUMNS = ("server", "client", "implementation")


class NotComparableError(ValueError):
    """The two sides cannot be compared as asked (one-line message)."""


# ------------------------------------------------------------------------------ statistics ----


def _cell_rng(seed: int, key: Sequence[Any]) -> np.random.Generator:
    """A generator for one cell: seeded by ``seed`` and a stable hash of the cell key."""
    digest = zlib.crc32(json.dumps([str(k) for k in key]).encode())
    return np.random.default_rng(np.random.SeedSequence([seed, digest]))


def bootstrap_ci(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *,
                 confidence: float = 0.95, n_boot: int = 10_000,
                 rng: np.random.Generator | int | None = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of ``median(b) / median(a) - 1``.

    Both samples are resampled independently with replacement (two-sample bootstrap), which
    is what ``scipy.stats.bootstrap((a, b), ..., paired=False, method="percentile")`` does.
    """
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.size == 0 or y.size == 0:
        return (math.nan, math.nan)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    med_a = np.median(x[gen.integers(0, x.size, size=(n_boot, x.size))], axis=1)
    med_b = np.median(y[gen.integers(0, y.size, size=(n_boot, y.size))], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = med_b / med_a - 1
    tail = (1 - confidence) / 2
    low, high = np.quantile(ratio, [tail, 1 - tail])
    return (float(low), float(high))


def cliffs_delta(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Cliff's delta of ``b`` over ``a``: ``P(b > a) - P(b < a)`` over all pairs (-1..1).

    Equal to the rank-biserial correlation ``2 U_b / (n_a n_b) - 1`` with ``U_b`` the
    Mann-Whitney statistic of ``b``. Positive: B tends to be faster.
    """
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.size == 0 or y.size == 0:
        return math.nan
    diff = y[:, None] - x[None, :]
    return float((np.sum(diff > 0) - np.sum(diff < 0)) / diff.size)


def mann_whitney_p(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Two-sided Mann-Whitney U p-value (scipy, ``method="auto"``); NaN for an empty side.

    Two constant, equal samples give p = 1 (scipy would return NaN: no variance at all).
    """
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.size == 0 or y.size == 0:
        return math.nan
    if np.ptp(np.concatenate([x, y])) == 0:
        return 1.0
    from scipy import stats  # imported on use: loading results does not need scipy

    return float(stats.mannwhitneyu(y, x, alternative="two-sided").pvalue)


def verdict(rel_diff: float, ci_low: float, ci_high: float, p_value: float, n_a: int,
            n_b: int, *, min_effect: float = 0.02, alpha: float = 0.05,
            min_samples: int = 5) -> str:
    """The verdict for one cell (see the module docstring).

    1. ``inconclusive`` when a side has fewer than ``min_samples`` ok attempts or a number is
       missing;
    2. ``faster``/``slower`` when the CI excludes 0 (``ci_low > 0`` or ``ci_high < 0``),
       ``|rel_diff| >= min_effect`` and ``p_value < alpha``;
    3. ``no change`` when ``-min_effect <= ci_low`` and ``ci_high <= min_effect``;
    4. ``inconclusive`` otherwise.
    """
    values = (rel_diff, ci_low, ci_high, p_value)
    if n_a < min_samples or n_b < min_samples or any(not math.isfinite(v) for v in values):
        return "inconclusive"
    if (ci_low > 0 or ci_high < 0) and abs(rel_diff) >= min_effect and p_value < alpha:
        return "faster" if rel_diff > 0 else "slower"
    if -min_effect <= ci_low and ci_high <= min_effect:
        return "no change"
    return "inconclusive"


# -------------------------------------------------------------------------------- the cells ----


def cell_keys(*frames: pd.DataFrame, exclude: Iterable[str] = ()) -> list[str]:
    """The columns that identify a cell: server, client, testcase, variant and every
    ``axis_*`` column present in any of the frames, minus ``exclude``."""
    skip = set(exclude)
    present: dict[str, None] = {}
    for frame in frames:
        present.update(dict.fromkeys(c for c in frame.columns
                                     if c in BASE_KEYS or str(c).startswith("axis_")))
    ordered = [c for c in BASE_KEYS if c in present]
    ordered += sorted(c for c in present if c not in BASE_KEYS)
    return [c for c in ordered if c not in skip]


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
            col = out[key].astype(object)
            out[key] = [("" if v is None or v is pd.NA or (isinstance(v, float)
                                                           and math.isnan(v)) else str(v))
                        for v in col]
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


def compare(frame_a: pd.DataFrame, frame_b: pd.DataFrame, *, min_effect: float = 0.02,
            confidence: float = 0.95, n_boot: int = 10_000, seed: int = 0,
            alpha: float = 0.05, by: Sequence[str] | None = None,
            min_samples: int = 5) -> pd.DataFrame:
    """Compare the goodput of side B against side A per cell.

    ``frame_a``/``frame_b`` are results frames (:func:`~.results.load_results`, or any frame
    with ``status``, ``goodput_mbps`` and the key columns). ``by`` overrides the key columns
    (default :func:`cell_keys`). Returns one row per cell, sorted by the keys, with the keys
    and ``n_a, n_b`` (ok attempts), ``failed_a, failed_b`` (attempts not ok: failed, timeout,
    unsupported), ``median_a, median_b`` (Mbit/s), ``rel_diff`` (``median_b/median_a - 1``),
    ``ci_low, ci_high`` (bootstrap CI of rel_diff at ``confidence``), ``p_value`` (two-sided
    Mann-Whitney U), ``cliffs_delta`` (B over A), ``verdict``, ``versions_a, versions_b``
    (server / client version) and ``note``. A cell on one side only is ``inconclusive``.
    The settings are kept in ``result.attrs``.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")
    if min_effect < 0:
        raise ValueError(f"min_effect must not be negative, not {min_effect}")
    keys = list(by) if by is not None else cell_keys(frame_a, frame_b)
    a = _normalized(frame_a, keys)
    b = _normalized(frame_b, keys)
    groups_a, groups_b = _groups(a, keys), _groups(b, keys)
    rows = []
    for key in sorted(set(groups_a) | set(groups_b)):
        ga, gb = groups_a.get(key), groups_b.get(key)
        x, failed_a = _samples(ga) if ga is not None else (np.empty(0), 0)
        y, failed_b = _samples(gb) if gb is not None else (np.empty(0), 0)
        med_a, med_b = _medians(x), _medians(y)
        rel = med_b / med_a - 1 if x.size and y.size and med_a > 0 else math.nan
        low, high = bootstrap_ci(x, y, confidence=confidence, n_boot=n_boot,
                                 rng=_cell_rng(seed, key)) if x.size and y.size \
            else (math.nan, math.nan)
        p = mann_whitney_p(x, y)
        notes = []
        if ga is None or gb is None:
            notes.append(f"only in {'A' if gb is None else 'B'}")
        elif x.size < min_samples or y.size < min_samples:
            notes.append(f"too few ok attempts (need {min_samples} per side)")
        if failed_b > failed_a:
            notes.append(f"more failures in B ({failed_b} vs {failed_a})")
        rows.append({
            **dict(zip(keys, key)),
            "n_a": int(x.size), "n_b": int(y.size), "failed_a": failed_a, "failed_b": failed_b,
            "median_a": med_a, "median_b": med_b, "rel_diff": rel, "ci_low": low,
            "ci_high": high, "p_value": p, "cliffs_delta": cliffs_delta(x, y),
            "verdict": verdict(rel, low, high, p, int(x.size), int(y.size),
                               min_effect=min_effect, alpha=alpha, min_samples=min_samples),
            "versions_a": _versions(ga), "versions_b": _versions(gb),
            "note": "; ".join(notes),
        })
    columns = [*keys, "n_a", "n_b", "failed_a", "failed_b", "median_a", "median_b", "rel_diff",
               "ci_low", "ci_high", "p_value", "cliffs_delta", "verdict", "versions_a",
               "versions_b", "note"]
    result = pd.DataFrame(rows, columns=columns)
    for col in ("n_a", "n_b", "failed_a", "failed_b"):
        result[col] = result[col].astype("int64")
    for col in ("median_a", "median_b", "rel_diff", "ci_low", "ci_high", "p_value",
                "cliffs_delta"):
        result[col] = result[col].astype("float64")
    result.attrs.update(keys=keys, min_effect=min_effect, confidence=confidence, alpha=alpha,
                        n_boot=n_boot, seed=seed, min_samples=min_samples,
                        settings=setting_differences(frame_a, frame_b))
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
    ``impl`` axis when comparing implementation names).
    """
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


def compare_variants(frame: pd.DataFrame, column: str, a: str, b: str,
                     **kwargs: Any) -> pd.DataFrame:
    """Compare two variants within one results frame: ``a`` (baseline) against ``b``.

    ``column`` as in :func:`split_variants` (e.g. ``implementation`` with
    ``quic-go@v0.48.0`` and ``quic-go@v0.49.0``, ``variant`` with two variant ids, or
    ``axis_rmem`` with ``1x`` and ``4x``). Keyword arguments go to :func:`compare`.
    Raises :class:`NotComparableError` when a value does not occur.
    """
    for value in (a, b):
        if value not in variant_values(frame, column):
            known = ", ".join(variant_values(frame, column)[:12]) or "none"
            raise NotComparableError(f"{value!r} does not occur in column {column!r} "
                                     f"(values: {known})")
    side_a, side_b, keys = split_variants(frame, column, a, b)
    kwargs.setdefault("by", keys)
    result = compare(side_a, side_b, **kwargs)
    result.attrs.update(column=column, a=a, b=b,
                        settings={column: [a, b], **result.attrs["settings"]})
    return result


def required_n(cv: float, effect: float, power: float = 0.8, alpha: float = 0.05) -> float:
    """Repetitions per side for a two-sided Mann-Whitney U test to detect a relative shift
    ``effect`` with ``power`` at level ``alpha`` when the noise (coefficient of variation)
    is ``cv``: the normal approximation of the two-sample t-test,
    ``2 (z_{1-alpha/2} + z_power)^2 (cv / effect)^2``, divided by the asymptotic relative
    efficiency of the U test, 3/pi = 0.955. Not rounded."""
    if effect <= 0:
        raise ValueError(f"effect must be positive, not {effect}")
    if not 0 < power < 1 or not 0 < alpha < 1:
        raise ValueError("power and alpha must be between 0 and 1")
    from scipy import stats

    z = float(stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power))
    return float(2 * z * z * (cv / effect) ** 2 / MWU_ARE)


def robust_cv(values: Sequence[float] | np.ndarray) -> float:
    """Noise of a sample relative to its median: ``1.4826 * MAD / median`` (the standard
    deviation for normal data, insensitive to an odd slow attempt); the ordinary ``std /
    mean`` when the MAD is 0; NaN below two values."""
    x = np.asarray(values, dtype=float)
    if x.size < 2:
        return math.nan
    med = float(np.median(x))
    mad = float(np.median(np.abs(x - med)))
    if mad > 0 and med > 0:
        return 1.4826 * mad / med
    mean = float(np.mean(x))
    return float(np.std(x, ddof=1) / mean) if mean > 0 else math.nan


def plan(frame: pd.DataFrame, effect: float = 0.02, power: float = 0.8, alpha: float = 0.05,
         *, by: Sequence[str] | None = None, other: pd.DataFrame | None = None,
         min_samples: int = 5) -> pd.DataFrame:
    """How many repetitions per side each cell needs to detect a relative change ``effect``.

    Per cell the noise is the :func:`robust_cv` of the ok goodputs (with ``other``, e.g. the
    B side, the larger of the two sides' values per cell); ``n_needed`` is
    :func:`required_n` rounded up, at least ``min_samples`` (the verdict's minimum).
    ``n_more`` is how many more ok attempts per side that is than the cell has (``n``: the
    fewer of the two sides). Cells with fewer than two ok attempts have no estimate (<NA>).

    Caveat: the ``faster``/``slower`` verdict also asks for ``|rel_diff| >= min_effect``; a
    true change exactly at ``min_effect`` reaches that only half of the time. To gate on 2 %
    with good power, plan for a somewhat larger effect (e.g. 3 %).
    """
    keys = list(by) if by is not None else cell_keys(frame, *([other] if other is not None
                                                               else []))
    sides = [_normalized(frame, keys)] + ([_normalized(other, keys)] if other is not None
                                          else [])
    per_side = [{k: _samples(g)[0] for k, g in _groups(side, keys).items()} for side in sides]
    rows = []
    for key in sorted(set().union(*per_side)):
        samples = [groups.get(key, np.empty(0)) for groups in per_side]
        cvs = [robust_cv(s) for s in samples]
        cv = math.nan if any(math.isnan(c) for c in cvs) else max(cvs)
        n = min(s.size for s in samples)
        needed = max(min_samples, math.ceil(required_n(cv, effect, power, alpha) - 1e-9)) \
            if math.isfinite(cv) else None
        rows.append({**dict(zip(keys, key)), "n": n,
                     "median": _medians(samples[0]), "cv": cv,
                     "n_needed": needed,
                     "n_more": None if needed is None else max(0, needed - n)})
    result = pd.DataFrame(rows, columns=[*keys, "n", "median", "cv", "n_needed", "n_more"])
    for col in ("n_needed", "n_more"):
        result[col] = result[col].astype("Int64")
    result["n"] = result["n"].astype("int64")
    result.attrs.update(effect=effect, power=power, alpha=alpha)
    return result


# ------------------------------------------------------------------------------ host facts ----


def _fact_map(hosts: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``{label: facts}`` per node role (server, client); multi-testbed campaigns
    (``{"by_testbed": {name: hosts}}``) as ``<testbed>/<role>``."""
    if "by_testbed" in hosts:
        out = {}
        for name, sub in (hosts.get("by_testbed") or {}).items():
            for role, facts in _fact_map(sub or {}).items():
                out[f"{name}/{role}"] = facts
        return out
    return {role: dict(hosts[role] or {}) for role in ("server", "client") if role in hosts}


def _facts_of(facts: Mapping[str, Any]) -> dict[str, Any]:
    out = {key: facts.get(key) for key in FACT_KEYS}
    sysctl = facts.get("sysctl") or {}
    out.update({name: sysctl.get(name) for name in FACT_SYSCTLS})
    return out


def facts_differences(hosts_a: Mapping[str, Any], hosts_b: Mapping[str, Any]) -> list[str]:
    """Differences between the host facts of two campaigns, one string each, e.g.
    ``server kernel: '6.1.0' vs '6.8.0'``.

    ``hosts_*`` are the ``hosts`` objects of ``campaign.json`` (role -> summary of
    :func:`interop_runner.hostfacts.summarize_facts`) or ``{"by_testbed": {name: hosts}}``
    for campaigns over several testbeds. Compared per node: :data:`FACT_KEYS` (CPU model,
    cores, kernel, NIC driver, link speed, MTU) and the buffer sysctls :data:`FACT_SYSCTLS`.
    A fact known on one side only counts as a difference (it cannot be checked); one unknown
    on both sides does not. A node present on one side only is a difference.
    """
    map_a, map_b = _fact_map(hosts_a), _fact_map(hosts_b)
    out = []
    for label in sorted(set(map_a) | set(map_b)):
        if label not in map_a or label not in map_b:
            out.append(f"{label}: no host facts in {'A' if label not in map_a else 'B'}")
            continue
        fa, fb = _facts_of(map_a[label]), _facts_of(map_b[label])
        for key in fa:
            va, vb = fa[key], fb[key]
            if va is None and vb is None:
                continue
            if va is None or vb is None or str(va) != str(vb):
                out.append(f"{label} {key}: {_show(va)} vs {_show(vb)}")
    return out


def _show(value: Any) -> str:
    return "unknown" if value is None else repr(value)


def campaign_hosts(campaign_dir: Path | str) -> dict[str, Any]:
    """The ``hosts`` of a campaign directory's ``campaign.json`` (for several testbeds
    ``{"by_testbed": ...}`` read from its ``testbed-<name>.json`` files); ``{}`` when there
    is none."""
    directory = Path(campaign_dir)
    try:
        meta = json.loads((directory / "campaign.json").read_text())
    except (OSError, ValueError):
        return {}
    if meta.get("testbed_files"):
        by = {}
        for name, file in meta["testbed_files"].items():
            try:
                by[name] = json.loads((directory / file).read_text()).get("hosts", {})
            except (OSError, ValueError):
                by[name] = {}
        return {"by_testbed": by}
    hosts: dict[str, Any] = meta.get("hosts") or {}
    return hosts


def facts_message(differences: Sequence[str], limit: int = 4) -> str:
    """One line naming the first differences (and how many more)."""
    shown = "; ".join(differences[:limit])
    more = f"; and {len(differences) - limit} more" if len(differences) > limit else ""
    return f"host facts differ ({shown}{more})"


def compare_campaigns(dir_a: Path | str, dir_b: Path | str, *, force: bool = False,
                      **kwargs: Any) -> pd.DataFrame:
    """Load two campaign directories and :func:`compare` them (A: baseline, B: candidate).

    Refuses (:class:`NotComparableError`, one line) when their host facts differ
    (:func:`facts_differences`), unless ``force``; a forced comparison records the
    differences in ``result.attrs["host_differences"]`` and ``attrs["forced"] = True``.
    """
    from .results import load_results

    differences = facts_differences(campaign_hosts(dir_a), campaign_hosts(dir_b))
    if differences and not force:
        raise NotComparableError(f"{facts_message(differences)}: the campaigns ran on "
                                 f"different hosts or settings; --force (force=True) "
                                 f"compares them anyway")
    result = compare(load_results(dir_a), load_results(dir_b), **kwargs)
    result.attrs.update(a=str(dir_a), b=str(dir_b), forced=bool(differences),
                        host_differences=differences)
    return result


# ----------------------------------------------------------------------------------- plots ----

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
    ax.set_xlabel("goodput change B vs A (%), median with "
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


@dataclass(frozen=True)
class Settings:
    """The statistical settings of a comparison, for reports."""

    min_effect: float
    confidence: float
    alpha: float
    n_boot: int
    seed: int
    min_samples: int

    @staticmethod
    def of(result: pd.DataFrame) -> "Settings":
        """The settings stored in a :func:`compare` result's ``attrs``."""
        attrs = result.attrs
        return Settings(float(attrs.get("min_effect", 0.02)),
                        float(attrs.get("confidence", 0.95)), float(attrs.get("alpha", 0.05)),
                        int(attrs.get("n_boot", 10_000)), int(attrs.get("seed", 0)),
                        int(attrs.get("min_samples", 5)))
