"""The shared harness code (implementations/_shared): its own tests run, and every
implementation that names a shared folder gets it uploaded and hashed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from interop_runner.config.implementations import load_registry, source_files

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT / "implementations" / "_shared"


def _cargo() -> str | None:
    found = shutil.which("cargo")
    home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo")) / "bin" / "cargo"
    return found or (str(home) if home.is_file() else None)


def test_rust_harness_unit_tests(tmp_path: Path) -> None:
    cargo = _cargo()
    if cargo is None:
        pytest.skip("cargo is not installed")
    res = subprocess.run([cargo, "test", "--offline", "--locked", "--quiet", "--manifest-path",
                          str(SHARED / "rust" / "qir-harness" / "Cargo.toml")],
                         capture_output=True, text=True, timeout=900,
                         env={**os.environ, "CARGO_TARGET_DIR": str(tmp_path / "target")})
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "test result: ok" in res.stdout


def test_rust_implementations_use_the_shared_crate() -> None:
    registry = load_registry()
    rust = [m for m in registry.values() if (m.path / "Cargo.toml").is_file()]
    assert len(rust) == 4
    for meta in rust:
        assert "rust" in meta.shared, meta.name
        assert 'path = "../_shared/rust/qir-harness"' in (meta.path / "Cargo.toml").read_text()
        lock = (meta.path / "Cargo.lock").read_text()
        assert 'name = "qir-harness"' in lock, meta.name
        # no crate builds the QIR_NEGOTIATED line by hand any more
        for source in (meta.path / "src").rglob("*.rs"):
            assert '"QIR_NEGOTIATED' not in source.read_text(), source


def test_shared_folders_count_in_the_source_hash(tmp_path: Path) -> None:
    impls = tmp_path / "implementations"
    shutil.copytree(ROOT / "implementations" / "quinn", impls / "quinn")
    shutil.copytree(SHARED, impls / "_shared")
    before = load_registry(impls)["quinn"].source_hash()
    contract = impls / "_shared" / "sh" / "contract.sh"
    contract.write_text(contract.read_text() + "\n# changed\n")
    load_registry.cache_clear()
    assert load_registry(impls)["quinn"].source_hash() != before
    load_registry.cache_clear()


def test_build_outputs_are_not_part_of_the_sources(tmp_path: Path) -> None:
    tree = tmp_path / "crate"
    (tree / "src").mkdir(parents=True)
    (tree / "src" / "lib.rs").write_text("")
    (tree / "target" / "debug").mkdir(parents=True)
    (tree / "target" / "debug" / "junk").write_text("x")
    assert [p.relative_to(tree).as_posix() for p in source_files(tree)] == ["src/lib.rs"]


def test_a_missing_shared_folder_is_a_registry_error(tmp_path: Path) -> None:
    from interop_runner.errors import RegistryError

    impls = tmp_path / "implementations"
    shutil.copytree(ROOT / "implementations" / "quinn", impls / "quinn")
    load_registry.cache_clear()
    with pytest.raises(RegistryError, match="shared"):
        load_registry(impls)
    load_registry.cache_clear()
