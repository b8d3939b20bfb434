"""The exit codes of ``run.py`` / ``qir``, in one place.

Their meaning is documented for users in ``run.py --help`` (the epilog in ``cli/main.py``),
README.md, docs/compare.md and docs/history.md; CI jobs gate on them, so a value never changes.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """A process exit code of the command line."""

    OK = 0
    """Done (``compare``: no cell slower or costlier; ``history check``: no open regression)."""
    RUNTIME_ERROR = 1
    """A runtime error (node, SSH, preflight, a user error found while running), or an action
    that did not fully succeed (``history ingest`` refused a campaign, ``testbed restore``
    could not undo a change)."""
    USAGE = 2
    """Invalid arguments or configuration (argparse's own code), also an unreachable node or a
    wrong host key before anything ran; ``compare`` and ``report`` user errors; damaged
    stored results (``compare``, ``report``, ``parse``, ``matrix``: a ``run.json`` or
    ``campaign.json`` that cannot be read, each named on one line; never a pass)."""
    TESTBED_UNHEALTHY = 3
    """``testbed status``: the local testbed is not healthy."""
    NO_OK_ATTEMPT = 4
    """``run``: the campaign finished without any successful attempt."""
    SLOWER_OR_REGRESSION = 5
    """The CI gate: ``compare`` found a slower cell or a costlier CPU cost per byte, or
    ``history check`` found an open regression."""
    INTERRUPTED = 130
    """Interrupted by Ctrl-C or SIGTERM (128 + SIGINT, as a shell reports it)."""
