"""The package is fully typed: mypy --strict (config in pyproject.toml) finds nothing."""

import subprocess
import sys

from .conftest import ROOT


def test_mypy_strict_clean():
    res = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Success: no issues found" in res.stdout
