"""Command line: the parser, the dispatch to one module per command group, exit codes.

The commands live in :mod:`.run` (``run``), :mod:`.testbed` (``testbed``), :mod:`.results`
(``validate``, ``list``, ``parse``, ``matrix``), :mod:`.summary`, :mod:`.report`, :mod:`.compare`,
:mod:`.sources` and :mod:`.history`; this module only wires them together and turns the errors
they raise into one ``error:`` line on stderr and an exit code.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Callable, Sequence

from interop_runner.cli import (
    compare,
    history,
    notebooks,
    path,
    report,
    results,
    run,
    sources,
    summary,
    testbed,
)
from interop_runner.errors import (
    ConfigError,
    DamagedResults,
    ExecutorError,
    KnobError,
    PathError,
    PreflightError,
    RegistryError,
    StoreError,
    TestbedUnreachable,
    UserError,
)
from interop_runner.exit_codes import ExitCode
from interop_runner.storage.layout import private_umask

EPILOG = ("Run `run.py <command> --help` for the options of each command. Exit codes: 0 done, "
          "1 runtime error (node, SSH, preflight), 2 invalid configuration (also an unreachable "
          "node or a wrong host key before anything ran; compare, report, parse and matrix: a "
          "damaged run.json or campaign.json, each named), 3 testbed not healthy (testbed "
          "status), 4 campaign finished without any successful attempt, 5 compare found a "
          "slower cell or a costlier CPU cost per byte (CI gate), "
          "or history check found an open regression, 130 interrupted.")

# Exit code 1: runtime errors (OSError: e.g. --results-dir names a file).
RUNTIME_ERRORS = (UserError, ExecutorError, PreflightError, StoreError, RegistryError, KnobError,
                  PathError, OSError)

Command = Callable[[argparse.Namespace], int]

# name -> handler, in the order of `run.py --help`
COMMANDS: dict[str, Command] = {
    "run": run.cmd_run, "validate": results.cmd_validate, "testbed": testbed.cmd_testbed,
    "list": results.cmd_list, "parse": results.cmd_parse, "matrix": results.cmd_matrix,
    "summary": summary.cmd_summary,
    "report": report.cmd_report, "compare": compare.command, "sources": sources.cmd_sources,
    "history": history.cmd_history, "notebooks": notebooks.cmd_notebooks,
    "path": path.cmd_path,
}


def _prog() -> str:
    """``qir`` when started as the installed console command, else ``run.py``."""
    return "qir" if Path(sys.argv[0]).name == "qir" else "run.py"


def build_parser() -> argparse.ArgumentParser:
    """The ``run.py`` argument parser with every command."""
    parser = argparse.ArgumentParser(
        prog=_prog(),
        description="Extended QUIC Interop Runner: goodput of QUIC (and TCP/TLS) client/server "
                    "pairs between two nodes driven over SSH.",
        epilog=EPILOG)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run.register(sub)
    results.register_validate(sub)
    testbed.register(sub)
    results.register_list(sub)
    results.register_parse(sub)
    results.register_matrix(sub)
    summary.register(sub)
    report.register(sub)
    compare.register(sub)
    sources.register(sub)
    history.register(sub)
    notebooks.register(sub)
    path.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = build_parser().parse_args(argv)
    # paramiko's transport thread logs a failed handshake with a traceback on stderr; the
    # ConnectError it turns into is printed as one `error:` line instead
    if not logging.getLogger("paramiko").handlers:
        logging.getLogger("paramiko").addHandler(logging.NullHandler())
    private_umask()  # results, caches, reports and journals stay private to the user
    try:
        code = COMMANDS[args.command](args) or ExitCode.OK
    except (ConfigError, DamagedResults) as exc:  # one line per problem (per damaged file)
        for line in exc.lines:
            print(f"error: {line}", file=sys.stderr)
        code = ExitCode.USAGE
    except TestbedUnreachable as exc:  # the testbed file names a host or key that is wrong
        print(f"error: {exc}", file=sys.stderr)
        code = ExitCode.USAGE
    except RUNTIME_ERRORS as exc:
        print(f"error: {exc}", file=sys.stderr)
        code = ExitCode.RUNTIME_ERROR
    return int(code)  # a plain int for sys.exit and callers, whatever the command returned
