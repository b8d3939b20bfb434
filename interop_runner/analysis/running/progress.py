"""The progress of a running campaign: a tqdm bar over all its runs with the time left,
estimated from what the testbed measured before (:mod:`.estimate`) and scaled after each
finished run by how long the finished ones really took."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Protocol, Sequence

from interop_runner.analysis.running.estimate import (
    History,
    PlannedLike,
    RemainingTime,
    estimate_plan,
    estimate_run,
    learn_history,
)

# (the items a campaign goes through, the runs it goes through) -> the same items
ProgressBar = Callable[[Iterator[Any], Sequence["KeyedRun"]], Iterator[Any]]


class KeyedRun(PlannedLike, Protocol):
    """A planned run with its key (``measure.plan.PlannedRun`` fits)."""

    @property
    def key(self) -> str: ...


def campaign_history(results_dir: Path, testbeds: Sequence[str],
                     runs: Iterable[PlannedLike]) -> History:
    """What the campaign's testbeds (names) measured before, for the pairs of ``runs``."""
    return learn_history(results_dir, testbeds, {(r.server, r.client) for r in runs})


def remaining_time(history: History, runs: Sequence[KeyedRun], file_size: int,
                   workers: int) -> RemainingTime:
    """The time left of ``runs``, the runs the campaign is about to go through. With several
    testbeds (``workers``) the bar starts before their setup."""
    estimates = {r.key: estimate_run(history, r, file_size).seconds for r in runs}
    return RemainingTime(estimates, setup_s=history.setup.value if workers > 1 else 0.0,
                         workers=workers,
                         guess=estimate_plan(history, runs, file_size, workers).guess)


def progress_bar(name: str, file_size: int, history: History, workers: int,
                 skipped: int = 0) -> ProgressBar:
    """A campaign's progress display: a bar (on stderr) over its runs and the ``skipped``
    ones stored before a resume, which count as done."""

    def progress(items: Iterator[Any], runs: Sequence[KeyedRun]) -> Iterator[Any]:
        from tqdm import tqdm

        left = remaining_time(history, runs, file_size, workers)
        bar = tqdm(total=len(runs) + skipped, initial=skipped, unit="run", desc=name,
                   file=sys.stderr, postfix=left.label(),
                   bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]")
        return ticking(items, bar, left)

    return progress


def ticking(it: Iterator[Any], bar: Any, left: RemainingTime,
            clock: Callable[[], float] | None = None) -> Iterator[Any]:
    """Pass the items on; when the consumer comes back for the next one, the previous run
    is done: move the bar and estimate the time left again (``clock``: time.monotonic)."""
    now = clock or time.monotonic
    start = now()
    try:
        for item in it:
            yield item
            left.finished(now() - start, getattr(item, "key", None))
            bar.set_postfix_str(left.label(), refresh=False)
            bar.update(1)
    finally:
        bar.close()
