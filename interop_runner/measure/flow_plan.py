"""The flows of one attempt of a ``flows:`` campaign, planned: each flow's port, label,
congestion control, duration or size, the plan of a pair's own Attempt, and why a flow
cannot run (an image, a congestion control its implementation lacks, no common protocol, a
standard parameter its client cannot honour)."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from interop_runner.config.campaign import CampaignConfig
from interop_runner.config.implementations import common_alpn, flow_unsupported
from interop_runner.measure.attempt import AttemptPlan
from interop_runner.measure.flows import KERNEL_TCP, FlowPlan
from interop_runner.measure.side import ImplKey, SidePlan

SidePlanFor = Callable[[ImplKey, CampaignConfig], SidePlan]


def first_pair(vcfg: CampaignConfig) -> tuple[str, str]:
    """The implementations of the attempt's record sides: its first pair flow's, else the
    kernel TCP reference's."""
    for flow in vcfg.flows or []:
        if flow.server is not None and flow.client is not None:
            return vcfg.impl.get(flow.server, flow.server), vcfg.impl.get(flow.client,
                                                                         flow.client)
    return KERNEL_TCP.name, KERNEL_TCP.name


def flow_pins(vcfg: CampaignConfig, port: int) -> dict[int, int]:
    """The ports of the flows pinned to one link of a two-link path: port -> link."""
    return {port + i: int(f.link) for i, f in enumerate(vcfg.flows or [])
            if f.link in ("0", "1")}


def plan_flows(vcfg: CampaignConfig, base: AttemptPlan, port: int,
               side_plan: SidePlanFor) -> list[FlowPlan]:
    """Every flow of the variant ``vcfg``, on ports ``port``, ``port + 1``, ..."""
    flow_set = vcfg.flow_set()
    assert flow_set is not None
    sides = [(side_plan(ImplKey("server", vcfg.impl.get(f.server, f.server)), vcfg),
              side_plan(ImplKey("client", vcfg.impl.get(f.client, f.client)), vcfg))
             if f.server is not None and f.client is not None else None
             for f in flow_set.flows]
    offered = [side[0].meta.supports.congestion_control if side else [] for side in sides]
    labels = flow_set.labels(vcfg.params, offered)
    plans = []
    for i, (flow, label) in enumerate(zip(flow_set.flows, labels)):
        plan = FlowPlan(i, label, flow, port + i, flow.cc(vcfg.params, offered[i]),
                        flow.runs_for(vcfg.duration),
                        flow.size if flow.kind == "tcp" else vcfg.file_size)
        side = sides[i]
        if side is not None:
            plan.pair, plan.unsupported = _pair_plan(vcfg, base, plan, *side)
        plans.append(plan)
    return plans


def _pair_plan(vcfg: CampaignConfig, base: AttemptPlan, plan: FlowPlan, server: SidePlan,
               client: SidePlan) -> tuple[AttemptPlan, str | None]:
    """A pair flow's own AttemptPlan, and why it cannot run (None: it can)."""
    flow = plan.flow
    assert flow.server is not None and flow.client is not None
    alpn = common_alpn(server.meta, client.meta)
    pair = replace(base, server=server, client=client, std_params=flow.std_params(vcfg.params),
                   alpn=alpn, port=plan.port, flow=plan.directory,
                   cell=(flow.server, flow.client))
    return pair, flow_unsupported(flow, vcfg.params, server.meta, client.meta)
