"""Host facts of two campaigns that make their goodput incomparable when they differ.

Read from result directories only (``campaign.json``, ``testbed-<name>.json``); used by
:func:`interop_runner.analysis.ab.compare.compare_campaigns` and ``run.py compare``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from interop_runner.errors import StoreError
from interop_runner.storage.campaign_record import hosts_of_campaign, read_campaign

# Host facts that make two campaigns incomparable when they differ (per node role).
FACT_KEYS: tuple[str, ...] = ("cpu_model", "cores", "kernel", "nic_driver", "nic_speed_mbps",
                              "mtu")
FACT_SYSCTLS: tuple[str, ...] = ("net.core.rmem_default", "net.core.rmem_max",
                                 "net.core.wmem_default", "net.core.wmem_max")


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
    :func:`interop_runner.parsers.hostfacts.summarize_facts`) or ``{"by_testbed": {name: hosts}}``
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
        meta = read_campaign(directory / "campaign.json")
    except (OSError, ValueError, StoreError):
        return {}
    return hosts_of_campaign(meta, directory)


def facts_message(differences: Sequence[str], limit: int = 4) -> str:
    """One line naming the first differences (and how many more)."""
    shown = "; ".join(differences[:limit])
    more = f"; and {len(differences) - limit} more" if len(differences) > limit else ""
    return f"host facts differ ({shown}{more})"
