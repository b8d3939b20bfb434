"""Where the project's own files are: ``implementations/``, ``configs/``, the git checkout.

The package is used from a checkout (``./run.py``) or installed with ``pip install .`` /
``pip install -e .``; an installed copy finds the checkout through ``QIR_HOME`` or, failing
that, the current directory.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def _is_project(path: Path) -> bool:
    return (path / "implementations").is_dir() and (path / "configs").is_dir()


def project_root() -> Path:
    """The checkout holding ``implementations/`` and ``configs/``: ``$QIR_HOME``, the
    directory above the package (a checkout or an editable install), or the current one."""
    env = os.environ.get("QIR_HOME")
    if env:
        return Path(env).resolve()
    if _is_project(PACKAGE_DIR.parent):
        return PACKAGE_DIR.parent
    return Path.cwd()


PROJECT_ROOT = project_root()
IMPLEMENTATIONS_DIR = PROJECT_ROOT / "implementations"
LOCAL_TESTBED_FILE = PROJECT_ROOT / "configs" / "testbeds" / "local.yml"
