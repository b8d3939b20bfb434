"""docs/architecture.md names every folder and module of the package (its "Every module"
section, one row per module with its job), and names none that is gone: a module added
without a line there fails here, so the map stays the house."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "interop_runner"
DOC = ROOT / "docs" / "architecture.md"
SECTION = "## Every module"


def _index() -> str:
    text = DOC.read_text()
    assert SECTION in text, f"docs/architecture.md has no {SECTION!r} section"
    return text.split(SECTION, 1)[1].split("\n## ", 1)[0]


def package_entries(pkg: Path = PKG) -> set[str]:
    """Every module (``analysis/frames/results.py``) and folder (``analysis/frames/``) of
    the package, relative to it; ``__init__.py`` files stand for their folder."""
    modules = {p.relative_to(pkg).as_posix() for p in pkg.rglob("*.py")
               if "__pycache__" not in p.parts and p.name != "__init__.py"}
    folders = {p.parent.relative_to(pkg).as_posix() + "/" for p in pkg.rglob("__init__.py")
               if p.parent != pkg}
    return modules | folders


def named_entries(index: str) -> set[str]:
    """What the index names: each module row's first cell and each folder's heading."""
    rows = set(re.findall(r"^\| `([\w/]+\.py)` \|", index, re.MULTILINE))
    folders = set(re.findall(r"^\*\*`([\w/]+/)`\*\*", index, re.MULTILINE))
    return rows | (folders - {"interop_runner/"})


def test_every_module_and_folder_is_named_and_none_that_is_gone() -> None:
    named, present = named_entries(_index()), package_entries()
    assert sorted(present - named) == [], "not in docs/architecture.md's 'Every module'"
    assert sorted(named - present) == [], "named in docs/architecture.md but not in the package"


def test_a_row_says_the_modules_job() -> None:
    empty = re.findall(r"^\| `([\w/]+\.py)` \|\s*\|$", _index(), re.MULTILINE)
    assert empty == []


def test_the_check_sees_a_module_that_is_not_named(tmp_path: Path) -> None:
    """The rule itself: a new module, or a new folder, is missing from an index that has not
    been told of it."""
    pkg = tmp_path / "interop_runner"
    (pkg / "measure").mkdir(parents=True)
    for name in ("__init__.py", "measure/__init__.py", "measure/attempt.py", "measure/flow.py"):
        (pkg / name).write_text('"""x."""\n')
    index = "**`measure/`** x\n\n| module | job |\n|---|---|\n| `measure/attempt.py` | x |\n"
    assert package_entries(pkg) - named_entries(index) == {"measure/flow.py"}
    assert named_entries(index) - package_entries(pkg) == set()
