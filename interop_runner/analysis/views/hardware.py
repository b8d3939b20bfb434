"""Paper Fig. 8: the same pairs on different hardware, and normalised to the CPUs' maximum
frequency (packet processing cost scales about linearly with it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from interop_runner.analysis.theories.stats import STAT_COLUMNS, cell_stats
from interop_runner.analysis.views._common import (
    PAIR,
    campaign_dir,
    empty,
    figure,
    grouped_bars,
    has_values,
    no_data,
    no_data_axes,
    pair_label,
    stack_of,
)
from interop_runner.errors import StoreError
from interop_runner.storage.campaign_record import read_campaign

ROLES = ("server", "client")
FACTS = ("cpu_model", "cpu_max_mhz", "cores", "kernel", "nic_driver", "nic_speed_mbps")
FACT_COLUMNS = ["campaign", "testbed", *(f"{r}_{f}" for r in ROLES for f in FACTS)]
COLUMNS = ["testbed", *PAIR, "pair", *STAT_COLUMNS, "cpu_model", "cpu_max_mhz",
           "reference_mhz", "median_normalised", "ci_low_normalised", "ci_high_normalised"]


def _by_role(hosts: dict[str, Any], testbed: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Host facts keyed by node name -> keyed by role (server/client)."""
    nodes = testbed.get("nodes") or {}
    out: dict[str, dict[str, Any]] = {}
    for name, facts in hosts.items():
        role = (nodes.get(name) or {}).get("role") if isinstance(nodes, dict) else None
        role = role or name
        if role in ROLES and isinstance(facts, dict):
            out[role] = facts
    return out


def _campaign_facts(directory: Path) -> dict[str | None, dict[str, dict[str, Any]]]:
    """testbed name (None: the campaign's only testbed) -> role -> facts."""
    try:
        meta = read_campaign(directory / "campaign.json")
    except (OSError, ValueError, StoreError):
        return {}
    out: dict[str | None, dict[str, dict[str, Any]]] = {}
    testbeds = meta.get("testbeds") or {}
    for name, file in (meta.get("testbed_files") or {}).items():
        try:
            hosts = read_campaign(directory / file).get("hosts") or {}
        except (OSError, ValueError, StoreError):
            continue
        out[name] = _by_role(hosts, testbeds.get(name) or {})
    if not out:
        out[None] = _by_role(meta.get("hosts") or {}, meta.get("testbed") or {})
    return out


def host_facts(frame: pd.DataFrame) -> pd.DataFrame:
    """CPU and NIC facts per campaign and testbed: ``<role>_cpu_model``,
    ``<role>_cpu_max_mhz``, ``<role>_cores``, ``<role>_kernel``, ``<role>_nic_driver``,
    ``<role>_nic_speed_mbps``.

    Read from campaign.json (or ``testbed-<name>.json`` for several testbeds) of the
    campaigns the attempts (``path``) belong to; columns of these names already in the frame
    fill what the files do not say. Unknown facts stay missing.
    """
    if "campaign" not in frame.columns or "testbed" not in frame.columns:
        return empty(FACT_COLUMNS)
    present = [c for c in FACT_COLUMNS[2:] if c in frame.columns]
    rows = []
    seen: dict[Path, dict[str | None, dict[str, dict[str, Any]]]] = {}
    for (campaign, testbed), group in frame.groupby(["campaign", "testbed"], dropna=False,
                                                    observed=True):
        paths = group["path"].dropna() if "path" in group else pd.Series(dtype=object)
        directory = campaign_dir(str(paths.iloc[0])) if len(paths) else None
        if directory is not None and directory not in seen:
            seen[directory] = _campaign_facts(directory)
        facts = seen.get(directory, {}) if directory is not None else {}
        name = testbed if isinstance(testbed, str) else None
        roles = facts.get(name) or facts.get(None) or {}
        row: dict[str, Any] = {"campaign": campaign, "testbed": testbed}
        for role in ROLES:
            for fact in FACTS:
                column = f"{role}_{fact}"
                value = (roles.get(role) or {}).get(fact)
                if value is None and column in present and group[column].notna().any():
                    value = group[column].dropna().iloc[0]
                row[column] = value
        rows.append(row)
    return pd.DataFrame(rows, columns=FACT_COLUMNS)


def _cpu(row: "pd.Series[Any]", fact: str) -> Any:
    """The server node's fact, else the client's (a host pair has one kind of CPU)."""
    value = row.get(f"server_{fact}")
    return value if value is not None and value is not pd.NA and value == value \
        else row.get(f"client_{fact}")


def hardware(frame: pd.DataFrame, *, n_boot: int = 2000, seed: int = 0
             ) -> tuple[pd.DataFrame, Figure]:
    """Goodput per testbed and pair, and normalised to the lowest maximum CPU frequency.

    The testbed is the ``testbed`` column (each record names its testbed; a campaign over
    several testbeds has ``axis_testbed`` too). Per testbed and pair:
    :func:`~interop_runner.analysis.theories.stats.cell_stats` of the goodput, the CPU model and max
    frequency of the testbed (:func:`host_facts`, server node, else client node) and
    ``median_normalised`` = median x ``reference_mhz`` / ``cpu_max_mhz`` (reference: the
    lowest maximum frequency among the testbeds), likewise the interval. Without a known
    frequency (VMs often report none) the normalised values stay missing.
    """
    title = "Goodput per testbed (Fig. 8)"
    column = "testbed" if has_values(frame, "testbed") else (
        "axis_testbed" if has_values(frame, "axis_testbed") else None)
    if column is None or not has_values(frame, "goodput_mbps"):
        return empty(COLUMNS), no_data("goodput" if column else "testbed", title)
    data = frame.copy()
    data["testbed"] = data[column].astype(str)
    table = cell_stats(data, ["testbed", *PAIR], n_boot=n_boot, seed=seed)
    facts = host_facts(data)
    if not facts.empty:
        facts = facts.assign(cpu_model=[_cpu(r, "cpu_model") for _, r in facts.iterrows()],
                             cpu_max_mhz=[_cpu(r, "cpu_max_mhz") for _, r in facts.iterrows()])
        facts = facts.drop_duplicates("testbed")[["testbed", "cpu_model", "cpu_max_mhz"]]
        facts["testbed"] = facts["testbed"].astype(str)
        table = table.merge(facts, on="testbed", how="left")
    for col in ("cpu_model", "cpu_max_mhz"):
        if col not in table.columns:
            table[col] = None
    table["cpu_max_mhz"] = pd.to_numeric(table["cpu_max_mhz"], errors="coerce").astype(float)
    known = table["cpu_max_mhz"].dropna()
    table["reference_mhz"] = float(known.min()) if len(known) else float("nan")
    factor = table["reference_mhz"] / table["cpu_max_mhz"]
    for col in ("median", "ci_low", "ci_high"):
        table[f"{col}_normalised"] = table[col].astype(float) * factor
    table["pair"] = [pair_label(s, c) for s, c in zip(table["server"], table["client"])]
    table = table.reindex(columns=COLUMNS)
    fig, (raw, norm) = figure(2, 1, size=(8.0, 7.0))
    pairs = sorted(dict.fromkeys(table["pair"]), key=lambda p: (stack_of(p) == "TCP/TLS", p))
    grouped_bars(raw, table, "pair", "testbed", groups=pairs)
    raw.set_ylabel("median goodput [Mbit/s]")
    raw.legend(fontsize=8, title="testbed")
    raw.set_title(f"{title} (a)")
    if table["median_normalised"].notna().any():
        grouped_bars(norm, table, "pair", "testbed", "median_normalised", groups=pairs)
        norm.set_ylabel(f"goodput at {table['reference_mhz'].iloc[0]:.0f} MHz [Mbit/s]")
        norm.set_title("(b) normalised to the lowest maximum CPU frequency")
    else:
        no_data_axes(norm, "CPU max frequency (host facts)")
    return table, fig

