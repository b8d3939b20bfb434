"""Every module, name and source file the docs and docstrings point at exists.

Modules move (``analysis/compare.py`` became ``analysis/ab/compare.py``); a reference left
behind still reads well and sends the reader nowhere. Checked, in Markdown, notebooks and
every Python/C file of the project:

* dotted names ``interop_runner.a.b.name`` (the module, then the name in it, then a class
  member), also without the prefix when a backticked name starts with a layer
  (```analysis.ab.compare```);
* paths ``interop_runner/a/b.py`` and layer-relative ones (``analysis/frames/columns.py``);
* relative Sphinx roles in the package (``:mod:`.stats```, ``:func:`~.stats.verdict```),
  from the module itself or one of its packages.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "interop_runner"
LAYERS = ("analysis", "cli", "config", "measure", "monitors", "parsers", "remote", "report",
          "storage", "testbed")
# not a path character before a reference: `interop_runner/x.py` is not `a/interop_runner/...`
START = r"(?<![\w./-])"
DOTTED = re.compile(START + r"interop_runner(?:\.[A-Za-z_]\w*)+")
LAYER_DOTTED = re.compile(r"`(?:" + "|".join(LAYERS) + r")(?:\.[A-Za-z_]\w*)+")
PATH = re.compile(START + r"interop_runner/[\w/]+\.(?:py|pyi|c)\b")
LAYER_PATH = re.compile(START + r"(?:" + "|".join(LAYERS) + r")/[\w/]*\.(?:py|pyi|c)\b")
ROLE = re.compile(r":(?:mod|func|class|meth|data|attr|exc):`~?(\.[\w.]+)`")
# backticked document keys that start like a layer: campaign.json's config -> sweep -> order
NOT_MODULES = {"`config.sweep.order"}
SKIP_DIRS = {".git", ".venv", "build", "results", ".hypothesis", ".mypy_cache",
             ".pytest_cache", "node_modules"}


def _sources() -> list[Path]:
    """The project's docs, notebooks and sources (not its results or build products)."""
    return sorted(p for p in ROOT.rglob("*")
                  if p.suffix in (".md", ".ipynb", ".py", ".pyi", ".c") and p.is_file()
                  and not SKIP_DIRS & set(p.relative_to(ROOT).parts)
                  and p != Path(__file__).resolve())  # its examples are dead on purpose


def _module_file(parts: tuple[str, ...]) -> Path | None:
    base = ROOT.joinpath(*parts)
    for candidate in (base / "__init__.py", base.with_suffix(".py"), base.with_suffix(".pyi")):
        if candidate.is_file():
            return candidate
    return None


@functools.cache
def _definitions(path: Path) -> dict[str, ast.AST]:
    """The top-level names a module binds, each with the statement that binds it."""
    names: dict[str, ast.AST] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            names.update({t.id: node for t in node.targets if isinstance(t, ast.Name)})
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update({(a.asname or a.name).split(".")[0]: node for a in node.names})
    return names


def _name_exists(module: Path, rest: tuple[str, ...]) -> bool:
    """``rest[0]`` is bound in ``module``; ``rest[1]``, if any, is a member of that class, or
    ``rest`` resolves where the project module ``rest[0]`` is imported from."""
    node = _definitions(module).get(rest[0])
    if node is None:
        return False
    if len(rest) == 1:
        return True
    if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("interop_runner"):
        source = next(a.name for a in node.names if (a.asname or a.name) == rest[0])
        return resolves((*str(node.module).split("."), source, *rest[1:]))
    if isinstance(node, (ast.Import, ast.ImportFrom)):  # another package: taken on trust
        return True
    if isinstance(node, ast.ClassDef):
        members = {n.name for n in node.body if isinstance(
            n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        members |= {t.id for n in node.body if isinstance(n, ast.AnnAssign)
                    for t in [n.target] if isinstance(t, ast.Name)}
        return len(rest) == 2 and rest[1] in members
    return False


def resolves(parts: tuple[str, ...]) -> bool:
    """``parts`` names a module of the project, or a name in (a class of) one."""
    for k in range(len(parts), 0, -1):
        module = _module_file(parts[:k])
        if module is not None:
            return k == len(parts) or _name_exists(module, parts[k:])
    return False


def _relative_role_resolves(path: Path, target: str) -> bool:
    """A role's ``.a.b`` from ``path``: a name in the module itself, or a module or name
    below the module's package or one of the packages above it."""
    module = path.relative_to(ROOT).with_suffix("").parts
    package = module[:-1]
    rel = tuple(target.lstrip(".").split("."))
    if _name_exists(path, rel):
        return True
    return any(resolves(package[:k] + rel) for k in range(len(package), 0, -1))


def prose(path: Path) -> str:
    """What ``path`` says to a reader: a Python file's docstrings and comments (its code is
    checked by running it), any other file whole."""
    text = path.read_text(errors="replace")
    if path.suffix != ".py":
        return text
    tree = ast.parse(text)
    parts = [doc for node in ast.walk(tree)
             if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                  ast.AsyncFunctionDef))
             and (doc := ast.get_docstring(node, clean=False))]
    parts += [tok.string for tok in tokenize.generate_tokens(io.StringIO(text).readline)
              if tok.type == tokenize.COMMENT]
    return "\n".join(parts)


def dead_references(path: Path) -> list[str]:
    """The references in ``path`` that name nothing in the project."""
    text = prose(path)
    dead = [m.group(0) for m in DOTTED.finditer(text)
            if not resolves(tuple(m.group(0).split(".")))]
    dead += [m.group(0) for m in LAYER_DOTTED.finditer(text)
             if m.group(0) not in NOT_MODULES and not text.startswith("*", m.end())
             and not resolves(("interop_runner", *m.group(0)[1:].split(".")))]
    dead += [m.group(0) for m in PATH.finditer(text) if not (ROOT / m.group(0)).exists()]
    dead += [m.group(0) for m in LAYER_PATH.finditer(text) if not (PKG / m.group(0)).exists()]
    if path.suffix == ".py" and PKG in path.parents:
        dead += [m.group(0) for m in ROLE.finditer(text)
                 if not _relative_role_resolves(path, m.group(1))]
    return dead


def test_docs_and_docstrings_name_only_what_exists() -> None:
    dead = {str(p.relative_to(ROOT)): refs for p in _sources() if (refs := dead_references(p))}
    assert dead == {}


@pytest.mark.parametrize("text", [
    "see `interop_runner/analysis/compare.py`",
    "in :mod:`interop_runner.analysis.abstats`",
    "``interop_runner.analysis.ab.compare.no_such_function``",
    "``interop_runner.analysis.ab.compare.CompareSettings.no_such_member``",
    "the statistics in `analysis/abstats.py`",
    "wired to `analysis.compare.with_pair_ids`",
])
def test_the_check_finds_a_dead_reference(text: str, tmp_path: Path) -> None:
    probe = tmp_path / "probe.md"
    probe.write_text(text + "\n")
    assert dead_references(probe) != []


def test_the_check_accepts_live_references(tmp_path: Path) -> None:
    probe = tmp_path / "probe.md"
    probe.write_text("`interop_runner/analysis/ab/compare.py`, "
                     ":func:`interop_runner.analysis.ab.compare.compare_variants`, "
                     "``interop_runner.analysis.ab.compare.CompareSettings.of``, "
                     "`analysis.ab.compare`, `report/compare_text.py`\n")
    assert dead_references(probe) == []
