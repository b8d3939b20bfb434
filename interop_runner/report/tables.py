"""The tables of a campaign's report section as pandas frames: the summary statistics per
cell, the failed attempts and the implementation versions (rendered by
:mod:`interop_runner.report.html`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from interop_runner.report.model import ReportCampaign, testbed_documents

if TYPE_CHECKING:
    import pandas as pd

# the CPU cost per side in the summary (analysis.theories.matrix: CPU-seconds per GiB delivered)
CPU_COST_COLUMNS = {"server_cpu_s_per_gib": "server CPU-s/GiB",
                    "client_cpu_s_per_gib": "client CPU-s/GiB"}


def summary_table(frame: "pd.DataFrame") -> "pd.DataFrame":
    """:func:`cell_stats` per pair, testbed (when several) and sweep axis value (one column
    per axis that varies, in the axis' own order: 1x, 2x, ..., 16x), else per variant; with
    the median CPU-s/GiB per side over the ok attempts when any attempt measured it. A set of
    flows is one cell, named by its flows (``flows``, ``tcp-reno+quic-go-reno``)."""
    from interop_runner.analysis.frames.results import label_flow_sets
    from interop_runner.analysis.theories.stats import axis_order, cell_stats

    frame = label_flow_sets(frame)
    by = ["server", "client"]
    if "testbed" in frame.columns and frame["testbed"].nunique(dropna=True) > 1:
        by.append("testbed")
    axes = [c for c in frame.columns if c.startswith("axis_") and c != "axis_testbed"
            and frame[c].nunique(dropna=True) > 1]
    if axes:
        by += axes
    elif "variant" in frame.columns and frame["variant"].nunique(dropna=True) > 1:
        by.append("variant")
    table: pd.DataFrame = _with_cpu_costs(cell_stats(frame, by), frame, by)
    if axes and not table.empty:
        rank = {c: {v: i for i, v in enumerate(axis_order(frame[c]))} for c in axes}
        table = table.sort_values(
            by, key=lambda col: col.map(rank[str(col.name)]) if col.name in rank else col,
            kind="stable", ignore_index=True)
    return table.rename(columns={c: c.removeprefix("axis_") for c in axes})


def _with_cpu_costs(table: "pd.DataFrame", frame: "pd.DataFrame",
                    by: list[str]) -> "pd.DataFrame":
    """``table`` (one row per cell of ``by``, in :func:`cell_stats`' order) with the median
    CPU-s/GiB of each side that was measured in any ok attempt."""
    import pandas as pd

    from interop_runner.analysis.theories.stats import ok_mask

    masks = {c: ok_mask(frame, c) for c in CPU_COST_COLUMNS}
    present = [c for c, mask in masks.items() if mask.any()]
    if not present or table.empty:
        return table
    values = pd.DataFrame({CPU_COST_COLUMNS[c]: pd.to_numeric(frame[c], errors="coerce")
                           .where(masks[c]) for c in present}).join(frame[by])
    # grouped exactly as cell_stats groups (sorted, NA keys kept): the rows line up
    medians = values.groupby(by, sort=True, dropna=False, observed=True).median()
    return pd.concat([table, medians.reset_index(drop=True).astype("Float64")], axis=1)


def campaigns_table(campaigns: Sequence[ReportCampaign]) -> "pd.DataFrame":
    """The cells of every campaign in one table, a campaign after the other: the campaign's
    name, then the table the end of its run printed
    (:func:`~interop_runner.analysis.frames.results.summarize`: attempts per status,
    median/min/max goodput, CPU cost per side); a campaign without attempts is one row of 0
    attempts."""
    import pandas as pd

    from interop_runner.analysis.frames.results import summarize

    parts = [summarize(c.frame) if len(c.frame) else pd.DataFrame({"attempts": [0]})
             for c in campaigns]
    parts = [p.assign(campaign=c.name) for c, p in zip(campaigns, parts)]
    table = pd.concat(parts, ignore_index=True)
    return table[["campaign", *(c for c in table.columns if c != "campaign")]]


def failures_table(campaign: ReportCampaign) -> "pd.DataFrame":
    """One row per attempt that did not succeed: who, when, status and reason; a damaged
    run.json or campaign.json (no status) is one too, its status ``damaged``."""
    frame = campaign.frame
    if frame.empty:
        return frame
    status = frame["status"].astype("string")
    bad = frame[status.ne("ok").fillna(True).to_numpy(bool)].copy()  # NA: no status, damaged
    bad["status"] = bad["status"].astype("string").fillna("damaged")
    cols = [c for c in ("server", "client", "testbed", "variant", "repetition", "attempt",
                        "status", "reason") if c in bad.columns]
    if "testbed" in cols and bad["testbed"].nunique(dropna=True) <= 1:
        cols.remove("testbed")
    if "variant" in cols and not bad["variant"].notna().any():
        cols.remove("variant")
    out = bad[cols].copy()
    if "path" in bad.columns:
        out["record"] = [_relative(p, campaign.directory) for p in bad["path"]]
    return out.reset_index(drop=True)


def versions_table(campaign: ReportCampaign) -> "pd.DataFrame":
    """Implementation versions per testbed, role and node (from the prepare step)."""
    import pandas as pd

    rows = []
    for testbed, doc in testbed_documents(campaign).items():
        for key, entry in sorted((doc.get("implementations") or {}).items()):
            role, _, name = str(key).partition(":")
            entry = entry if isinstance(entry, dict) else {}
            rows.append({"testbed": testbed, "implementation": name, "role": role,
                         "node": entry.get("node"), "version": entry.get("version"),
                         "declared": entry.get("declared_version"),
                         "source": str(entry.get("source_hash") or "")[:12] or None,
                         "setup error": entry.get("setup_error")})
    table = pd.DataFrame(rows)
    if not table.empty:
        if table["testbed"].nunique() <= 1:
            table = table.drop(columns="testbed")
        if not table["setup error"].notna().any():
            table = table.drop(columns="setup error")
    return table


def _relative(path: Any, base: Path) -> str:
    try:
        return str(Path(str(path)).resolve().relative_to(base.resolve()))
    except ValueError:
        return str(path)
