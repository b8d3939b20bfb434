"""The package installs: a wheel holds every subpackage and its data files and runs from
anywhere; ``pip install -e .`` gives the ``qir`` command. Offline: setuptools and wheel come
from the venv (requirements.txt), never from an index (``--no-build-isolation``)."""

from __future__ import annotations

import email
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "interop_runner"
RUNTIME_DEPS = {"cryptography", "docker", "dpkt", "duckdb", "joblib", "matplotlib", "numpy",
                "pandas", "paramiko", "pyarrow", "pydantic", "pyyaml", "ruptures", "scipy",
                "tqdm"}
# pip install -e changes the venv it runs in: only the checkout's own .venv (install.sh's)
OWN_VENV = Path(sys.prefix).resolve() == (ROOT / ".venv").resolve()


def pip(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
           "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([sys.executable, "-m", "pip", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def source_subpackages() -> set[str]:
    return {p.parent.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("__init__.py")
            if "__pycache__" not in p.parts}


def source_data_files() -> set[str]:
    """Files of the package that are not Python modules (read at run time, e.g. perf_rules.yml
    or the delay line's source, which is compiled on a node; or the compiled parsers'
    extension; not the C source that extension is built from)."""
    return {p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*")
            if p.is_file() and p.suffix not in (".py", ".pyc") and p.name != "_speedups.c"
            and "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a copy of the package (the build leaves build/ and *.egg-info in
    its source tree, which must not be the checkout)."""
    src = tmp_path_factory.mktemp("src")
    shutil.copytree(PACKAGE, src / "interop_runner",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so"))
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("wheel")
    pip("wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", str(out), str(src), cwd=src)
    (built,) = out.glob("interop_runner-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel installed into a bare target directory (no dependencies)."""
    target = tmp_path_factory.mktemp("target")
    pip("install", "--no-deps", "--no-index", "--target", str(target), str(wheel))
    return target


def test_wheel_holds_every_subpackage_and_data_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "interop_runner/parsers/perf_rules.yml" in names
    assert "interop_runner/testbed/path/delayline.c" in names
    # the parsers' compiled loops, built with the wheel (setup.py)
    assert any(n.startswith("interop_runner/parsers/_speedups.") and n.endswith(".so")
               for n in names)
    assert source_data_files() <= names, source_data_files() - names
    packages = {n.rsplit("/", 1)[0] for n in names if n.endswith("/__init__.py")}
    assert source_subpackages() <= packages, source_subpackages() - packages
    assert {"interop_runner/__main__.py", "interop_runner/cli/__init__.py"} <= names
    assert not any(n.startswith("tests/") for n in names)


def test_wheel_declares_runtime_dependencies_and_qir(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        info = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        meta = email.message_from_string(zf.read(info).decode())
        entry = next(n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt"))
        entry_points = zf.read(entry).decode()
    required = [r for r in meta.get_all("Requires-Dist") or [] if "extra ==" not in r]
    names = {r.split(">")[0].split("=")[0].split("<")[0].split(";")[0].strip().lower()
             for r in required}
    assert names == RUNTIME_DEPS
    assert "qir = interop_runner.cli:main" in entry_points


def _bare_python(target: Path, *args: str, cwd: Path,
                 env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The base interpreter (no venv, so no editable install of the checkout) with the
    installed copy first and the venv's packages for the dependencies."""
    site = sysconfig.get_paths()["purelib"]
    full = {k: v for k, v in os.environ.items() if k not in ("QIR_HOME", "PYTHONPATH")}
    full.update(PYTHONPATH=os.pathsep.join([str(target), site]), PYTHONDONTWRITEBYTECODE="1",
                MPLBACKEND="Agg", **(env or {}))
    executable = getattr(sys, "_base_executable", sys.executable)
    return subprocess.run([executable, "-s", *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=120)


def test_installed_copy_runs_from_another_directory(installed: Path, tmp_path: Path) -> None:
    proc = _bare_python(installed, "-m", "interop_runner", "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "usage:" in proc.stdout and "compare" in proc.stdout
    code = ("import interop_runner, interop_runner.paths as p; "
            "from interop_runner.analysis import load_results; "
            "from interop_runner.parsers.perf import DEFAULT_RULES_PATH; "
            "print(interop_runner.__file__); print(p.PROJECT_ROOT); "
            "print(DEFAULT_RULES_PATH.is_file())")
    proc = _bare_python(installed, "-c", code, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    module, root, rules = proc.stdout.splitlines()
    assert Path(module).is_relative_to(installed)  # the installed copy, not the checkout
    assert Path(root) == tmp_path.resolve()  # no QIR_HOME: the current directory
    assert rules == "True"


def test_installed_copy_finds_the_checkout_through_qir_home(installed: Path,
                                                            tmp_path: Path) -> None:
    proc = _bare_python(installed, "-m", "interop_runner", "list", cwd=tmp_path,
                        env={"QIR_HOME": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert {"quic-go", "tcp-tls"} <= {line.split()[0] for line in proc.stdout.splitlines()}


@pytest.mark.skipif(not OWN_VENV, reason="pip install -e goes into the checkout's .venv only")
def test_editable_install_gives_qir(tmp_path: Path) -> None:
    """What pos_scripts/install.sh does; leaves nothing in the checkout."""
    pip("install", "--no-deps", "--no-build-isolation", "--no-index", "-e", str(ROOT))
    assert not (ROOT / "interop_runner.egg-info").exists()
    qir = Path(sys.executable).parent / "qir"
    env = {k: v for k, v in os.environ.items() if k not in ("QIR_HOME", "PYTHONPATH")}
    proc = subprocess.run([str(qir), "--help"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: qir ") and "compare" in proc.stdout
    proc = subprocess.run([str(qir), "list"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and "quic-go" in proc.stdout, proc.stderr  # its own checkout


DEBIAN_12_PYTHON = "3.11.2"  # python3 of a fresh Debian 12, which install.sh's venv may use


def test_every_pin_installs_on_debian_12_python() -> None:
    """Each distribution pinned in requirements.txt accepts Debian 12's Python (its installed
    metadata's Requires-Python): a pin that needs a later 3.11 breaks install.sh there."""
    from importlib.metadata import PackageNotFoundError, metadata

    from packaging.specifiers import SpecifierSet

    refused = []
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        name, version = line.split("==")
        try:
            meta = metadata(name)
        except PackageNotFoundError:  # not in this venv: nothing to read
            continue
        assert meta["Version"] == version, f"{name}: venv has {meta['Version']}"
        needs = meta.get("Requires-Python")
        if needs and DEBIAN_12_PYTHON not in SpecifierSet(needs):
            refused.append(f"{name}=={version} needs Python {needs}")
    assert not refused, refused
