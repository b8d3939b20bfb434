"""Estimates from what a testbed measured before (analysis/running/estimate.py) and the
progress bar's time left (analysis/running/progress.py). Result trees are built in tmp_path
from real stored documents."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from interop_runner.analysis.running import estimate
from interop_runner.analysis.running.estimate import (
    History,
    RemainingTime,
    Source,
    Value,
    describe_estimate,
    estimate_plan,
    estimate_run,
    format_duration,
    learn_history,
)
from interop_runner.analysis.running.progress import campaign_history, progress_bar, ticking

from .conftest import ROOT

SCHEMA = ROOT / "tests" / "data" / "schema"
RUN = json.loads((SCHEMA / "run-v3.json").read_text())
CAMPAIGN = json.loads((SCHEMA / "campaign-v2.json").read_text())
T0_NS = 1_795_000_000_000_000_000  # 2026-11-18T...Z, a campaign's start
GB = 10**9


@dataclass
class Att:
    """One stored attempt: pair, goodput, transfer start and duration after the campaign's
    start (s)."""

    server: str = "quic-go"
    client: str = "quiche"
    mbps: float | None = 1000.0
    start_s: float = 1.0
    duration_s: float = 1.0
    status: str = "ok"
    testbed: str | None = ""  # "": the campaign's; None: not recorded (older records)


def iso(ns: int) -> str:
    from datetime import datetime, timezone
    return datetime.fromtimestamp(ns / 1e9, timezone.utc).isoformat(timespec="milliseconds")


def store_campaign(root: Path, stamp: str, attempts: list[Att], *, testbed: str = "local",
                   wall_s: float | None = 10.0, status: str = "finished", t0_ns: int = T0_NS,
                   **extra: Any) -> Path:
    """A one-testbed campaign ``local_<stamp>`` started at ``t0_ns`` with ``attempts``."""
    directory = root / f"local_{stamp}"
    meta = copy.deepcopy(CAMPAIGN)
    meta.update(campaign=directory.name, started_at=iso(t0_ns), status=status, **extra)
    meta["testbed"]["name"] = testbed
    meta["finished_at"] = iso(t0_ns + int((wall_s or 10.0) * 1e9))
    if wall_s is None:
        del meta["wall_s"]
    else:
        meta["wall_s"] = wall_s
    directory.mkdir(parents=True)
    (directory / "campaign.json").write_text(json.dumps(meta))
    store_runs(directory, attempts, t0_ns, testbed)
    return directory


def store_runs(directory: Path, attempts: list[Att], t0_ns: int, testbed: str = "") -> None:
    for rep, att in enumerate(attempts, 1):
        run = copy.deepcopy(RUN)
        start = t0_ns + int(att.start_s * 1e9)
        run.update(campaign=directory.name, repetition=rep, status=att.status,
                   goodput_mbps=att.mbps, testbed=testbed if att.testbed == "" else att.testbed,
                   start_ns=start,
                   end_ns=start + int(att.duration_s * 1e9), duration_s=att.duration_s)
        run["server"]["implementation"], run["client"]["implementation"] = att.server, att.client
        out = directory / f"{att.server}_{att.client}" / "goodput" / str(rep) / "attempt-1"
        out.mkdir(parents=True)
        (out / "run.json").write_text(json.dumps(run))


@dataclass
class Planned:
    server: str = "quic-go"
    client: str = "quiche"
    unsupported: str | None = None
    key: str = ""
    scheduled_s: float | None = None
    path_rate_mbps: float | None = None


# -- goodput -----------------------------------------------------------------------------------
def test_goodput_is_the_median_of_the_pairs_recent_ok_attempts(tmp_path: Path) -> None:
    store_campaign(tmp_path, "20261101T000000Z", [Att(mbps=1000.0), Att(mbps=2000.0)])
    store_campaign(tmp_path, "20261102T000000Z", [Att(mbps=3000.0),
                                                  Att(mbps=None, status="failed")])
    history = learn_history(tmp_path, ["local"])
    assert history.campaigns == 2
    assert history.pair_goodput("quic-go", "quiche") == Value(2000.0, Source(True, 3, 2))
    run = estimate_run(history, Planned(), GB)
    assert run.transfer_s == pytest.approx(8e9 / (2000.0 * 1e6))
    # a pair never measured here: the guess
    assert history.pair_goodput("quiche", "quic-go") == Value(1000.0, Source(False))
    assert estimate_run(history, Planned("quiche", "quic-go"), GB).transfer_s == 8.0


def test_only_the_last_attempts_of_the_newest_campaigns_count(tmp_path: Path) -> None:
    store_campaign(tmp_path, "20261101T000000Z", [Att(mbps=100.0)] * 5)  # old and slow
    store_campaign(tmp_path, "20261102T000000Z",
                   [Att(mbps=900.0, start_s=s) for s in range(1, 6)], t0_ns=T0_NS + 10**12)
    store_campaign(tmp_path, "20261103T000000Z",
                   [Att(mbps=1100.0, start_s=s) for s in range(1, 7)], t0_ns=T0_NS + 2 * 10**12)
    value = learn_history(tmp_path, ["local"], {("quic-go", "quiche")}).pair_goodput(
        "quic-go", "quiche")
    # 6 of the newest, then the 4 newest of the one before: median of 6 x 1100, 4 x 900
    assert value == Value(1100.0, Source(True, estimate.RECENT_ATTEMPTS, 2))


def test_only_the_newest_campaigns_are_read(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(estimate, "RECENT_CAMPAIGNS", 2)
    for day, mbps in (("01", 100.0), ("02", 200.0), ("03", 300.0)):
        store_campaign(tmp_path, f"202611{day}T000000Z", [Att(mbps=mbps)])
    history = learn_history(tmp_path, ["local"])
    assert history.campaigns == 2
    assert history.pair_goodput("quic-go", "quiche").value == 250.0


def test_other_testbeds_are_ignored(tmp_path: Path) -> None:
    store_campaign(tmp_path, "20261101T000000Z", [Att(mbps=5000.0)], testbed="lab")
    # a record of another testbed inside a campaign of ours (and an older one without any)
    store_campaign(tmp_path, "20261102T000000Z",
                   [Att(mbps=7000.0, testbed="lab"), Att(mbps=500.0, testbed=None)])
    history = learn_history(tmp_path, ["local"])
    assert history.campaigns == 1
    assert history.pair_goodput("quic-go", "quiche") == Value(500.0, Source(True, 1, 1))
    assert learn_history(tmp_path, ["elsewhere"]) == History(tmp_path, ("elsewhere",))


def test_damaged_files_are_skipped(tmp_path: Path) -> None:
    good = store_campaign(tmp_path, "20261101T000000Z", [Att(mbps=800.0), Att(mbps=900.0),
                                                         Att(mbps=1000.0)])
    runs = sorted(good.glob("*/goodput/*/attempt-1/run.json"))
    runs[0].write_text("{ not json")
    data = json.loads(runs[1].read_text())
    runs[1].write_text(json.dumps({**data, "goodput_mbps": "fast"}))
    broken = store_campaign(tmp_path, "20261102T000000Z", [Att(mbps=1.0)])
    (broken / "campaign.json").write_text("[]")
    newer = store_campaign(tmp_path, "20261103T000000Z", [Att(mbps=2.0)])
    (newer / "campaign.json").write_text(json.dumps({**CAMPAIGN, "schema_version": 99}))
    (tmp_path / "notes.txt").write_text("not a campaign")
    history = learn_history(tmp_path, ["local"])
    assert history.campaigns == 1
    assert history.pair_goodput("quic-go", "quiche") == Value(1000.0, Source(True, 1, 1))


# -- overhead and setup ------------------------------------------------------------------------
def test_overhead_and_setup_from_the_campaigns_timing(tmp_path: Path) -> None:
    # transfers at 2-3 s, 4-6 s, 7-8 s: span 6 s, 4 s of it transfers, 2 gaps of 1 s;
    # wall 10 s, so 4 s setup and clean-up outside the span
    store_campaign(tmp_path, "20261101T000000Z",
                   [Att(start_s=2, duration_s=1), Att(start_s=4, duration_s=2),
                    Att(start_s=7, duration_s=1)], wall_s=10.0)
    # 2 transfers (1-2 s, 4.5-5 s): one gap of 2.5 s; no wall_s: finished_at - started_at
    store_campaign(tmp_path, "20261102T000000Z",
                   [Att(start_s=1, duration_s=1), Att(start_s=4.5, duration_s=0.5)],
                   wall_s=None, t0_ns=T0_NS + 10**12)
    history = learn_history(tmp_path, ["local"])
    assert history.overhead == Value(pytest.approx(1.75), Source(True, 5, 2))
    assert history.setup == Value(pytest.approx(5.0), Source(True, 5, 2))  # 4 s and 6 s


def test_unfinished_and_resumed_campaigns_give_goodput_but_no_timing(tmp_path: Path) -> None:
    attempts = [Att(start_s=1), Att(start_s=3)]
    store_campaign(tmp_path, "20261101T000000Z", attempts, status="interrupted")
    store_campaign(tmp_path, "20261102T000000Z", attempts,
                   sessions=[{"status": "interrupted", "finished_at": iso(T0_NS)}],
                   resumed_at=iso(T0_NS))
    history = learn_history(tmp_path, ["local"])
    assert history.overhead == Value(1.0) and history.setup == Value(0.0)
    assert history.pair_goodput("quic-go", "quiche").source == Source(True, 4, 2)


def test_timing_of_one_testbed_of_a_campaign_over_several(tmp_path: Path) -> None:
    directory = tmp_path / "two_20261101T000000Z"
    directory.mkdir()
    meta = json.loads((SCHEMA / "campaign-v2-two-testbeds.json").read_text())
    (directory / "campaign.json").write_text(json.dumps(meta))
    doc = json.loads((SCHEMA / "campaign-v2-testbed-doc.json").read_text())
    doc.update(started_at=iso(T0_NS), wall_s=12.0)
    (directory / "testbed-local-a.json").write_text(json.dumps(doc))
    store_runs(directory, [Att(start_s=3, testbed="local-a", mbps=400.0),
                           Att(start_s=5, testbed="local-b", mbps=9000.0),
                           Att(start_s=6, testbed="local-a", mbps=600.0)], T0_NS)
    history = learn_history(tmp_path, ["local-a"])
    assert history.pair_goodput("quic-go", "quiche").value == 500.0
    assert history.overhead.value == pytest.approx(2.0)  # 3-4 s, 6-7 s: one gap of 2 s
    assert history.setup.value == pytest.approx(8.0)  # 12 s wall - 4 s span


# -- the plan and its description -------------------------------------------------------------
def test_the_plan_without_history_is_the_old_guess(tmp_path: Path) -> None:
    history = learn_history(tmp_path / "missing", ["local"])
    est = estimate_plan(history, [Planned(), Planned(unsupported="no common protocol")], GB)
    assert est.guess and est.seconds == 8.0 + 1.0  # the unsupported run costs nothing
    assert describe_estimate(est) == (
        f"estimated 9 s (a guess: no earlier results of testbed 'local' in "
        f"{tmp_path / 'missing'}/; 1 Gbit/s or the path's rate and 1 s overhead per run "
        f"assumed)")


def test_a_transfer_is_no_faster_than_its_paths_rate(tmp_path: Path) -> None:
    store_campaign(tmp_path, "20261101T000000Z", [Att(mbps=800.0)])
    history = learn_history(tmp_path, ["local"])
    measured_pair, new_pair = Planned(path_rate_mbps=20.0), Planned("x", "y", path_rate_mbps=20.0)
    # 1 GB at 20 Mbit/s: 400 s, whether the pair was measured faster unshaped or never
    assert estimate_run(history, measured_pair, GB).transfer_s == pytest.approx(400.0)
    assert estimate_run(history, new_pair, GB).transfer_s == pytest.approx(400.0)
    assert estimate_run(history, Planned(), GB).transfer_s == pytest.approx(10.0)  # 800 Mbit/s


def test_the_plan_says_what_was_measured_and_what_guessed(tmp_path: Path) -> None:
    store_campaign(tmp_path, "20261101T000000Z",
                   [Att(mbps=800.0, start_s=2), Att(mbps=800.0, start_s=4)], wall_s=10.0)
    history = learn_history(tmp_path, ["local"])
    runs = [Planned(), Planned(), Planned("quiche", "quiche"),
            Planned("x", "y", unsupported="no common protocol")]
    est = estimate_plan(history, runs, 100 * GB, workers=2)
    # 2 x 1000 s at 800 Mbit/s + 800 s at the guess, 1 s overhead each, over 2 testbeds
    assert (est.transfer_s, est.overhead_s) == (pytest.approx(2800.0), pytest.approx(3.0))
    assert est.seconds == pytest.approx(7.0 + 2803.0 / 2)
    assert (est.pairs_measured, est.pairs_guessed, est.guess) == (1, 1, False)
    assert describe_estimate(est) == (
        "estimated 23.5 min: transfers from this testbed's recent goodput for 1 of 2 pairs "
        "(1 pair guessed at 1 Gbit/s or the path's rate), overhead 1 s per run and 7.0 s "
        "setup measured over 1 campaign")


def test_descriptions_of_partial_histories(tmp_path: Path) -> None:
    store_campaign(tmp_path, "20261101T000000Z", [Att()], status="interrupted")
    history = learn_history(tmp_path, ["local", "lab"])
    est = estimate_plan(history, [Planned()], GB)
    assert describe_estimate(est) == (
        "estimated 9 s: transfers from these testbeds' recent goodput of 1 pair, overhead "
        "1 s per run and 0.0 s setup guessed (no finished campaign of testbeds 'local', 'lab' "
        "to measure them)")
    only_timing = History(tmp_path, ("local",), 1, {}, Value(0.5, Source(True, 4, 2)),
                          Value(3.0, Source(True, 4, 2)))
    assert describe_estimate(estimate_plan(only_timing, [Planned()] * 2, GB)) == (
        "estimated 20 s: transfers guessed at 1 Gbit/s or the path's rate (no ok attempt "
        "of this pair on "
        "testbed 'local'), overhead 0.5 s per run and 3.0 s setup measured over 2 campaigns")
    nothing = History(tmp_path, ("local",), 3)
    assert describe_estimate(estimate_plan(nothing, [Planned()], GB)).endswith(
        "(a guess: nothing usable in 3 earlier campaign(s) of testbed 'local' in "
        f"{tmp_path}/; 1 Gbit/s or the path's rate and 1 s overhead per run "
        "assumed)")


@pytest.mark.parametrize("seconds,text", [(0.4, "0 s"), (119, "119 s"), (120, "2.0 min"),
                                          (7199, "120.0 min"), (7200, "2.0 h")])
def test_durations(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


# -- the time left -----------------------------------------------------------------------------
def test_time_left_is_corrected_by_the_finished_runs() -> None:
    left = RemainingTime({"a": 10.0, "b": 20.0, "c": 30.0})
    assert left.seconds() == 60.0 and left.label() == "~60 s left"
    left.finished(20.0, "a")  # took twice its estimate
    assert left.seconds() == 100.0
    left.finished(25.0, "c")  # now 25 s for 40 s estimated
    assert left.seconds() == pytest.approx(20.0 * 25 / 40)
    left.finished(40.0, "b")
    assert left.seconds() == 0.0


def test_time_left_over_parallel_testbeds_with_setup_to_come() -> None:
    left = RemainingTime({"a": 10.0, "b": 10.0, "c": 10.0, "d": 10.0}, setup_s=5.0, workers=2,
                         guess=True)
    assert left.seconds() == 25.0 and left.label() == "~25 s left (guess)"
    left.finished(10.0)  # unknown run: the next in plan order; 5 s setup + 5 s estimated
    assert left.seconds() == pytest.approx(15.0)


class FakeBar:
    def __init__(self) -> None:
        self.postfix: list[str] = []
        self.n, self.closed = 0, False

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        self.postfix.append(text)

    def update(self, n: int) -> None:
        self.n += n

    def close(self) -> None:
        self.closed = True


def test_the_bar_moves_after_each_run() -> None:
    clock = iter([0.0, 4.0, 9.0])
    bar = FakeBar()
    runs = [Planned(key="a"), Planned(key="b")]
    ticks = ticking(iter(runs), bar, RemainingTime({"a": 2.0, "b": 2.0}),
                    clock=lambda: next(clock))
    assert next(ticks) is runs[0] and bar.n == 0
    assert next(ticks) is runs[1]
    assert (bar.n, bar.postfix) == (1, ["~4 s left"])  # 4 s for a 2 s estimate
    assert list(ticks) == [] and bar.closed
    assert (bar.n, bar.postfix[-1]) == (2, "~0 s left")


def test_the_progress_bar_shows_the_time_left(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    store_campaign(tmp_path, "20261101T000000Z", [Att(mbps=8.0)])
    runs = [Planned(key="a"), Planned(key="b")]
    history = campaign_history(tmp_path, ["local"], runs)
    progress = progress_bar("demo", 10**6, history, workers=1, skipped=1)
    assert list(progress(iter(runs), runs)) == runs
    err = capsys.readouterr().err
    # 1 MB at 8 Mbit/s and the guessed 1 s overhead: 2 x 2 s before the first run finishes
    assert "demo:  33%|" in err and "1/3 [00:00, ~4 s left]" in err
    assert "3/3 [00:00, ~0 s left]" in err
