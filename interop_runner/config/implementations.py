"""The registry of implementations: ``implementations/<name>/meta.yml`` and their parameters."""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from interop_runner.config.flows import FlowConfig
from interop_runner.config.params import StandardParams, Supports, pair_unsupported
from interop_runner.config.workload import BODYLESS_ALPNS, Workload, WorkloadSupport
from interop_runner.config.written import SIZE_UNITS, bare_message, is_bare
from interop_runner.errors import RegistryError
from interop_runner.paths import IMPLEMENTATIONS_DIR
from interop_runner.units import parse_size, positive_size

ROLES = ("server", "client")
SCRIPTS = ("setup", "pre", "run-server", "run-client", "post", "version")
EXIT_UNSUPPORTED = 127


class ParameterSpec(BaseModel):
    """One parameter an implementation honours (declared in meta.yml)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["bool", "int", "bytes", "str"]
    default: Any = None
    choices: list[str] | None = None
    help: str = ""

    def to_env(self, value: Any) -> str:
        """Check ``value`` against this spec and render it for ``PARAM_<NAME>``.

        Raises ValueError with a short reason.
        """
        if self.type == "bool":
            if not isinstance(value, bool):
                raise ValueError(f"expected true/false, got {value!r}")
            return "1" if value else "0"
        if self.type == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"expected an integer, got {value!r}")
            return str(value)
        if self.type == "bytes":
            return str(parse_size(value))
        if not isinstance(value, str):
            raise ValueError(f"expected a string, got {value!r}")
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"expected one of {', '.join(self.choices)}, got {value!r}")
        return value


_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
VARIANT_KINDS = ("version", "source", "build_env")


class UpstreamArchive(BaseModel):
    """An upstream source archive an implementation builds from (meta.yml ``sources``): taken
    from a local source directory or downloaded from ``url``, used only if its SHA-256 is
    ``sha256``, and copied to the nodes by the runner (a node never downloads it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    file: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
    """The archive's file name (in the source cache and in QIR_SOURCES on the node)."""
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """The SHA-256 the file must have."""
    url: str = Field(pattern=r"^https://")
    """Where upstream publishes exactly this file."""


class VariantSpec(BaseModel):
    """An implementation built differently from its pinned default (issue: A/B comparisons).

    ``version``: another release of the library (fetched from the registry into the build
    caches; for an implementation built from upstream source archives, ``archive`` names
    that release's archive); ``source``: a local source tree of the library (optionally
    exported at ``commit``); ``build_env``: environment variables for the build (build
    options).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    base: str
    version: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
    source: str | None = None
    commit: str | None = Field(None, pattern=r"^[0-9a-fA-F]{7,40}$")
    build_env: dict[str, str] = {}
    archive: UpstreamArchive | None = None

    @model_validator(mode="after")
    def _archive_is_a_release(self) -> "VariantSpec":
        if self.archive is not None and (self.version is None or self.source is not None):
            raise ValueError("archive names the release of a version variant: give version "
                             "with it, and no source")
        return self

    def kinds(self) -> list[str]:
        """Which variant kinds this spec uses (``version``, ``source``, ``build_env``)."""
        return [k for k in VARIANT_KINDS if getattr(self, k)]

    def check_env_names(self) -> list[str]:
        """Names in ``build_env`` that are not plain environment variable names."""
        return [k for k in self.build_env if not _ENV_NAME.match(k) or k.startswith("QIR_")]


# the QUIC Interop Runner's endpoint test case names for the protocol of a pair
QIR_TESTCASES = {"hq-interop": "transfer", "h3": "http3"}
IMAGE_BASES_DIR = "_shared/image-bases"
QIR_ENDPOINT_DIR = "_shared/qir-endpoint"


class ImageSpec(BaseModel):
    """An implementation that runs as a container image following the QUIC Interop Runner's
    endpoint contract (meta.yml ``image``): a published image, or a build context here."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    ref: str | None = Field(None, pattern=r"^[a-z0-9][a-z0-9._/:@-]*$")
    """A published image (e.g. one of QIR's implementations.json), best pinned by digest
    (``name@sha256:...``). Pulled by each node's engine unless ``archive`` is given."""
    archive: str | None = None
    """``docker save`` output of ``ref`` on the management node, for labs without a registry:
    copied to the nodes over SFTP and loaded there."""
    build: str | None = None
    """A build context folder under ``implementations/<name>/`` (with its Dockerfile)."""
    base: str | None = None
    """The base image the Dockerfile builds on (``ARG BASE``): a folder under
    ``implementations/_shared/image-bases/``, made by ``pos_scripts/build-base-image.sh``."""
    port: int = Field(443, ge=1, le=65535)
    """The UDP (or TCP) port the server listens on; QIR images listen on 443."""
    native: dict[str, list[str]] = {}
    """Files of another implementation's native build on the node (paths below its
    ``SETUP_DIR/<impl>/``) put into the build context under ``native/<impl>/``."""

    @model_validator(mode="after")
    def _one_source(self) -> "ImageSpec":
        if (self.ref is None) == (self.build is None):
            raise ValueError("image: give exactly one of ref (a published image) or build "
                             "(a build context folder)")
        if self.build is not None and self.base is None:
            raise ValueError("image: a build context needs base (implementations/_shared/"
                             "image-bases/<base>)")
        if self.archive is not None and self.ref is None:
            raise ValueError("image: archive belongs to ref (the image the archive holds)")
        return self


SHARED_DIR = "_shared"
_BUILD_DIRS = {"__pycache__", "target"}


def source_files(tree: Path) -> list[Path]:
    """The files of an implementation or shared folder, sorted, build outputs left out."""
    return sorted(p for p in tree.rglob("*") if p.is_file()
                  and not _BUILD_DIRS.intersection(p.relative_to(tree).parts))


class ReceiveWindow(BaseModel):
    """``receive_window:`` in meta.yml: the largest flow-control window the stack's receiver
    grants in our harness (its stream window, or its connection window where that is
    smaller), read from the harness and the pinned sources; the flow-control ceiling of
    docs/closed-form.md divides it by the RTT. Exactly one of ``size`` (bytes, with a unit),
    ``unbounded`` (it raises its credit without bound) and ``unknown`` (why it was not read).
    ``versions``: the library versions ``size`` was read for, when it is the library's
    default; empty when the harness sets it for any version."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    size: int | None = None
    unbounded: bool = False
    unknown: str | None = None
    source: str = ""
    versions: tuple[str, ...] = ()

    @field_validator("size", mode="before")
    @classmethod
    def _size(cls, value: Any) -> int | None:
        if is_bare(value):  # meta.yml is written by hand: a size carries its unit
            raise ValueError(bare_message(value, SIZE_UNITS))
        return None if value is None else positive_size(value)

    @model_validator(mode="after")
    def _one_of(self) -> "ReceiveWindow":
        given = [k for k in ("size", "unbounded", "unknown") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError("give exactly one of size, unbounded: true, unknown: <why>")
        if not self.unknown and not self.source:
            raise ValueError("say where the window was read (source)")
        return self


class RenoBackoff(BaseModel):
    """``reno_backoff:`` in meta.yml: the share of its window the stack's Reno keeps after a
    loss, where that is not RFC 9002's 1/2, and where its source says so; the loss-limited
    (Mathis) ceiling of docs/closed-form.md uses it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    keeps: float = Field(gt=0, lt=1)
    source: str = Field(min_length=1)


class ImplementationMeta(BaseModel):
    """Contents of ``meta.yml`` plus where the implementation lives."""

    model_config = ConfigDict(extra="forbid")
    name: str
    version: str
    roles: list[Literal["server", "client"]]
    alpns: list[str] = Field(min_length=1)
    ready: Literal["udp", "tcp"]
    parameters: dict[str, ParameterSpec] = {}
    supports: Supports = Supports()
    description: str = ""
    # which variant kinds its setup can build (see VariantSpec)
    variants: list[Literal["version", "source", "build_env"]] = []
    # harness code it shares with implementations in the same language: folder names under
    # implementations/_shared/, uploaded beside it and counted in its source_hash
    shared: list[str] = []
    path: Path = Path()
    # set on variants: the folder name it is built from and how it differs
    base: str | None = None
    variant: VariantSpec | None = None
    # set when it runs as a container image instead of by its scripts
    image: ImageSpec | None = None
    # upstream source archives its setup builds from (SHA-256 checked, copied to the nodes)
    sources: list[UpstreamArchive] = []
    # facts the analysis needs about the stack (docs/closed-form.md)
    receive_window: ReceiveWindow | None = None
    reno_backoff: RenoBackoff | None = None
    # which workloads its harness runs (docs/implementations.md, "Workloads")
    workloads: WorkloadSupport = WorkloadSupport()
    # how what the client received is checked: each transfer's file hashed where it landed,
    # or (kernel TCP, no payload of its own) the receiver's count in iperf3's JSON report
    verified_by: Literal["hash", "iperf3"] = "hash"

    @property
    def is_image(self) -> bool:
        """True when it runs as a container image (QIR endpoint contract), not by scripts."""
        return self.image is not None

    @property
    def folder(self) -> str:
        """The ``implementations/<folder>`` its scripts come from."""
        return self.base or self.name

    def has_script(self, script: str) -> bool:
        """True when the implementation ships the given script (an image ships none)."""
        return self.image is None and (self.path / script).is_file()

    def shared_dirs(self) -> dict[str, Path]:
        """The shared harness folders it uses: ``_shared/<name>`` -> local path."""
        root = self.path.parent / SHARED_DIR
        dirs = {f"{SHARED_DIR}/{name}": root / name for name in self.shared}
        if self.image is not None and self.image.build is not None:  # part of its context
            dirs[QIR_ENDPOINT_DIR] = self.path.parent / QIR_ENDPOINT_DIR
            dirs[f"{IMAGE_BASES_DIR}/{self.image.base}"] = (self.path.parent / IMAGE_BASES_DIR
                                                           / str(self.image.base))
        return dirs

    def source_hash(self) -> str:
        """SHA-256 over every file of the implementation folder and of the shared harness
        folders it uses (names and contents)."""
        digest = hashlib.sha256()
        trees = {"": self.path, **{f"{k}/": v for k, v in self.shared_dirs().items()}}
        for prefix, tree in trees.items():
            for file in source_files(tree):
                name = prefix + file.relative_to(tree).as_posix()
                digest.update(name.encode() + b"\0")
                digest.update(file.read_bytes())
        return digest.hexdigest()

    def param_env(self, params: dict[str, Any]) -> dict[str, str]:
        """Render validated parameters as ``PARAM_<NAME>`` environment variables."""
        return {f"PARAM_{k.upper()}": self.parameters[k].to_env(v) for k, v in params.items()}


@lru_cache(maxsize=4)
def load_registry(root: Path = IMPLEMENTATIONS_DIR) -> dict[str, ImplementationMeta]:
    """Read every ``implementations/*/meta.yml``; the folder name is the implementation name."""
    registry: dict[str, ImplementationMeta] = {}
    for meta_file in sorted(root.glob("*/meta.yml")):
        try:
            data = yaml.safe_load(meta_file.read_text()) or {}
            meta = ImplementationMeta.model_validate({**data, "path": meta_file.parent})
        except (yaml.YAMLError, ValidationError) as exc:
            first = str(exc).splitlines()[0:3]
            raise RegistryError(f"{meta_file}: invalid meta.yml: {' '.join(first)}") from None
        for folder, local in meta.shared_dirs().items():
            if not local.is_dir():
                raise RegistryError(f"{meta_file}: shared: {local} does not exist")
        _check_image(meta_file, meta, root)
        if meta.name != meta_file.parent.name:
            raise RegistryError(f"{meta_file}: name {meta.name!r} differs from its folder name")
        registry[meta.name] = meta
    return registry


def _check_image(meta_file: Path, meta: ImplementationMeta, root: Path) -> None:
    """An image implementation's build context, base and native inputs must exist."""
    spec = meta.image
    if spec is None:
        return
    if meta.variants:
        raise RegistryError(f"{meta_file}: variants: an image implementation has none (build "
                            "another image instead)")
    if spec.build is not None and not (meta.path / spec.build / "Dockerfile").is_file():
        raise RegistryError(f"{meta_file}: image.build: {meta.path / spec.build}/Dockerfile "
                            "does not exist")
    if spec.base is not None and not (root / IMAGE_BASES_DIR / spec.base).is_dir():
        raise RegistryError(f"{meta_file}: image.base: {root / IMAGE_BASES_DIR / spec.base} "
                            "does not exist")
    for impl in spec.native:
        if not (root / impl / "meta.yml").is_file():
            raise RegistryError(f"{meta_file}: image.native: no implementation {impl!r}")


VARIANT_SEP = "@"


def resolve(name: str, registry: dict[str, ImplementationMeta],
            declared: dict[str, VariantSpec] | None = None) -> ImplementationMeta:
    """The implementation a campaign names: a registry entry or a variant of one.

    ``declared`` are the campaign's ``implementations:`` entries; an undeclared
    ``<name>@<version>`` means that release of ``<name>``. Raises KeyError (unknown base) or
    ValueError (the base cannot build that kind of variant) with a short reason.
    """
    if name in registry:
        return registry[name]
    spec = (declared or {}).get(name)
    if spec is None and VARIANT_SEP in name:
        base, _, version = name.partition(VARIANT_SEP)
        spec = VariantSpec(base=base, version=version or None)
    if spec is None or spec.base not in registry:
        raise KeyError(name if spec is None else spec.base)
    base_meta = registry[spec.base]
    unsupported = [k for k in spec.kinds() if k not in base_meta.variants]
    if unsupported:
        raise ValueError(f"{spec.base} cannot build {', '.join(unsupported)} variants (its "
                         f"meta.yml allows: {', '.join(base_meta.variants) or 'none'})")
    if not spec.kinds():
        raise ValueError("a variant needs a version, source or build_env")
    bad = spec.check_env_names()
    if bad:
        raise ValueError(f"build_env: not an environment variable name: {', '.join(bad)}")
    return base_meta.model_copy(update={"name": name, "base": spec.base, "variant": spec,
                                        "version": spec.version or base_meta.version})


def common_alpn(server: ImplementationMeta, client: ImplementationMeta) -> str | None:
    """The protocol a pair speaks: the server's most preferred ALPN the client also speaks."""
    for alpn in server.alpns:
        if alpn in client.alpns:
            return alpn
    return None


def why_unsupported(params: StandardParams, server: ImplementationMeta,
                    client: ImplementationMeta, alpn: str | None,
                    workload: Workload | None = None) -> str | None:
    """Why a pair cannot run with ``params`` (None: it can): no common protocol (``alpn``
    None), a workload a side does not run (:func:`workload_unsupported`), or a standard
    parameter its client cannot honour (:func:`pair_unsupported`)."""
    if alpn is None:
        return (f"no common protocol: server speaks {', '.join(server.alpns)}, client "
                f"speaks {', '.join(client.alpns)}")
    if workload is not None:
        why = workload_unsupported(workload, server, client, alpn)
        if why is not None:
            return why
    return pair_unsupported(params, server.supports, client.supports, client.name)


def workload_unsupported(workload: Workload, server: ImplementationMeta,
                         client: ImplementationMeta, alpn: str) -> str | None:
    """Why a pair cannot run ``workload`` over ``alpn`` (None: it can): a request of that
    protocol carries no body (an upload over hq-interop), or a side's harness does not run
    that kind, or that many streams or connections (its meta.yml ``workloads``)."""
    if workload.uploads and alpn in BODYLESS_ALPNS:
        return f"{alpn} requests carry no body: no {workload.kind} over {alpn}"
    if workload.duration is not None and client.is_image:
        return f"{client.name} runs as an image: a client image is not stopped at a " \
               "workload's duration yet"
    return next((why for meta in (server, client)
                 if (why := meta.workloads.why_not(workload, meta.name)) is not None), None)


def flow_unsupported(flow: FlowConfig, params: StandardParams, server: ImplementationMeta,
                     client: ImplementationMeta) -> str | None:
    """Why a pair flow cannot run (None: it can): a congestion control the flow names itself
    that a side lacks (one it does not name runs as in a pair: the server's own, with a note),
    or what makes the pair unsupported (:func:`why_unsupported`)."""
    cc = flow.congestion_control
    for meta, role in ((server, "server"), (client, "client")):
        offered = meta.supports.congestion_control
        if cc is not None and offered and cc not in offered:
            return f"{meta.name} ({role}) offers no {cc} (it offers: {', '.join(offered)})"
    return why_unsupported(flow.std_params(params), server, client, common_alpn(server, client),
                           flow.work)


_CIPHER_SHORT = {"TLS_AES_128_GCM_SHA256": "AES-128-GCM", "TLS_AES_256_GCM_SHA384": "AES-256-GCM",
                 "TLS_CHACHA20_POLY1305_SHA256": "ChaCha20-Poly1305"}


def support_table(registry: dict[str, ImplementationMeta]) -> str:
    """The Markdown table of which implementation honours which standard parameter.

    docs/implementations.md embeds it; a test keeps the two identical.
    """
    head = ("| implementation | version | protocols | congestion control | cipher suites | "
            "socket buffers | GSO on/off | GRO on/off | AES-NI off | qlog | key log | "
            "ACK frequency | flow-control window | own parameters |")
    lines = [head, "|" + "---|" * 14]

    def yes(flag: bool) -> str:
        return "yes" if flag else "no"

    for name in sorted(registry):
        meta, sup = registry[name], registry[name].supports
        cc = ", ".join(sup.congestion_control) or "no choice"
        if sup.congestion_control and "cubic" not in sup.congestion_control:
            cc += f" (runs {sup.congestion_control[0]} when asked for cubic)"
        ciphers = ", ".join(_CIPHER_SHORT[c] for c in sup.cipher) or "no choice"
        own = ", ".join(f"`{k}`" for k in meta.parameters) or "-"
        lines.append(f"| `{name}` | {meta.version} | {', '.join(meta.alpns)} | {cc} | {ciphers} | "
                     f"{yes(sup.socket_buffers)} | {yes(sup.gso)} | {yes(sup.gro)} | "
                     f"{yes(sup.aes_hw_off)} | "
                     f"{yes(sup.qlog)} | {yes(sup.keylog)} | {_ack_cell(sup)} | "
                     f"{yes(sup.flow_control_window)} | {own} |")
    return "\n".join(lines)


def workload_table(registry: dict[str, ImplementationMeta]) -> str:
    """The Markdown table of the workloads each implementation's harness runs, and why it
    runs no more (docs/implementations.md embeds it; a test keeps the two identical)."""
    lines = ["| implementation | workloads | streams per connection | connections | why not "
             "more |", "|---|---|---|---|---|"]
    for name in sorted(registry):
        w = registry[name].workloads
        lines.append(f"| `{name}` | {', '.join(w.kinds)} | {w.streams} | {w.connections} | "
                     f"{w.note or '-'} |")
    return "\n".join(lines)


def _ack_cell(sup: Supports) -> str:
    """The ACK frequency cell: which of ack_ratio and max_ack_delay the client sets itself,
    and ACK_FREQUENCY (a server that asks, a client that obeys)."""
    own = [name for name in ("ack_ratio", "max_ack_delay") if getattr(sup, name)]
    parts = [", ".join(f"`{n}`" for n in own)] if own else []
    if sup.ack_frequency:
        parts.append("ACK_FREQUENCY")
    return " + ".join(parts) or "no"
