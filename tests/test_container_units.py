"""Pure parts of running implementations as container images (no engine needed)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from pydantic import ValidationError

from interop_runner.config.implementations import ImageSpec, load_registry
from interop_runner.measure.container import SETUP_SHIM, hosts_map, qir_testcase
from interop_runner.remote.docker_engine import rfc3339_ns
from interop_runner.testbed.images import _tag, context_tar


def test_rfc3339_with_nanoseconds() -> None:
    assert rfc3339_ns("1970-01-01T00:00:01.000000002Z") == 1_000_000_002
    assert rfc3339_ns("2026-11-24T10:00:00.5Z") == 1795514400_500_000_000
    assert rfc3339_ns("2026-11-24T11:00:00.5+01:00") == 1795514400_500_000_000


def test_docker_zero_time_is_none() -> None:
    assert rfc3339_ns("0001-01-01T00:00:00Z") is None
    assert rfc3339_ns("garbage") is None


def test_qir_testcase_names() -> None:
    assert qir_testcase("goodput", "hq-interop") == "transfer"
    assert qir_testcase("goodput", "h3") == "http3"
    assert qir_testcase("handshake", "h3") == "handshake"  # the image answers 127


def test_hosts_map_ipv4() -> None:
    hosts = hosts_map("198.19.0.1", "198.19.0.2")
    assert hosts["server"] == hosts["server4"] == hosts["server46"] == "198.19.0.1"
    assert hosts["client4"] == "198.19.0.2" and hosts["sim"] == "127.0.0.1"
    assert "server6" not in hosts


def test_hosts_map_ipv6() -> None:
    hosts = hosts_map("fd00::1", "fd00::2")
    assert hosts["server6"] == "fd00::1" and "server4" not in hosts


def test_setup_shim_changes_nothing_on_the_node() -> None:
    commands = [ln.split()[0] for ln in SETUP_SHIM.splitlines()[1:]
                if ln.strip() and not ln.startswith("#")]
    assert commands == ["mkdir", "echo", "echo", "exit"]
    assert SETUP_SHIM.rstrip().endswith("exit 0")


@pytest.mark.parametrize("data, why", [
    ({}, "exactly one"),
    ({"ref": "a/b:1", "build": "image", "base": "debian-trixie"}, "exactly one"),
    ({"build": "image"}, "needs base"),
    ({"build": "image", "base": "x", "archive": "/a.tar"}, "archive belongs"),
    ({"ref": "Bad Ref"}, "pattern"),
])
def test_image_spec_rejects(data: dict[str, str], why: str) -> None:
    with pytest.raises(ValidationError, match=why):
        ImageSpec.model_validate(data)


def test_image_spec_defaults_to_qir_port() -> None:
    assert ImageSpec(ref="ghcr.io/x/y@sha256:" + "0" * 64).port == 443


def _image_meta(name: str = "quic-go-qir"):  # type: ignore[no-untyped-def]
    meta = load_registry().get(name)
    if meta is None or meta.image is None:
        pytest.skip(f"{name} is not an image implementation here")
    return meta


def test_context_has_dockerfile_endpoint_files_and_native() -> None:
    meta = _image_meta()
    data = context_tar(meta, {"quic-go/bin/server": b"ELF"})
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        names = set(tar.getnames())
        native = tar.extractfile("native/quic-go/bin/server")
        assert native is not None and native.read() == b"ELF"
    assert "Dockerfile" in names
    assert {"qir-endpoint/setup.sh", "qir-endpoint/wait-for-it.sh"} <= names


def test_image_tag_follows_every_input() -> None:
    meta = _image_meta()
    tag = _tag(meta, "k1", {"quic-go/bin/server": b"a"})
    assert tag == _tag(meta, "k1", {"quic-go/bin/server": b"a"})
    assert tag != _tag(meta, "k2", {"quic-go/bin/server": b"a"})
    assert tag != _tag(meta, "k1", {"quic-go/bin/server": b"b"})
    assert tag.startswith("qir/quic-go-qir:")


def test_image_source_hash_covers_the_endpoint_files() -> None:
    meta = _image_meta()
    assert "_shared/qir-endpoint" in meta.shared_dirs()
    assert Path(meta.shared_dirs()["_shared/qir-endpoint"]).is_dir()
