#!/usr/bin/env python3
"""Parsing speed: today's loader and this tree's, side by side on one generated campaign.

A 1,000-attempt campaign from ``bench/make_campaign.py`` (light monitor set, every counter
extracted) is loaded cold (``load_results(dir, cache=False)``) by the loader of git revision
``--old-rev`` (its ``interop_runner`` package, extracted with ``git archive``) and by this
tree's, each in a fresh subprocess, alternately for ``--rounds`` rounds (``--repeat`` loads
per subprocess). Each load's wall time and CPU time (the process and its pool workers) are
reported; peak memory is the subprocess's own RSS and its largest pool worker's. The two
frames are compared on their common columns (the old revision may lack newer base
columns).

Then a just-finished campaign: a ``CampaignCache`` gets every ``run.json`` while
``campaign.json`` says ``running``, the final ``campaign.json`` is put back, ``finish()``
writes the cache, and a fresh subprocess times the first ``load_results(dir)``.

The predecessor's parser loads 4,430 repetitions in 5.2 s on this kind of machine (about
1.17 s per 1,000 attempts) extracting 6 ethtool and 6 netstat fields per side.
Usage: .venv/bin/python bench/parsing.py [--attempts 1000] [--rounds 3] [--repeat 3]
       [--dir /dev/shm/qir-parse] [--old-rev 21fe00e]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from common import ROOT, machine

PREDECESSOR_S_PER_1000 = 5.2 / 4430 * 1000

# Each worker: sys.path[0] is the package root to load with; prints one JSON line.
_RSS = """
import resource
def rss():
    kib = [resource.getrusage(w).ru_maxrss for w in (resource.RUSAGE_SELF,
                                                     resource.RUSAGE_CHILDREN)]
    return {"main": round(kib[0] / 1024, 1), "largest_worker": round(kib[1] / 1024, 1)}
"""
COLD = _RSS + """
import json, os, sys, time
root, campaign, repeat, dump = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
sys.path.insert(0, root)
from interop_runner.analysis import load_results
def cpu():
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system
times, cpus = [], []
for _ in range(repeat):
    t0, c0 = time.perf_counter(), cpu()
    frame = load_results(campaign, cache=False)
    times.append(time.perf_counter() - t0)
    cpus.append(cpu() - c0)
if dump:
    frame.to_pickle(dump)
print(json.dumps({"times": times, "cpu": cpus, "shape": frame.shape, "rss": rss()}))
"""
BUILD_CACHE = """
import json, sys, time
from pathlib import Path
root, campaign = sys.argv[1], Path(sys.argv[2])
sys.path.insert(0, root)
from interop_runner.analysis.running.campaign_cache import CampaignCache
from interop_runner.storage.layout import iter_run_files
meta = campaign / "campaign.json"
final = meta.read_bytes()
meta.write_text(json.dumps({**json.loads(final), "status": "running"}))  # as it starts
files = list(iter_run_files(campaign))
cache = CampaignCache(campaign)
t0 = time.perf_counter()
for path in files:  # the runner adds each record as it is stored
    cache.add(path)
add_s = time.perf_counter() - t0
meta.write_bytes(final)  # the campaign ended
t0 = time.perf_counter()
wrote = cache.finish()
finish_s = time.perf_counter() - t0
print(json.dumps({"add_s": add_s, "attempts": len(files), "finish_s": finish_s,
                  "wrote": wrote}))
"""
FIRST_LOAD = _RSS + """
import json, sys, time
root, campaign, dump = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, root)
from interop_runner.analysis import load_results
t0 = time.perf_counter()
frame = load_results(campaign)
first = time.perf_counter() - t0
frame.to_pickle(dump)
print(json.dumps({"first_load_s": first, "rss": rss()}))
"""


def _worker(code: str, *args: str) -> dict[str, Any]:
    """Run a worker in a fresh interpreter (outside the tree, so only its root is found)."""
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True,
                         text=True, cwd=tempfile.gettempdir()).stdout
    result: dict[str, Any] = json.loads(out.splitlines()[-1])
    return result


def _summary(runs: list[dict[str, Any]], attempts: int) -> dict[str, Any]:
    """Times of every load of one loader (best, median, per 1,000 attempts), peak memory."""
    times = [t for run in runs for t in run["times"]]
    median = statistics.median(times)
    return {
        "times_s": [round(t, 3) for t in times], "best_s": round(min(times), 3),
        "median_s": round(median, 3), "median_s_per_1000": round(median / attempts * 1000, 3),
        "cpu_median_s": round(statistics.median(c for run in runs for c in run["cpu"]), 3),
        "peak_rss_mib": {k: max(run["rss"][k] for run in runs)
                         for k in ("main", "largest_worker")},
    }


def _compare(old_pickle: Path, new_pickle: Path) -> dict[str, Any]:
    """Whether the frames are identical on the columns both have (order, dtypes, values)."""
    import pandas as pd

    old, new = pd.read_pickle(old_pickle), pd.read_pickle(new_pickle)
    only_new = [c for c in new.columns if c not in old.columns]
    only_old = [c for c in old.columns if c not in new.columns]
    try:
        pd.testing.assert_frame_equal(old.drop(columns=only_old), new.drop(columns=only_new),
                                      check_exact=True)
        identical = True
    except AssertionError:
        identical = False
    differing = [c for c in old.columns if c in new.columns and not _same_column(old[c], new[c])]
    return {"identical_on_common_columns": identical, "columns_only_in_new": only_new,
            "columns_only_in_old": only_old, "common_columns_that_differ": differing}


def _same_column(old: Any, new: Any) -> bool:
    """Equal dtype and values (NA where the other is NA)."""
    import pandas as pd

    try:
        pd.testing.assert_series_equal(old, new, check_exact=True)
    except AssertionError:
        return False
    return True


def _side_by_side(args: argparse.Namespace, campaign: Path, old_root: Path, scratch: Path
                  ) -> dict[str, Any]:
    """Cold loads of both loaders, alternating (old first in even rounds)."""
    runs: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    roots = {"old": old_root, "new": ROOT}
    for round_ in range(args.rounds):
        for which in ("old", "new") if round_ % 2 == 0 else ("new", "old"):
            dump = str(scratch / f"{which}.pkl") if round_ == 0 else ""
            runs[which].append(_worker(COLD, str(roots[which]), str(campaign),
                                       str(args.repeat), dump))
    attempts = runs["new"][0]["shape"][0]
    old, new = _summary(runs["old"], attempts), _summary(runs["new"], attempts)
    return {"attempts": attempts, "columns": runs["new"][0]["shape"][1], "old": old,
            "new": new, "speedup_median": round(old["median_s"] / new["median_s"], 2),
            "frame": _compare(scratch / "old.pkl", scratch / "new.pkl")}


def _just_finished(campaign: Path, scratch: Path) -> dict[str, Any]:
    """CampaignCache over the whole campaign, then the first load in a fresh process."""
    shutil.rmtree(campaign / ".cache", ignore_errors=True)
    built = _worker(BUILD_CACHE, str(ROOT), str(campaign))
    first = _worker(FIRST_LOAD, str(ROOT), str(campaign), str(scratch / "first.pkl"))
    same = _compare(scratch / "new.pkl", scratch / "first.pkl")["identical_on_common_columns"]
    return {"add_ms_per_attempt": round(built["add_s"] / built["attempts"] * 1000, 3),
            "finish_s": round(built["finish_s"], 3), "wrote_cache": built["wrote"],
            "first_load_s": round(first["first_load_s"], 3),
            "first_load_peak_rss_mib": first["rss"]["main"],
            "first_load_equals_cold_load": same}


def _extract(rev: str, root: Path) -> None:
    """The package of ``rev`` under ``root``, with its compiled parser loops built where it
    has them (as install.sh builds them), so the old loader is measured as installed."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "interop_runner",
                              *_paths_at(rev, "setup.py")], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    if (root / "setup.py").exists():
        subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=root,
                       check=True, capture_output=True)


def _paths_at(rev: str, *paths: str) -> list[str]:
    """Those of ``paths`` that exist at ``rev``."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "--name-only", rev, *paths],
                            check=True, capture_output=True, text=True).stdout
    return listed.split()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3, help="old/new alternations")
    parser.add_argument("--repeat", type=int, default=3, help="cold loads per subprocess")
    parser.add_argument("--dir", type=Path, default=Path("/dev/shm/qir-parse"))
    parser.add_argument("--old-rev", default="21fe00e", help="today's loader (git revision)")
    args = parser.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "make_campaign.py"),
                          str(args.dir / "tree"), "--attempts", str(args.attempts)],
                         check=True, capture_output=True, text=True).stdout
    campaign = Path(out.splitlines()[0].strip())
    old_root, scratch = args.dir / "old", args.dir / "scratch"
    old_root.mkdir()
    scratch.mkdir()
    try:
        _extract(args.old_rev, old_root)
        result = _side_by_side(args, campaign, old_root, scratch)
        result["just_finished_campaign"] = _just_finished(campaign, scratch)
    finally:
        shutil.rmtree(args.dir, ignore_errors=True)
    print(json.dumps({"machine": machine(), "old_rev": args.old_rev, **result,
                      "predecessor_s_per_1000": round(PREDECESSOR_S_PER_1000, 3)}, indent=2))


if __name__ == "__main__":
    main()
