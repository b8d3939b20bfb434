"""The parsers' compiled inner loops (``_speedups.c``, built by ``pip install -e .``), each
``None`` where the extension was not built: then the parsers run their Python loops, which
are the reference the tests hold the compiled ones to."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

PidstatShares = Callable[[str, int, int, int, float, float],
                         "tuple[dict[str, float], dict[str, list[float]]] | None"]
AlignedFits = Callable[[np.ndarray, np.ndarray, str, bool], "bool | None"]
AlignedChangedLines = Callable[[np.ndarray, np.ndarray, np.ndarray, str, str, bool],
                               "list[int] | None"]

pidstat_shares: PidstatShares | None = None
"""sysstat's pidstat fast-path loop (``_pidstat_shares``)."""
aligned_fits: AlignedFits | None = None
"""``snapshots.Aligned.fits`` on a text."""
aligned_changed_lines: AlignedChangedLines | None = None
"""``snapshots.Aligned.changed_lines`` on two texts."""


def _load() -> Any:
    try:
        from interop_runner.parsers import _speedups
    except ImportError:  # not built
        return None
    return _speedups


_built = _load()
if _built is not None:
    pidstat_shares = _built.pidstat_shares
    aligned_fits = _built.aligned_fits
    aligned_changed_lines = _built.aligned_changed_lines
