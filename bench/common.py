"""Shared helpers for the benchmarks (run as root on the local testbed)."""

from __future__ import annotations

import platform
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from interop_runner.config.campaign import CampaignConfig  # noqa: E402
from interop_runner.config.loader import load_testbed  # noqa: E402
from interop_runner.measure.campaign import Campaign  # noqa: E402
from interop_runner.measure.outcome import CampaignResult  # noqa: E402
from interop_runner.storage.run_record import RunRecord  # noqa: E402
from interop_runner.testbed import local  # noqa: E402


def machine() -> str:
    """One line describing this machine and the date."""
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text()
                .splitlines() if ln.startswith("model name")), "?")
    import os

    return (f"{datetime.now(timezone.utc):%Y-%m-%d}, {cpu}, {os.cpu_count()} cores, "
            f"kernel {platform.release()}")


def run_campaign(name: str, size: int, repetitions: int, server: str = "quic-go",
                 client: str = "quic-go", on_record: Callable[[RunRecord], None] | None = None,
                 ) -> CampaignResult:
    """Run a campaign on the local testbed (brought up if needed) into a temp directory."""
    local.up()
    testbed = load_testbed(local.TESTBED_FILE)
    cfg = CampaignConfig(name=name, testbed=str(local.TESTBED_FILE), file_size=size,
                         repetitions=repetitions, pairs=[{"server": server, "client": client}])
    out = Path(tempfile.mkdtemp(prefix=f"qir-bench-{name}-"))
    return Campaign(cfg, testbed, out).execute(on_record=on_record)
