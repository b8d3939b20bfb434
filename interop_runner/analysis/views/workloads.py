"""Workloads (docs/workloads.md): upload against download per stack, with the sending and the
receiving side's CPU per GiB; goodput against streams per connection, a line per number of
connections."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from interop_runner.analysis.theories.stats import STAT_COLUMNS, cell_stats
from interop_runner.analysis.views._common import (
    cell_medians,
    empty,
    figure,
    grouped_bars,
    has_values,
    no_data,
    pair_label,
)

DIRECTION_KEYS = ["pair", "direction"]
DIRECTION_COLUMNS = [*DIRECTION_KEYS, *STAT_COLUMNS, "sender_cpu_s_per_gib",
                     "receiver_cpu_s_per_gib"]
STREAM_KEYS = ["pair", "direction", "connections", "streams"]
STREAM_COLUMNS = [*STREAM_KEYS, *STAT_COLUMNS, "sender_cpu_s_per_gib", "receiver_cpu_s_per_gib"]


def _with_sides(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with ``pair`` and each attempt's sending and receiving side's CPU per GiB
    (a download's sender is the server, an upload's the client; a bidirectional attempt's
    sides both send and receive, so it has neither)."""
    out = frame.copy()
    out["pair"] = [pair_label(s, c) for s, c in zip(out["server"], out["client"])]
    for side, download_role, upload_role in (("sender", "server", "client"),
                                             ("receiver", "client", "server")):
        values = pd.Series(float("nan"), index=out.index)
        for direction, role in (("download", download_role), ("upload", upload_role)):
            column = f"{role}_cpu_s_per_gib"
            if column in out.columns:
                rows = out["direction"] == direction
                values[rows] = pd.to_numeric(out.loc[rows, column], errors="coerce")
        out[f"{side}_cpu_s_per_gib"] = values
    return out


def _cells(frame: pd.DataFrame, keys: list[str], columns: list[str]) -> pd.DataFrame:
    """Goodput statistics per cell of ``keys`` with the median CPU per GiB of both sides."""
    sides = _with_sides(frame)
    # cell_stats builds its rows from dicts: a key column holding NA comes back as object
    stats = cell_stats(sides, keys).astype({k: sides[k].dtype for k in keys})
    cpu = cell_medians(sides, keys, {c: c for c in ("sender_cpu_s_per_gib",
                                                    "receiver_cpu_s_per_gib")})
    out = stats.merge(cpu, on=keys, how="left") if not cpu.empty else stats
    return out.reindex(columns=columns)


def direction_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Per pair and direction (download, upload, bidirectional): goodput statistics and the
    median CPU per GiB of the sending and the receiving side."""
    if not has_values(frame, "goodput_mbps") or "direction" not in frame.columns:
        return empty(DIRECTION_COLUMNS)
    return _cells(frame, DIRECTION_KEYS, DIRECTION_COLUMNS)


def upload_vs_download(frame: pd.DataFrame) -> tuple[pd.DataFrame, Figure]:
    """Goodput of each direction per pair (bars with the median's interval), and the
    sending and receiving side's CPU per GiB."""
    table = direction_frame(frame)
    title = "Upload against download"
    # one direction alone is the interop matrix's goodput again: nothing to set against
    if table.empty or table.loc[table["n"] > 0, "direction"].nunique() < 2:
        return empty(DIRECTION_COLUMNS), no_data("attempts in more than one direction", title)
    fig, (ax, cpu_ax) = figure(1, 2, size=(11.0, 4.0))
    grouped_bars(ax, table, "pair", "direction")
    ax.set_ylabel("goodput (Mbit/s)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    one_way = table.loc[table["direction"] != "bidirectional",
                        [*DIRECTION_KEYS, "sender_cpu_s_per_gib", "receiver_cpu_s_per_gib"]]
    long = one_way.melt(id_vars=DIRECTION_KEYS, var_name="side", value_name="median")
    long["bar"] = long["direction"] + " " + long["side"].str.removesuffix("_cpu_s_per_gib")
    grouped_bars(cpu_ax, long, "pair", "bar")
    cpu_ax.set_ylabel("CPU-s per GiB")
    cpu_ax.set_title("CPU per GiB: sending and receiving side")
    cpu_ax.legend(fontsize=7)
    return table, fig


def streams_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Per pair, direction, connections and streams: goodput statistics and CPU per GiB."""
    needed = ("direction", "streams", "connections")
    if not has_values(frame, "goodput_mbps") or any(c not in frame.columns for c in needed):
        return empty(STREAM_COLUMNS)
    # records written before workloads hold no counts (object columns of NA): one integer
    # dtype on both sides of the statistics' merge
    counts = frame.assign(**{c: pd.to_numeric(frame[c], errors="coerce").astype("Int64")
                             for c in ("streams", "connections")})
    return _cells(counts, STREAM_KEYS, STREAM_COLUMNS)


def goodput_vs_streams(frame: pd.DataFrame) -> tuple[pd.DataFrame, Figure]:
    """Median goodput against streams per connection, a panel per pair and direction, a line
    per number of connections (the interval of the median as a band)."""
    table = streams_frame(frame)
    title = "Goodput against streams and connections"
    ok = table[table["n"] > 0] if not table.empty else table
    # one (streams, connections) per pair and direction has no line to draw
    counts = ok.dropna(subset=STREAM_KEYS).drop_duplicates(STREAM_KEYS)
    if counts.empty or counts.groupby(["pair", "direction"]).size().max() < 2:
        return empty(STREAM_COLUMNS), no_data("attempts with several streams or connections",
                                              title)
    panels = list(dict.fromkeys(zip(ok["pair"], ok["direction"])))
    fig, axes = figure(1, len(panels), size=(4.0 * len(panels), 3.6), sharey=True)
    for ax, (pair, direction) in zip(axes, panels):
        cell = ok[(ok["pair"] == pair) & (ok["direction"] == direction)]
        for conns, line in cell.groupby("connections", sort=True):
            line = line.sort_values("streams")
            ax.plot(line["streams"], line["median"], marker="o", label=f"{conns} conn.")
            ax.fill_between(line["streams"].astype(float), line["ci_low"].astype(float),
                            line["ci_high"].astype(float), alpha=0.2)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("streams per connection")
        ax.set_title(f"{pair}, {direction}", fontsize=9)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("goodput (Mbit/s)")
    fig.suptitle(title)
    return table, fig
