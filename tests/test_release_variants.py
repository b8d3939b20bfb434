"""A version variant of an implementation built from upstream source archives: another
release, named by its archive and SHA-256 in the campaign, built on the real testbed; an
archive whose bytes differ is refused for its pairs only, with one line."""

from __future__ import annotations

import hashlib
import tarfile
from pathlib import Path

import pytest

from interop_runner.config.implementations import load_registry
from interop_runner.testbed.sources import fetch

from .test_campaign import assert_nodes_clean, campaign, execute

NAME = "lsquic-4.9.3-qirtest"


def make_release(src_dir: Path, work: Path) -> str:
    """A release archive as a user would bring one: the pinned lsquic tree with one changed
    file, packed under its own top-level directory. Returns its SHA-256."""
    pinned = next(a for a in load_registry()["lsquic"].sources if a.file.startswith("lsquic-"))
    with tarfile.open(fetch(pinned).path) as tar:
        tar.extractall(work, filter="tar")
    (top,) = work.iterdir()
    with (top / "README.md").open("a") as fh:
        fh.write("\nqirtest release\n")
    src_dir.mkdir()
    out = src_dir / f"{NAME}.tar.gz"
    with tarfile.open(out, "w:gz") as tar:
        tar.add(top, arcname=NAME)
    return hashlib.sha256(out.read_bytes()).hexdigest()


@pytest.mark.usefixtures("local_testbed")
def test_lsquic_release_variant(tmp_path, local_testbed, monkeypatch):
    sha = make_release(tmp_path / "src", tmp_path / "tree")
    monkeypatch.setenv("QIR_SOURCE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("QIR_SOURCE_DIRS", f"{tmp_path / 'src'}:/var/cache/qir/sources")
    bad = "0" * 64
    url = f"https://example.invalid/{NAME}.tar.gz"
    cfg = campaign(tmp_path, f"""name: release
file_size: 5MB
repetitions: 1
port: 4446
timeouts: {{setup: 3000s}}
implementations:
  lsquic@qirtest: {{base: lsquic, version: 4.9.3-qirtest,
                   archive: {{file: {NAME}.tar.gz, sha256: {sha}, url: "{url}"}}}}
  lsquic@bad: {{base: lsquic, version: 4.9.3-bad,
               archive: {{file: {NAME}.tar.gz, sha256: "{bad}", url: "{url}"}}}}
pairs:
  - {{server: lsquic@qirtest, client: lsquic}}
  - {{server: lsquic@bad, client: lsquic}}
""")
    result = execute(cfg, tmp_path)
    by_server = {r.server.implementation: r for r in result.records}
    good, refused = by_server["lsquic@qirtest"], by_server["lsquic@bad"]
    assert good.status == "ok" and good.hash_ok, good.reason
    assert good.server.version == f"4.9.3+source-release-{sha[:12]}"
    assert good.client.version == "4.9.3"
    assert refused.status == "failed"
    assert f"{NAME}.tar.gz has SHA-256 {sha}, expected {bad}" in refused.reason
    assert "\n" not in refused.reason
    assert_nodes_clean(local_testbed)
