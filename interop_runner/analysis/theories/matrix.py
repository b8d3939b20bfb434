"""Server x client matrices: median goodput of every pair (paper Fig. 6) and the CPU cost of
moving the data (CPU-seconds or cycles per delivered byte, per side), as tables and heatmaps.

The CPU cost columns of :func:`~interop_runner.analysis.load_results` are
``server_cpu_s_per_gib`` / ``client_cpu_s_per_gib`` (CPU-seconds, user + system, of the
implementation's processes per GiB delivered) and ``server_cycles_per_byte`` /
``client_cycles_per_byte``; NaN means not measured, never 0. A cost matrix is the median over
the ok attempts of one side's column, or of ``total`` = server + client per attempt (an attempt
counts for the total only when both sides were measured).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import pandas as pd

from interop_runner.analysis.theories.stats import ok_mask

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

Side = Literal["server", "client", "total"]
SIDES: tuple[Side, ...] = ("server", "client", "total")
# cost metric (column suffix) -> unit label and how a cell's value is written in the heatmap
COST_METRICS: dict[str, tuple[str, str]] = {
    "cpu_s_per_gib": ("CPU-s/GiB", "{:.3g}"),
    "cycles_per_byte": ("cycles/B", "{:.3g}"),
}
GOODPUT = "goodput_mbps"
# viridis: bright = high goodput (good); reversed for costs, so bright stays the good end
GOODPUT_CMAP = "viridis"
COST_CMAP = "viridis_r"


# a heatmap's colour scale spans at least this share of its median: cells within 0.3 % of
# each other are one colour, not yellow to dark purple (and the spread is printed)
MIN_COLOUR_SPAN = 0.05


def colour_limits(values: Any, min_span: float = MIN_COLOUR_SPAN
                  ) -> tuple[float, float] | None:
    """The colour scale of a heatmap's finite ``values``: their range, widened around their
    median to at least ``min_span`` of it (0.05: +-2.5 %) when it is narrower, so that a
    narrow spread does not stretch over the whole colour map. None without a finite value."""
    spread = _spread(values)
    if spread is None:
        return None
    low, high, middle = spread
    half = min_span * abs(middle) / 2
    return min(low, middle - half), max(high, middle + half)


def narrow_spread(values: Any, min_span: float = MIN_COLOUR_SPAN) -> str | None:
    """``cells within 0.3 % (19.1-19.2)`` when the finite ``values`` spread over less than
    ``min_span`` of their median (:func:`colour_limits` widened the scale), else None."""
    spread = _spread(values)
    if spread is None or spread[0] == spread[1]:  # one value (or one cell): no spread
        return None
    low, high, middle = spread
    if not middle or high - low >= min_span * abs(middle):
        return None
    return f"cells within {100 * (high - low) / abs(middle):.1f} % ({low:.4g}-{high:.4g})"


def _spread(values: Any) -> tuple[float, float, float] | None:
    """Minimum, maximum and median of the finite values; None without one."""
    import numpy as np

    finite = np.asarray(values, dtype=float)
    finite = finite[np.isfinite(finite)]
    if not finite.size:
        return None
    return float(finite.min()), float(finite.max()), float(np.median(finite))


def median_matrix(frame: pd.DataFrame, value: str = GOODPUT) -> pd.DataFrame:
    """Median of ``value`` over the ok attempts that have it: rows = servers, columns =
    clients (every server and client of the frame). A pair without such an attempt is <NA>."""
    servers = sorted(frame["server"].dropna().unique())
    clients = sorted(frame["client"].dropna().unique())
    ok = frame[ok_mask(frame, value)]
    if ok.empty:
        table = pd.DataFrame(index=servers, columns=clients, dtype="Float64")
    else:
        numbers = ok.assign(**{value: pd.to_numeric(ok[value], errors="coerce")})
        table = numbers.pivot_table(index="server", columns="client", values=value,
                                    aggfunc="median", observed=True)
        table = table.reindex(index=servers, columns=clients).astype("Float64")
    table.index.name, table.columns.name = "server", "client"
    return table


def goodput_matrix(frame: pd.DataFrame) -> pd.DataFrame:
    """Median goodput (Mbit/s) of the ok attempts: rows = servers, columns = clients.

    A pair without any ok attempt is <NA>.
    """
    return median_matrix(frame, GOODPUT)


def cost_column(side: Side, metric: str = "cpu_s_per_gib") -> str:
    """The frame column of one side's cost, e.g. ``client_cpu_s_per_gib``."""
    if side not in SIDES or metric not in COST_METRICS:
        raise ValueError(f"unknown cost {side!r} / {metric!r}: sides {', '.join(SIDES)}, "
                         f"metrics {', '.join(COST_METRICS)}")
    return f"{side}_{metric}"


def with_costs(frame: pd.DataFrame, metric: str = "cpu_s_per_gib") -> pd.DataFrame:
    """The frame with both sides' cost columns (NaN where missing) and their per-attempt sum
    ``total_<metric>`` (NaN unless both sides were measured)."""
    sides = {s: cost_column(s, metric) for s in ("server", "client")}
    values = {s: pd.to_numeric(frame[c], errors="coerce") if c in frame.columns
              else pd.Series(float("nan"), index=frame.index) for s, c in sides.items()}
    return frame.assign(**{sides["server"]: values["server"], sides["client"]: values["client"],
                           cost_column("total", metric): values["server"] + values["client"]})


def cost_matrix(frame: pd.DataFrame, side: Side = "total",
                metric: str = "cpu_s_per_gib") -> pd.DataFrame:
    """Median CPU cost of the ok attempts per server x client (default: CPU-seconds per GiB,
    server + client). A pair without an ok attempt whose cost was measured is <NA>."""
    return median_matrix(with_costs(frame, metric), cost_column(side, metric))


def status_matrix(frame: pd.DataFrame, value: str = GOODPUT,
                  number: str = "{:.1f}") -> pd.DataFrame:
    """Per pair, a short text: the median of ``value``, plus what went wrong in how many
    attempts.

    ``1234.5``, ``1234.5 (1/3 failed)``, ``failed 3/3``, ``unsupported``; ``NA`` when ok
    attempts exist but none has the value (a cost that was not measured).
    """
    medians = median_matrix(frame, value)
    out = pd.DataFrame("-", index=medians.index, columns=medians.columns, dtype="string")
    for key, group in frame.groupby(["server", "client"], observed=True):
        server, client = str(key[0]), str(key[1])
        median = medians.at[server, client]
        known = None if pd.isna(median) else float(median)  # type: ignore[arg-type]
        out.at[server, client] = _status_text(group["status"], known, number)
    return out


def _status_text(status: "pd.Series[Any]", median: float | None, number: str) -> str:
    """One cell of :func:`status_matrix`."""
    counts = status.value_counts()
    n = len(status)
    bad = {s: int(counts.get(s, 0)) for s in ("failed", "timeout", "unsupported")}
    if median is None:
        if int(counts.get("ok", 0)):
            return "NA"
        if bad["unsupported"] == n:
            return "unsupported"
        worst = max(bad, key=lambda s: bad[s])
        return f"{worst} {bad[worst]}/{n}"
    notes = [f"{k} {v}/{n}" for k, v in bad.items() if v]
    return number.format(median) + (f" ({', '.join(notes)})" if notes else "")


def plot_matrix(frame: pd.DataFrame, ax: "Axes | None" = None, *, title: str | None = None,
                cmap: str = GOODPUT_CMAP, value: str = GOODPUT,
                label: str = "median goodput [Mbit/s]", number: str = "{:.0f}",
                limits: tuple[float, float] | None = None) -> "Axes":
    """Heatmap of the median of ``value`` per server x client (default: goodput, paper
    Fig. 6) with the value, the failure or ``NA`` (ok attempts, value not measured) in every
    cell.

    ``cmap`` runs from worst to best for goodput; costs pass a reversed map (see
    :func:`plot_cost_matrix`). ``label`` names the colour bar, ``number`` formats a cell,
    ``limits`` fixes the colour scale (several panels on one scale).
    """
    medians = median_matrix(frame, value)
    if ax is None:
        ax = _new_axes(medians)
    image = _draw_cells(ax, medians, status_matrix(frame, value), cmap, number, limits)
    colorbar: Any = ax.figure.colorbar(image, ax=ax)
    spread = narrow_spread(medians.to_numpy(dtype=float, na_value=float("nan")))
    colorbar.set_label(label + (f"\n{spread}" if spread else ""))
    default = "Goodput" if value == GOODPUT else value
    ax.set_title(title or f"{default} per server x client")
    return ax


def plot_cost_matrix(frame: pd.DataFrame, ax: "Axes | None" = None, *, side: Side = "total",
                     metric: str = "cpu_s_per_gib", title: str | None = None,
                     limits: tuple[float, float] | None = None) -> "Axes":
    """Heatmap of :func:`cost_matrix`: a higher cost is darker; ``NA`` where not measured."""
    column = cost_column(side, metric)
    unit, number = COST_METRICS[metric]
    who = {"total": "server + client"}.get(side, side)
    return plot_matrix(with_costs(frame, metric), ax, value=column, cmap=COST_CMAP,
                       label=f"median {unit} ({who})", number=number, limits=limits,
                       title=title or f"{unit} of the {who}")


def cost_heatmap(frame: pd.DataFrame, metric: str = "cpu_s_per_gib"
                 ) -> "tuple[pd.DataFrame, Figure | None]":
    """The report's CPU cost view: one panel per side (server above client), one colour scale,
    and per pair the ok attempts and the median cost per side and in total. No figure (and an
    empty frame) when no attempt has a cost."""
    from matplotlib.figure import Figure

    costs = with_costs(frame, metric)
    columns = [cost_column(s, metric) for s in SIDES]
    table = _cost_table(costs, columns)
    if table.empty or not table[columns[:2]].notna().to_numpy().any():
        return table.iloc[0:0], None
    drawn = table[columns[:2]].to_numpy(dtype=float, na_value=float("nan"))
    limits = colour_limits(drawn)
    servers, clients = costs["server"].nunique(), costs["client"].nunique()
    # panels stacked: as wide as the goodput heatmap, so the report shows the two side by side
    fig = Figure(figsize=(max(4.5, 0.9 * clients + 2.5), 2 * max(3.5, 0.7 * servers + 1.5)),
                 layout="constrained")
    sides: tuple[Side, Side] = ("server", "client")
    for ax, side in zip(fig.subplots(2, 1), sides):
        plot_cost_matrix(costs, ax, side=side, metric=metric, limits=limits)
    return table, fig


def _cost_table(costs: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Per pair: ok attempts and the median of each cost column over them."""
    ok = costs[(costs["status"].astype("string") == "ok").fillna(False)]
    if ok.empty:
        return pd.DataFrame(columns=["server", "client", "ok", *columns])
    grouped = ok.groupby(["server", "client"], observed=True)
    table = grouped[columns].median()
    table.insert(0, "ok", grouped.size())
    return table.reset_index()


def _new_axes(medians: pd.DataFrame) -> "Axes":
    """Pyplot axes sized for the matrix (the command line's figure)."""
    import matplotlib.pyplot as plt

    size = max(4.0, 0.9 * len(medians.columns) + 2)
    _, ax = plt.subplots(figsize=(size, max(3.5, 0.7 * len(medians.index) + 1.5)))
    return ax


def _draw_cells(ax: "Axes", medians: pd.DataFrame, labels: pd.DataFrame, cmap: str,
                number: str, limits: tuple[float, float] | None) -> Any:
    """The coloured cells, the axis labels and each cell's text; returns the image."""
    import numpy as np

    values = medians.to_numpy(dtype=float, na_value=np.nan)
    vmin, vmax = limits or colour_limits(values) or (None, None)
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, aspect="auto",
                      vmin=vmin, vmax=vmax)
    ax.set_facecolor("#dddddd")  # pairs without a value
    ax.set_xticks(range(len(medians.columns)), list(medians.columns), rotation=45, ha="right")
    ax.set_yticks(range(len(medians.index)), list(medians.index))
    ax.set_xlabel("client")
    ax.set_ylabel("server")
    for i, server in enumerate(medians.index):
        for j, client in enumerate(medians.columns):
            value = values[i, j]
            finite = bool(np.isfinite(value))
            text = number.format(value) if finite else _short(labels.loc[server, client])
            ax.text(j, i, text, ha="center", va="center", fontsize=8,
                    color=_text_colour(image, value) if finite else "black")
    return image


def _text_colour(image: Any, value: float) -> str:
    """Black on a light cell, white on a dark one (whatever the colour map)."""
    red, green, blue, _ = image.cmap(image.norm(value))
    return "black" if 0.299 * red + 0.587 * green + 0.114 * blue > 0.5 else "white"


def _short(label: str) -> str:
    return {"unsupported": "n/s", "-": ""}.get(label, label.split(" ")[0])
