"""Preparing a testbed's two nodes for a campaign, once per session: preflight (space, tools),
every implementation installed in its role (setup, source variants, images), the served
file, the certificate, the monitors checked. What it produced is a :class:`Prepared`."""

from __future__ import annotations

import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from interop_runner.config.campaign import CampaignConfig, variant_configs
from interop_runner.config.implementations import ImplementationMeta, load_registry
from interop_runner.errors import EngineError, SetupError
from interop_runner.measure.monitor_session import NodeMonitors
from interop_runner.measure.side import ROLES, ImplKey, Role
from interop_runner.measure.variants import SourceArchive, VariantError, variant_source
from interop_runner.storage.campaign_record import (
    CampaignRecord,
    ImplementationEntry,
    plain,
)
from interop_runner.testbed.files import (
    CACHE_CHECK,
    HASH_COMMANDS,
    SPACE_MARGIN,
    ServedFile,
    prepare_file,
    space_needed,
)
from interop_runner.testbed.images import ensure_image
from interop_runner.testbed.knobs import NodeKnobs
from interop_runner.testbed.node import Node
from interop_runner.testbed.sources import SourceError, put_sources

# called with (message, log tail) when an implementation's setup fails
OnSetupError = Callable[[str, str], None]


@dataclass(frozen=True)
class Installed:
    """What installing one implementation in one role on its node gave."""

    source_hash: str | None = None  # of the tree that was installed
    version: str | None = None  # None: not installed
    image: str | None = None  # the image it runs from on the node (image implementations)
    setup_error: str | None = None  # why its setup failed


@dataclass
class Prepared:
    """What preparing the nodes produced: each implementation as installed, the file to
    download and its hash, the nodes' monitors and knob handlers."""

    installed: dict[ImplKey, Installed]
    file_name: str
    file_digest: str  # of cfg.verify_hash
    server_monitors: NodeMonitors
    client_monitors: NodeMonitors
    server_knobs: NodeKnobs | None = None
    client_knobs: NodeKnobs | None = None
    # the file the clients upload (on the client node) and its digest: "" when no variant
    # of the campaign uploads
    upload_name: str = ""
    upload_digest: str = ""

    def of(self, key: ImplKey) -> Installed:
        """How the implementation ``key`` was installed (nothing known: not installed)."""
        return self.installed.get(key, Installed())


def most_transfers(cfg: CampaignConfig, direction: str) -> int:
    """The most files one attempt of the campaign moves in ``direction`` (download, upload):
    its workloads' streams x connections (a set of flows: all its QUIC flows' together, as
    they run at once); 0 when none moves data that way."""
    return max((sum(w.streams * w.connections for w in vcfg.file_workloads()
                    if direction in w.directions) for _, vcfg in variant_configs(cfg)),
               default=0)


def flow_tools(cfg: CampaignConfig) -> tuple[str, ...]:
    """What a campaign's flows need on both nodes: timeout(1), which stops a flow at its
    duration, and iperf3 for kernel TCP reference flows."""
    flows = [f for _, vcfg in variant_configs(cfg) for f in vcfg.flows or []]
    return (("timeout",) if flows else ()) + \
        (("iperf3",) if any(f.kind == "tcp" for f in flows) else ())


class Preparation:
    """Prepares the server and client node of one testbed for the campaign ``cfg``."""

    def __init__(self, cfg: CampaignConfig, port: int,
                 on_setup_error: OnSetupError | None = None) -> None:
        """``port``: the measurement port on this testbed (the monitors watch it)."""
        self.cfg, self.port, self.on_setup_error = cfg, port, on_setup_error

    def prepare(self, server: Node, client: Node, doc: CampaignRecord,
                metas: Mapping[Role, list[ImplementationMeta]]) -> Prepared:
        """Preflight both nodes, install every implementation of ``metas`` in its role,
        generate the file, exchange the certificate, check the monitors; ``doc`` notes what
        each step found."""
        cfg = self.cfg
        tools = (HASH_COMMANDS[cfg.verify_hash], HASH_COMMANDS[CACHE_CHECK], *flow_tools(cfg))
        # the server holds its file and what is uploaded to it, the client what it
        # downloads and its own file to upload (each stream's a hard link to one file)
        uploads, downloads = most_transfers(cfg, "upload"), most_transfers(cfg, "download")
        server.preflight(space_needed(server, cfg.file_size, cfg.file_cache)
                         + uploads * cfg.file_size, server.cfg.tmpdir, tools)
        client.preflight(max(downloads, 1) * cfg.file_size + SPACE_MARGIN
                         + (space_needed(client, cfg.file_size, cfg.file_cache) if uploads
                            else 0), client.cfg.tmpdir, tools)
        installed = self._install_all((server, client), doc, metas)
        served = self._serve_file(server, doc)
        upload = self._upload_file(client, doc) if uploads else None
        client.install_ca(server.make_certificate(server.cfg.ip))
        statuses = doc.monitors = doc.monitors or {}
        monitors = []
        for node in (server, client):
            mon = NodeMonitors(node.executor, node.name, node.cfg.interface, list(cfg.monitors),
                               node.cfg.role, self.port, cfg.monitor_options)
            statuses[node.cfg.role] = mon.check()
            if mon.perf_event:
                statuses[node.cfg.role]["perf.event"] = mon.perf_event
            monitors.append(mon)
        return Prepared(installed, served.name, served.digest, monitors[0], monitors[1],
                        upload_name=upload.name if upload else "",
                        upload_digest=upload.digest if upload else "")

    def _install_all(self, nodes: tuple[Node, Node], doc: CampaignRecord,
                     metas: Mapping[Role, list[ImplementationMeta]]
                     ) -> dict[ImplKey, Installed]:
        """Install each role's implementations on its node (server, client); campaign.json
        gets an entry per implementation and role."""
        installed: dict[ImplKey, Installed] = {}
        archives: dict[str, SourceArchive | None] = {}
        entries = doc.implementations = doc.implementations or {}
        packdir = Path(tempfile.mkdtemp(prefix="qir-variants-"))
        try:
            for node, role in zip(nodes, ROLES):
                for impl in metas[role]:
                    key = ImplKey(role, impl.name)
                    entries[key.label], installed[key] = self._install(node, impl, archives,
                                                                       packdir)
        finally:
            shutil.rmtree(packdir, ignore_errors=True)
        return installed

    def _serve_file(self, server: Node, doc: CampaignRecord) -> ServedFile:
        """The file to download, on the server node (campaign.json ``file``)."""
        served = self._generated(server, f"goodput-{self.cfg.file_size}.bin")
        doc.file = served.info()
        return served

    def _upload_file(self, client: Node, doc: CampaignRecord) -> ServedFile:
        """The file the clients upload, on the client node (campaign.json ``upload_file``)."""
        upload = self._generated(client, f"upload-{self.cfg.file_size}.bin")
        doc.upload_file = upload.info()
        return upload

    def _generated(self, node: Node, name: str) -> ServedFile:
        """A file of the campaign's size in the node's ``www``, from the node's cache when
        its content still matches (a warning when a cached file had to be generated anew)."""
        cfg = self.cfg
        made = prepare_file(node, name, cfg.file_size, cfg.verify_hash, keep=cfg.file_cache,
                            timeout=max(120.0, cfg.file_size / 50e6))
        if made.note:
            print(f"warning: {node.name}: {made.note}", file=sys.stderr)
        return made

    def _install(self, node: Node, impl: ImplementationMeta,
                 archives: dict[str, SourceArchive | None], packdir: Path
                 ) -> tuple[ImplementationEntry, Installed]:
        """Install one implementation (or variant) on one node: its campaign.json entry and
        what the attempts use. The source tree is hashed here, once: the hash of what was
        built. A failure fails only the pairs with this implementation."""
        entry = ImplementationEntry(declared_version=impl.version,
                                    source_hash=impl.source_hash(), node=node.name)
        if impl.variant is not None:
            entry.variant = plain(impl.variant.model_dump(exclude_defaults=True))
        image: str | None = None
        try:
            if impl.name not in archives:  # once per campaign, for both nodes
                archives[impl.name] = variant_source(impl, packdir)
            archive = archives[impl.name]
            if archive is not None:
                entry.variant_source = plain(archive.identity)
            if impl.is_image:
                image, entry.version = self._install_image(node, impl)
            else:
                entry.version = node.install(
                    impl, self.cfg.timeouts.setup, archive.path if archive else None,
                    archive.label if archive else None, extra_env=put_sources(node, impl),
                    strip_top=bool(archive and archive.is_release))
        except (SetupError, VariantError, EngineError, SourceError) as exc:
            tail = exc.tail if isinstance(exc, SetupError) else ""
            entry.version, entry.setup_error, entry.setup_log_tail = None, str(exc), tail
            if self.on_setup_error is not None:
                self.on_setup_error(str(exc), tail)
        return entry, Installed(entry.source_hash, entry.version, image, entry.setup_error)

    def _install_image(self, node: Node, impl: ImplementationMeta) -> tuple[str, str]:
        """Build, load or pull an image implementation on the node (after the native builds
        it takes files from); return the image it runs from and its recorded version."""
        assert impl.image is not None
        for name in impl.image.native:
            native = load_registry()[name]
            node.install(native, self.cfg.timeouts.setup, extra_env=put_sources(node, native))
        image = ensure_image(node, node.engine(), impl)
        return image.ref, image.version
