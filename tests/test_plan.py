"""build_plan: the one place a campaign's plan is built, fresh or for a resume (the dry run and
Campaign both use it; resume refusals: test_campaign_local, test_cli)."""

from __future__ import annotations

from pathlib import Path

from interop_runner.config.loader import load_campaign_testbeds
from interop_runner.measure.plan import build_plan, plan_runs

from .test_cli import shuffled_config, stored_campaign


def test_a_fresh_plan_runs_everything(tmp_path: Path) -> None:
    cfg, testbeds = load_campaign_testbeds(shuffled_config(tmp_path / "c.yml"))
    names = [t.name for t in testbeds]
    plan = build_plan(cfg, names)
    assert (plan.resume, plan.previous, plan.done, plan.skipped) == (None, None, frozenset(), 0)
    assert len(plan.runs) == 6 and plan.todo == list(plan.runs)
    assert [r.key for r in plan.runs] == [r.key for r in plan_runs(cfg, plan.seed, names)]


def test_a_resumed_plan_has_the_stored_seed_and_record(tmp_path: Path) -> None:
    config = shuffled_config(tmp_path / "c.yml")
    stored = stored_campaign(tmp_path / "bad_20260101T000000Z", config, seed=1234)
    cfg, testbeds = load_campaign_testbeds(config)
    names = [t.name for t in testbeds]
    plan = build_plan(cfg, names, stored)
    assert plan.seed == 1234 and plan.resume == stored
    assert plan.previous is not None and plan.previous.campaign == stored.name
    assert [r.key for r in plan.runs] == [r.key for r in plan_runs(cfg, 1234, names)]
    assert plan.done == frozenset() and plan.todo == list(plan.runs)  # nothing stored yet
