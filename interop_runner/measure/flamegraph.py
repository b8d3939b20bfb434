"""Flame graph SVGs from folded stacks, drawn by ``inferno-flamegraph`` (Rust crate ``inferno``).

Runs on the management node after results were fetched (never on a measurement node, and it
does not use the executor). Install the tool with
``cargo install inferno --version 0.12.8 --locked`` (see ``docs/perf.md``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from interop_runner.parsers.folded import write_folded

FLAMEGRAPH_TOOL = "inferno-flamegraph"
FLAMEGRAPH_INSTALL_HINT = "cargo install inferno --version 0.12.8 --locked"


class FlamegraphToolMissing(RuntimeError):
    """``inferno-flamegraph`` is neither on PATH nor in ``$CARGO_HOME/bin``."""


def find_flamegraph_tool() -> str:
    """Path of ``inferno-flamegraph``: PATH first, then ``$CARGO_HOME/bin`` / ``~/.cargo/bin``."""
    found = shutil.which(FLAMEGRAPH_TOOL)
    if found:
        return found
    cargo_home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    candidate = cargo_home / "bin" / FLAMEGRAPH_TOOL
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    raise FlamegraphToolMissing(
        f"{FLAMEGRAPH_TOOL} not found (PATH, {cargo_home / 'bin'}); install it with "
        f"'{FLAMEGRAPH_INSTALL_HINT}'")


def write_flamegraph(stacks: Mapping[str, int], svg_path: str | Path, title: str, *,
                     countname: str = "samples", subtitle: str | None = None,
                     timeout: float = 300.0) -> None:
    """Draw ``stacks`` as an SVG flame graph at ``svg_path`` with ``inferno-flamegraph``.

    Colours are deterministic (same function, same colour across runs). Raises
    :class:`FlamegraphToolMissing` when the tool is not installed, ValueError for empty
    input and RuntimeError when the tool fails. The SVG is written to a temporary file next to
    ``svg_path`` and renamed into place, so a failure leaves no partial SVG.
    """
    if not any(v > 0 for v in stacks.values()):
        raise ValueError("no samples: cannot draw an empty flame graph")
    tool = find_flamegraph_tool()
    svg_path = Path(svg_path)
    svg_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="qir-flamegraph-") as tmp:
        folded = Path(tmp) / "stacks.folded"
        write_folded(stacks, folded)
        argv = [tool, "--title", title, "--countname", countname, "--deterministic"]
        if subtitle:
            argv += ["--subtitle", subtitle]
        argv.append(str(folded))
        part = svg_path.with_name(svg_path.name + ".part")
        with part.open("wb") as out:
            try:
                res = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE,
                                     timeout=timeout, check=False)
            except subprocess.TimeoutExpired:
                part.unlink(missing_ok=True)
                raise RuntimeError(f"{FLAMEGRAPH_TOOL} timed out after {timeout:.0f} s") from None
        if res.returncode != 0:
            part.unlink(missing_ok=True)
            err = res.stderr.decode("utf-8", "replace").strip()
            raise RuntimeError(f"{FLAMEGRAPH_TOOL} failed ({res.returncode}): {err}")
        part.replace(svg_path)
