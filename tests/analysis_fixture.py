"""A small real result set for the report and notebook tests, produced on the local testbed.

``analysis_results`` (session scope) runs ``run.py run`` on three reduced copies of the
shipped campaign files: ``configs/buffers.yml`` (quic-go only, two buffer sizes),
``configs/interop.yml`` (every pair among quic-go, quiche and quinn, with TLS key logs on, so
the report's key-log notice is exercised on real files, and the ifstat monitor for the
goodput-over-time view) and ``configs/pinning.yml`` (2 x 2
cores) and ``configs/workloads.yml`` (quic-go only, download and upload with 1 and 4
streams); 8 MiB files, two repetitions. It returns ``{"buffers": dir, "interop": dir,
"pinning": dir, "workloads": dir}`` (campaign directories).

``QIR_TEST_RESULTS=<dir>`` uses campaigns already stored below ``<dir>`` instead (the newest
finished ``buffers_*``, ``interop_*`` and ``pinning_*``, and ``workloads_*``, ``crypto_*``,
``offload_*``, ``hardware_*``, ``profile_*`` when present), e.g. to develop the analysis
without a testbed; without it the fixture needs the ``local_testbed`` fixture (root, sshd)
and skips with that fixture's reason when it is unavailable.

Import the fixture into a test module with ``from .analysis_fixture import
analysis_results  # noqa: F401``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SIZE = "8MiB"
REPETITIONS = 2
TRIO = ["quic-go", "quiche", "quinn"]
NAMES = ("buffers", "interop", "pinning")
# used when QIR_TEST_RESULTS has them
OPTIONAL = ("workloads", "crypto", "offload", "hardware", "profile")
RUN_TIMEOUT_S = 3600  # the first run may build quiche and quinn


def _reduce_buffers(cfg: dict[str, Any]) -> None:
    cfg["pairs"] = [{"server": "quic-go", "client": "quic-go"}]
    cfg["sweep"]["axes"] = [{"path": "knobs.rmem", "values": ["1x", "16x"]}]


def _reduce_interop(cfg: dict[str, Any]) -> None:
    cfg["servers"], cfg["clients"] = list(TRIO), list(TRIO)
    cfg["keylog"] = True  # real key logs: the report must warn about them
    cfg["monitors"] = [*cfg["monitors"], "ifstat"]  # per-second rates: goodput over time
    cfg.setdefault("timeouts", {})["client"] = "120s"


def _reduce_pinning(cfg: dict[str, Any]) -> None:
    axes = cfg["sweep"]["axes"]
    assert [len(a["values"]) for a in axes] == [2, 2], "configs/pinning.yml: expected 2 x 2"


def _reduce_workloads(cfg: dict[str, Any]) -> None:
    cfg["pairs"] = [{"server": "quic-go", "client": "quic-go"}]
    cfg["sweep"]["axes"] = [*cfg["sweep"]["axes"],
                            {"path": "workload.streams", "values": [1, 4]}]


REDUCE: dict[str, Callable[[dict[str, Any]], None]] = {
    "buffers": _reduce_buffers, "interop": _reduce_interop, "pinning": _reduce_pinning,
    "workloads": _reduce_workloads}
# produced here; OPTIONAL ones are only read from QIR_TEST_RESULTS (workloads: both)
PRODUCED = (*NAMES, "workloads")


def reduced_config(name: str, directory: Path) -> Path:
    """Write the reduced copy of ``configs/<name>.yml`` into ``directory``; returns its path."""
    source = ROOT / "configs" / f"{name}.yml"
    cfg: dict[str, Any] = yaml.safe_load(source.read_text())
    cfg["name"] = f"{name}"
    cfg["file_size"] = SIZE
    cfg["repetitions"] = REPETITIONS
    cfg["testbed"] = str((source.parent / cfg["testbed"]).resolve())
    REDUCE[name](cfg)
    path = directory / f"{name}.yml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def _finished(directory: Path) -> bool:
    try:
        meta = json.loads((directory / "campaign.json").read_text())
    except (OSError, ValueError):
        return False
    return meta.get("status") not in (None, "running")


def stored_campaigns(root: Path) -> dict[str, Path]:
    """The newest finished campaign per name below ``root`` (``<name>_<UTC time>``); the
    three of NAMES must be there, those of OPTIONAL may."""
    found: dict[str, Path] = {}
    for name in (*NAMES, *OPTIONAL):
        candidates = sorted(d for d in root.glob(f"{name}_*") if _finished(d))
        if candidates:
            found[name] = candidates[-1]
    missing = [n for n in NAMES if n not in found]
    if missing:
        raise RuntimeError(f"QIR_TEST_RESULTS={root}: no finished campaign for "
                           f"{', '.join(missing)}")
    return found


def run_campaign(config: Path, results: Path) -> Path:
    """``run.py run`` one campaign file; returns the new campaign directory."""
    before = set(results.glob("*")) if results.exists() else set()
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "run", str(config),
                           "--results-dir", str(results), "--no-progress"],
                          capture_output=True, text=True, cwd=ROOT, timeout=RUN_TIMEOUT_S,
                          check=False)
    assert proc.returncode == 0, f"{config.name}: exit {proc.returncode}\n{proc.stderr[-4000:]}"
    new = [d for d in set(results.glob("*")) - before if (d / "campaign.json").is_file()]
    assert len(new) == 1, f"{config.name}: expected one new campaign, got {new}"
    return new[0]


# Test modules import the fixture, so pytest registers it once per module: without this memo
# every importing module would run the campaigns again (session scope is per definition).
_MEMO: dict[str, Any] = {}


def _produce(request: pytest.FixtureRequest,
             tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    stored = os.environ.get("QIR_TEST_RESULTS")
    if stored:
        return stored_campaigns(Path(stored))
    request.getfixturevalue("local_testbed")  # skips (with its reason) without root/sshd
    tmp = tmp_path_factory.mktemp("analysis-results")
    results = tmp / "results"
    return {name: run_campaign(reduced_config(name, tmp), results) for name in PRODUCED}


@pytest.fixture(scope="session")
def analysis_results(request: pytest.FixtureRequest,
                     tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Campaign directories of the small real result set: buffers, interop, pinning (and
    the optional ones found below QIR_TEST_RESULTS)."""
    if "error" in _MEMO:
        raise _MEMO["error"]
    if "result" not in _MEMO:
        try:
            _MEMO["result"] = _produce(request, tmp_path_factory)
        except BaseException as exc:  # a skip or a failure: the same for every module
            _MEMO["error"] = exc
            raise
    result: dict[str, Path] = _MEMO["result"]
    return result
