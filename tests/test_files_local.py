"""The generated file and the server node's cache of it (testbed/files.py), on a Node.local
(a LocalExecutor, directories in a temp dir): digests checked against b3sum and hashlib, a
cached file reused only while its content matches its digest."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from interop_runner.errors import PreflightError
from interop_runner.testbed.files import cache_dir, cached_name, prepare_file
from interop_runner.testbed.node import Node

from .test_node_local import local_pair, needs_tools

pytestmark = needs_tools
SIZE = 3 * 2**20 + 5  # not a multiple of any block size


def b3sum(path: Path) -> str:
    return subprocess.run(["b3sum", "--", str(path)], capture_output=True, text=True,
                          check=True).stdout.split()[0]


def cached(node: Node, size: int = SIZE) -> Path:
    return Path(cache_dir(node), f"{cached_name(size)}.bin")


def record(node: Node, size: int = SIZE) -> dict[str, object]:
    data: dict[str, object] = json.loads(
        Path(cache_dir(node), f"{cached_name(size)}.json").read_text())
    return data


@pytest.fixture
def server(tmp_path: Path) -> Node:
    node, _ = local_pair(tmp_path)
    return node


def test_generated_file_is_cached_and_reused(server: Node) -> None:
    first = prepare_file(server, "g.bin", SIZE, "blake3", keep=True, timeout=60)
    served = Path(server.www, "g.bin")
    assert (first.reused, first.note, first.path) == (False, None, str(served))
    assert served.stat().st_size == SIZE and first.digest == b3sum(served)
    assert served.stat().st_ino == cached(server).stat().st_ino  # a hard link, no copy
    assert record(server)["digests"] == {"blake3": first.digest}
    assert record(server)["size"] == SIZE and record(server)["content"] == "random"
    served.unlink()  # what the campaign's cleanup does
    second = prepare_file(server, "g.bin", SIZE, "blake3", keep=True, timeout=60)
    assert (second.reused, second.digest, second.note) == (True, first.digest, None)
    assert b3sum(served) == first.digest


def test_sha256_is_added_to_a_cached_files_record(server: Node) -> None:
    first = prepare_file(server, "g.bin", SIZE, "blake3", keep=True, timeout=60)
    Path(server.www, "g.bin").unlink()
    second = prepare_file(server, "g.bin", SIZE, "sha256", keep=True, timeout=60)
    data = Path(server.www, "g.bin").read_bytes()
    assert second.reused and second.algorithm == "sha256"
    assert second.digest == hashlib.sha256(data).hexdigest()
    assert record(server)["digests"] == {"blake3": first.digest, "sha256": second.digest}


def test_a_cached_file_that_no_longer_matches_its_digest_is_generated_anew(
        server: Node) -> None:
    first = prepare_file(server, "g.bin", SIZE, "blake3", keep=True, timeout=60)
    Path(server.www, "g.bin").unlink()
    with open(cached(server), "r+b") as fh:  # one bit flipped in the node's cached copy
        fh.seek(SIZE // 2)
        byte = fh.read(1)[0]
        fh.seek(SIZE // 2)
        fh.write(bytes([byte ^ 0x01]))
    corrupted = b3sum(cached(server))
    second = prepare_file(server, "g.bin", SIZE, "blake3", keep=True, timeout=60)
    assert second.reused is False
    assert second.note is not None and "no longer matches its blake3 digest" in second.note
    served = Path(server.www, "g.bin")
    assert second.digest == b3sum(served) == record(server)["digests"]["blake3"]  # type: ignore[index]
    assert second.digest not in (first.digest, corrupted)
    assert served.stat().st_size == SIZE


@pytest.mark.parametrize("damage", ["record", "size"])
def test_a_damaged_record_or_wrong_size_is_generated_anew(server: Node, damage: str) -> None:
    prepare_file(server, "g.bin", SIZE, "blake3", keep=True, timeout=60)
    Path(server.www, "g.bin").unlink()
    if damage == "record":
        Path(cache_dir(server), f"{cached_name(SIZE)}.json").write_text("{not json")
    else:
        with open(cached(server), "ab") as fh:
            fh.write(b"x")
    again = prepare_file(server, "g.bin", SIZE, "blake3", keep=True, timeout=60)
    assert again.reused is False and again.note is not None
    assert ("is damaged" if damage == "record" else f"is not {SIZE} bytes") in again.note
    assert cached(server).stat().st_size == SIZE
    assert again.digest == b3sum(Path(server.www, "g.bin"))


def test_the_cache_keeps_one_size(server: Node) -> None:
    prepare_file(server, "a.bin", SIZE, "blake3", keep=True, timeout=60)
    prepare_file(server, "b.bin", 4096, "blake3", keep=True, timeout=60)
    assert sorted(p.name for p in Path(cache_dir(server)).iterdir()) == \
        [f"{cached_name(4096)}.bin", f"{cached_name(4096)}.json"]


def test_without_the_cache_the_file_is_fresh_and_the_cache_removed(server: Node) -> None:
    first = prepare_file(server, "g.bin", SIZE, "blake3", keep=True, timeout=60)
    Path(server.www, "g.bin").unlink()
    fresh = prepare_file(server, "g.bin", SIZE, "sha256", keep=False, timeout=60)
    served = Path(server.www, "g.bin")
    assert fresh.reused is False and not Path(cache_dir(server)).exists()
    assert fresh.digest == hashlib.sha256(served.read_bytes()).hexdigest()
    assert b3sum(served) != first.digest  # new bytes, not the cached ones


def test_no_space_is_one_line_and_nothing_is_written(server: Node) -> None:
    with pytest.raises(PreflightError) as err:
        prepare_file(server, "g.bin", 2**45, "blake3", keep=True, timeout=60)
    message = str(err.value)
    assert message.startswith(f"server: {cache_dir(server)} has ")
    assert message.endswith("the 32.00 TiB file needs 32.00 TiB (lower file_size or free space)")
    assert "\n" not in message
    assert not any(Path(cache_dir(server)).iterdir())
