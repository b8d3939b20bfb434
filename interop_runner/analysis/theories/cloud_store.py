"""Clouds kept on disk between processes, keyed by the content they were computed from.

Clustering a cloud (choosing k on R(k), :func:`~.envelope.retention`) is most of what a
conformance table costs, and one campaign's clouds are computed by several processes: the
report, each notebook's kernel, ``run.py compare``. :func:`cached` keeps a function's result
in a joblib :class:`~joblib.Memory` store under :func:`location`, keyed by the function's
arguments (the caller passes the data's digest, not the data: ``trials``, or the two clouds
of a comparison, are not hashed again),
one of them ``code``, :data:`CODE_KEY`: the sources of the modules a cloud is computed by
and the numpy and scipy versions, so a change of either computes the cloud again (joblib
itself also starts over when the function's own source changes). The store is bounded
(:data:`STORE_BYTES`, the least recently used go first). Where no directory can be written
(a read-only home), nothing is stored and every process computes its own.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path
from typing import Any, Callable, TypeVar

import numpy as np
import scipy

__all__ = ["CODE_KEY", "STORE_BYTES", "cached", "location"]

STORE_BYTES = 512 * 2**20  # the store's size after a trim (each cloud: a few to 100s of kB)
_SOURCES = ("envelope.py", "conformance.py")  # what a cloud is computed by
F = TypeVar("F", bound=Callable[..., Any])


def _code_key() -> str:
    digest = hashlib.sha256(f"numpy {np.__version__} scipy {scipy.__version__}".encode())
    for name in _SOURCES:
        digest.update((Path(__file__).parent / name).read_bytes())
    return digest.hexdigest()[:16]


CODE_KEY = _code_key()


def location() -> Path | None:
    """``$QIR_CACHE_DIR/clouds`` (default ``$XDG_CACHE_HOME/qir``, else ``~/.cache/qir``),
    created private to the user; None where it cannot be (nothing is stored then)."""
    base = os.environ.get("QIR_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "qir")
    path = Path(base) / "clouds"
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError:
        return None
    return path if os.access(path, os.W_OK) else None


def cached(*ignore: str) -> Callable[[F], F]:
    """A decorator: the function with its results kept in the store, by its arguments but
    those named in ``ignore`` (the data itself, whose digest the caller passes as another
    argument, with ``code=CODE_KEY``); the function itself where there is no store. The
    store is opened, and trimmed to :data:`STORE_BYTES`, at the first call in a process
    (importing the analysis writes nothing)."""
    def decorate(function: F) -> F:
        opened: list[Callable[..., Any]] = []

        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            if not opened:
                opened.append(_open(function, list(ignore)))
            return opened[0](*args, **kwargs)

        return call  # type: ignore[return-value]
    return decorate


def _open(function: Callable[..., Any], ignore: list[str]) -> Callable[..., Any]:
    from joblib import Memory

    where = location()
    if where is None:
        return function
    memory = Memory(where, verbose=0)
    memory.reduce_size(bytes_limit=STORE_BYTES)
    cached_function: Callable[..., Any] = memory.cache(function, ignore=ignore)
    return cached_function
