"""The flows of one attempt of a ``flows:`` campaign, planned: each flow's port, label,
congestion control, duration or size, the plan of a pair's own Attempt, and why a flow
cannot run (an image, a congestion control its implementation lacks, no common protocol, a
standard parameter its client cannot honour)."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from interop_runner.config.campaign import CampaignConfig
from interop_runner.config.flows import KERNEL_TCP, FlowConfig
from interop_runner.config.implementations import common_alpn, flow_unsupported
from interop_runner.measure.attempt import AttemptPlan
from interop_runner.measure.flows import FlowPlan
from interop_runner.measure.side import ImplKey, SidePlan

SidePlanFor = Callable[[ImplKey, CampaignConfig], SidePlan]


def first_pair(vcfg: CampaignConfig) -> tuple[str, str]:
    """The implementations of the attempt's record sides: its first pair flow's, else the
    kernel TCP reference's."""
    for flow in vcfg.flows or []:
        if flow.kind == "quic":
            server, client = flow.sides
            return vcfg.impl.get(server, server), vcfg.impl.get(client, client)
    return KERNEL_TCP, KERNEL_TCP


def flow_pins(vcfg: CampaignConfig, port: int) -> dict[int, int]:
    """The ports of the flows pinned to one link of a two-link path: port -> link."""
    return {port + i: int(f.link) for i, f in enumerate(vcfg.flows or [])
            if f.link in ("0", "1")}


def plan_flows(vcfg: CampaignConfig, base: AttemptPlan, port: int,
               side_plan: SidePlanFor) -> list[FlowPlan]:
    """Every flow of the variant ``vcfg``, on ports ``port``, ``port + 1``, ..."""
    flow_set = vcfg.flow_set()
    assert flow_set is not None
    sides = [(side_plan(ImplKey("server", _runs(vcfg, f, 0)), vcfg),
              side_plan(ImplKey("client", _runs(vcfg, f, 1)), vcfg)) for f in flow_set.flows]
    offered = [server.meta.supports.congestion_control if f.kind == "quic" else []
               for f, (server, _) in zip(flow_set.flows, sides)]
    labels = flow_set.labels(vcfg.params, offered)
    plans = []
    for i, (flow, label) in enumerate(zip(flow_set.flows, labels)):
        size = flow.size if flow.kind == "tcp" else vcfg.file_size
        duration = flow.runs_for(vcfg.duration)
        pair, unsupported = _pair_plan(vcfg, base, flow, port + i, f"flow-{i}", size,
                                       duration, *sides[i])
        plans.append(FlowPlan(i, label, flow, port + i, flow.cc(vcfg.params, offered[i]),
                              duration, size, pair, unsupported))
    return plans


def _runs(vcfg: CampaignConfig, flow: FlowConfig, index: int) -> str:
    """The implementation the flow's server (``index`` 0) or client (1) runs: as written
    after ``impl`` substitutions; kernel TCP's for a tcp flow (never substituted)."""
    name = flow.sides[index]
    return name if flow.kind == "tcp" else vcfg.impl.get(name, name)


def _pair_plan(vcfg: CampaignConfig, base: AttemptPlan, flow: FlowConfig, port: int,
               directory: str, size: int | None, duration: float | None, server: SidePlan,
               client: SidePlan) -> tuple[AttemptPlan, str | None]:
    """A flow's own AttemptPlan, and why it cannot run (None: it can). A kernel TCP flow
    takes no parameters but its congestion control: it is never unsupported."""
    pair = replace(base, server=server, client=client, std_params=flow.std_params(vcfg.params),
                   alpn=common_alpn(server.meta, client.meta), port=port, flow=directory,
                   cell=flow.sides, duration_s=duration, workload=flow.work,
                   file_size=base.file_size if size is None else size)
    if flow.kind == "tcp":
        return pair, None
    return pair, flow_unsupported(flow, vcfg.params, server.meta, client.meta)
