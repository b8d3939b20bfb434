#!/usr/bin/env python3
"""False alarms and detections of `history check` on series resampled from real campaigns.

Reads the two real series `bench/history_series.py` wrote (``OUT/step``: goodput lowered by a
rate knob from campaign k on; ``OUT/aa``: no change), then:

* checks both as they are (``history check``'s own analysis);
* builds ``--series`` A/A series by resampling the real A/A campaigns: each series takes the
  campaigns in a random order, and each campaign's attempts drawn with replacement; reports
  how many have any change point (the false-alarm rate, target <= 5 %);
* builds as many step series the same way from the real step series, keeping the campaigns
  before k before it and those from k on after it; reports how many have exactly one change
  point, at k, with the observed step inside its CI.

Usage: .venv/bin/python bench/history_resampled.py OUT [--series 50] [--step-at 7] [--seed 1]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import numpy as np
from common import machine

from interop_runner.analysis.frames.results import load_results
from interop_runner.analysis.history.changepoints import Point, change_points, resampled
from interop_runner.analysis.history.series import points


def real_points(results: Path) -> list[Point]:
    """The goodput points of one series of real campaigns, oldest first."""
    frame = load_results(results)
    frame = frame.assign(campaign_started_at=frame.groupby("campaign")["started_at"]
                         .transform("min"), knobs=None)
    return points(frame)


def main() -> None:
    """Print the real series' change points and the resampled rates."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--series", type=int, default=50)
    parser.add_argument("--step-at", type=int, default=7)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(machine())
    step, aa = real_points(args.out / "step"), real_points(args.out / "aa")
    k = args.step_at - 1
    truth = statistics.median(p.median for p in step[k:]) / \
        statistics.median(p.median for p in step[:k]) - 1
    for name, pts in (("step", step), ("aa", aa)):
        found = change_points(pts)
        print(f"real {name}: {len(pts)} campaigns, change points: "
              + (", ".join(f"at {c.index + 1} {100 * c.rel_change:+.1f} % "
                           f"[{100 * c.ci_low:+.1f}, {100 * c.ci_high:+.1f}] p={c.p_value:.4f}"
                           for c in found) or "none"))
    rng = np.random.default_rng(args.seed)
    alarms = sum(bool(change_points(resampled(aa, rng, None))) for _ in range(args.series))
    print(f"A/A: {alarms} of {args.series} resampled series with a change point "
          f"({100 * alarms / args.series:.1f} % false alarms)")
    right = 0
    for _ in range(args.series):
        found = change_points(resampled(step, rng, k))
        right += len(found) == 1 and found[0].index == k and \
            found[0].ci_low <= truth <= found[0].ci_high
    print(f"step {100 * truth:+.1f} % at campaign {args.step_at}: exactly one change point "
          f"there with the step in its CI in {right} of {args.series} resampled series")


if __name__ == "__main__":
    main()
