"""Upstream source archives: the management cache, filled from a local directory or by
download, and only ever with the SHA-256 meta.yml names."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest

from interop_runner.config.implementations import UpstreamArchive, load_registry
from interop_runner.testbed.sources import SourceError, fetch, fetch_all, sha256_file

from .conftest import ROOT


def archive_for(data: bytes, name: str = "lib-1.0.tar.gz",
                url: str = "https://127.0.0.1:9/lib-1.0.tar.gz") -> UpstreamArchive:
    return UpstreamArchive(file=name, sha256=hashlib.sha256(data).hexdigest(), url=url)


def test_copied_from_a_source_directory_then_kept(tmp_path):
    data = b"release bytes" * 1000
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "lib-1.0.tar.gz").write_bytes(data)
    archive = archive_for(data)
    first = fetch(archive, tmp_path / "cache", [tmp_path / "src"], download=False)
    assert first.how == "copied" and first.path.read_bytes() == data
    (tmp_path / "src" / "lib-1.0.tar.gz").unlink()
    again = fetch(archive, tmp_path / "cache", [tmp_path / "src"], download=False)
    assert again.how == "cached" and again.path == first.path
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["lib-1.0.tar.gz"]


def test_a_corrupted_archive_is_refused_and_never_cached(tmp_path):
    data = bytearray(b"release bytes" * 1000)
    archive = archive_for(bytes(data))
    data[100] ^= 0x01
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "lib-1.0.tar.gz").write_bytes(bytes(data))
    with pytest.raises(SourceError) as err:
        fetch(archive, tmp_path / "cache", [tmp_path / "src"], download=False)
    message = str(err.value)
    assert "\n" not in message and "lib-1.0.tar.gz" in message
    assert f"expected {archive.sha256}" in message
    assert not (tmp_path / "cache" / "lib-1.0.tar.gz").exists()


def test_a_corrupted_cache_entry_is_replaced_from_the_source_directory(tmp_path):
    data = b"good" * 100
    archive = archive_for(data)
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "lib-1.0.tar.gz").write_bytes(b"truncated")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "lib-1.0.tar.gz").write_bytes(data)
    got = fetch(archive, tmp_path / "cache", [tmp_path / "src"], download=False)
    assert got.how == "copied" and sha256_file(got.path) == archive.sha256


def test_missing_offline_and_failed_download_are_one_line_errors(tmp_path):
    archive = archive_for(b"x")
    with pytest.raises(SourceError, match=r"lib-1.0.tar.gz is neither in .* nor in a source"):
        fetch(archive, tmp_path / "cache", [tmp_path], download=False)
    # nothing listens on port 9 of this host: the download fails at once
    with pytest.raises(SourceError, match=r"download from https://127.0.0.1:9/lib-1.0.tar.gz "
                                          r"failed") as err:
        fetch(archive, tmp_path / "cache", [tmp_path], download=True)
    assert "\n" not in str(err.value)
    assert list((tmp_path / "cache").iterdir()) == []  # no partial download left


def test_the_registry_names_the_pinned_archives():
    archives = {a.file: a for meta in load_registry().values() for a in meta.sources}
    assert archives["lsquic-4.9.3.tar.gz"].sha256 == \
        "9f2140384dd8ec6a041993f3307886a6e552f95998251eebb569e74877fcb724"
    assert archives["picoquic-d199d45b.tar.gz"].sha256 == \
        "6839e8724c116145e39c1eaac14f31952d218c4d0b260d56a6eabd6c5da0f017"
    assert archives["picotls-f07f1c8.tar.gz"].sha256 == \
        "a003a83118f47f2ebfb5affc87883aa4f7e58c1964294acf78ecee5eb948016a"


@pytest.mark.testbed  # the management cache install.sh filled as root (/var/cache/qir)
def test_cli_refuses_a_corrupted_archive_with_one_line(tmp_path):
    """`run.py sources` with a local directory holding a flipped copy of a real archive."""
    registry = load_registry()
    archive = next(a for meta in registry.values() for a in meta.sources)
    good = fetch_all(registry)  # the cache install.sh filled
    data = bytearray(next(f for f in good if f.archive == archive).path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    (tmp_path / "src").mkdir()
    for item in good:
        target = tmp_path / "src" / item.archive.file
        target.write_bytes(bytes(data) if item.archive == archive else item.path.read_bytes())
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "sources", "--offline",
                           "--cache", str(tmp_path / "cache"), "--source-dir",
                           str(tmp_path / "src")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip() == (f"error: source archive {tmp_path / 'src' / archive.file} "
                                   f"has SHA-256 {hashlib.sha256(data).hexdigest()}, "
                                   f"expected {archive.sha256}")
