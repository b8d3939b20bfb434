"""`run.py sources`: the upstream source archives implementations build from."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from interop_runner.errors import UserError
from interop_runner.exit_codes import ExitCode

DESCRIPTION = ("Fill the management node's source cache with every upstream archive an "
               "implementation's meta.yml names (`sources:`): kept if the cache holds it, "
               "copied from a local source directory when one has it, else downloaded from its "
               "pinned URL. Every file is used only with the SHA-256 meta.yml names; another "
               "hash is a one-line error naming the file and the expected hash. The runner "
               "copies the archives from the cache to the nodes before a build.")


def register(subparsers: "argparse._SubParsersAction[Any]") -> argparse.ArgumentParser:
    """Add the ``sources`` command to the ``run.py`` subparsers."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "sources", help="fetch and check the upstream source archives (SHA-256)",
        description=DESCRIPTION)
    p.add_argument("implementations", nargs="*", metavar="IMPL",
                   help="only the archives of these implementations (default: all)")
    p.add_argument("--source-dir", type=Path, action="append", metavar="DIR",
                   help="a local directory with archives, searched before downloading "
                        "(repeatable; default: $QIR_SOURCE_DIRS, else <checkout>/../shared/"
                        "sources)")
    p.add_argument("--cache", type=Path, metavar="DIR",
                   help="the source cache (default: $QIR_SOURCE_CACHE, else "
                        "/var/cache/qir/sources)")
    p.add_argument("--offline", action="store_true",
                   help="never download; an archive not found locally is an error")
    return p


def cmd_sources(args: argparse.Namespace) -> int:
    """Fetch every archive; print one line per archive. SourceError reaches main's handler."""
    from interop_runner.config.implementations import load_registry
    from interop_runner.testbed.sources import fetch_all

    registry = load_registry()
    unknown = [name for name in args.implementations if name not in registry]
    if unknown:
        raise UserError(f"unknown implementation {unknown[0]!r} (known: {', '.join(registry)})")
    if args.implementations:
        registry = {name: registry[name] for name in args.implementations}
    fetched = fetch_all(registry, args.cache, args.source_dir, not args.offline)
    for item in fetched:
        print(f"{item.archive.file}: {item.how}, SHA-256 {item.archive.sha256} ({item.path})")
    if not fetched:
        print("no implementation " + ("of these " if args.implementations else "")
              + "names a source archive")
    return ExitCode.OK
