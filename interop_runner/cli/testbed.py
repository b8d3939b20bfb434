"""``run.py testbed up|down|status|restore``: the embedded namespace testbed, and undoing what
a killed run left on the nodes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from interop_runner.errors import UserError
from interop_runner.exit_codes import ExitCode

if TYPE_CHECKING:
    from interop_runner.testbed.leftovers import Restored


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Add ``testbed``."""
    p = sub.add_parser("testbed", help="manage the embedded local testbed (needs root)",
                       description="Two network namespaces (qir-server, qir-client) joined by "
                                   "veth, each running its own sshd, reachable from this "
                                   "machine over a management link; 198.18.0.0/15 addresses. "
                                   "Where docker.io is installed each node also runs its own "
                                   "Docker Engine (socket /run/qir/docker/<node>.sock, image "
                                   "cache /var/lib/qir/docker/<node>); the host's engine is "
                                   "never used.")
    p.add_argument("action", choices=["up", "down", "status", "restore"],
                   help="restore: undo host knobs a killed run left on the nodes (replays "
                        "their restore journals)")
    p.add_argument("--purge", action="store_true",
                   help="with down: also remove the nodes' work and tmpfs directories and "
                        "their engines' image caches")
    p.add_argument("--file", type=Path, default=None, metavar="TESTBED_YML",
                   help="with restore: a testbed file of real hosts (default: the local "
                        "testbed, configs/testbeds/local.yml)")


def testbed_module() -> ModuleType:
    """The local testbed module (imported lazily: only `testbed` and local runs need it)."""
    from interop_runner.testbed import local

    return local


def cmd_testbed(args: argparse.Namespace) -> int:
    """up, down, status (exit 3 when not healthy) or restore."""
    if args.action == "restore":
        return restore(args.file)
    local = testbed_module()
    try:
        if args.action == "up":
            print(local.up().render())
        elif args.action == "down":
            local.down(purge=args.purge)
            print("local testbed: down")
        else:
            status = local.status()
            print(status.render())
            return ExitCode.OK if status.healthy else ExitCode.TESTBED_UNHEALTHY
    except local.TestbedError as exc:
        raise UserError(str(exc)) from None
    return ExitCode.OK


def ensure_local_testbed() -> None:
    """Bring the local testbed up unless it is healthy."""
    local = testbed_module()
    try:
        if not local.status().healthy:
            print("local testbed is not up: bringing it up", file=sys.stderr)
            local.up()
    except local.TestbedError as exc:
        raise UserError(str(exc)) from None


def restore(path: Path | None) -> int:
    """Replay the restore journals of a testbed's nodes (and of this host for the local one);
    exit 1 when something could not be undone."""
    from interop_runner.config.campaign import load_testbed
    from interop_runner.paths import LOCAL_TESTBED_FILE
    from interop_runner.testbed.leftovers import restore_testbed

    testbed = load_testbed(path or LOCAL_TESTBED_FILE)
    if testbed.local:
        ensure_local_testbed()
    undone = restore_testbed(testbed)
    if testbed.local:  # sysctls of the local testbed live on this host
        undone.update(_restore_host())
    if not undone:
        print(f"{testbed.name}: nothing to restore")
        return ExitCode.OK
    return _report_restored(undone)


def _restore_host() -> "dict[str, Restored]":
    """The management host's own journal (the local testbed's sysctls), when it has one."""
    from interop_runner.remote.executor import LocalExecutor
    from interop_runner.testbed.knobs import Journal
    from interop_runner.testbed.leftovers import HOST_JOURNAL, Restored

    host = Journal(LocalExecutor("management"), HOST_JOURNAL)
    if host.pending():
        return {"management": Restored([], host.replay())}
    return {}


def _report_restored(undone: "dict[str, Restored]") -> int:
    bad = 0
    for node, done in undone.items():
        for line in done.killed:
            print(f"{node}: {line}")
        print(f"{node}: restored"
              + (f"; could not undo: {'; '.join(done.failed)}" if done.failed else ""))
        bad += len(done.failed)
    return ExitCode.RUNTIME_ERROR if bad else ExitCode.OK
