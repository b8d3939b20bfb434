"""The tree passes ruff (config in pyproject.toml: line length 100, pycodestyle, pyflakes,
import order), and the check really looks: a file that breaks the rules is refused."""

import subprocess
import sys
from pathlib import Path

from .conftest import ROOT

RUFF = [sys.executable, "-m", "ruff", "check", "--no-cache"]


def test_ruff_clean():
    res = subprocess.run([*RUFF, "."], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr


def test_ruff_sees_a_violation(tmp_path: Path):
    bad = tmp_path / "bad.py"
    bad.write_text("import sys\nimport os\n\nX = '" + "x" * 100 + "'\n")
    res = subprocess.run([*RUFF, "--config", str(ROOT / "pyproject.toml"), str(bad)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 1
    for rule in ("I001", "F401", "E501"):
        assert rule in res.stdout, res.stdout
