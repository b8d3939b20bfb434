"""Container images of implementations on a node's engine: built, loaded or pulled once, cached.

An image implementation (meta.yml ``image``) is either a published image (``ref``; pulled by
the node, or copied from the management node's ``docker save`` archive over SFTP and loaded) or
a build context under ``implementations/<name>/``. A build context is built on each node's
engine FROM a Debian base made by ``pos_scripts/build-base-image.sh`` (no Docker Hub needed),
with the QIR endpoint files (``_shared/qir-endpoint``) and, where meta.yml asks, files of a
native build on that node. Built images are tagged by the hash of everything that went in, so
a second campaign finds them and builds nothing.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path

from interop_runner.config.implementations import QIR_ENDPOINT_DIR, ImplementationMeta, source_files
from interop_runner.errors import EngineError, SetupError
from interop_runner.remote.docker_engine import ContainerSpec, Engine
from interop_runner.testbed.node import Node
from interop_runner.testbed.sources import sha256_file

BASE_CACHE = Path("/var/cache/qir/images")  # pos_scripts/build-base-image.sh writes here
BUILD_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class NodeImage:
    """The image an implementation runs from on one node."""

    ref: str       # what containers start from (a tag or the published reference)
    image_id: str  # sha256:... of the image on this engine
    digest: str    # the registry digest where the image has one, else its id
    reported: str  # what the image reports of its version (/VERSION), "" if nothing

    @property
    def version(self) -> str:
        """The version recorded for the side: what the image reports plus its digest."""
        return f"{self.reported or '?'} (image {self.digest})"


def base_info(base: str, cache: Path = BASE_CACHE) -> dict[str, str]:
    """The manifest of a built base image (SetupError naming the command when it is missing)."""
    manifest = cache / f"{base}.json"
    try:
        info = json.loads(manifest.read_text())
    except (OSError, ValueError):
        raise SetupError(f"base image {base!r} not built on the management node ({manifest} "
                         f"missing): run pos_scripts/build-base-image.sh {base}", "") from None
    if not Path(info.get("tar", "")).is_file():
        raise SetupError(f"base image {base!r}: {info.get('tar')} missing: run "
                         f"pos_scripts/build-base-image.sh {base}", "")
    return {k: str(v) for k, v in info.items()}


def context_tar(meta: ImplementationMeta, native: dict[str, bytes]) -> bytes:
    """The build context: the image folder, ``qir-endpoint/`` and ``native/<impl>/...``."""
    assert meta.image is not None and meta.image.build is not None
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        trees = {"": meta.path / meta.image.build,
                 "qir-endpoint/": meta.path.parent / QIR_ENDPOINT_DIR}
        for prefix, tree in trees.items():
            for file in source_files(tree):
                tar.add(file, arcname=prefix + file.relative_to(tree).as_posix(), recursive=False)
        for name, data in sorted(native.items()):
            info = tarfile.TarInfo(f"native/{name}")
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _native_files(node: Node, meta: ImplementationMeta) -> dict[str, bytes]:
    """Files of native builds on the node that go into the context (their setup ran before)."""
    assert meta.image is not None
    out: dict[str, bytes] = {}
    for impl, files in meta.image.native.items():
        for rel in files:
            path = f"{node.setup_dir}/{impl}/{rel}"
            try:
                out[f"{impl}/{rel}"] = node.executor.read_bytes(path)
            except (OSError, EngineError) as exc:
                raise SetupError(f"{node.name}: {meta.name} needs {path} from the native "
                                 f"{impl} build: {exc}", "") from None
    return out


def _tag(meta: ImplementationMeta, base_key: str, native: dict[str, bytes]) -> str:
    digest = hashlib.sha256(f"{meta.source_hash()}\0{base_key}\0".encode())
    for name, data in sorted(native.items()):
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return f"qir/{meta.name}:{digest.hexdigest()[:16]}"


def _ensure_base(node: Node, engine: Engine, base: str) -> tuple[str, str]:
    """Import the base tarball on the node's engine once; return (its tag, its key)."""
    info = base_info(base)
    ref = f"qir-base/{base}:{info['key']}"
    if engine.image_id(ref) is None:
        remote = node.upload_cached(Path(info["tar"]), info["sha256"], _image_cache(node))
        engine.import_file(remote, ref, timeout=600)
        node.run(["rm", "-f", "--", remote])
    return ref, info["key"]


def _image_cache(node: Node) -> str:
    """Where image archives wait on the node until the engine has imported them."""
    return f"{node.cfg.workdir}/image-cache"


def _ensure_ref(node: Node, engine: Engine, meta: ImplementationMeta) -> str:
    """A published image on the node: there already, loaded from the archive, or pulled."""
    assert meta.image is not None and meta.image.ref is not None
    ref = meta.image.ref
    if engine.image_id(ref) is not None:
        return ref
    if meta.image.archive is not None:
        archive = Path(meta.image.archive)
        if not archive.is_file():
            raise SetupError(f"{meta.name}: image.archive {archive} does not exist on the "
                             "management node", "")
        remote = node.upload_cached(archive, sha256_file(archive), _image_cache(node))
        engine.load_file(remote, timeout=1800)
        node.run(["rm", "-f", "--", remote])
        if engine.image_id(ref) is None:
            raise SetupError(f"{meta.name}: {archive} does not hold the image {ref}", "")
        return ref
    engine.pull(ref, timeout=BUILD_TIMEOUT_S)
    return ref


def _reported_version(engine: Engine, ref: str, name: str) -> str:
    """What the image says about its version (``/VERSION``, as our images write it)."""
    spec = ContainerSpec(image=ref, name=name, env={}, mounts=[], extra_hosts={},
                         labels={"qir.purpose": "version"}, entrypoint=["cat", "/VERSION"])
    try:
        cid = engine.start(spec)
    except EngineError:
        return ""
    try:
        code = engine.wait(cid, timeout=60)
        out, _ = engine.logs(cid)
    finally:
        engine.remove(cid)
    return out.decode(errors="replace").strip().splitlines()[0][:120] if code == 0 and out \
        else ""


def ensure_image(node: Node, engine: Engine, meta: ImplementationMeta) -> NodeImage:
    """Make ``meta``'s image present on the node's engine (cached); describe it.

    Native builds it takes files from must be installed on the node first. Raises SetupError
    (with the build log's tail) or EngineError.
    """
    spec = meta.image
    if spec is None:
        raise ValueError(f"{meta.name} is not an image implementation")
    if spec.ref is not None:
        ref = _ensure_ref(node, engine, meta)
    else:
        base_ref, base_key = _ensure_base(node, engine, str(spec.base))
        native = _native_files(node, meta)
        ref = _tag(meta, base_key, native)
        if engine.image_id(ref) is None:
            try:
                engine.build(context_tar(meta, native), ref, {"BASE": base_ref},
                             timeout=BUILD_TIMEOUT_S)
            except EngineError as exc:
                raise SetupError(f"{node.name}: image build of {meta.name} failed: {exc}",
                                 "") from None
    attrs = engine.image_attrs(ref)
    digests = attrs.get("RepoDigests") or []
    image_id = str(attrs["Id"])
    reported = _reported_version(engine, ref, f"qir-version-{node.name}-{image_id[7:19]}")
    return NodeImage(ref, image_id, str(digests[0]) if digests else image_id, reported)

