"""``run.py path calibrate``: build each path of a campaign, calibrate it, remove it, and
report what was measured, without running any attempt.

The same code builds and calibrates the paths of a campaign (:mod:`.path_session`); here
each path is calibrated with ``calibrate: warn`` so that every path is measured, and the
verdicts are returned to the caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from interop_runner.config.campaign import CampaignConfig, variant_configs
from interop_runner.config.sweep import Variant
from interop_runner.config.testbed import NodeConfig, TestbedConfig
from interop_runner.measure.path_session import (
    PathSession,
    path_journal_leftovers,
    path_key,
    placement_of,
    routed,
)
from interop_runner.storage.campaign_record import PlanInfo, new_campaign_record
from interop_runner.storage.layout import utc_now
from interop_runner.testbed.node import Node

Connect = Callable[[str, NodeConfig, str, float], Node]


@dataclass
class PathCheck:
    """One path of the campaign: its variant, key and stored entry (with calibration)."""

    variant: Variant
    key: str
    entry: dict[str, Any]

    @property
    def ok(self) -> bool:
        """Whether its calibration passed."""
        return bool((self.entry.get("calibration") or {}).get("ok"))


def calibrate_paths(cfg: CampaignConfig, testbed: TestbedConfig, connect: Connect = Node.connect,
                    timeout: float = 120.0) -> list[PathCheck]:
    """Calibrate every distinct path of ``cfg``'s variants on ``testbed``."""
    campaign_id = f"path-check_{utc_now().replace(':', '')}"
    nodes: list[Node] = []
    try:
        for role in ("server", "client"):
            name, node_cfg = testbed.node(role)
            nodes.append(connect(name, routed(node_cfg), campaign_id, timeout))
        router = testbed.router()
        if router is not None:
            nodes.append(connect(router[0], router[1], campaign_id, timeout))
        for node in nodes:
            node.take_lease()
            node.claim_scratch()
            node.reap_leftovers()
        path_journal_leftovers(nodes)
        return _calibrate_all(cfg, testbed, nodes, campaign_id)
    finally:
        for node in nodes:
            node.cleanup(False)
            node.close()


def _calibrate_all(cfg: CampaignConfig, testbed: TestbedConfig, nodes: list[Node],
                   campaign_id: str) -> list[PathCheck]:
    doc = new_campaign_record(campaign_id, cfg.model_dump(mode="json"), {}, 0, PlanInfo())
    server, client = nodes[0], nodes[1]
    session = PathSession(nodes[2] if len(nodes) > 2 else server, placement_of(testbed),
                          server, client, testbed.port or cfg.port, doc, lambda: None)
    checks: list[PathCheck] = []
    try:
        for variant, vcfg in variant_configs(cfg):
            if vcfg.path is None:
                continue
            key = path_key(vcfg.path)
            if any(c.key == key for c in checks):
                continue
            session.activate(vcfg.path.model_copy(update={"calibrate": "warn"}), observe=False)
            checks.append(PathCheck(variant, key, (doc.paths or {})[key]))
    finally:
        session.close()
    return checks
