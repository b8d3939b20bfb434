"""A campaign's implementation names and parameters checked against the registry of
``implementations/*/meta.yml``: one ``file: key: message`` line per problem."""

from __future__ import annotations

import difflib
from pathlib import Path

from interop_runner.config.campaign import CampaignConfig
from interop_runner.config.implementations import (
    ImplementationMeta,
    VariantSpec,
    resolve,
)
from interop_runner.config.written import (
    SIZE_UNITS,
    bare_message,
    is_bare,
)


class _ImplementationCheck:
    """Checks every implementation name and parameter a campaign uses against the registry;
    ``errors`` collects one ``file: key: message`` line per problem."""

    def __init__(self, source: str, cfg: CampaignConfig,
                 registry: dict[str, ImplementationMeta]) -> None:
        self.source, self.cfg, self.registry = source, cfg, registry
        self.known = ", ".join(sorted(registry)) or "none"
        self.errors: list[str] = []

    def name(self, key: str, name: str, role: str, pair: bool = False) -> None:
        """``name`` must resolve (registry or variant) and have ``role``; in a pair
        (``pair``), it must not be the kernel TCP reference, which runs only as a flow."""
        try:
            meta = resolve(name, self.registry, self.cfg.implementations)
        except KeyError as exc:
            base = str(exc.args[0])
            hint = difflib.get_close_matches(base, list(self.registry), n=1)
            did = f"; did you mean {hint[0]!r}?" if hint else ""
            self.errors.append(f"{self.source}: {key}: unknown implementation {base!r} "
                               f"(known: {self.known}{did})")
            return
        except ValueError as exc:
            self.errors.append(f"{self.source}: {key}: {name}: {exc}")
            return
        if role not in meta.roles:
            self.errors.append(f"{self.source}: {key}: implementation {name!r} has no "
                               f"{role} role")
        if pair and meta.verified_by == "iperf3":
            self.errors.append(f"{self.source}: {key}: {name!r} is the kernel TCP reference; "
                               "it runs as a flow ({tcp: cubic} in flows:), not in pairs")

    def variants(self) -> None:
        """``implementations:``: variant names, their base and source tree."""
        for name, spec in self.cfg.implementations.items():
            where = f"implementations.{name}"
            if name in self.registry:
                self.errors.append(f"{self.source}: {where}: {name!r} is a registry "
                                   "implementation; give the variant another name (e.g. "
                                   "<name>@<label>)")
                continue
            self.name(where, name, "server" if "server" in getattr(
                self.registry.get(spec.base), "roles", ["server"]) else "client")
            if spec.source is not None:
                src = Path(spec.source).expanduser()
                if not src.is_dir():
                    self.errors.append(f"{self.source}: {where}.source: not a directory: {src}")
            self.release_archive(where, spec)

    def release_archive(self, where: str, spec: VariantSpec) -> None:
        """A version variant of an implementation built from upstream archives names the
        release's archive; only those take one."""
        base = self.registry.get(spec.base)
        if base is None:
            return
        if spec.archive is not None and not base.sources:
            self.errors.append(f"{self.source}: {where}.archive: {spec.base} is not built from "
                               "upstream source archives (give version alone)")
        elif spec.version is not None and spec.archive is None and base.sources:
            self.errors.append(f"{self.source}: {where}: {spec.base} builds from upstream "
                               "source archives: a version variant needs archive: {file, "
                               "sha256, url} of that release")

    def pairs(self) -> None:
        """``impl:``, ``servers:``/``clients:`` and ``pairs:``."""
        cfg = self.cfg
        for as_written, name in cfg.impl.items():
            self.name(f"impl.{as_written}", name, "server" if any(
                p.server == as_written for p in cfg.written_pairs() + cfg.flow_pairs())
                else "client")
        for i, name in enumerate(cfg.servers):
            self.name(f"servers[{i}]", name, "server", pair=True)
        for i, name in enumerate(cfg.clients):
            self.name(f"clients[{i}]", name, "client", pair=True)
        for i, pair in enumerate(cfg.pairs or []):
            self.name(f"pairs[{i}].server", pair.server, "server", pair=True)
            self.name(f"pairs[{i}].client", pair.client, "client", pair=True)
        for i, flow in enumerate(cfg.flows or []):
            if flow.server is not None and flow.client is not None:
                self.name(f"flows[{i}].server", flow.server, "server", pair=True)
                self.name(f"flows[{i}].client", flow.client, "client", pair=True)

    def parameters(self, side: str) -> None:
        """``<side>_params:``: every key declared by the implementation, every value valid."""
        for impl, params in getattr(self.cfg, f"{side}_params").items():
            base = f"{side}_params.{impl}"
            try:
                specs = resolve(impl, self.registry, self.cfg.implementations).parameters
            except (KeyError, ValueError):
                self.name(base, impl, side)
                continue
            for key, value in (params or {}).items():
                if key not in specs:
                    names = ", ".join(sorted(specs)) or "none"
                    self.errors.append(f"{self.source}: {base}.{key}: unknown parameter for "
                                       f"{impl} (it accepts: {names})")
                    continue
                if specs[key].type == "bytes" and is_bare(value):
                    self.errors.append(f"{self.source}: {base}.{key}: "
                                       f"{bare_message(value, SIZE_UNITS)}")
                    continue
                try:
                    specs[key].to_env(value)
                except ValueError as exc:
                    self.errors.append(f"{self.source}: {base}.{key}: {exc}")


def check_implementations(
    source: str, cfg: CampaignConfig, registry: dict[str, ImplementationMeta]
) -> list[str]:
    check = _ImplementationCheck(source, cfg, registry)
    check.variants()
    check.pairs()
    check.parameters("server")
    check.parameters("client")
    return check.errors
