"""Folded stacks files (``comm;root;...;leaf count`` per line), as perf post-processing writes
them on the management node and the loaders read them back."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path


def write_folded(stacks: Mapping[str, int], path: str | Path) -> None:
    """Write folded stacks (``comm;root;...;leaf count`` per line, sorted by stack)."""
    path = Path(path)
    with path.open("w", encoding="utf-8") as fh:
        for key in sorted(stacks):
            value = stacks[key]
            if value > 0:
                fh.write(f"{key} {value}\n")


def read_folded(path: str | Path) -> Counter[str]:
    """Read a folded-stacks file (the count is the last space-separated field)."""
    out: Counter[str] = Counter()
    with Path(path).open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            line = line.rstrip("\n")
            if not line:
                continue
            key, sep, count = line.rpartition(" ")
            if not sep or not count.isdigit():
                raise ValueError(f"{path}:{n}: not a folded stack line: {line[:80]!r}")
            out[key] += int(count)
    return out
