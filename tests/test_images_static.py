"""The container-image implementations, checked without Docker.

Their files (implementations/<name>/meta.yml + image/), the QIR endpoint files they share
(implementations/_shared/qir-endpoint/), the base image descriptions
(implementations/_shared/image-bases/) and pos_scripts/build-base-image.sh: keys, Dockerfile
shape, shellcheck, the 127 contract of /run_endpoint.sh, wait-for-it.sh against a local socket,
and the base script's key, reuse and errors (without mmdebstrap: a tarball is put in place).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from interop_runner.config.params import Supports

ROOT = Path(__file__).resolve().parent.parent
IMPL = ROOT / "implementations"
SHARED_ENDPOINT = IMPL / "_shared" / "qir-endpoint"
BASES = IMPL / "_shared" / "image-bases"
BUILD_BASE = ROOT / "pos_scripts" / "build-base-image.sh"

EXPECTED_IMAGES = {"nginx-h3", "quic-go-qir", "ngtcp2-trixie"}
META_KEYS = {"name", "version", "description", "roles", "alpns", "ready", "image", "supports",
             "parameters", "shared", "receive_window", "reno_backoff", "workloads"}
REQUIRED_META_KEYS = {"name", "version", "roles", "alpns", "ready", "image", "supports"}
IMAGE_KEYS = {"build", "base", "port", "native"}
# QIR's test case names for the protocols (the runner maps goodput onto them)
QIR_TESTCASE = {"hq-interop": "transfer", "h3": "http3"}
# (implementation, role, testcase) answered 127 beyond what meta.yml alpns imply
EXTRA_UNSUPPORTED = {("nginx-h3", "client", "transfer")}  # curl speaks no hq-interop


def image_impls() -> dict[str, dict]:
    """Every implementations/<name>/meta.yml with a build context (``image.build``)."""
    out = {}
    for meta_file in sorted(IMPL.glob("*/meta.yml")):
        data = yaml.safe_load(meta_file.read_text()) or {}
        if isinstance(data.get("image"), dict) and "build" in data["image"]:
            out[meta_file.parent.name] = data
    return out


IMAGES = image_impls()
NAMES = sorted(IMAGES)


def context_dir(name: str) -> Path:
    return IMPL / name / IMAGES[name]["image"]["build"]


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """The Dockerfile's instructions (keyword upper-cased, continuation lines joined)."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in dockerfile.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        if full:
            word, _, rest = full.partition(" ")
            out.append((word.upper(), rest.strip()))
    assert not pending, f"{dockerfile}: ends in a continuation line"
    return out


def shell_scripts() -> list[Path]:
    scripts = [BUILD_BASE, *sorted(SHARED_ENDPOINT.glob("*.sh"))]
    for name in NAMES:
        scripts += sorted(context_dir(name).rglob("*.sh"))
    return scripts


# ------------------------------------------------------------------------------ meta.yml --
def test_image_implementations_present() -> None:
    assert EXPECTED_IMAGES <= set(IMAGES), f"found {sorted(IMAGES)}"


@pytest.mark.parametrize("name", NAMES)
def test_meta_keys(name: str) -> None:
    meta = IMAGES[name]
    assert set(meta) <= META_KEYS, f"unknown keys: {set(meta) - META_KEYS}"
    assert REQUIRED_META_KEYS <= set(meta), f"missing keys: {REQUIRED_META_KEYS - set(meta)}"
    assert meta["name"] == name
    assert isinstance(meta["version"], str) and meta["version"]
    assert meta["roles"] and set(meta["roles"]) <= {"server", "client"}
    assert meta["alpns"] and set(meta["alpns"]) <= set(QIR_TESTCASE)
    assert meta["ready"] in ("udp", "tcp")
    Supports.model_validate(meta["supports"])  # the project's own model of `supports`

    image = meta["image"]
    assert set(image) <= IMAGE_KEYS and {"build", "base", "port"} <= set(image), image
    ctx = context_dir(name)
    assert (ctx / "Dockerfile").is_file() and (ctx / "run_endpoint.sh").is_file()
    base = BASES / image["base"]
    assert (base / "suite").is_file() and (base / "packages").is_file(), base
    assert isinstance(image["port"], int) and 1 <= image["port"] <= 65535
    for impl, files in image.get("native", {}).items():
        assert (IMPL / impl / "meta.yml").is_file(), f"native: no implementation {impl}"
        assert files and all(isinstance(f, str) and not f.startswith("/") and ".." not in f
                             for f in files), files
    for pname, spec in (meta.get("parameters") or {}).items():
        assert re.fullmatch(r"[a-z][a-z0-9_]*", pname) and spec["type"] in (
            "bool", "int", "bytes", "str")


def test_quic_go_qir_uses_the_native_build() -> None:
    image = IMAGES["quic-go-qir"]["image"]
    assert image["native"] == {"quic-go": ["bin/server", "bin/client"]}
    assert IMAGES["quic-go-qir"]["alpns"] == ["h3", "hq-interop"]
    native = yaml.safe_load((IMPL / "quic-go" / "meta.yml").read_text())
    assert IMAGES["quic-go-qir"]["version"] == native["version"]


# ---------------------------------------------------------------------------- Dockerfile --
@pytest.mark.parametrize("name", NAMES)
def test_dockerfile_shape(name: str) -> None:
    ctx = context_dir(name)
    ins = instructions(ctx / "Dockerfile")
    assert ins[0] == ("ARG", "BASE"), ins[0]
    assert ins[1] == ("FROM", "${BASE}"), ins[1]
    entrypoints = [rest for word, rest in ins if word == "ENTRYPOINT"]
    assert entrypoints and json.loads(entrypoints[-1]) == ["/run_endpoint.sh"]
    assert sum(word == "FROM" for word, _ in ins) == 1
    for word, rest in ins:
        # the nodes are offline: nothing is fetched while building
        assert word != "ADD", f"ADD: {rest}"
        if word == "RUN":
            assert not re.search(r"\b(apt-get|apt|pip|wget|curl -[a-zA-Z]*[oO])\b"
                                 r".*\b(install|http)", rest), rest
    copies = [rest.split() for word, rest in ins if word == "COPY"]
    dests = {c[-1]: c[:-1] for c in copies}
    assert dests.get("/setup.sh") == ["qir-endpoint/setup.sh"]
    assert dests.get("/wait-for-it.sh") == ["qir-endpoint/wait-for-it.sh"]
    assert dests.get("/run_endpoint.sh") == ["run_endpoint.sh"]
    native = IMAGES[name]["image"].get("native", {})
    for *sources, _dest in copies:
        for src in sources:
            assert not src.startswith("--"), f"COPY {src}: the legacy builder has no flags"
            if src.startswith("qir-endpoint/"):
                assert (SHARED_ENDPOINT / src.removeprefix("qir-endpoint/")).is_file(), src
            elif src.startswith("native/"):
                _, impl, rel = src.split("/", 2)
                assert rel in native.get(impl, []), f"{src} is not declared in image.native"
            else:
                assert (ctx / src).exists(), f"COPY {src}: not in {ctx}"


# ------------------------------------------------------------------------ shell scripts --
def test_shellcheck() -> None:
    assert shutil.which("shellcheck"), "shellcheck is required (pos_scripts/install.sh installs it)"
    scripts = shell_scripts()
    res = subprocess.run(["shellcheck", "-x", *map(str, scripts)], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize("script", shell_scripts(), ids=lambda p: str(p.relative_to(ROOT)))
def test_scripts_executable(script: Path) -> None:
    assert os.access(script, os.X_OK), f"{script} is not executable"
    text = script.read_text()
    assert text.startswith("#!"), script
    if script.name != "setup.sh":  # QIR's setup.sh goes on after a failing step
        assert text.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in text


def test_setup_sh_is_qirs() -> None:
    """The shared /setup.sh does what QIR's endpoint setup.sh does (and so must never run with
    NET_ADMIN on host networking: the runner mounts its own script over it)."""
    text = (SHARED_ENDPOINT / "setup.sh").read_text()
    code = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
    for pattern in (r"ethtool -K eth0 tx off",
                    r'IP=\$\(hostname -I \| cut -f1 -d" "\)',
                    r'GATEWAY="\$\{IP%\.\*\}\.2"',
                    r'route add -net 193\.167\.0\.0 netmask 255\.255\.0\.0 gw "?\$GATEWAY"?',
                    r'route del -net "?\$UNNEEDED_ROUTE"? netmask 255\.255\.255\.0',
                    r'IP=\$\(hostname -I \| cut -f2 -d" "\)',
                    r'ip -d route add fd00:cafe:cafe::/48 via "?\$GATEWAY"?',
                    r'ip -d route del "?\$UNNEEDED_ROUTE/64"?',
                    r"mkdir -p /logs/qlog"):
        assert re.search(pattern, code), pattern
    assert not re.search(r"^\s*set -[a-z]*e", code, re.M), "QIR's setup.sh stops at no error"


# -------------------------------------------------------------- the 127 contract, no Docker --
def unsupported_cases() -> list[tuple[str, str, str]]:
    cases = []
    for name in NAMES:
        meta = IMAGES[name]
        supported = {QIR_TESTCASE[a] for a in meta["alpns"]}
        for role in meta["roles"]:
            for tc in ("foo", "", "goodput", "handshake", "transfer", "http3"):
                if tc not in supported or (name, role, tc) in EXTRA_UNSUPPORTED:
                    cases.append((name, role, tc))
    return cases


def run_endpoint(name: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """run_endpoint.sh outside any container, traced (bash -x), with a minimal environment."""
    script = context_dir(name) / "run_endpoint.sh"
    return subprocess.run(["bash", "-x", str(script)], cwd=cwd, capture_output=True, text=True,
                          timeout=30, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                           "HOME": str(cwd), **env})


@pytest.mark.parametrize("name,role,testcase", unsupported_cases())
def test_run_endpoint_unsupported_testcase(tmp_path: Path, name: str, role: str,
                                           testcase: str) -> None:
    """An unsupported TESTCASE is exit 127 before anything is touched (no /setup.sh)."""
    res = run_endpoint(name, {"ROLE": role, "TESTCASE": testcase,
                              "REQUESTS": "https://server4:443/f.bin"}, tmp_path)
    assert res.returncode == 127, res.stderr
    assert "unsupported" in res.stderr
    assert "/setup.sh" not in res.stderr and "/wait-for-it.sh" not in res.stderr
    assert "command not found" not in res.stderr and "No such file" not in res.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", NAMES)
def test_run_endpoint_bad_role_is_a_failure(tmp_path: Path, name: str) -> None:
    testcase = QIR_TESTCASE[IMAGES[name]["alpns"][0]]
    res = run_endpoint(name, {"ROLE": "sideways", "TESTCASE": testcase}, tmp_path)
    assert res.returncode == 1, res.stderr
    assert "/setup.sh" not in res.stderr


@pytest.mark.parametrize("name", NAMES)
def test_run_endpoint_follows_qir_order(name: str) -> None:
    """TESTCASE is checked first, then /setup.sh, the client waits for sim:57832, and a
    missing program is exit 1 (an exec of a missing file would be 127, "unsupported")."""
    text = (context_dir(name) / "run_endpoint.sh").read_text()
    code = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
    first_127 = code.index("exit 127")
    assert code.index('"${TESTCASE:-}"') < first_127 < code.index("/setup.sh")
    assert code.index("/setup.sh") < code.index("/wait-for-it.sh sim:57832 -s -t 30")
    assert re.search(r"missing from the image.*\n\s*exit 1", code)


# ------------------------------------------------------------------------- wait-for-it.sh --
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_it(*args: str, timeout: float = 30) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    res = subprocess.run([str(SHARED_ENDPOINT / "wait-for-it.sh"), *args], capture_output=True,
                         text=True, timeout=timeout)
    return res, time.monotonic() - start


def test_wait_for_it_open_port(tmp_path: Path) -> None:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        port = srv.getsockname()[1]
        res, took = wait_for_it(f"127.0.0.1:{port}", "-s", "-t", "30")
        assert res.returncode == 0 and took < 10, res.stderr
        assert f"127.0.0.1:{port} is available" in res.stderr
        flag = tmp_path / "ran"
        res, _ = wait_for_it("-h", "127.0.0.1", "-p", str(port), "-q", "--", "touch", str(flag))
        assert res.returncode == 0 and flag.exists() and res.stderr == ""


def test_wait_for_it_timeout(tmp_path: Path) -> None:
    port = free_port()
    res, took = wait_for_it(f"127.0.0.1:{port}", "-t", "1")
    assert res.returncode == 124 and 0.9 < took < 10, (res.stderr, took)
    assert "timeout occurred after waiting 1 seconds" in res.stderr
    flag = tmp_path / "ran"
    res, _ = wait_for_it(f"127.0.0.1:{port}", "-s", "-t", "1", "--", "touch", str(flag))
    assert res.returncode == 124 and not flag.exists()
    assert "strict mode, refusing to execute subprocess" in res.stderr
    res, _ = wait_for_it(f"127.0.0.1:{port}", "--timeout=1", "--", "touch", str(flag))
    assert res.returncode == 0 and flag.exists()  # not strict: the command runs anyway


def test_wait_for_it_usage() -> None:
    for args in ([], ["nohost"], ["127.0.0.1:x"], ["127.0.0.1:1", "-t", "soon"]):
        res, _ = wait_for_it(*args)
        assert res.returncode == 1 and "usage:" in res.stderr, args


# -------------------------------------------------------------------- base images --
def build_version() -> str:
    m = re.search(r"^BUILD_VERSION=(\S+)$", BUILD_BASE.read_text(), re.M)
    assert m, "BUILD_VERSION not found in build-base-image.sh"
    return m.group(1)


def expected_key(suite: str, packages: list[str]) -> str:
    text = f"suite={suite}\n" + "".join(f"package={p}\n" for p in sorted(set(packages)))
    text += f"build_version={build_version()}\n"
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def build_base(*args: str, bases: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QIR_IMAGE_BASES": str(bases), "QIR_IMAGE_CACHE": str(cache)}
    return subprocess.run([str(BUILD_BASE), *args], capture_output=True, text=True, timeout=60,
                          env=env)


def test_base_debian_trixie_has_what_the_images_need() -> None:
    base = BASES / "debian-trixie"
    assert (base / "suite").read_text().split()[0] == "trixie"
    packages = {ln.split("#")[0].strip() for ln in (base / "packages").read_text().splitlines()}
    assert {"nginx", "curl", "iproute2", "ethtool", "net-tools", "netcat-openbsd",
            "ca-certificates", "openssl", "ngtcp2-client", "ngtcp2-server"} <= packages
    for name in NAMES:
        assert IMAGES[name]["image"]["base"] == "debian-trixie"


def test_build_base_key_reuse_and_manifest(tmp_path: Path) -> None:
    bases, cache = tmp_path / "bases", tmp_path / "cache"
    (bases / "demo").mkdir(parents=True)
    cache.mkdir()
    (bases / "demo" / "suite").write_text("# the suite\ntrixie\n")
    (bases / "demo" / "packages").write_text("# tools\ncurl\n\nethtool   # offloads\ncurl\n")
    key = expected_key("trixie", ["curl", "ethtool"])
    tar = cache / f"demo-{key}.tar"

    res = build_base("--dry-run", "demo", bases=bases, cache=cache)
    assert res.returncode == 0 and res.stdout == f"{tar}\n", res.stderr
    assert list(cache.iterdir()) == []  # a dry run builds and writes nothing

    # the same set in another order, other comments: the same key
    (bases / "demo" / "packages").write_text("ethtool\ncurl # again\n")
    assert build_base("--dry-run", "demo", bases=bases, cache=cache).stdout == f"{tar}\n"
    # another package or suite: another key
    (bases / "demo" / "packages").write_text("ethtool\ncurl\nnginx\n")
    other = build_base("--dry-run", "demo", bases=bases, cache=cache).stdout
    other_key = expected_key("trixie", ["curl", "ethtool", "nginx"])
    assert other.strip() == str(cache / f"demo-{other_key}.tar")
    (bases / "demo" / "packages").write_text("curl\nethtool\n")

    # an existing tarball with the key is reused at once (no mmdebstrap) and described
    tar.write_bytes(b"not really a tar, but reused as it is")
    res = build_base("demo", bases=bases, cache=cache)
    assert res.returncode == 0 and res.stdout == f"{tar}\n", res.stderr
    manifest = json.loads((cache / "demo.json").read_text())
    assert manifest == {**manifest, "name": "demo", "key": key, "tar": str(tar), "suite": "trixie",
                        "packages": ["curl", "ethtool"],
                        "sha256": hashlib.sha256(tar.read_bytes()).hexdigest()}
    assert set(manifest) == {"name", "key", "tar", "sha256", "suite", "packages", "built_at"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", manifest["built_at"])
    before = (cache / "demo.json").read_text()
    res = build_base("demo", bases=bases, cache=cache)
    assert res.returncode == 0 and res.stdout == f"{tar}\n"
    assert (cache / "demo.json").read_text() == before
    assert not [p for p in cache.iterdir() if p.name.startswith(".demo.json")]  # no temp left


@pytest.mark.parametrize("packages,suite,args,message", [
    ("curl\n", "trixie", ["nope"], "no base 'nope'"),
    ("curl wget\n", "trixie", ["demo"], "one package per line"),
    ("Curl\n", "trixie", ["demo"], "invalid package name 'Curl'"),
    ("# nothing\n", "trixie", ["demo"], "lists no package"),
    ("curl\n", "Trixie!", ["demo"], "invalid suite"),
    ("curl\n", "trixie", [], "usage:"),
    ("curl\n", "trixie", ["demo", "extra"], "usage:"),
    ("curl\n", "trixie", ["--fast", "demo"], "unknown option"),
    ("curl\n", "trixie", ["../demo"], "invalid base name"),
])
def test_build_base_errors(tmp_path: Path, packages: str, suite: str, args: list[str],
                           message: str) -> None:
    bases, cache = tmp_path / "bases", tmp_path / "cache"
    (bases / "demo").mkdir(parents=True)
    (bases / "demo" / "suite").write_text(suite + "\n")
    (bases / "demo" / "packages").write_text(packages)
    res = build_base(*args, bases=bases, cache=cache)
    assert res.returncode == 1 and res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("build-base-image: ") and message in lines[0], \
        res.stderr
    assert not cache.exists()


def test_build_base_help() -> None:
    res = subprocess.run([str(BUILD_BASE), "--help"], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0 and "mmdebstrap" in res.stdout and "set -euo" not in res.stdout


# ---------------------------------------------------------------------------------- docs --
def test_docs_section() -> None:
    doc = (ROOT / "docs" / "implementations.md").read_text()
    assert "## Implementations as container images" in doc
    section = doc.split("## Implementations as container images", 1)[1]
    for name in EXPECTED_IMAGES:
        assert f"`{name}`" in section
    assert "build-base-image.sh" in section
