"""`run.py path calibrate`: measure what each path of a campaign really does."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from interop_runner.errors import UserError
from interop_runner.exit_codes import ExitCode

DESCRIPTION = ("Build each emulated path of a campaign (its `path:` block and every sweep "
               "variant of it) on its testbed, calibrate it (base RTT, bottleneck rate, "
               "queueing delay of a full buffer, loss) and remove it again, without running "
               "any attempt. Prints configured against measured for each parameter with the "
               "tolerance; exit code 1 when a path misses its configuration. docs/paths.md "
               "explains the measurements and tolerances.")


def register(subparsers: "argparse._SubParsersAction[Any]") -> argparse.ArgumentParser:
    """Add the ``path`` command group to the ``run.py`` subparsers."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "path", help="calibrate the emulated paths of a campaign", description=DESCRIPTION)
    sub = p.add_subparsers(dest="path_command", required=True, metavar="SUBCOMMAND")
    cal = sub.add_parser("calibrate", help="build, calibrate and remove each path",
                         description=DESCRIPTION)
    cal.add_argument("config", type=Path, help="campaign YAML file with a `path:` block")
    cal.add_argument("--json", type=Path, metavar="FILE",
                     help="also write every path with its calibration to FILE (JSON)")
    return p


def cmd_path(args: argparse.Namespace) -> int:
    """``path calibrate``: one block per path; exit 1 when any calibration failed."""
    from interop_runner.cli.testbed import ensure_local_testbed
    from interop_runner.config.loader import load_campaign
    from interop_runner.measure.path_check import calibrate_paths

    cfg, testbed = load_campaign(args.config)
    if cfg.path is None and not any(a.path.split(".")[0] == "path" for a in cfg.sweep.axes):
        raise UserError(f"{args.config}: path: the campaign has no `path:` block to calibrate")
    if testbed.local:
        ensure_local_testbed()
    checks = calibrate_paths(cfg, testbed)
    for check in checks:
        cal = check.entry.get("calibration") or {}
        label = check.variant.id or "path"
        print(f"{label} [{check.key}, {check.entry['backend']} on {check.entry['placement']}]: "
              f"{'ok' if check.ok else 'FAILED'}")
        for item in cal.get("checks", []):
            mark = "ok  " if item["ok"] else "FAIL"
            print(f"  {mark} {_line(item)}")
        for number, earlier in enumerate(cal.get("earlier") or [], start=1):
            failed = "; ".join(_line(i) for i in earlier.get("checks", []) if not i["ok"])
            print(f"  (calibration {number} failed on a busy host, so it was repeated: {failed})")
    if args.json is not None:
        args.json.write_text(json.dumps([{"variant": c.variant.id, "key": c.key, **c.entry}
                                         for c in checks], indent=1))
    return ExitCode.OK if all(c.ok for c in checks) else ExitCode.RUNTIME_ERROR


def _line(item: dict[str, Any]) -> str:
    measured = item.get("measured")
    shown = "not measured" if measured is None else f"{measured:.4g}"
    allowed = f" ±{item['tolerance']:.3g}" if item.get("tolerance") else ""
    detail = f" ({item['detail']})" if item.get("detail") else ""
    unit = f" {item['unit']}" if item.get("unit") else ""  # loss is a plain fraction
    return (f"{item['parameter']}: configured {item['configured']:.4g}, measured {shown}"
            f"{allowed}{unit}{detail}")
