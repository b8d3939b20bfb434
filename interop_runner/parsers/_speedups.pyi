"""Types of the compiled inner loops (_speedups.c)."""

import numpy as np

def pidstat_shares(text: str, ncols: int, tid_i: int, cpu_i: int, lo: float, hi: float,
                   /) -> tuple[dict[str, float], dict[str, list[float]]] | None: ...
def aligned_fits(reference: np.ndarray, fixed: np.ndarray, text: str, digits: bool,
                 /) -> bool | None: ...
def aligned_changed_lines(reference: np.ndarray, fixed: np.ndarray, newlines: np.ndarray,
                          new: str, old: str, digits: bool, /) -> list[int] | None: ...
