"""The package's layers and the direction of imports between them (docs/architecture.md).

Every import counts, also one inside a function. A subpackage may import only the layers
listed for it; nothing imports in a cycle; analysis and report never reach the layers that run
commands (remote, testbed, measure), so notebooks need no SSH.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "interop_runner"
FOUNDATION = {"errors", "exit_codes", "units", "paths", "__init__"}  # __init__: __version__
# layer -> the layers it may import (besides itself)
ALLOWED: dict[str, set[str]] = {
    "errors": set(), "exit_codes": set(), "units": set(), "paths": set(), "__init__": set(),
    "parsers": FOUNDATION,
    "monitors": FOUNDATION | {"parsers"},
    "config": FOUNDATION | {"monitors", "parsers"},
    "storage": FOUNDATION,
    "analysis": FOUNDATION | {"parsers", "monitors", "config", "storage"},
    "report": FOUNDATION | {"analysis", "storage", "config", "monitors", "parsers"},
    "remote": FOUNDATION | {"storage"},
    "testbed": FOUNDATION | {"parsers", "config", "storage", "remote"},
    "measure": FOUNDATION | {"parsers", "monitors", "config", "storage", "remote", "testbed"},
    "cli": FOUNDATION | {"parsers", "monitors", "config", "storage", "analysis", "report",
                         "remote", "testbed", "measure"},
    "__main__": {"cli"},
}
NEVER_FROM_ANALYSIS = ("remote", "testbed", "measure")


def _module(path: Path, pkg: Path = PKG) -> str:
    parts = list(path.relative_to(pkg.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, pkg: Path = PKG) -> set[str]:
    """Every interop_runner module ``path`` imports, anywhere in the file (relative too)."""
    module = _module(path, pkg)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            out.add(base)
            out |= {f"{base}.{a.name}" for a in node.names}
    return {m for m in out if m == "interop_runner" or m.startswith("interop_runner.")}


def _graph(pkg: Path = PKG) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, for the package at ``pkg``."""
    files = {_module(p, pkg): p for p in pkg.rglob("*.py")}
    return {m: {t for t in _imports(p, pkg) if t in files and t != m} for m, p in files.items()}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_subpackage_has_a_layer() -> None:
    layers = {_layer(m) for m in _graph()}
    assert layers - set(ALLOWED) == set()


def test_imports_point_down_the_layers() -> None:
    bad = [f"{m} -> {t}" for m, targets in _graph().items() for t in targets
           if _layer(t) != _layer(m) and _layer(t) not in ALLOWED[_layer(m)]]
    assert bad == []


def test_analysis_and_report_never_reach_commands() -> None:
    for layer in ("analysis", "report"):
        assert not set(NEVER_FROM_ANALYSIS) & ALLOWED[layer]
        for dep in ALLOWED[layer]:  # nor through a layer they may use
            assert not set(NEVER_FROM_ANALYSIS) & ALLOWED[dep], (layer, dep)


def test_no_import_cycles() -> None:
    graph = _graph()
    # a package's __init__ re-exporting its modules is not a cycle of substance
    graph = {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in graph.items()}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                cycles.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target, path + [target])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert cycles == []


def test_the_checker_sees_violations(tmp_path: Path) -> None:
    """The checks can fail: a function-level import of the executor from analysis is found.
    The probe goes into a copy of the package, never the tree other tests (the type check,
    the wheel build) read at the same time under pytest-xdist."""
    pkg = tmp_path / "interop_runner"
    shutil.copytree(PKG, pkg, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    probe = pkg / "analysis" / "_layers_probe.py"
    probe.write_text("def f() -> None:\n    from interop_runner.remote import executor\n")
    bad = [t for t in _graph(pkg)["interop_runner.analysis._layers_probe"]]
    assert "interop_runner.remote.executor" in bad
    assert _layer(bad[0]) not in ALLOWED["analysis"]


def test_notebook_imports_load_no_ssh() -> None:
    code = ("import sys, interop_runner.analysis, interop_runner.analysis.views, "
            "interop_runner.report; "
            "bad = [m for m in sys.modules if m.startswith(('interop_runner.remote', "
            "'interop_runner.testbed', 'interop_runner.measure', 'paramiko'))]; "
            "print(bad); sys.exit(1 if bad else 0)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=PKG.parent)
    assert res.returncode == 0, res.stdout + res.stderr
