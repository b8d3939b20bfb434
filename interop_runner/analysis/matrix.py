"""The interop matrix (paper Fig. 6): median goodput of every server x client pair."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def goodput_matrix(frame: pd.DataFrame) -> pd.DataFrame:
    """Median goodput (Mbit/s) of the ok attempts: rows = servers, columns = clients.

    A pair without any ok attempt is <NA>.
    """
    ok = frame[frame["status"] == "ok"]
    servers = sorted(frame["server"].dropna().unique())
    clients = sorted(frame["client"].dropna().unique())
    table = ok.pivot_table(index="server", columns="client", values="goodput_mbps",
                           aggfunc="median", observed=True)
    table = table.reindex(index=servers, columns=clients).astype("Float64")
    table.index.name, table.columns.name = "server", "client"
    return table


def status_matrix(frame: pd.DataFrame) -> pd.DataFrame:
    """Per pair, a short text: the median, plus what went wrong in how many attempts.

    ``1234.5``, ``1234.5 (1/3 failed)``, ``failed 3/3``, ``unsupported``.
    """
    medians = goodput_matrix(frame)
    cells: dict[tuple[str, str], str] = {}
    for key, group in frame.groupby(["server", "client"], observed=True):
        server, client = str(key[0]), str(key[1])
        counts = group["status"].value_counts()
        n = len(group)
        bad = {s: int(counts.get(s, 0)) for s in ("failed", "timeout", "unsupported")}
        value = medians.at[server, client]
        median = None if pd.isna(value) else float(value)  # type: ignore[arg-type]
        if median is None:
            if bad["unsupported"] == n:
                cells[(server, client)] = "unsupported"
            else:
                worst = max(bad, key=lambda s: bad[s])
                cells[(server, client)] = f"{worst} {bad[worst]}/{n}"
            continue
        notes = [f"{k} {v}/{n}" for k, v in bad.items() if v]
        cells[(server, client)] = f"{median:.1f}" + (f" ({', '.join(notes)})" if notes else "")
    out = pd.DataFrame("", index=medians.index, columns=medians.columns, dtype="string")
    for (server, client), text in cells.items():
        out.loc[server, client] = text
    out = out.fillna("-")
    out[out == ""] = "-"
    return out


def plot_matrix(frame: pd.DataFrame, ax: "Axes | None" = None, *, title: str | None = None,
                cmap: str = "viridis") -> "Axes":
    """Heatmap of :func:`goodput_matrix` with the value (or the failure) in every cell."""
    import matplotlib.pyplot as plt
    import numpy as np

    medians = goodput_matrix(frame)
    labels = status_matrix(frame)
    if ax is None:
        size = max(4.0, 0.9 * len(medians.columns) + 2)
        _, ax = plt.subplots(figsize=(size, max(3.5, 0.7 * len(medians.index) + 1.5)))
    values = medians.to_numpy(dtype=float, na_value=np.nan)
    masked = np.ma.masked_invalid(values)
    image = ax.imshow(masked, cmap=cmap, aspect="auto")
    ax.set_facecolor("#dddddd")  # pairs without a result
    ax.set_xticks(range(len(medians.columns)), list(medians.columns), rotation=45, ha="right")
    ax.set_yticks(range(len(medians.index)), list(medians.index))
    ax.set_xlabel("client")
    ax.set_ylabel("server")
    finite = values[np.isfinite(values)]
    mid = float(finite.min() + finite.max()) / 2 if finite.size else 0.0
    for i, server in enumerate(medians.index):
        for j, client in enumerate(medians.columns):
            value = values[i, j]
            text = f"{value:.0f}" if np.isfinite(value) else _short(labels.loc[server, client])
            color = "black" if not np.isfinite(value) or value > mid else "white"
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color=color)
    colorbar: Any = ax.figure.colorbar(image, ax=ax)
    colorbar.set_label("median goodput [Mbit/s]")
    ax.set_title(title or "Goodput per server x client")
    return ax


def _short(label: str) -> str:
    return {"unsupported": "n/s", "-": ""}.get(label, label.split(" ")[0])
