"""Clouds kept on disk between processes (interop_runner.analysis.theories.cloud_store): a second
process reads the cloud the first computed, the same; another code key or other trials
compute again; no writable directory stores nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from interop_runner.analysis.theories import cloud_store

# two loose clusters per trial, three trials; prints the cloud, or fails if it is computed
# while computing is refused (retention and the envelope replaced by a function that raises)
SCRIPT = """
import importlib, sys
import numpy as np
from interop_runner.analysis.theories import cloud_store
conformance = importlib.import_module("interop_runner.analysis.theories.conformance")
rng = np.random.default_rng(int(sys.argv[1]))
trials = [np.vstack([rng.normal((1, 5), 0.4, (60, 2)), rng.normal((4, 2), 0.6, (60, 2))])
          for _ in range(3)]
if sys.argv[2] == "refuse":
    def refused(*args, **kwargs):
        raise SystemExit("computed, not read from the store")
    conformance.retention = conformance.performance_envelope = refused
code = sys.argv[3] if len(sys.argv) > 3 else cloud_store.CODE_KEY
c = conformance.stored_cloud(conformance._Trials.of(trials).digest, None, 8, 0, code=code,
                             trials=conformance._Trials.of(trials))
print(c.k, c.signature, len(c.kept), ",".join(f"{r:.12f}" for r in c.retention))
"""


def run(store: Path, *args: str, script: str = SCRIPT) -> subprocess.CompletedProcess[str]:
    """``script`` (the clouds' by default) in a process of its own, over the store ``store``."""
    env = {**os.environ, "QIR_CACHE_DIR": str(store)}
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                          text=True, env=env, timeout=300)


def test_a_second_process_reads_the_cloud_the_first_computed(tmp_path: Path) -> None:
    first = run(tmp_path, "1", "compute")
    assert first.returncode == 0, first.stderr
    assert any((tmp_path / "clouds").rglob("output.pkl"))  # joblib's stored result
    second = run(tmp_path, "1", "refuse")
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout and first.stdout.split()[0] in "12345678"


def test_other_trials_or_another_code_key_are_computed_again(tmp_path: Path) -> None:
    assert run(tmp_path, "1", "compute").returncode == 0
    other_trials = run(tmp_path, "2", "refuse")
    assert "computed, not read from the store" in other_trials.stderr
    other_code = run(tmp_path, "1", "refuse", "0123456789abcdef")
    assert "computed, not read from the store" in other_code.stderr


def test_without_a_writable_directory_nothing_is_stored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")  # a file where the directory would be
    monkeypatch.setenv("QIR_CACHE_DIR", str(blocker))
    assert cloud_store.location() is None
    calls = []

    def twice(x: int, *, code: str, trials: object) -> int:
        calls.append(x)
        return 2 * x

    stored = cloud_store.cached("trials")(twice)
    assert stored(3, code="k", trials=None) == stored(3, code="k", trials=None) == 6
    assert calls == [3, 3]


def test_the_code_key_names_the_sources_and_versions() -> None:
    assert len(cloud_store.CODE_KEY) == 16
    assert cloud_store._code_key() == cloud_store.CODE_KEY


# the figures of a test cloud against a reference (the translation search), stored as the
# clouds are: printed, or refused when they would be computed again
FIGURES = """
import importlib, sys
import numpy as np
conformance = importlib.import_module("interop_runner.analysis.theories.conformance")
rng = np.random.default_rng(int(sys.argv[1]))
def trials(shift):
    return [np.vstack([rng.normal((1 + shift, 5), 0.4, (60, 2)),
                       rng.normal((4, 2 + shift), 0.6, (60, 2))]) for _ in range(3)]
test, reference = trials(0.5), trials(0.0)
if sys.argv[2] == "refuse":
    def refused(*args, **kwargs):
        raise SystemExit("computed, not read from the store")
    conformance.best_translation = conformance.overlaps = refused
r = conformance.conformance(test, reference, spread_seeds=())
print(repr((r.conformance, r.conformance_t, r.delta_throughput, r.delta_delay,
            r.delta_throughput_range, r.delta_delay_range)))
"""


def test_a_second_process_reads_the_figures_the_first_computed(tmp_path: Path) -> None:
    first = run(tmp_path, "1", "compute", script=FIGURES)
    assert first.returncode == 0, first.stderr
    second = run(tmp_path, "1", "refuse", script=FIGURES)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout  # the same figures, bit for bit
    other = run(tmp_path, "2", "refuse", script=FIGURES)  # other clouds: computed, not looked up
    assert "computed, not read from the store" in other.stderr
