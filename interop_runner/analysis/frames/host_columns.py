"""The host-load columns of the results frame: how busy the hosts were over the attempt
(run.json ``host_load`` and ``host_busy``, schema 7; docs/paths.md, "A busy host").

Every column exists in every frame; a record that did not read the hosts' load (before
schema 7) has them <NA>.
"""

from __future__ import annotations

from typing import Any

# column -> (pandas dtype, unit, meaning)
HOST_COLUMNS: dict[str, tuple[str, str, str]] = {
    "host_busy": ("boolean", "", "some host (server, client, router, management) was busy "
                  "over the attempt (docs/paths.md, \"A busy host\"); <NA>: not read "
                  "(records before schema 7)"),
    "host_busy_reasons": ("string", "", "why, per host: \"<host>: <reason>\"; \"; \" between "
                          "them"),
    "host_load1_max": ("Float64", "tasks", "highest 1-minute load average of the hosts after "
                       "the attempt"),
    "host_steal_share_max": ("Float64", "", "highest share of a host's CPU time stolen by the "
                             "hypervisor over the attempt"),
}


def host_values(record: dict[str, Any]) -> dict[str, Any]:
    """The host-load columns of one run.json: ``host_busy`` as recorded, the reasons of the
    busy hosts, the highest load average and steal share; None where no host said."""
    row: dict[str, Any] = dict.fromkeys(HOST_COLUMNS)
    row["host_busy"] = record.get("host_busy")
    load = record.get("host_load")
    nodes = load.get("nodes") if isinstance(load, dict) else None
    if not isinstance(nodes, dict):
        return row
    entries = [(name, e) for name, e in nodes.items() if isinstance(e, dict)]
    reasons = [f"{name}: {r}" for name, e in entries for r in e.get("busy_reasons") or []]

    def highest(key: str) -> float | None:
        values = [e[key] for _, e in entries if isinstance(e.get(key), (int, float))]
        return max(values) if values else None

    row.update(host_busy_reasons="; ".join(reasons) or None,
               host_load1_max=highest("load1_after"),
               host_steal_share_max=highest("steal_share"))
    return row
