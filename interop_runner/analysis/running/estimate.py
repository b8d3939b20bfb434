"""How long a planned campaign will take, learnt from what its testbed measured before.

Three components, each either *measured* on this testbed or a *guess* (the old defaults):

- transfer time of a run: file size / the pair's recent goodput (median of its last
  :data:`RECENT_ATTEMPTS` ok attempts, newest campaigns first; guess: 1 Gbit/s), at most the
  rate of the emulated path the run goes through (a pair measured unshaped is no faster over
  a 20 Mbit/s bottleneck);
- overhead per run: the time between transfers that is not a transfer (starting and stopping
  the server, the client's start-up, verifying, storing: (last transfer end - first transfer
  start - the transfers) / (transfers - 1)); guess: 1 s;
- setup of a campaign: its wall time outside that span (connecting, building, generating the
  file before the first transfer, cleaning up after the last); guess: 0 s.

Overhead and setup are medians over the newest :data:`TIMING_CAMPAIGNS` finished one-session
campaigns of the testbed (a resumed campaign's wall time covers only its last session). Only
the newest :data:`RECENT_CAMPAIGNS` campaigns are considered (by the UTC time in the directory
name), only ``campaign.json``, ``testbed-<name>.json`` and ``run.json`` files are read, and a
damaged file is skipped. Pure: reads files, runs nothing.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Protocol, Sequence

from interop_runner.errors import StoreError
from interop_runner.storage.campaign_record import read_campaign
from interop_runner.storage.layout import iter_run_files
from interop_runner.storage.run_record import read_run

GUESS_MBPS = 1000.0  # goodput assumed for a pair this testbed never measured
GUESS_OVERHEAD_S = 1.0  # per run, without a finished campaign to learn it from
GUESS_SETUP_S = 0.0  # per campaign, likewise
RECENT_ATTEMPTS = 10  # ok attempts per pair whose goodput median is its estimate
RECENT_CAMPAIGNS = 20  # newest campaigns of the testbed that are read at all
TIMING_CAMPAIGNS = 5  # newest finished campaigns whose overhead and setup are used
_STAMP = re.compile(r"_(\d{8}T\d{6}Z)(?:-(\d+))?$")  # new_campaign_dir's <name>_<UTC>[-k]
Pair = tuple[str, str]
_GUESSED = f"{GUESS_MBPS / 1000:g} Gbit/s or the path's rate"


class PlannedLike(Protocol):
    """What an estimate needs of a planned run (``measure.plan.PlannedRun`` fits)."""

    @property
    def server(self) -> str: ...

    @property
    def client(self) -> str: ...

    @property
    def unsupported(self) -> str | None:
        """Why it is recorded as unsupported without running (None: it runs)."""

    @property
    def scheduled_s(self) -> float | None:
        """How long its transfer lasts by its schedule (flows with durations), else None."""

    @property
    def path_rate_mbps(self) -> float | None:
        """The rate of the emulated path it goes through in Mbit/s (None: no fixed rate)."""


@dataclass(frozen=True)
class Source:
    """Where a value comes from: measured (from so many attempts and campaigns) or a guess."""

    measured: bool
    attempts: int = 0
    campaigns: int = 0

    @property
    def kind(self) -> str:
        """``measured`` or ``guess``."""
        return "measured" if self.measured else "guess"


GUESS = Source(False)


@dataclass(frozen=True)
class Value:
    """A number and its source."""

    value: float
    source: Source = GUESS


@dataclass(frozen=True)
class History:
    """What the testbed(s) measured before: goodput per (server, client) that was measured,
    overhead per run and setup per campaign (measured or guessed)."""

    results_dir: Path
    testbeds: tuple[str, ...]
    campaigns: int = 0  # campaigns of these testbeds that were read
    goodput: Mapping[Pair, Value] = field(default_factory=dict)  # Mbit/s, measured pairs only
    overhead: Value = Value(GUESS_OVERHEAD_S)
    setup: Value = Value(GUESS_SETUP_S)

    def pair_goodput(self, server: str, client: str) -> Value:
        """The pair's recent goodput in Mbit/s, or the guess."""
        return self.goodput.get((server, client), Value(GUESS_MBPS))


@dataclass(frozen=True)
class RunEstimate:
    """One planned run: its transfer and overhead (both 0 for a run that cannot run)."""

    transfer_s: float
    overhead_s: float
    goodput: Value

    @property
    def seconds(self) -> float:
        """Transfer plus overhead."""
        return self.transfer_s + self.overhead_s


@dataclass(frozen=True)
class PlanEstimate:
    """A whole plan: wall time (setup, then the runs shared by the parallel testbeds) and
    what each part rests on."""

    seconds: float
    transfer_s: float
    overhead_s: float
    history: History
    pairs_measured: int
    pairs_guessed: int
    workers: int = 1

    @property
    def guess(self) -> bool:
        """Nothing in it was measured."""
        h = self.history
        return not (self.pairs_measured or h.overhead.source.measured or h.setup.source.measured)


# -- the estimate ------------------------------------------------------------------------------
def estimate_run(history: History, run: PlannedLike, file_size: int) -> RunEstimate:
    """Transfer (``file_size`` at the pair's recent goodput) and overhead of one run."""
    goodput = history.pair_goodput(run.server, run.client)
    if run.unsupported is not None:  # recorded as unsupported without running
        return RunEstimate(0.0, 0.0, goodput)
    if run.scheduled_s is not None:  # flows that last their durations: known in advance
        return RunEstimate(run.scheduled_s, history.overhead.value, Value(0.0, Source(True)))
    mbps = goodput.value if run.path_rate_mbps is None else min(goodput.value,
                                                                 run.path_rate_mbps)
    return RunEstimate(file_size * 8 / (mbps * 1e6), history.overhead.value, goodput)


def estimate_plan(history: History, runs: Sequence[PlannedLike], file_size: int,
                  workers: int = 1) -> PlanEstimate:
    """The wall time of ``runs``: setup once, then the runs split over ``workers`` testbeds
    running in parallel."""
    each = [estimate_run(history, r, file_size) for r in runs]
    pairs = {(r.server, r.client): e.goodput.source.measured
             for r, e in zip(runs, each) if r.unsupported is None and r.scheduled_s is None}
    transfer = sum(e.transfer_s for e in each)
    overhead = sum(e.overhead_s for e in each)
    workers = max(workers, 1)
    setup = history.setup.value if runs else 0.0
    return PlanEstimate(setup + (transfer + overhead) / workers, transfer, overhead, history,
                        sum(pairs.values()), sum(not m for m in pairs.values()), workers)


def describe_estimate(est: PlanEstimate) -> str:
    """One line: the estimate and what it rests on (which parts were measured, which
    guessed)."""
    head = f"estimated {format_duration(est.seconds)}"
    if est.guess:
        return f"{head} ({_no_history(est.history)}; {_GUESSED} and " \
               f"{GUESS_OVERHEAD_S:g} s overhead per run assumed)"
    return f"{head}: {_transfer_note(est)}, {_timing_note(est.history)}"


def format_duration(seconds: float) -> str:
    """``45 s``, ``12.3 min`` or ``26.5 h``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _names(history: History) -> str:
    quoted = ", ".join(f"'{t}'" for t in history.testbeds)
    return f"testbed{'s' if len(history.testbeds) > 1 else ''} {quoted}"


def _no_history(history: History) -> str:
    where = f"{history.results_dir}/"
    if history.campaigns:
        return f"a guess: nothing usable in {history.campaigns} earlier campaign(s) of " \
               f"{_names(history)} in {where}"
    return f"a guess: no earlier results of {_names(history)} in {where}"


def _transfer_note(est: PlanEstimate) -> str:
    pairs = est.pairs_measured + est.pairs_guessed
    if not pairs:
        return "nothing to transfer"
    whose = "this testbed's" if len(est.history.testbeds) == 1 else "these testbeds'"
    if not est.pairs_guessed:
        return f"transfers from {whose} recent goodput of {_count(pairs, 'pair')}"
    if not est.pairs_measured:
        return f"transfers guessed at {_GUESSED} (no ok attempt of " \
               f"{'these pairs' if pairs > 1 else 'this pair'} on {_names(est.history)})"
    return f"transfers from {whose} recent goodput for {est.pairs_measured} of {pairs} " \
           f"pairs ({_count(est.pairs_guessed, 'pair')} guessed at " \
           f"{_GUESSED})"


def _timing_note(history: History) -> str:
    overhead, setup = history.overhead, history.setup
    per_run = f"{overhead.value:.2g}" if overhead.value < 10 else f"{overhead.value:.0f}"
    text = f"overhead {per_run} s per run and {setup.value:.1f} s setup"
    if overhead.source.measured:
        return f"{text} measured over {_count(overhead.source.campaigns, 'campaign')}"
    return f"{text} guessed (no finished campaign of {_names(history)} to measure them)"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


# -- the time left while a campaign runs -----------------------------------------------------
class RemainingTime:
    """The time left of a running campaign: the estimates of the runs not finished yet,
    scaled by how long the finished ones really took compared with their estimates."""

    def __init__(self, estimates: Mapping[str, float], *, setup_s: float = 0.0,
                 workers: int = 1, guess: bool = False) -> None:
        """``estimates``: seconds per run key, in plan order; ``setup_s``: setup still to
        come before the first run; ``workers``: testbeds running in parallel."""
        self._pending = dict(estimates)
        self._setup = setup_s
        self._workers = max(workers, 1)
        self._done_s = 0.0  # estimated seconds of the finished runs (with the setup)
        self._elapsed = 0.0
        self._finished = 0
        self.guess = guess

    def finished(self, elapsed_s: float, key: str | None = None) -> None:
        """One more run finished, ``elapsed_s`` after the start. ``key``: which one (None:
        unknown, the next in plan order is taken)."""
        if key not in self._pending:
            key = next(iter(self._pending), None)
        estimate = self._pending.pop(key, 0.0) if key is not None else 0.0
        self._done_s += estimate / self._workers + (self._setup if not self._finished else 0)
        self._finished += 1
        self._elapsed = elapsed_s

    def seconds(self) -> float:
        """The estimated wall time left."""
        left = sum(self._pending.values()) / self._workers
        if not self._finished:
            return self._setup + left
        ratio = self._elapsed / self._done_s if self._done_s > 0 else 1.0
        return ratio * left

    def label(self) -> str:
        """E.g. ``~12.3 min left`` or ``~45 s left (guess)``."""
        return f"~{format_duration(self.seconds())} left{' (guess)' if self.guess else ''}"


# -- learning from stored campaigns ----------------------------------------------------------
@dataclass
class _Attempt:
    """The few values of a run.json the estimate uses."""

    pair: Pair
    ok_mbps: float | None  # goodput of an ok attempt
    start_ns: int | None
    end_ns: int | None


@dataclass
class _Campaign:
    """A stored campaign of the testbed(s): its timing documents (one per testbed of ours
    with a readable document) and directory."""

    directory: Path
    started: str
    timing: list[tuple[str, dict[str, Any]]]  # (testbed, campaign/testbed-<name>.json)
    single: str | None = None  # the testbed of a one-testbed campaign


@dataclass
class _Learnt:
    """Samples collected so far, newest campaigns first."""

    goodput: dict[Pair, list[tuple[float, str]]] = field(default_factory=dict)
    overhead: list[float] = field(default_factory=list)
    setup: list[float] = field(default_factory=list)
    timed: int = 0  # transfers the overhead samples come from
    timing_campaigns: int = 0


def learn_history(results_dir: Path, testbeds: Sequence[str],
                  pairs: Iterable[Pair] | None = None) -> History:
    """What ``testbeds`` measured in the campaigns stored in ``results_dir`` (``pairs``: the
    (server, client) pairs whose goodput is wanted; None: every pair). Never raises for
    a missing directory or a damaged file: what cannot be read is left out."""
    names = tuple(testbeds)
    wanted = set(pairs) if pairs is not None else None
    campaigns = _campaigns(results_dir, set(names))
    learnt = _Learnt()
    for camp in campaigns:
        if not _learn_campaign(camp, names, wanted, learnt):
            break
    return History(results_dir, names, len(campaigns), _goodput(learnt),
                   _median(learnt.overhead, GUESS_OVERHEAD_S, learnt),
                   _median(learnt.setup, GUESS_SETUP_S, learnt))


def _goodput(learnt: _Learnt) -> dict[Pair, Value]:
    out = {}
    for pair, samples in learnt.goodput.items():
        recent = samples[:RECENT_ATTEMPTS]
        source = Source(True, len(recent), len({c for _, c in recent}))
        out[pair] = Value(statistics.median(v for v, _ in recent), source)
    return out


def _median(samples: list[float], guess: float, learnt: _Learnt) -> Value:
    if not samples:
        return Value(guess)
    return Value(statistics.median(samples), Source(True, learnt.timed, len(samples)))


def _learn_campaign(camp: _Campaign, names: tuple[str, ...], wanted: set[Pair] | None,
                    learnt: _Learnt) -> bool:
    """Add one campaign's samples; False once nothing more is needed (older campaigns are
    then not read)."""
    need_timing = learnt.timing_campaigns < TIMING_CAMPAIGNS
    timing = need_timing and any(_one_finished_session(doc) for _, doc in camp.timing)
    short = None if wanted is None else {p for p in wanted
                                         if len(learnt.goodput.get(p, [])) < RECENT_ATTEMPTS}
    if short is not None and not short and not timing:
        return need_timing  # every pair has enough: go on only for the timing
    attempts = _attempts(camp, names, None if timing else short)
    for name, attempts_of in attempts.items():
        _add_goodput(learnt, attempts_of, camp.directory.name, wanted)
        doc = dict(camp.timing).get(name)
        if timing and doc is not None and _one_finished_session(doc):
            _add_timing(learnt, doc, attempts_of)
    learnt.timing_campaigns += timing
    return True


def _add_goodput(learnt: _Learnt, attempts: list[_Attempt], campaign: str,
                 wanted: set[Pair] | None) -> None:
    ok = [a for a in attempts if a.ok_mbps is not None and (wanted is None or a.pair in wanted)]
    for a in sorted(ok, key=lambda a: a.start_ns or 0, reverse=True):
        assert a.ok_mbps is not None
        learnt.goodput.setdefault(a.pair, []).append((a.ok_mbps, campaign))


def _add_timing(learnt: _Learnt, doc: dict[str, Any], attempts: list[_Attempt]) -> None:
    """Overhead per run and setup of one campaign on one testbed, when it has two or more
    transfers with their times and a wall time."""
    timed = [(a.start_ns, a.end_ns) for a in attempts
             if a.start_ns is not None and a.end_ns is not None and a.end_ns >= a.start_ns]
    wall = _wall_s(doc)
    if len(timed) < 2 or wall is None:
        return
    span = (max(e for _, e in timed) - min(s for s, _ in timed)) / 1e9
    transfers = sum(e - s for s, e in timed) / 1e9
    learnt.overhead.append(max(span - transfers, 0.0) / (len(timed) - 1))
    learnt.setup.append(max(wall - span, 0.0))
    learnt.timed += len(timed)


def _one_finished_session(doc: dict[str, Any]) -> bool:
    return doc.get("status") == "finished" and not doc.get("sessions") \
        and not doc.get("resumed_at")


def _wall_s(doc: dict[str, Any]) -> float | None:
    """``wall_s``, else finished_at - started_at."""
    wall = _number(doc.get("wall_s"))
    if wall is not None:
        return wall
    start, end = _utc(doc.get("started_at")), _utc(doc.get("finished_at"))
    return (end - start).total_seconds() if start and end and end >= start else None


def _utc(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)


def _number(value: Any) -> float | None:
    """A finite, positive number, else None (damaged values are skipped)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if 0 < value < float("inf") else None


# -- reading ---------------------------------------------------------------------------------
def _campaigns(results_dir: Path, names: set[str]) -> list[_Campaign]:
    """The newest :data:`RECENT_CAMPAIGNS` campaigns that ran on one of ``names``, newest
    first."""
    found: list[_Campaign] = []
    for directory in _newest_first(results_dir):
        camp = _campaign(directory, names)
        if camp is not None:
            found.append(camp)
            if len(found) == RECENT_CAMPAIGNS:
                break
    return sorted(found, key=lambda c: c.started, reverse=True)


def _newest_first(results_dir: Path) -> list[Path]:
    """Campaign directories by the UTC time in their names (others last)."""
    try:
        dirs = [p for p in results_dir.iterdir() if p.is_dir()]
    except OSError:
        return []

    def stamp(p: Path) -> tuple[str, int]:
        m = _STAMP.search(p.name)
        return (m.group(1), int(m.group(2) or 1)) if m else ("", 0)

    return sorted(dirs, key=stamp, reverse=True)


def _campaign(directory: Path, names: set[str]) -> _Campaign | None:
    """The campaign in ``directory`` if it ran on one of ``names`` (None: not ours, or its
    campaign.json cannot be read)."""
    meta = _document(directory / "campaign.json")
    if meta is None:
        return None
    started = str(meta.get("started_at") or "")
    testbed = meta.get("testbed")
    if isinstance(testbed, dict) and testbed.get("name") in names:
        name = str(testbed["name"])
        return _Campaign(directory, started, [(name, meta)], single=name)
    several = meta.get("testbeds")
    ours = sorted(n for n in several if n in names) if isinstance(several, dict) else []
    if not ours:
        return None
    files = meta.get("testbed_files")
    files = files if isinstance(files, dict) else {}
    timing = [(n, doc) for n in ours
              if (doc := _document(directory / str(files.get(n, f"testbed-{n}.json"))))]
    return _Campaign(directory, started, timing)


def _document(path: Path) -> dict[str, Any] | None:
    try:
        return read_campaign(path)
    except (OSError, ValueError, StoreError):
        return None


def _attempts(camp: _Campaign, names: tuple[str, ...], only: set[Pair] | None
              ) -> dict[str, list[_Attempt]]:
    """The campaign's attempts per testbed of ours (``only``: those of these pairs)."""
    out: dict[str, list[_Attempt]] = {}
    for path in _run_files(camp.directory, only):
        data = _read(path)
        if data is None:
            continue
        testbed = data.get("testbed") or camp.single  # older records may lack it
        pair = _pair(data)
        if testbed in names and pair is not None and (only is None or pair in only):
            out.setdefault(str(testbed), []).append(_attempt(data, pair))
    return out


def _run_files(directory: Path, only: set[Pair] | None) -> Iterator[Path]:
    if only is None:
        yield from iter_run_files(directory)
        return
    for server, client in sorted(only):
        yield from iter_run_files(directory / f"{server}_{client}")


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return read_run(path)
    except (OSError, ValueError, StoreError):
        return None


def _pair(data: dict[str, Any]) -> Pair | None:
    server, client = (side.get("implementation") if isinstance(side, dict) else None
                      for side in (data.get("server"), data.get("client")))
    return (server, client) if isinstance(server, str) and isinstance(client, str) else None


def _attempt(data: dict[str, Any], pair: Pair) -> _Attempt:
    ok = data.get("status") == "ok" and not data.get("interrupted")
    start, end = data.get("start_ns"), data.get("end_ns")
    return _Attempt(pair, _number(data.get("goodput_mbps")) if ok else None,
                    start if isinstance(start, int) and not isinstance(start, bool) else None,
                    end if isinstance(end, int) and not isinstance(end, bool) else None)
