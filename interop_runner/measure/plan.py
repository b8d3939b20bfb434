"""The campaign plan: which runs, in which order, which are already stored (how long they
take: :mod:`interop_runner.analysis.running.estimate`).

Pure apart from reading stored records (resume) and the implementation registry.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from interop_runner.config.campaign import CampaignConfig, Pair, variant_configs
from interop_runner.config.implementations import (
    ImplementationMeta,
    common_alpn,
    flow_unsupported,
    load_registry,
    resolve,
    why_unsupported,
)
from interop_runner.config.sweep import Variant, order_runs, slug
from interop_runner.errors import StoreError
from interop_runner.storage.campaign_record import CampaignRecord, load_campaign_record, plain
from interop_runner.storage.layout import repetition_dir
from interop_runner.storage.run_record import stored_attempts

# the server part of a set of flows' name, in its directory (flows_<set>) and cell
FLOW_SET_NAME = "flows"


@dataclass
class PlannedRun:
    """One entry of the campaign plan."""

    server: str
    client: str
    repetition: int
    alpn: str | None
    variant: Variant = Variant("", ())
    cfg: CampaignConfig | None = None  # the variant's config (None: the campaign's)
    # the pair as written in the campaign (differs from server/client under `impl`)
    cell: tuple[str, str] | None = None
    # why the pair cannot run (no common protocol, a standard parameter the client cannot
    # honour): recorded as unsupported without running; None: it runs
    unsupported: str | None = None
    # an attempt of the variant's set of flows (server FLOW_SET_NAME, client the set's label)
    flow_set: bool = False

    @property
    def scheduled_s(self) -> float | None:
        """A run of flows that all have durations: how long its flows last (their last
        start plus duration, and the one second their common start lies ahead); else None."""
        if not self.flow_set or self.cfg is None or not self.cfg.flows:
            return None
        flows, default = self.cfg.flows, self.cfg.duration
        ends = [f.start + d for f in flows if (d := f.runs_for(default)) is not None]
        return 1.0 + max(ends) if len(ends) == len(flows) else None

    @property
    def path_rate_mbps(self) -> float | None:
        """The rate of its emulated path in Mbit/s: the bottleneck's, or the links' sum;
        None without a path or with a trace (its rate varies)."""
        path = self.cfg.path if self.cfg is not None else None
        if path is None or path.trace is not None:
            return None
        return path.resolved().rate_bps / 1e6

    @property
    def key(self) -> str:
        """Identifies the run within its campaign (pair, variant, repetition)."""
        return f"{self.server}_{self.client}/{self.variant.id}/{self.repetition}"


def draw_seed() -> int:
    """A fresh seed for the run order (recorded in campaign.json)."""
    return random.SystemRandom().randrange(2**31)


def plan_order(cfg: CampaignConfig, testbeds: int = 1) -> str:
    """``shuffled`` or ``sequential``: sequential when nothing varies between runs."""
    varies = bool(cfg.sweep.axes) or (testbeds > 1 and cfg.distribute == "each")
    return cfg.sweep.order if varies else "sequential"


def plan_runs(cfg: CampaignConfig, seed: int | None = None,
              testbeds: list[str] | None = None) -> list[PlannedRun]:
    """The ordered runs: variants x pairs x repetitions.

    Without axes and with order ``sequential`` this is pair by pair, repetitions 1..N. With
    order ``shuffled`` (the default) every repetition round visits all (variant, pair)
    combinations in an order drawn from ``seed`` (``cfg.sweep.seed``, else the given one).
    """
    registry = load_registry()
    order = plan_order(cfg, len(testbeds or []))
    seed = cfg.sweep.seed if cfg.sweep.seed is not None else (seed or 0)
    configs = variant_configs(cfg)
    if testbeds and len(testbeds) > 1 and cfg.distribute == "each":
        # every run on every testbed: the testbed becomes one more axis (id and axis_testbed)
        configs = [(Variant(",".join(x for x in (f"testbed={slug(t)}", v.id) if x),
                            (("testbed", t), *v.values)), vcfg)
                   for t in testbeds for v, vcfg in configs]
    # a campaign's pairs (one per attempt) and its set of flows (None) side by side
    units: list[tuple[Variant, CampaignConfig, Pair | None]] = [
        (variant, vcfg, pair) for pair in [*cfg.written_pairs(), *([None] if cfg.flows else [])]
        for variant, vcfg in configs]
    return [_pair_run(rep, variant, vcfg, written, registry) if written is not None
            else _flows_run(rep, variant, vcfg, registry)
            for rep, (variant, vcfg, written) in order_runs(
                units, cfg.repetitions, order, seed,
                group=lambda u: (u[2].server, u[2].client) if u[2] else (FLOW_SET_NAME, ""))]


def _pair_run(rep: int, variant: Variant, vcfg: CampaignConfig, written: Pair,
              registry: dict[str, ImplementationMeta]) -> PlannedRun:
    """One attempt of one pair."""
    pair = vcfg.substitute(written)
    server = resolve(pair.server, registry, vcfg.implementations)
    client = resolve(pair.client, registry, vcfg.implementations)
    alpn = common_alpn(server, client)
    return PlannedRun(pair.server, pair.client, rep, alpn, variant, vcfg,
                      cell=(written.server, written.client),
                      unsupported=why_unsupported(vcfg.params, server, client, alpn,
                                                  vcfg.workload))


def _flows_run(rep: int, variant: Variant, vcfg: CampaignConfig,
               registry: dict[str, ImplementationMeta]) -> PlannedRun:
    """One attempt of the variant's flows, named ``flows_<set>``."""
    flows = vcfg.flow_set()
    assert flows is not None
    metas = [(resolve(vcfg.impl.get(f.server, f.server), registry, vcfg.implementations),
              resolve(vcfg.impl.get(f.client, f.client), registry, vcfg.implementations))
             if f.server is not None and f.client is not None else None for f in flows.flows]
    label = flows.set_label(vcfg.params, [m[0].supports.congestion_control if m else []
                                          for m in metas])
    alpn = next((common_alpn(*m) for m in metas if m), "tcp")
    # what makes a flow unsupported (its record says so; nothing of the set runs), shown by
    # --dry-run as a pair's is
    why = next((f"flow {i}: {reason}" for i, (f, m) in enumerate(zip(flows.flows, metas))
                if m and (reason := flow_unsupported(f, vcfg.params, *m))), None)
    return PlannedRun(FLOW_SET_NAME, label, rep, alpn or "", variant, vcfg,
                      cell=(FLOW_SET_NAME, label), unsupported=why, flow_set=True)


def completed_keys(directory: Path, cfg: CampaignConfig, runs: list[PlannedRun]) -> set[str]:
    """The planned runs that are done: they have a stored ``ok`` or ``unsupported`` record.

    A failed or timed-out attempt (a fault, a dropped connection, a broken build) and one
    stopped by Ctrl-C do not count: resume runs that repetition again as the next attempt.
    """
    done = set()
    for run in runs:
        rep = repetition_dir(directory, run.server, run.client, cfg.testcase, run.repetition,
                             run.variant.id)
        if any(not data.get("interrupted") and data.get("status") in ("ok", "unsupported")
               for _, data in stored_attempts(rep)):
            done.add(run.key)
    return done


def check_resume(directory: Path, cfg: CampaignConfig) -> CampaignRecord:
    """campaign.json of the campaign to resume; the config must be the same as then.

    A campaign.json of a newer version than this runner reads is refused (SchemaError)."""
    path = directory / "campaign.json"
    try:
        previous = load_campaign_record(path)
    except StoreError as exc:  # SchemaError (a newer version) or not a campaign record
        reason = str(exc).removeprefix(f"{path}: ")
        raise type(exc)(f"{path}: cannot resume: {reason}") from None
    except (OSError, ValueError) as exc:
        raise StoreError(f"{path}: cannot resume: {exc}") from None
    before = plain(previous.config)
    now = plain(cfg.model_dump())
    # a key added to the config format since then counts as unchanged while at its default
    defaults = json.loads(json.dumps({k: f.get_default(call_default_factory=True)
                                      for k, f in type(cfg).model_fields.items()
                                      if not f.is_required() and k not in before},
                                     default=str))
    before.update({k: v for k, v in defaults.items() if now.get(k) == v})
    changed = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
    if changed:
        raise StoreError(f"{directory}: cannot resume: the config differs from the stored one "
                         f"in {', '.join(changed)}")
    return previous


@dataclass(frozen=True)
class CampaignPlan:
    """What a campaign will run: every planned run in order, the ones already stored (a
    resumed campaign) and the record of the campaign being resumed."""

    seed: int  # recorded in campaign.json; the order's seed unless the config fixes one
    runs: tuple[PlannedRun, ...]  # every run of the plan, stored ones too
    done: frozenset[str] = frozenset()  # keys of the runs already stored (resume)
    resume: Path | None = None  # the directory of the campaign being resumed
    previous: CampaignRecord | None = None  # its campaign.json

    @property
    def todo(self) -> list[PlannedRun]:
        """The runs still to run, in order."""
        return [r for r in self.runs if r.key not in self.done]

    @property
    def skipped(self) -> int:
        """How many planned runs are stored already."""
        return len(self.done)


def build_plan(cfg: CampaignConfig, testbeds: Sequence[str],
               resume: Path | None = None) -> CampaignPlan:
    """The plan of a campaign on ``testbeds`` (their names): a fresh one, or (``resume``) the
    one of the campaign stored there, whose config must be the same (:func:`check_resume`)
    and whose recorded seed gives the same order; its stored runs count as done."""
    seed = cfg.sweep.seed if cfg.sweep.seed is not None else draw_seed()
    previous = check_resume(resume, cfg) if resume is not None else None
    if previous is not None and previous.plan.seed is not None:
        seed = previous.plan.seed
    runs = plan_runs(cfg, seed, list(testbeds))
    done = completed_keys(resume, cfg, runs) if resume is not None else set()
    return CampaignPlan(seed, tuple(runs), frozenset(done), resume, previous)
