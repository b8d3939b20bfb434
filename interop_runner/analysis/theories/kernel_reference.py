"""The reference of a conformance cell as paper 000 defines it (§3.1: "the PE of the QUIC
implementation competing with a reference implementation was compared with the PE of a
reference implementation competing with itself"; docs/conformance.md, "The reference").

The reference of a (congestion control, path) cell is the kernel flows of the
kernel-vs-kernel runs of that congestion control on the same path: attempts whose flows are
all kernel TCP flows, two or more of them of that congestion control (configs/conformance.yml
plans ``[{tcp: cubic}, {tcp: cubic}]`` per congestion control), all of them ended ok. One
run is one trial, its flows of that congestion control pooled: the two flows of a run share
the bottleneck and trade throughput, so they are one draw of "the kernel competing with
itself", not two independent ones.

A reference holds for one kernel: its key (:class:`ReferenceKey`) is the congestion control,
the path (:func:`path_key`: rate, RTT, buffer, loss, jitter, links, trace as the attempt
resolved them) and the kernel (:func:`kernel_key`: both nodes' kernel release and the
``net.ipv4.tcp_*`` sysctls that shape a kernel flow's windows, from the host facts of
``run.json`` and ``campaign.json``). Pure reading of stored records, nothing measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from interop_runner.errors import StoreError
from interop_runner.storage.campaign_record import hosts_of_campaign, read_campaign
from interop_runner.storage.run_record import read_run

__all__ = ["CONTEXT_COLUMNS", "ReferenceKey", "TCP_SYSCTL_PREFIX", "attempt_contexts",
           "halves", "kernel_key", "kernel_runs", "path_key"]

#: The columns of :func:`attempt_contexts`.
CONTEXT_COLUMNS = ["path", "path_key", "kernel"]
#: The sysctls of the host facts that are part of a kernel's key: the TCP ones but the
#: default congestion control (iperf3 -C sets each flow's own).
TCP_SYSCTL_PREFIX = "net.ipv4.tcp_"
_NOT_SHAPING = {"net.ipv4.tcp_congestion_control"}
# what of the resolved path makes two paths the same one (not how it was calibrated)
_PATH_FIELDS = ("rate_bps", "rtt_ms", "buffer_bytes", "loss", "jitter", "links", "trace",
                "reverse_rate_bps")
_ROLES = ("server", "client")  # the nodes a kernel flow runs between
_CAMPAIGN_DEPTH = 8  # directories above an attempt to look for its campaign.json


@dataclass(frozen=True)
class ReferenceKey:
    """What a reference is for: a congestion control on one path with one kernel."""

    congestion_control: str
    path: str
    kernel: str


def path_key(record: dict[str, Any]) -> str:
    """The path an attempt ran over, as text: its resolved rate, RTT, buffer and the rest of
    :data:`_PATH_FIELDS` that are set (``direct link`` without an emulated path)."""
    path = record.get("path")
    resolved = path.get("resolved") if isinstance(path, dict) else None
    if not isinstance(resolved, dict):
        return "direct link"
    return ", ".join(f"{name}={_plain(resolved[name])}" for name in _PATH_FIELDS
                     if resolved.get(name) not in (None, 0, 0.0))


def _plain(value: Any) -> str:
    """A fact as text (a whole float without its ``.0``)."""
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return str(int(value))
    return str(value)


def kernel_key(record: dict[str, Any], hosts: dict[str, Any]) -> str:
    """The kernel of an attempt's kernel flows, as text: per node (server, client; one text
    when both agree) its kernel release (``run.json``'s host facts, else the campaign's)
    and its :data:`TCP_SYSCTL_PREFIX` sysctls (the campaign's host facts); ``unknown`` for
    what is not recorded."""
    recorded = _as_dict(record.get("hosts"))
    testbed = record.get("testbed")
    if "by_testbed" in hosts:  # a campaign over several testbeds: the attempt's own
        hosts = hosts["by_testbed"].get(testbed, {}) if isinstance(testbed, str) else {}
    texts = [_node_kernel(_as_dict(recorded.get(role)), _as_dict(hosts.get(role)))
             for role in _ROLES]
    return texts[0] if texts[0] == texts[1] else f"server {texts[0]} / client {texts[1]}"


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _node_kernel(recorded: dict[str, Any], facts: dict[str, Any]) -> str:
    """One node's kernel release and TCP sysctls."""
    release = recorded.get("kernel") or facts.get("kernel") or "unknown"
    sysctl = _as_dict(facts.get("sysctl"))
    tcp = sorted((name, " ".join(str(value).split())) for name, value in sysctl.items()
                 if name.startswith(TCP_SYSCTL_PREFIX) and name not in _NOT_SHAPING)
    settings = ", ".join(f"{name.removeprefix('net.ipv4.')}={value}" for name, value in tcp)
    return f"{release} ({settings or 'tcp sysctls unknown'})"


def attempt_contexts(paths: Any) -> pd.DataFrame:
    """Per attempt directory of ``paths``: its ``path_key`` and ``kernel``
    (:data:`CONTEXT_COLUMNS`), from its ``run.json`` and its campaign's ``campaign.json``;
    both <NA> where the record cannot be read."""
    campaigns: dict[Path, dict[str, Any]] = {}
    rows = []
    for path in dict.fromkeys(str(p) for p in paths):
        try:
            record = read_run(Path(path) / "run.json")
        except (OSError, ValueError, StoreError):
            rows.append({"path": path, "path_key": None, "kernel": None})
            continue
        hosts = _campaign_hosts(Path(path), campaigns)
        rows.append({"path": path, "path_key": path_key(record),
                     "kernel": kernel_key(record, hosts)})
    return pd.DataFrame(rows, columns=CONTEXT_COLUMNS).astype("string")


def _campaign_hosts(attempt: Path, seen: dict[Path, dict[str, Any]]) -> dict[str, Any]:
    """The host facts of the campaign an attempt directory lies in (``{}`` if none)."""
    for directory in list(attempt.parents)[:_CAMPAIGN_DEPTH]:
        if directory in seen:
            return seen[directory]
        if (directory / "campaign.json").is_file():
            try:
                meta = read_campaign(directory / "campaign.json")
                seen[directory] = hosts_of_campaign(meta, directory)
            except (OSError, ValueError, StoreError):
                seen[directory] = {}
            return seen[directory]
    return {}


def kernel_runs(flow_results: pd.DataFrame, contexts: pd.DataFrame
                ) -> dict[ReferenceKey, list[tuple[str, list[int]]]]:
    """The kernel-vs-kernel runs of ``flow_results``
    (:func:`~interop_runner.analysis.frames.flows.load_flow_results`
    rows) by :class:`ReferenceKey`: per run its attempt path and the flows of that
    congestion control (two or more, all kernel TCP flows of an attempt of kernel flows
    only, all ended ok), in the frame's order (campaign, flow set, variant, repetition,
    attempt). Attempts without a context (no record) are none."""
    known = contexts.dropna(subset=["path_key", "kernel"]).set_index("path")
    runs: dict[ReferenceKey, list[tuple[str, list[int]]]] = {}
    for path, attempt in flow_results.groupby("path", sort=False):
        kinds = attempt["kind"].astype("string")
        if str(path) not in known.index or not (kinds == "tcp").fillna(False).all():
            continue
        context = known.loc[str(path)]
        for control, flows in attempt.groupby("congestion_control", sort=True):
            ok = (flows["status"].astype("string") == "ok").fillna(False)
            if len(flows) >= 2 and ok.all():
                key = ReferenceKey(str(control), str(context["path_key"]),
                                   str(context["kernel"]))
                runs.setdefault(key, []).append((str(path), [int(f) for f in flows["flow"]]))
    return runs


def halves(runs: list[Any]) -> tuple[list[Any], list[Any]]:
    """Runs split in two interleaved halves (1st, 3rd, ... and 2nd, 4th, ...): independent
    runs on both sides, drift of the machine shared alike. The noise floor compares them."""
    return runs[0::2], runs[1::2]
