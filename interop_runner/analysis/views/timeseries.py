"""Views on the long frames: perf categories per implementation and role (paper Fig. 7) and
the receive rate over the seconds of a transfer."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from interop_runner.analysis.frames.series import load_interface_rates, load_perf_categories
from interop_runner.analysis.theories.stats import ok_mask
from interop_runner.analysis.views._common import (
    Source,
    as_paths,
    empty,
    figure,
    finish_share_bars,
    no_data,
    pair_label,
)
from interop_runner.parsers.perf import CATEGORIES

PERF_COLUMNS = ["implementation", "role", "category", "attempts", "median_share", "mean_share"]
RATE_COLUMNS = ["server", "client", "pair", "repetition", "attempt", "role", "iface", "t_s",
                "rate_mbps"]
_WIDE = re.compile(r"^(server|client)_perf_(.+)_share$")
_SLUGS = {c.lower().replace(" ", "_").replace("/", ""): c for c in CATEGORIES}


def _perf_long(source: Source) -> pd.DataFrame:
    """One row per attempt, role and category: implementation, role, category, share."""
    if not isinstance(source, pd.DataFrame):
        source = load_perf_categories(*as_paths(source))
    if {"category", "share", "role"} <= set(source.columns):  # load_perf_categories
        long = source
        if "scope" in long.columns:
            long = long[long["scope"] == "process"]
        impl = [row["server"] if row["role"] == "server" else row["client"]
                for _, row in long.iterrows()]
        ids = [c for c in ("campaign", "server", "client", "testcase", "variant", "repetition",
                           "attempt", "path") if c in long.columns]
        attempt_id = [str(key) for key in long[ids].itertuples(index=False)] if ids \
            else [str(i) for i in long.index]
        return pd.DataFrame({"implementation": impl, "role": list(long["role"]),
                             "category": list(long["category"]),
                             "share": pd.to_numeric(long["share"]).astype(float).to_numpy(),
                             "attempt_id": attempt_id})
    wide = source[ok_mask(source)] if "goodput_mbps" in source else source
    rows = []
    for column in wide.columns:
        match = _WIDE.match(str(column))
        if not match or match.group(1) not in wide.columns:
            continue
        role, slug = match.groups()
        for index, impl, share in zip(wide.index, wide[role], wide[column]):
            if pd.notna(share):
                rows.append({"implementation": impl, "role": role,
                             "category": _SLUGS.get(slug, slug), "share": float(share),
                             "attempt_id": index})
    return pd.DataFrame(rows, columns=["implementation", "role", "category", "share",
                                       "attempt_id"])


def perf_categories(frame_or_paths: Source) -> tuple[pd.DataFrame, Figure]:
    """Share of CPU samples per perf category, per implementation and role.

    Accepts the results frame (its ``<role>_perf_<category>_share`` columns), the long frame
    of :func:`~interop_runner.analysis.frames.series.load_perf_categories` (process scope), or
    campaign paths to load it from. Per implementation, role and category: the number of
    attempts and the median and mean share (the means of one bar add up to 1, the bars
    stack them; a category absent in an attempt counts as 0 there).
    """
    title = "CPU samples per perf category (Fig. 7)"
    long = _perf_long(frame_or_paths)
    if long.empty:
        return empty(PERF_COLUMNS), no_data("perf categories (perf monitor)", title)
    # an attempt without a category its implementation and role show elsewhere: share 0
    full = long.pivot_table(index=["implementation", "role", "attempt_id"],
                            columns="category", values="share", aggfunc="sum", fill_value=0.0)
    melted = full.reset_index().melt(id_vars=["implementation", "role", "attempt_id"],
                                     var_name="category", value_name="share")
    seen = set(zip(long["implementation"], long["role"], long["category"]))
    melted = melted[[key in seen for key in zip(melted["implementation"], melted["role"],
                                                melted["category"])]]
    grouped = melted.groupby(["implementation", "role", "category"], sort=True)
    table = pd.DataFrame({"attempts": grouped.size(), "median_share": grouped["share"].median(),
                          "mean_share": grouped["share"].mean()}).reset_index()
    order = {c: i for i, c in enumerate(CATEGORIES)}
    table = table.sort_values(["implementation", "role", "category"], key=lambda s: s.map(
        lambda v: order.get(v, len(order))) if s.name == "category" else s, ignore_index=True)
    table = table.reindex(columns=PERF_COLUMNS)
    bars = list(dict.fromkeys(zip(table["implementation"], table["role"])))
    fig, (ax,) = figure(size=(8.0, max(3.0, 0.45 * len(bars) + 1.5)))
    left = np.zeros(len(bars))
    for category in dict.fromkeys(table["category"]):
        rows = table[table["category"] == category].set_index(["implementation", "role"])
        width = np.array([float(rows.loc[b, "mean_share"]) if b in rows.index else 0.0
                          for b in bars])
        ax.barh(range(len(bars)), width, left=left, label=str(category))
        left += width
    finish_share_bars(ax, [f"{impl} ({role})" for impl, role in bars],
                      "mean share of non-idle samples", title)
    return table, fig


def _seconds(clock: "pd.Series[str]") -> "pd.Series[float]":
    """HH:MM:SS -> seconds of the day."""
    parts = clock.str.split(":", expand=True).astype(float)
    return parts[0] * 3600 + parts[1] * 60 + parts[2]


def goodput_over_time(paths: Source) -> tuple[pd.DataFrame, Figure]:
    """The client's receive rate on the data interface per second (ifstat monitor) over
    each transfer: an upper view of goodput over time (it counts headers too).

    Accepts campaign paths (or the frame of
    :func:`~interop_runner.analysis.frames.series.load_interface_rates`). One row per sample:
    pair, repetition, attempt, ``t_s`` (seconds since the attempt's first sample) and
    ``rate_mbps`` (client receive rate; the server's transmit rate when the client has no
    samples).
    """
    title = "Receive rate over time (ifstat)"
    rates = paths if isinstance(paths, pd.DataFrame) else load_interface_rates(*as_paths(paths))
    needed = {"role", "rx_mbps", "tx_mbps", "server", "client"}
    timed = "time_of_day" in rates.columns or "timestamp" in rates.columns
    if rates.empty or not needed <= set(rates.columns) or not timed:
        return empty(RATE_COLUMNS), no_data("per-second rates (ifstat monitor)", title)
    client = rates[rates["role"] == "client"].assign(rate_mbps=lambda f: f["rx_mbps"])
    server = rates[rates["role"] == "server"].assign(rate_mbps=lambda f: f["tx_mbps"])
    ids = [c for c in ("campaign", "server", "client", "repetition", "attempt")
           if c in rates.columns]
    have = set(map(tuple, client[ids].astype(str).to_numpy()))
    server = server[[tuple(r) not in have for r in server[ids].astype(str).to_numpy()]]
    data = pd.concat([client, server], ignore_index=True)
    if "timestamp" in data and data["timestamp"].notna().all():
        data["_t"] = data["timestamp"].astype(float)
    else:
        data["_t"] = _seconds(data["time_of_day"].astype(str))
    keys = [*ids, "role", *(["iface"] if "iface" in data.columns else [])]
    groups = data.groupby(keys, dropna=False, sort=False)["_t"]
    t = data["_t"] - groups.transform("first")
    data["t_s"] = t.where(t >= 0, t + 86400)  # a transfer running over midnight
    data["pair"] = [pair_label(s, c) for s, c in zip(data["server"], data["client"])]
    table = data.reindex(columns=RATE_COLUMNS).sort_values(
        ["server", "client", "repetition", "attempt", "t_s"], ignore_index=True)
    fig, (ax,) = figure(size=(8.0, 4.0))
    colors = {p: f"C{i}" for i, p in enumerate(dict.fromkeys(table["pair"]))}
    for (pair, _, _), rows in table.groupby(["pair", "repetition", "attempt"], sort=False,
                                             dropna=False):
        ax.plot(rows["t_s"], rows["rate_mbps"].astype(float), color=colors[str(pair)],
                alpha=0.7, linewidth=1)
    for pair, color in colors.items():
        ax.plot([], [], color=color, label=pair)
    ax.set_xlabel("time since the first sample [s]")
    ax.set_ylabel("rate [Mbit/s]")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    ax.set_title(title)
    return table, fig
