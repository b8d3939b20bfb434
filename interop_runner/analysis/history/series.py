"""Series of campaigns from the history frame (:func:`~.db.load_history`), their points and
the change points of all of them (docs/history.md, "Series").

A series is one (testbed, server, client, testcase, signature); its points are the campaigns
that measured it, oldest first, each the median of its ok attempts of one metric. A
conformance series (:func:`conformance_series_rows`) is one (testbed, stack, reference flow,
``conformance``, flow set + label + sweep axes): its points are the campaigns' cell figures.
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from interop_runner.analysis.history.changepoints import (
    LINEAR_METRICS,
    METRIC_DIRECTIONS,
    ChangePoint,
    ChangePointSettings,
    Point,
    change_points,
)
from interop_runner.analysis.history.db import CPU_COST_COLUMNS

SERIES_KEYS = ("testbed", "server", "client", "testcase", "signature")
GOODPUT = "goodput_mbps"
CONFORMANCE_METRICS = ("conformance", "conformance_t", "delta_throughput", "delta_delay",
                       "conformance_same_run", "conformance_t_same_run",
                       "delta_throughput_same_run", "delta_delay_same_run")
ATTEMPT_METRICS = (GOODPUT, *CPU_COST_COLUMNS)  # the attempts table's; the rest: conformance
METRIC_GROUPS: dict[str, tuple[str, ...]] = {
    "goodput": (GOODPUT,), "cpu": CPU_COST_COLUMNS, "conformance": CONFORMANCE_METRICS,
    "all": (*ATTEMPT_METRICS, *CONFORMANCE_METRICS)}
UNITS = {GOODPUT: "Mbit/s", "server_cpu_s_per_gib": "CPU-s/GiB",
         "client_cpu_s_per_gib": "CPU-s/GiB", "server_cycles_per_byte": "cycles/byte",
         "client_cycles_per_byte": "cycles/byte", "conformance": "share",
         "conformance_t": "share", "delta_throughput": "Mbit/s", "delta_delay": "ms",
         "conformance_same_run": "share", "conformance_t_same_run": "share",
         "delta_throughput_same_run": "Mbit/s", "delta_delay_same_run": "ms"}
CONFORMANCE_TESTCASE = "conformance"  # the testcase of a conformance series
CHANGE_COLUMNS = ("series", *SERIES_KEYS, "metric", "campaign", "time", "versions_before",
                  "versions_after", "n_before", "n_after", "median_before", "median_after",
                  "rel_change", "ci_low", "ci_high", "p_value", "p_at_split", "verdict",
                  "regression", "newest", "index", "points")


def series_id(key: Sequence[Any]) -> str:
    """A short stable id of a series key (8 hex digits)."""
    text = "\0".join("" if pd.isna(k) else str(k) for k in key)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _ok(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Ok attempts with a positive value of ``metric`` (a linear metric: any value)."""
    if metric not in frame.columns:
        return frame.iloc[0:0]
    values = pd.to_numeric(frame[metric], errors="coerce")
    usable = values.notna() if metric in LINEAR_METRICS else values > 0
    return frame[(frame["status"].astype("string") == "ok").fillna(False) & usable]


def conformance_series_rows(conformance: pd.DataFrame) -> pd.DataFrame:
    """The conformance table's rows (:func:`~.db.load_conformance`) as rows of the history
    frame, so that :func:`check` finds their change points: ``server`` the tested stack,
    ``client`` the kernel reference flow (``tcp/cubic``), ``testcase``
    :data:`CONFORMANCE_TESTCASE`, ``signature`` the flow set, label and sweep axes;
    ``status`` ok where figures exist (against the kernel-vs-kernel runs or the same-run
    ones: each metric's own values say which); ``client_version`` the stack's version
    too."""
    present = conformance["conformance_missing"].isna().to_numpy(dtype=bool)
    if "conformance_same_run_missing" in conformance.columns:  # a version 3 table
        present = present | conformance["conformance_same_run_missing"].isna().to_numpy(
            dtype=bool)
    return conformance.assign(
        server=conformance["stack"], client=conformance["reference_label"],
        testcase=CONFORMANCE_TESTCASE, status=np.where(present, "ok", "missing"),
        client_version=conformance["server_version"], knobs=None)


def filter_series(frame: pd.DataFrame, **wanted: str | None) -> pd.DataFrame:
    """Rows whose key columns equal the given values (None: any); ``series`` filters by
    :func:`series_id`."""
    mask = pd.Series(True, index=frame.index)
    for column, value in wanted.items():
        if value is None:
            continue
        if column == "series":
            ids = frame[list(SERIES_KEYS)].astype(object).apply(
                lambda r: series_id(tuple(r)), axis=1)
            mask &= ids == value
        else:
            mask &= (frame[column].astype("string") == value).fillna(False)
    return frame[mask]


def series_count(frame: pd.DataFrame) -> int:
    """How many series the attempts of ``frame`` belong to."""
    return 0 if frame.empty else int(frame[list(SERIES_KEYS)].drop_duplicates().shape[0])


def series_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per series: id, key, campaigns, first and last campaign time, the newest
    median goodput and the metrics that have values."""
    rows = []
    for key, group in _groups(frame):
        times = pd.to_datetime(group["campaign_started_at"], utc=True)
        newest = group[times == times.max()]
        ok = _ok(newest, GOODPUT)
        rows.append({
            "series": series_id(key), **dict(zip(SERIES_KEYS, key)),
            "campaigns": int(group["campaign"].nunique()), "first": times.min(),
            "last": times.max(),
            "last_median_mbps": float(np.median(ok[GOODPUT])) if len(ok) else np.nan,
            "metrics": ",".join(m for m in METRIC_GROUPS["all"] if len(_ok(group, m)))})
    return pd.DataFrame(rows, columns=["series", *SERIES_KEYS, "campaigns", "first", "last",
                                       "last_median_mbps", "metrics"])


def _groups(frame: pd.DataFrame) -> Iterable[tuple[tuple[Any, ...], pd.DataFrame]]:
    keys = list(SERIES_KEYS)
    if frame.empty:
        return []
    filled = frame.assign(**{k: frame[k].astype("string").fillna("") for k in keys})
    return ((tuple(k), g) for k, g in filled.groupby(keys, sort=True))


def points(group: pd.DataFrame, metric: str = GOODPUT) -> list[Point]:
    """The points of one series (its rows): one per campaign with an ok value, oldest
    first (none when the rows lack ``metric``: attempts have no conformance)."""
    if metric not in group.columns:
        return []
    ok = _ok(group, metric)
    if "knobs" not in ok.columns:  # a database written before host knobs were kept
        ok = ok.assign(knobs=None)
    ok = ok[["campaign", "campaign_started_at", metric, "server_version", "client_version",
             "knobs"]]
    out = []
    for campaign, rows in ok.groupby("campaign", sort=False):
        out.append((pd.Timestamp(rows["campaign_started_at"].min()), Point(
            str(campaign), pd.Timestamp(rows["campaign_started_at"].min()).isoformat(),
            tuple(rows[metric].astype(float)), _common(rows["server_version"]),
            _common(rows["client_version"]), _common(rows["knobs"]))))
    return [p for _, p in sorted(out, key=lambda tp: (tp[0], tp[1].campaign))]


def _common(values: "pd.Series[Any]") -> str | None:
    counts = values.dropna().astype(str).value_counts()
    return str(counts.index[0]) if len(counts) else None


def points_frame(pts: Sequence[Point]) -> pd.DataFrame:
    """Points as a table: campaign, time, n, median, versions."""
    return pd.DataFrame([{"campaign": p.campaign, "time": p.time, "n": p.n,
                          "median": p.median, "server_version": p.server_version,
                          "client_version": p.client_version} for p in pts],
                        columns=["campaign", "time", "n", "median", "server_version",
                                 "client_version"])


def by_version(pts: Sequence[Point]) -> pd.DataFrame:
    """Points grouped by versions, in order of first appearance: campaigns, the median of
    their medians, first and last campaign."""
    frame = points_frame(pts).assign(versions=[p.versions for p in pts])
    if frame.empty:
        return pd.DataFrame(columns=["versions", "campaigns", "median", "first", "last"])
    grouped = frame.groupby("versions", sort=False)
    return pd.DataFrame({"campaigns": grouped.size(), "median": grouped["median"].median(),
                         "first": grouped["campaign"].first(),
                         "last": grouped["campaign"].last()}).reset_index()


def check(frame: pd.DataFrame, metrics: Sequence[str] = (GOODPUT,),
          settings: ChangePointSettings = ChangePointSettings()) -> pd.DataFrame:
    """Every significant change point of every series and metric (:data:`CHANGE_COLUMNS`);
    ``newest`` is True on the last change point of a series and metric (the newest point of
    the series lies in the segment it opens)."""
    rows = []
    for key, group in _groups(frame):
        for metric in metrics:
            pts = points(group, metric)
            found = change_points(pts, settings, metric)
            rows += [_row(key, metric, c, c is found[-1], len(pts)) for c in found]
    return pd.DataFrame(rows, columns=list(CHANGE_COLUMNS))


def _row(key: tuple[Any, ...], metric: str, change: ChangePoint, newest: bool,
         n_points: int) -> dict[str, Any]:
    return {"series": series_id(key), **dict(zip(SERIES_KEYS, key)), "metric": metric,
            "campaign": change.campaign, "time": change.time,
            "versions_before": change.versions_before, "versions_after": change.versions_after,
            "n_before": change.n_before, "n_after": change.n_after,
            "median_before": change.median_before, "median_after": change.median_after,
            "rel_change": change.rel_change, "ci_low": change.ci_low, "ci_high": change.ci_high,
            "p_value": change.p_value, "p_at_split": change.p_at_split,
            "verdict": change.verdict, "regression": change.regression, "newest": newest,
            "index": change.index, "points": n_points}


def open_regressions(changes: pd.DataFrame, recent: int | None = None) -> pd.DataFrame:
    """The change points that make ``history check`` exit 5: the newest significant change
    point of a series and metric is a regression (the series' newest campaign lies in the
    regressed segment), and with ``recent`` it opened within the newest ``recent`` points."""
    if changes.empty:
        return changes
    hits = changes[changes["newest"].astype(bool) & changes["regression"].astype(bool)]
    if recent is not None:
        hits = hits[hits["points"] - hits["index"] <= recent]
    return hits


def regression_direction(metric: str) -> str:
    """``down`` when a lower value is worse (goodput), ``up`` when a higher one is (cost)."""
    return "down" if METRIC_DIRECTIONS.get(metric, -1) < 0 else "up"
