"""Command line: wires config, testbed, campaign, store and analysis together."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Iterator, Sequence

from interop_runner.errors import ConfigError

from interop_runner.config.campaign import check_ssh_files, load_campaign_testbeds
from interop_runner.errors import ExecutorError
from interop_runner.errors import RegistryError
from interop_runner.config.implementations import load_registry
from interop_runner.errors import KnobError
from interop_runner.errors import PreflightError
from interop_runner.errors import StoreError
from interop_runner.storage.store import private_umask
from interop_runner.units import format_iec
from interop_runner.errors import UserError

if TYPE_CHECKING:
    from typing import Callable

    import pandas as pd

    from interop_runner.config.campaign import CampaignConfig, TestbedConfig

EPILOG = ("Run `run.py <command> --help` for the options of each command. Exit codes: 0 done, "
          "1 runtime error (node, SSH, preflight), 2 invalid configuration (also an unreachable "
          "node or a wrong host key before anything ran), 3 testbed not healthy (testbed status), "
          "4 campaign finished without any successful attempt, 5 compare found a slower cell (CI gate), 130 interrupted.")


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="run.py",
        description="Extended QUIC Interop Runner: goodput of QUIC (and TCP/TLS) client/server "
                    "pairs between two nodes driven over SSH.",
        epilog=EPILOG)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("run", help="run a campaign and print a summary table",
                       description="Run every pair x repetition of a campaign file. Results go "
                                   "to <results_dir>/<name>_<UTC time>/ (never overwritten). "
                                   "A local testbed is brought up if it is down.")
    p.add_argument("config", type=Path, help="campaign YAML file, e.g. configs/local.yml")
    p.add_argument("--dry-run", action="store_true",
                   help="print the planned runs, their count and an estimated duration; run "
                        "nothing")
    p.add_argument("--results-dir", type=Path, default=None,
                   help="where campaign directories go (default: results_dir of the config)")
    p.add_argument("--keep-files", action="store_true",
                   help="keep the generated file and certificates on the nodes")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--resume", type=Path, default=None, metavar="CAMPAIGN_DIR",
                   help="continue an interrupted campaign in CAMPAIGN_DIR (same config): runs "
                        "with an ok (or unsupported) record are skipped, failed, timed-out and "
                        "interrupted ones run again as a new attempt; nothing stored is "
                        "rewritten")

    p = sub.add_parser("validate", help="check a campaign file (and its testbed) without running",
                       description="Validate a campaign file and the testbed file it names; "
                                   "print one line per problem, with its key path.")
    p.add_argument("config", type=Path)

    p = sub.add_parser("testbed", help="manage the embedded local testbed (needs root)",
                       description="Two network namespaces (qir-server, qir-client) joined by "
                                   "veth, each running its own sshd, reachable from this "
                                   "machine over a management link; 198.18.0.0/15 addresses.")
    p.add_argument("action", choices=["up", "down", "status", "restore"],
                   help="restore: undo host knobs a killed run left on the nodes (replays "
                        "their restore journals)")
    p.add_argument("--purge", action="store_true",
                   help="with down: also remove the nodes' work and tmpfs directories")
    p.add_argument("--file", type=Path, default=None, metavar="TESTBED_YML",
                   help="with restore: a testbed file of real hosts (default: the local "
                        "testbed, configs/testbeds/local.yml)")

    sub.add_parser("list", help="list the available implementations",
                   description="List implementations with their version, roles, protocols and "
                               "parameters.")

    p = sub.add_parser("parse", help="write the results of one or more campaigns as a table",
                       description="Load every run.json below RESULTS (one row per attempt) "
                                   "and write it as Parquet or CSV (chosen by the suffix).")
    p.add_argument("results", type=Path, nargs="+", help="campaign or results directories")
    p.add_argument("-o", "--output", type=Path, required=True,
                   help="output file ending in .parquet or .csv")

    p = sub.add_parser("matrix", help="print the server x client goodput matrix",
                       description="Median goodput (Mbit/s) of every server x client pair "
                                   "below RESULTS, with failures per cell (paper Fig. 6); "
                                   "optionally drawn as a heatmap.")
    p.add_argument("results", type=Path, nargs="+", help="campaign or results directories")
    p.add_argument("-o", "--output", type=Path, default=None,
                   help="also write the heatmap to this image file (.png, .svg, .pdf)")
    from interop_runner.cli.report import register as register_report  # run.py report (cli_report.py)

    register_report(sub)
    from interop_runner.cli.compare import register as register_compare  # run.py compare (cli_compare.py)

    register_compare(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = _build_parser().parse_args(argv)
    # paramiko's transport thread logs a failed handshake with a traceback on stderr; the
    # ConnectError it turns into is printed as one `error:` line instead
    if not logging.getLogger("paramiko").handlers:
        logging.getLogger("paramiko").addHandler(logging.NullHandler())
    private_umask()  # results, caches, reports and journals stay private to the user
    try:
        return int(_COMMANDS[args.command](args) or 0)
    except ConfigError as exc:
        for line in exc.lines:
            print(f"error: {line}", file=sys.stderr)
        return 2
    except TestbedUnreachable as exc:  # the testbed file names a host or key that is wrong
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (UserError, ExecutorError, PreflightError, StoreError, RegistryError, KnobError,
            OSError) as exc:  # OSError: e.g. --results-dir names a file
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _cmd_validate(args: argparse.Namespace) -> int:
    cfg, testbeds = load_campaign_testbeds(args.config)
    check_ssh_files(args.config, cfg, testbeds)
    print(f"{args.config}: ok — {len(cfg.pair_list())} pair(s) x {cfg.repetitions} "
          f"repetition(s), file {format_iec(cfg.file_size)}, testbed "
          f"{', '.join(t.name for t in testbeds)}")
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    for meta in load_registry().values():
        params = ", ".join(f"{k} ({v.type})" for k, v in meta.parameters.items()) or "-"
        sup = meta.supports
        flags = [n for n in ("socket_buffers", "gso", "gro", "qlog", "keylog") if getattr(sup, n)]
        print(f"{meta.name:10} {meta.version:14} roles={','.join(meta.roles):14} "
              f"alpn={','.join(meta.alpns):14} cc={','.join(sup.congestion_control) or '-':16} "
              f"ciphers={len(sup.cipher)} {' '.join(flags) or '-'}; params: {params}")
    return 0


def _print_matrix(frame: "pd.DataFrame") -> None:
    from interop_runner.analysis import status_matrix

    table = status_matrix(frame)
    print("\nmedian goodput in Mbit/s; rows: server, columns: client")
    print(table.to_string())


def _testbed_module() -> ModuleType:
    """The local testbed module (imported lazily: only `testbed` and local runs need it)."""
    from interop_runner.testbed import local

    return local


def _cmd_testbed(args: argparse.Namespace) -> int:
    if args.action == "restore":
        return _restore(args.file)
    local = _testbed_module()
    try:
        if args.action == "up":
            print(local.up().render())
        elif args.action == "down":
            local.down(purge=args.purge)
            print("local testbed: down")
        else:
            status = local.status()
            print(status.render())
            return 0 if status.healthy else 3
    except local.TestbedError as exc:
        raise UserError(str(exc)) from None
    return 0


def _restore(path: Path | None) -> int:
    from interop_runner.testbed.leftovers import HOST_JOURNAL, Restored, restore_testbed
    from interop_runner.config.campaign import load_testbed
    from interop_runner.testbed.knobs import Journal

    from interop_runner.paths import LOCAL_TESTBED_FILE

    testbed = load_testbed(path or LOCAL_TESTBED_FILE)
    if testbed.local:
        _ensure_local_testbed()
    undone = restore_testbed(testbed)
    if testbed.local:  # sysctls of the local testbed live on this host
        from interop_runner.remote.executor import LocalExecutor

        host = Journal(LocalExecutor("management"), HOST_JOURNAL)
        if host.pending():
            undone["management"] = Restored([], host.replay())
    if not undone:
        print(f"{testbed.name}: nothing to restore")
        return 0
    bad = 0
    for node, done in undone.items():
        for line in done.killed:
            print(f"{node}: {line}")
        print(f"{node}: restored"
              + (f"; could not undo: {'; '.join(done.failed)}" if done.failed else ""))
        bad += len(done.failed)
    return 1 if bad else 0


def _ensure_local_testbed() -> None:
    local = _testbed_module()
    try:
        if not local.status().healthy:
            print("local testbed is not up: bringing it up", file=sys.stderr)
            local.up()
    except local.TestbedError as exc:
        raise UserError(str(exc)) from None


def _undecided_cells(cfg: "CampaignConfig") -> "Callable[[Path], set[tuple[str, str]]]":
    """For adaptive A/B campaigns: the cells whose verdict is still ``inconclusive``."""
    from interop_runner.analysis import load_results
    from interop_runner.analysis.ab.compare import compare_variants
    from interop_runner.config.sweep import variants

    assert cfg.sweep.adaptive is not None
    arm_a, arm_b = (v.id for v in variants(cfg.sweep))
    min_effect = cfg.sweep.adaptive.min_effect

    def undecided(directory: Path) -> set[tuple[str, str]]:
        frame = load_results(directory, cache=False)
        result = compare_variants(frame, "variant", arm_a, arm_b, min_effect=min_effect)
        open_ = result[result["verdict"] == "inconclusive"]
        return {(str(s), str(c)) for s, c in zip(open_["server"], open_["client"])}

    return undecided


class TestbedUnreachable(Exception):
    """A node of the testbed file cannot be reached or authenticated before anything ran."""


def _probe_nodes(testbeds: "list[TestbedConfig]", timeout: float
                 ) -> dict[str, list[dict[str, str]]]:
    """Open and close an SSH connection to every node before a campaign directory exists, so
    an unreachable host, a wrong host key or a node another runner is using (its lease) is a
    one-line error that leaves nothing behind.
    Returns the host keys accepted on first use, per testbed, for campaign.json."""
    from interop_runner.errors import ConnectError
    from interop_runner.errors import NodeBusy
    from interop_runner.testbed.node import Node

    trusted: dict[str, list[dict[str, str]]] = {}
    for testbed in testbeds:
        for name, node_cfg in testbed.nodes.items():
            try:
                node = Node.connect(name, node_cfg, "probe", timeout)
            except ConnectError as exc:
                raise TestbedUnreachable(f"testbed {testbed.name}: {exc}") from None
            try:
                trusted.setdefault(testbed.name, []).extend(node.trusted_host_keys)
                busy = node.lease_holder()
            finally:
                node.close()
            if busy:
                raise NodeBusy(f"testbed {testbed.name}: {name}: {node_cfg.workdir} is in use "
                               f"by {busy}; wait for it to finish or stop it first")
    return trusted


def _cmd_run(args: argparse.Namespace) -> int:
    from interop_runner.measure.campaign import Campaign
    from interop_runner.measure.plan import completed_keys, draw_seed, estimate_seconds, plan_order, plan_runs

    cfg, testbeds = load_campaign_testbeds(args.config)
    check_ssh_files(args.config, cfg, testbeds)
    testbed = testbeds[0]
    if args.resume is not None and not (args.resume / "campaign.json").is_file():
        raise UserError(f"{args.resume}: not a campaign directory (no campaign.json)")
    if args.dry_run:
        seed = draw_seed()
        if args.resume is not None:
            try:
                seed = json.loads((args.resume / "campaign.json").read_text()).get(
                    "plan", {}).get("seed", seed)
            except (OSError, ValueError, AttributeError) as exc:
                raise UserError(f"{args.resume / 'campaign.json'}: cannot resume: {exc}") from None
        runs = plan_runs(cfg, seed, [t.name for t in testbeds])
        done = completed_keys(args.resume, cfg, runs) if args.resume is not None else set()
        for run in runs:
            note = "" if run.alpn else "  (unsupported: no common protocol)"
            if run.key in done:
                note += "  (stored: skipped)"
            variant = f" {run.variant.id}" if run.variant.id else ""
            print(f"{run.server:>10} -> {run.client:<10} rep {run.repetition:<4}{variant} "
                  f"alpn={run.alpn or '-'}{note}")
        todo = [r for r in runs if r.key not in done]
        est = estimate_seconds(cfg, todo)
        order = plan_order(cfg, len(testbeds))
        seed_note = f", seed {cfg.sweep.seed if cfg.sweep.seed is not None else seed}" \
            if order == "shuffled" else ""
        print(f"{len(runs)} run(s) ({len({r.variant.id for r in runs})} variant(s) x "
              f"{len(cfg.pair_list())} pair(s) x {cfg.repetitions} repetition(s), order "
              f"{order}{seed_note}), {len(todo)} to run; file {format_iec(cfg.file_size)}, "
              f"testbed {', '.join(t.name for t in testbeds)}"
              f"{' (' + cfg.distribute + ')' if len(testbeds) > 1 else ''}; estimated "
              f"{est / 60 / (len(testbeds) if cfg.distribute == 'spread' else 1):.1f} min at "
              f"1 Gbit/s plus 1 s overhead per run")
        if cfg.sweep.adaptive is not None:
            extra = cfg.sweep.adaptive.max_repetitions - cfg.repetitions
            print(f"adaptive: up to {max(extra, 0)} more paired round(s) (to "
                  f"{cfg.sweep.adaptive.max_repetitions} repetitions) for cells whose verdict "
                  f"stays inconclusive at a {cfg.sweep.adaptive.min_effect:.0%} minimum effect")
        return 0
    results_root = args.results_dir or Path(cfg.results_dir)
    if not results_root.is_absolute() and args.results_dir is None:
        results_root = Path.cwd() / results_root
    if results_root.exists() and not results_root.is_dir():
        raise UserError(f"{results_root}: the results directory is not a directory")
    if any(t.local for t in testbeds):
        _ensure_local_testbed()
    # the nearest existing ancestor must be a directory (checked before any connection)
    ancestor = next(p for p in (results_root, *results_root.parents) if p.exists())
    if not ancestor.is_dir():
        raise UserError(f"{results_root}: cannot create the results directory below the "
                        f"file {ancestor}")
    campaign = Campaign(cfg, testbeds, results_root, keep_files=args.keep_files or None,
                        resume=args.resume)
    campaign.trusted_before = _probe_nodes(testbeds, cfg.timeouts.command)
    if campaign.skipped:
        print(f"resuming {args.resume}: {campaign.skipped} run(s) already stored, "
              f"{len(campaign.runs)} to go", file=sys.stderr)

    def setup_failed(message: str, tail: str) -> None:
        print(f"error: {message}; its pairs are recorded as failed. Last lines of its "
              f"output:", file=sys.stderr)
        for line in tail.splitlines():
            print(f"  | {line}", file=sys.stderr)

    campaign.on_setup_error = setup_failed
    if cfg.sweep.adaptive is not None:
        campaign.undecided = _undecided_cells(cfg)

    def progress(it: Iterator, total: int) -> Iterator:  # type: ignore[type-arg]
        if args.no_progress:
            return it
        from tqdm import tqdm

        # over the whole campaign: runs stored before a resume count as done
        return iter(tqdm(it, total=total + campaign.skipped, initial=campaign.skipped,
                         unit="run", desc=cfg.name, file=sys.stderr))

    try:
        result = campaign.execute(progress=progress)
    except KeyboardInterrupt:
        print("\ninterrupted: nodes cleaned up; stored attempts are kept", file=sys.stderr)
        return 130
    from interop_runner.analysis import load_results, summarize  # pandas: only after a run (fast errors)

    frame = load_results(result.directory)
    table = summarize(frame)
    print(table.to_string(index=False, na_rep="n/a", float_format=lambda v: f"{v:.1f}"))
    swept = "variant" in frame.columns and frame["variant"].notna().any()
    if not swept and (frame["server"].nunique() > 1 or frame["client"].nunique() > 1):
        _print_matrix(frame)  # (with a sweep the table above is already per variant)
    print(f"\nresults: {result.directory}  ({len(frame)} attempt(s), "
          f"{result.wall_s:.1f} s wall time; goodput in Mbit/s)")
    return 0 if (frame["status"] == "ok").any() else 4


def _cmd_parse(args: argparse.Namespace) -> int:
    from interop_runner.analysis import load_results

    frame = load_results(*args.results)
    suffix = args.output.suffix.lower()
    if suffix == ".parquet":
        frame.to_parquet(args.output, index=False)
    elif suffix == ".csv":
        frame.to_csv(args.output, index=False)
    else:
        raise UserError(f"{args.output}: output must end in .parquet or .csv")
    print(f"{args.output}: {len(frame)} attempt(s)")
    return 0


def _cmd_matrix(args: argparse.Namespace) -> int:
    from interop_runner.analysis import load_results, plot_matrix

    frame = load_results(*args.results)
    if frame.empty:
        raise UserError(f"no attempts found below {', '.join(map(str, args.results))}")
    _print_matrix(frame)
    if args.output is not None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        ax = plot_matrix(frame)
        fig = plt.gcf()
        fig.tight_layout()
        try:
            fig.savefig(args.output, dpi=150)
        except (OSError, ValueError) as exc:
            raise UserError(f"{args.output}: cannot write the heatmap: {exc}") from None
        print(f"heatmap: {args.output}")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from interop_runner.cli.report import cmd_report

    return cmd_report(args)


def _cmd_compare(args: argparse.Namespace) -> int:
    from interop_runner.cli.compare import command

    return command(args)


_COMMANDS = {"run": _cmd_run, "validate": _cmd_validate, "testbed": _cmd_testbed,
             "list": _cmd_list, "parse": _cmd_parse, "matrix": _cmd_matrix,
             "report": _cmd_report, "compare": _cmd_compare}
