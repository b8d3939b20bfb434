"""``run.py validate``, ``list``, ``parse`` and ``matrix``: campaign files, implementations and
stored results, nothing that reaches a node."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interop_runner.config.implementations import load_registry
from interop_runner.config.loader import check_ssh_files, load_campaign_testbeds
from interop_runner.errors import UserError
from interop_runner.exit_codes import ExitCode
from interop_runner.units import format_iec

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

# --value of ``matrix``: the cost metric (column suffix) of a CPU cost, None for goodput
MATRIX_VALUES: dict[str, str | None] = {"goodput": None, "cpu": "cpu_s_per_gib",
                                        "cycles": "cycles_per_byte"}


def register_validate(sub: "argparse._SubParsersAction[Any]") -> None:
    """Add ``validate``."""
    p = sub.add_parser("validate", help="check a campaign file (and its testbed) without running",
                       description="Validate a campaign file and the testbed file it names; "
                                   "print one line per problem, with its key path.")
    p.add_argument("config", type=Path)


def register_list(sub: "argparse._SubParsersAction[Any]") -> None:
    """Add ``list``."""
    sub.add_parser("list", help="list the available implementations",
                   description="List implementations with their version, roles, protocols and "
                               "parameters.")


def register_parse(sub: "argparse._SubParsersAction[Any]") -> None:
    """Add ``parse``."""
    p = sub.add_parser("parse", help="write the results of one or more campaigns as a table",
                       description="Load every run.json below RESULTS (one row per attempt) "
                                   "and write it as Parquet or CSV (chosen by the suffix).")
    p.add_argument("results", type=Path, nargs="+", help="campaign or results directories")
    p.add_argument("-o", "--output", type=Path, required=True,
                   help="output file ending in .parquet or .csv")


def register_matrix(sub: "argparse._SubParsersAction[Any]") -> None:
    """Add ``matrix``."""
    p = sub.add_parser("matrix", help="print the server x client goodput (or CPU cost) matrix",
                       description="Median goodput (Mbit/s) of every server x client pair "
                                   "below RESULTS, with failures per cell (paper Fig. 6); "
                                   "or, with --value cpu / cycles, the median CPU cost per "
                                   "GiB / byte of the server, the client and both together "
                                   "(NA: not measured); optionally drawn as a heatmap.")
    p.add_argument("results", type=Path, nargs="+", help="campaign or results directories")
    p.add_argument("--value", choices=sorted(MATRIX_VALUES), default="goodput",
                   help="goodput (Mbit/s, default), cpu (CPU-seconds per GiB delivered) or "
                        "cycles (CPU cycles per byte)")
    p.add_argument("-o", "--output", type=Path, default=None,
                   help="also write the heatmap to this image file (.png, .svg, .pdf); for "
                        "a cost, one panel per side")


def cmd_validate(args: argparse.Namespace) -> int:
    """Check a campaign file and its testbed; one summary line when they are valid."""
    cfg, testbeds = load_campaign_testbeds(args.config)
    check_ssh_files(args.config, cfg, testbeds)
    print(f"{args.config}: ok — {len(cfg.pair_list())} pair(s) x {cfg.repetitions} "
          f"repetition(s), file {format_iec(cfg.file_size)}, testbed "
          f"{', '.join(t.name for t in testbeds)}")
    return ExitCode.OK


def cmd_list(args: argparse.Namespace) -> int:
    """One line per implementation: version, roles, protocols, support, parameters."""
    from interop_runner.report.results_text import implementation_lines

    for line in implementation_lines(load_registry()):
        print(line)
    return ExitCode.OK


def print_matrix(frame: "pd.DataFrame") -> None:
    """The server x client goodput matrix of a results frame, on stdout."""
    from interop_runner.report.results_text import goodput_matrix_text

    print(goodput_matrix_text(frame))


def cmd_parse(args: argparse.Namespace) -> int:
    """Write the attempts below the result directories as Parquet or CSV; a damaged
    run.json or campaign.json is a row without status (its reason names the file), then one
    ``error:`` line each and exit 2."""
    from interop_runner.analysis import load_results
    from interop_runner.analysis.frames.results import refuse_damaged

    frame = load_results(*args.results)
    suffix = args.output.suffix.lower()
    if suffix == ".parquet":
        frame.to_parquet(args.output, index=False)
    elif suffix == ".csv":
        frame.to_csv(args.output, index=False)
    else:
        raise UserError(f"{args.output}: output must end in .parquet or .csv")
    print(f"{args.output}: {len(frame)} attempt(s)")
    refuse_damaged(frame)  # the table is written; the damage is never a pass
    return ExitCode.OK


def cmd_matrix(args: argparse.Namespace) -> int:
    """Print the goodput (or CPU cost) matrix; with ``-o`` also draw it as a heatmap. A
    damaged run.json or campaign.json: the matrix of the others, then one ``error:`` line
    each and exit 2."""
    from interop_runner.analysis import load_results
    from interop_runner.analysis.frames.results import refuse_damaged

    frame = load_results(*args.results)
    if frame.empty:
        raise UserError(f"no attempts found below {', '.join(map(str, args.results))}")
    metric = MATRIX_VALUES[args.value]
    if metric is None:
        print_matrix(frame)
    else:
        from interop_runner.report.results_text import cost_matrices_text

        print(cost_matrices_text(frame, metric))
    if args.output is not None:
        _save_heatmap(_heatmap(frame, metric), args.output)
    refuse_damaged(frame)  # never a matrix that passes for complete
    return ExitCode.OK


def _heatmap(frame: "pd.DataFrame", metric: str | None) -> "Figure":
    """The goodput heatmap, or the two panels (server, client) of a cost."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from interop_runner.analysis.theories.matrix import cost_heatmap, plot_matrix

    if metric is None:
        plot_matrix(frame)
        fig: Figure = plt.gcf()
        fig.tight_layout()
        return fig
    _, cost_fig = cost_heatmap(frame, metric)
    if cost_fig is None:
        raise UserError(f"no successful attempt has a measured CPU cost "
                        f"(server_{metric}, client_{metric}): nothing to draw")
    return cost_fig


def _save_heatmap(fig: "Figure", output: Path) -> None:
    try:
        fig.savefig(output, dpi=150)
    except (OSError, ValueError) as exc:
        raise UserError(f"{output}: cannot write the heatmap: {exc}") from None
    print(f"heatmap: {output}")
