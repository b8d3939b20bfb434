#!/usr/bin/env python3
"""Loading speed of a large predecessor (QIR 10G) result tree: the fixture scaled N times.

Builds ``<dest>/results/`` from the real fixture (default /work/shared/fixtures/qir10g/results,
else tests/data/qir10g/results): every ``<server>_<client>/goodput/<rep>/`` directory is
repeated ``--factor`` times as repetitions ``rep + k * step`` (k = 0..factor-1), with every file
symlinked to the original (so the tree has factor x the files, but the page cache is warm: this
measures parsing, not disk reads). ``out.perf.zst`` is left out unless ``--perf`` is given
(one perf repetition costs ~2.7 s of CPU for 2 x 2.6 MB of perf script output).

Then times ``load_results`` on it in a fresh interpreter (cold: no Parquet cache exists for
this format, no warm module caches), ``--repeat`` times, and prints one JSON line.
Usage: .venv/bin/python bench/qir10g_scale.py [--factor 100] [--dest /tmp/qir10g-scale] [--perf]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path("/work/shared/fixtures/qir10g/results")

_CHILD = """
import sys, time, json, resource
sys.path.insert(0, {root!r})
t0 = time.perf_counter()
from interop_runner.analysis import load_results
t1 = time.perf_counter()
frame = load_results({tree!r})
t2 = time.perf_counter()
print(json.dumps({{"import_s": t1 - t0, "load_s": t2 - t1, "rows": len(frame),
                  "columns": frame.shape[1], "ok": int((frame["status"] == "ok").sum()),
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def build(source: Path, dest: Path, factor: int, perf: bool) -> tuple[int, int]:
    """Scaled copy of ``source`` under ``dest``; returns (repetition dirs, files)."""
    shutil.rmtree(dest, ignore_errors=True)
    reps = files = 0
    for dirpath, dirnames, filenames in os.walk(source):
        here = Path(dirpath)
        rel = here.relative_to(source)
        parts = rel.parts
        # a repetition directory: <exp...>/<server>_<client>/<testcase>/<n>
        if parts and parts[-1].isdecimal() and (here / "output.txt").exists():
            dirnames[:] = []
            siblings = [int(p.name) for p in here.parent.iterdir() if p.name.isdecimal()]
            step = max(siblings)
            for k in range(factor):
                target = dest / rel.parent / str(int(parts[-1]) + k * step)
                for sub, _, names in os.walk(here):
                    out = target / Path(sub).relative_to(here)
                    out.mkdir(parents=True, exist_ok=True)
                    for name in names:
                        if name.endswith((".zst", ".perf")) and not perf:
                            continue
                        os.symlink(Path(sub, name).resolve(), out / name)
                        files += 1
                reps += 1
            continue
        if any(p.isdecimal() for p in parts):
            continue
        (dest / rel).mkdir(parents=True, exist_ok=True)
        for name in filenames:
            if name == "result.json":
                shutil.copyfile(here / name, dest / rel / name)
                files += 1
    return reps, files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--factor", type=int, default=100)
    parser.add_argument("--dest", type=Path, default=Path("/tmp/qir10g-scale"))
    parser.add_argument("--source", type=Path,
                        default=SHARED if SHARED.exists() else
                        ROOT / "tests" / "data" / "qir10g" / "results")
    parser.add_argument("--perf", action="store_true", help="include out.perf.zst files")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the scaled tree")
    args = parser.parse_args()
    tree = args.dest / "results"
    t0 = time.perf_counter()
    reps, files = build(args.source, tree, args.factor, args.perf)
    build_s = time.perf_counter() - t0
    runs = []
    try:
        for _ in range(args.repeat):
            out = subprocess.run([sys.executable, "-c", _CHILD.format(root=str(ROOT),
                                                                      tree=str(tree))],
                                 check=True, capture_output=True, text=True).stdout
            runs.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        if not args.keep:
            shutil.rmtree(args.dest, ignore_errors=True)
    assert all(r["rows"] == reps for r in runs), (reps, runs)
    load = [r["load_s"] for r in runs]
    print(json.dumps({
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
                   f"python {platform.python_version()}",
        "source": str(args.source), "factor": args.factor, "perf": args.perf,
        "repetition_dirs": reps, "files": files, "build_s": round(build_s, 2),
        "rows": runs[0]["rows"], "columns": runs[0]["columns"], "ok": runs[0]["ok"],
        "load_s_median": round(statistics.median(load), 3),
        "load_s_runs": [round(x, 3) for x in load],
        "ms_per_repetition": round(1000 * statistics.median(load) / reps, 3),
        "import_s": round(statistics.median(r["import_s"] for r in runs), 3),
        "peak_rss_mib": round(max(r["peak_rss_mib"] for r in runs), 1),
    }))


if __name__ == "__main__":
    main()
