"""``run.py testbed up|down|status|restore``: the embedded namespace testbed, and undoing what
a killed run left on the nodes."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interop_runner.errors import TestbedError, UserError
from interop_runner.exit_codes import ExitCode

if TYPE_CHECKING:
    from interop_runner.config.campaign import CampaignConfig
    from interop_runner.testbed.leftovers import Restored
    from interop_runner.testbed.local import LocalTestbed


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Add ``testbed``."""
    p = sub.add_parser("testbed", help="manage the embedded local testbed (needs root)",
                       description="Three network namespaces (qir-server, qir-client and "
                                   "qir-router between them) joined by veth, each running its "
                                   "own sshd, reachable from this machine over a management "
                                   "link; 198.18.0.0/15 addresses. Server and client are linked "
                                   "directly (data0) and through the router (path0). Where "
                                   "docker.io is installed server and client also run their "
                                   "own Docker Engine (socket /run/qir/docker/<node>.sock, "
                                   "image cache /var/lib/qir/docker/<node>); the host's engine "
                                   "is never used.")
    p.add_argument("action", choices=["up", "down", "status", "restore"],
                   help="restore: undo the host knobs and emulated paths a killed run left "
                        "on the nodes, the router included (kills its leftover processes, "
                        "such as delay lines, and replays the path and knob journals)")
    p.add_argument("--purge", action="store_true",
                   help="with down: also remove the nodes' work and tmpfs directories and "
                        "their engines' image caches")
    p.add_argument("--file", type=Path, default=None, metavar="TESTBED_YML",
                   help="with restore: a testbed file of real hosts (default: the local "
                        "testbed, configs/testbeds/local.yml)")


def local_testbed() -> "LocalTestbed":
    """The default local testbed (imported lazily: only `testbed` and local runs need it)."""
    from interop_runner.testbed.local import TESTBED

    return TESTBED


def cmd_testbed(args: argparse.Namespace) -> int:
    """up, down, status (exit 3 when not healthy) or restore."""
    if args.action == "restore":
        return restore(args.file)
    testbed = local_testbed()
    try:
        if args.action == "up":
            print(testbed.up().render())
        elif args.action == "down":
            testbed.down(purge=args.purge)
            print("local testbed: down")
        else:
            status = testbed.status()
            print(status.render())
            return ExitCode.OK if status.healthy else ExitCode.TESTBED_UNHEALTHY
    except TestbedError as exc:
        raise UserError(str(exc)) from None
    return ExitCode.OK


def ensure_local_testbed(cfg: "CampaignConfig | None" = None) -> None:
    """Bring the local testbed up unless it is healthy; with a campaign, first install what
    its implementations build from when it is missing (:func:`ensure_installed`)."""
    if cfg is not None:
        ensure_installed(cfg)
    testbed = local_testbed()
    try:
        if not testbed.status().healthy:
            print("local testbed is not up: bringing it up", file=sys.stderr)
            testbed.up()
    except TestbedError as exc:
        raise UserError(str(exc)) from None


def ensure_installed(cfg: "CampaignConfig") -> None:
    """Run ``pos_scripts/install.sh`` for the targets the campaign needs that are not installed
    (the offline caches of its implementations, base images, inferno), showing its steps and
    times; install.sh only installs, so the run goes on (also when it fails: a warning line,
    the setup on the node tells what is really missing). As another user than root, or
    without install.sh, a one-line error names the command instead."""
    from interop_runner.config.needs import for_config, missing
    from interop_runner.paths import PROJECT_ROOT

    todo = missing(for_config(cfg))
    if not todo:
        return
    script = PROJECT_ROOT / "pos_scripts" / "install.sh"
    argv = [str(script), "--no-core"] + [word for target in todo
                                         for word in target.option.split()]
    command = " ".join(argv)
    names = ", ".join(map(str, todo))
    if os.geteuid() != 0 or not script.is_file():
        raise UserError(f"campaign {cfg.name} needs {names}, not installed: run {command} "
                        "as root")
    print(f"campaign {cfg.name} needs {names}: {command}", file=sys.stderr)
    start = time.monotonic()
    done = subprocess.run(["bash", *argv], check=False,
                          env={**os.environ, "QIR_INSTALL_PYTHON": sys.executable})
    seconds = time.monotonic() - start
    left = ", ".join(map(str, missing(todo)))
    if done.returncode != 0 or left:
        # the campaign still runs: a cache that is really missing fails the setup of its
        # implementation on the node, which records why; only its pairs fail
        why = f"exit {done.returncode}" if done.returncode else f"still missing: {left}"
        print(f"warning: {command} did not install everything ({why}; its output is above); "
              "the campaign goes on with what is there", file=sys.stderr)
        return
    print(f"installed {names} in {seconds:.1f} s", file=sys.stderr)


def restore(path: Path | None) -> int:
    """Replay the restore journals of a testbed's nodes (and of this host for the local one);
    exit 1 when something could not be undone."""
    from interop_runner.config.loader import load_testbed
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
