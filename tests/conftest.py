"""Shared fixtures."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TESTBED_FILE = ROOT / "configs" / "testbeds" / "local.yml"


def write(path: Path, text: str) -> Path:
    """Write a text file and return its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def campaign_file(tmp_path: Path):
    """Factory: write a campaign YAML (testbed points at the local testbed file)."""

    def make(body: str, name: str = "c.yml") -> Path:
        text = f"testbed: {TESTBED_FILE}\n" + body
        return write(tmp_path / name, text)

    return make


needs_root_testbed = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("sshd", path="/usr/sbin:/usr/bin") is None,
    reason="integration tests need root and openssh-server (run pos_scripts/install.sh)",
)
