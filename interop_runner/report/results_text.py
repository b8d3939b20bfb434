"""The text of ``run.py list``, ``run.py matrix`` and ``run.py summary``: one line per
implementation, the server x client matrices of goodput and CPU cost, and the cell table that
ends a run.

Pure functions; the command line (``interop_runner/cli/results.py``) loads the registry or the
results and prints what these return.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from interop_runner.config.implementations import ImplementationMeta

if TYPE_CHECKING:  # the matrices import pandas when drawn: `run.py list` stays quick
    import pandas as pd


def implementation_lines(registry: Mapping[str, ImplementationMeta]) -> list[str]:
    """One line per implementation: version, how it runs, roles, protocols, support,
    parameters; the name and version columns as wide as the longest."""
    name_w = max(len(m.name) for m in registry.values())
    version_w = max(len(m.version) for m in registry.values())
    lines = []
    for meta in registry.values():
        params = ", ".join(f"{k} ({v.type})" for k, v in meta.parameters.items()) or "-"
        sup = meta.supports
        flags = [n for n in ("socket_buffers", "gso", "gro", "qlog", "keylog", "ack_ratio",
                             "max_ack_delay", "ack_frequency", "flow_control_window")
                 if getattr(sup, n)]
        lines.append(
            f"{meta.name:{name_w}} {meta.version:{version_w}} {_kind(meta):22} "
            f"roles={','.join(meta.roles):14} "
            f"alpn={','.join(meta.alpns):14} cc={','.join(sup.congestion_control) or '-':16} "
            f"ciphers={len(sup.cipher)} {' '.join(flags) or '-'}; params: {params}; "
            f"workloads: {meta.workloads.summary}")
    return lines


def _kind(meta: ImplementationMeta) -> str:
    """How it runs: ``native``, ``image (<base>)`` (built on a base image) or
    ``image (published)``."""
    if meta.image is None:
        return "native"
    if meta.image.build is not None:
        return f"image ({meta.image.base})"
    return "image (published)"


def run_summary_text(frame: "pd.DataFrame") -> str:
    """The cell table that ends a run (``run.py run``) and that ``run.py summary`` prints of
    a stored campaign: :func:`~interop_runner.analysis.frames.results.summarize` (one row per pair,
    or set of flows, and sweep variant), then the goodput matrix when the campaign has
    several servers or clients and no sweep (with a sweep the table is per variant)."""
    from interop_runner.analysis.frames.results import summarize

    table = summarize(frame).to_string(index=False, na_rep="n/a",
                                       float_format=lambda v: f"{v:.1f}")
    swept = "variant" in frame.columns and frame["variant"].notna().any()
    if not swept and (frame["server"].nunique() > 1 or frame["client"].nunique() > 1):
        table += "\n" + goodput_matrix_text(frame)
    return table


def campaign_summary_text(name: str, directory: object, frame: "pd.DataFrame") -> str:
    """``run.py summary``'s text of one stored campaign: a line naming it and its attempts,
    then :func:`run_summary_text` (or a line saying it has no attempt)."""
    head = f"{name}: {len(frame)} attempt(s) ({directory})"
    if frame.empty:
        return f"{head}\nno attempts recorded"
    return f"{head}\n{run_summary_text(frame)}"


def goodput_matrix_text(frame: "pd.DataFrame") -> str:
    """The server x client goodput matrix of a results frame, after a blank line."""
    from interop_runner.analysis.theories.matrix import status_matrix

    return ("\nmedian goodput in Mbit/s; rows: server, columns: client\n"
            + status_matrix(frame).to_string())


def cost_matrices_text(frame: "pd.DataFrame", metric: str) -> str:
    """The server x client CPU cost matrices (server, client, total), each after a blank
    line."""
    from interop_runner.analysis.theories.matrix import (
        COST_METRICS,
        SIDES,
        cost_column,
        status_matrix,
        with_costs,
    )

    unit, number = COST_METRICS[metric]
    costs = with_costs(frame, metric)
    parts = []
    for side in SIDES:
        who = "server + client" if side == "total" else side
        table = status_matrix(costs, cost_column(side, metric), number)
        parts.append(f"\nmedian {unit} of the {who} (NA: not measured); rows: server, "
                     f"columns: client\n{table.to_string()}")
    return "\n".join(parts)
