"""What a campaign needs installed on the management node, for ``pos_scripts/install.sh``.

install.sh always installs the core (the Debian packages of the management node and the local
testbed, the Python venv); the rest comes in *targets*, each installed only when asked for:

- ``impl F``: the offline caches the nodes build implementation folder ``F`` from (its
  ``apt-packages``, Python wheels, Go modules, Rust crates, npm packages, source archives);
- ``base B``: the container base image ``B`` (``implementations/_shared/image-bases/B``), for
  image implementations, with ``docker.io`` and ``mmdebstrap``;
- ``tool inferno``: flame graphs, for campaigns with the ``perf`` monitor.

A campaign needs the folders of every implementation it may run (pairs, ``impl`` substitutions
and sweep values, declared variants: a variant builds from its base's folder) and, for an image
implementation, the folders of the native builds it copies (``image.native``) and its base.

After filling a target install.sh writes a stamp (``QIR_INSTALL_STAMPS``, default
``/var/cache/qir/install``): the SHA-256 of the target's input files (lock files, package
lists) and the cache paths that must exist. :func:`missing` compares them, so a changed lock
file or an emptied cache makes the target missing again. ``python -m interop_runner.config.needs
--help`` is install.sh's side of this.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

from interop_runner.config.implementations import (
    IMAGE_BASES_DIR,
    ImplementationMeta,
    load_registry,
    resolve,
)
from interop_runner.paths import IMPLEMENTATIONS_DIR, PROJECT_ROOT

if TYPE_CHECKING:
    from interop_runner.config.campaign import CampaignConfig

# the files of an implementation folder its offline caches are filled from
CACHE_INPUTS = ("apt-packages", "requirements.txt", "go.mod", "go.sum", "variant-versions",
                "Cargo.toml", "Cargo.lock", "package.json", "package-lock.json", "meta.yml")
BASE_INPUTS = ("suite", "packages")
# the script that builds a base image: its BUILD_VERSION is part of the image's cache key
BASE_BUILDER = PROJECT_ROOT / "pos_scripts" / "build-base-image.sh"
INFERNO_MONITORS = frozenset({"perf"})  # monitors whose data `run.py report` draws with inferno


@dataclass(frozen=True, order=True)
class Target:
    """One install.sh target: ``kind`` impl, base or tool, and its name."""

    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"

    @property
    def option(self) -> str:
        """The install.sh option that installs it."""
        return {"impl": "--impl", "base": "--base", "tool": "--tool"}[self.kind] + " " + self.name


def stamp_dir() -> Path:
    """Where install.sh keeps its stamps."""
    return Path(os.environ.get("QIR_INSTALL_STAMPS", "/var/cache/qir/install"))


def _folder_targets(meta: ImplementationMeta, registry: dict[str, ImplementationMeta]
                    ) -> set[Target]:
    """The targets one (resolved) implementation needs."""
    out = {Target("impl", meta.folder)}
    if meta.image is not None:
        if meta.image.base is not None:
            out.add(Target("base", meta.image.base))
        for native in meta.image.native:
            out |= _folder_targets(registry[native], registry)
    return out


def for_implementations(names: Iterable[str],
                        registry: dict[str, ImplementationMeta] | None = None) -> set[Target]:
    """The targets of implementations named as a campaign names them (``quic-go``,
    ``quic-go@v0.64.0``). Raises KeyError/ValueError for an unknown one."""
    registry = load_registry() if registry is None else registry
    out: set[Target] = set()
    for name in names:
        out |= _folder_targets(resolve(name, registry), registry)
    return out


def for_campaign(path: Path | str) -> set[Target]:
    """The targets a campaign file needs (raises ConfigError for an invalid one)."""
    from interop_runner.config.loader import load_campaign_testbeds

    return for_config(load_campaign_testbeds(path)[0])


def for_config(cfg: "CampaignConfig") -> set[Target]:
    """The targets a (validated) campaign needs."""
    from interop_runner.config.campaign import variant_configs

    registry = load_registry()
    out: set[Target] = set()
    for _, vcfg in variant_configs(cfg):
        for pair in vcfg.pair_list():
            for name in (pair.server, pair.client):
                out |= _folder_targets(resolve(name, registry, vcfg.implementations), registry)
        if INFERNO_MONITORS.intersection(vcfg.monitors):
            out.add(Target("tool", "inferno"))
    return out


def everything(registry: dict[str, ImplementationMeta] | None = None) -> set[Target]:
    """Every target (``install.sh --all``)."""
    registry = load_registry() if registry is None else registry
    out = {Target("tool", "inferno")}
    for meta in registry.values():
        out |= _folder_targets(meta, registry)
    return out


def _inputs(target: Target) -> list[Path]:
    if target.kind == "impl":
        return [IMPLEMENTATIONS_DIR / target.name / f for f in CACHE_INPUTS]
    if target.kind == "base":
        folder = IMPLEMENTATIONS_DIR / IMAGE_BASES_DIR / target.name
        return [*(folder / f for f in BASE_INPUTS), BASE_BUILDER]
    return []


def key(target: Target) -> str:
    """SHA-256 over the target's input files (names and contents; absent ones count too)."""
    digest = hashlib.sha256(str(target).encode() + b"\0")
    for path in _inputs(target):
        digest.update(path.name.encode() + b"\0")
        digest.update(path.read_bytes() if path.is_file() else b"\0absent\0")
    return digest.hexdigest()


def write_stamp(target: Target, paths: Sequence[str]) -> Path:
    """Record that ``target`` was installed: its key and the cache paths it filled."""
    stamp = stamp_dir() / f"{target.kind}-{target.name}"
    stamp.parent.mkdir(parents=True, exist_ok=True)
    tmp = stamp.with_suffix(".tmp")
    tmp.write_text("\n".join([key(target), *paths]) + "\n")
    tmp.replace(stamp)
    return stamp


def installed(target: Target) -> bool:
    """True when the target's stamp has its current key and every path it names exists (a
    tool: when it is found)."""
    if target.kind == "tool":  # where measure/flamegraph.py looks for inferno's programs
        cargo_bin = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo")) / "bin"
        program = f"{target.name}-flamegraph"
        return bool(shutil.which(program) or (cargo_bin / program).is_file())
    stamp = stamp_dir() / f"{target.kind}-{target.name}"
    try:
        first, *paths = stamp.read_text().splitlines()
    except (OSError, ValueError):
        return False
    return first == key(target) and all(Path(p).exists() for p in paths if p)


def missing(targets: Iterable[Target]) -> list[Target]:
    """The targets that are not installed, sorted."""
    return sorted(t for t in targets if not installed(t))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m interop_runner.config.needs",
        description="install.sh's targets: `plan` prints the targets (one `KIND NAME` line "
                    "each) of campaigns and implementations, `stamp` records one as installed.")
    sub = p.add_subparsers(dest="action", required=True)
    plan = sub.add_parser("plan")
    plan.add_argument("--for", dest="configs", action="append", default=[], metavar="CONFIG")
    plan.add_argument("--impl", action="append", default=[], metavar="NAME")
    plan.add_argument("--all", action="store_true")
    sub.add_parser("missing", help="of the targets on stdin (`KIND NAME` lines), print those "
                                   "not installed")
    stamp = sub.add_parser("stamp")
    stamp.add_argument("kind", choices=["impl", "base"])
    stamp.add_argument("name")
    stamp.add_argument("paths", nargs="*", help="cache paths that must exist")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """install.sh's helper; errors are one line on stderr, exit 2."""
    from interop_runner.errors import ConfigError
    from interop_runner.exit_codes import ExitCode

    args = _parser().parse_args(argv)
    try:
        if args.action == "stamp":
            write_stamp(Target(args.kind, args.name), args.paths)
            return ExitCode.OK
        if args.action == "missing":
            wanted = [Target(*line.split(maxsplit=1)) for line in sys.stdin if line.strip()]
            print("".join(f"{t}\n" for t in missing(wanted)), end="")
            return ExitCode.OK
        targets = everything() if args.all else set()
        targets |= for_implementations(args.impl)
        for config in args.configs:
            targets |= for_campaign(config)
    except ConfigError as exc:
        print("\n".join(f"error: {line}" for line in exc.lines), file=sys.stderr)
        return ExitCode.USAGE
    except KeyError as exc:
        print(f"error: unknown implementation {exc.args[0]!r}", file=sys.stderr)
        return ExitCode.USAGE
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    for target in sorted(targets):
        print(target)
    return ExitCode.OK


if __name__ == "__main__":
    sys.exit(main())
