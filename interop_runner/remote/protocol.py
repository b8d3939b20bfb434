"""What both transports (:mod:`.executor`'s ``LocalExecutor`` and :mod:`.ssh`) share with a node.

A foreground command runs under :data:`RUN_WRAPPER` (see :func:`wrapped_argv`), which prints the
command's process group id on the first stderr line, so that a timeout or Ctrl-C can kill
exactly that group; :func:`split_pgid_marker` takes that line off again. ``Executor.hold``
waits for a ready line with :func:`output_before_ready`, and files fetched from a node are
written through :func:`open_private_file` (mode 0600).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO, Sequence

from interop_runner.storage.layout import PRIVATE_FILE_MODE

# Foreground wrapper: report the process group id on stderr's first line (so a timeout or Ctrl-C
# can kill the whole group on the node), then exec the command in place.
RUN_WRAPPER = 'read -r _ _ _ _ pg _ </proc/$$/stat; echo "QIRPGID $pg" >&2; exec "$@"'
PGID_MARKER = "QIRPGID "


def wrapped_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` run under :data:`RUN_WRAPPER` (``$0`` is ``qir``, the command its arguments)."""
    return ["sh", "-c", RUN_WRAPPER, "qir", *argv]


def split_pgid_marker(err: str) -> tuple[int | None, str]:
    """The process group id from the wrapper's first stderr line (``None`` when that line is
    missing or not a number) and the stderr without that line."""
    if err.startswith(PGID_MARKER):
        line, _, rest = err.partition("\n")
        try:
            return int(line[len(PGID_MARKER):]), rest
        except ValueError:
            return None, rest
    return None, err


def output_before_ready(buf: bytes, ready: str) -> str | None:
    """The output before the line ``ready``, once ``buf`` holds that line (else ``None``)."""
    lines = buf.decode(errors="replace").split("\n")
    if ready in lines[:-1]:
        return "\n".join(lines[:lines.index(ready)])
    return None


def open_private_file(path: Path | str) -> BinaryIO:
    """Open ``path`` for writing (truncated), created or changed to mode 0600."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
    os.fchmod(fd, PRIVATE_FILE_MODE)  # an existing file keeps its mode on O_CREAT
    return os.fdopen(fd, "wb")
