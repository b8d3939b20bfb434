"""How busy the hosts were during an attempt (or a path's calibration): a sample of each
node's load before and after (``/proc/loadavg``, ``/proc/stat``, ``/proc/pressure/cpu``,
read on the node through its executor), and of the management host's, turned into the
record's ``host_load`` and the flag ``host_busy`` (:mod:`interop_runner.parsers.hostload`;
thresholds and why: docs/paths.md, "A busy host").

A node that cannot be read has its entry with ``busy: None`` and the reason in ``notes``;
nothing here stops a campaign (a node that is really gone stops it elsewhere).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from interop_runner.errors import ExecutorError
from interop_runner.parsers.common import ParseError
from interop_runner.parsers.hostload import (
    HOST_LOAD_SCRIPT,
    THRESHOLDS,
    LoadSample,
    host_load,
    parse_load_sample,
)
from interop_runner.remote.executor import Executor, LocalExecutor

SAMPLE_TIMEOUT_S = 10.0
MANAGEMENT = "management"  # the key of the management host (the runner's own machine)

Sample = LoadSample | str  # a sample, or why there is none


def sample(executor: Executor) -> Sample:
    """One load sample of the host behind ``executor``, or the reason it could not be read."""
    try:
        res = executor.run(["bash", "-c", HOST_LOAD_SCRIPT], timeout=SAMPLE_TIMEOUT_S,
                           check=False)
    except ExecutorError as exc:
        return f"not read: {exc}"
    if not res.ok:
        return f"not read: bash exited {res.exit_code}: {res.stderr.strip()[:200]}"
    try:
        return parse_load_sample(res.stdout)
    except ParseError as exc:
        return f"not read: {exc.reason}"


class HostLoad:
    """Samples the hosts (``executors``: name -> executor; the management host is added)
    when created and again at :meth:`finish`."""

    def __init__(self, executors: Sequence[tuple[str, Executor]]) -> None:
        self.executors = [*executors, (MANAGEMENT, LocalExecutor(MANAGEMENT))]
        self.before = self._samples()

    def _samples(self) -> dict[str, Sample]:
        """A sample of every host, one after the other: hosts that share a kernel (the
        namespace testbed's nodes) would count each other's samplers as other work."""
        return {name: sample(ex) for name, ex in self.executors}

    def finish(self) -> tuple[dict[str, Any], bool | None]:
        """``host_load`` (per host its load over the interval, and the thresholds) and
        ``host_busy`` (True: some host was busy; False: none was; None: none could be
        read)."""
        after = self._samples()
        nodes = {name: entry(self.before[name], after[name]) for name, _ in self.executors}
        verdicts = [e["busy"] for e in nodes.values() if e["busy"] is not None]
        busy = any(verdicts) if verdicts else None
        return {"nodes": nodes, "thresholds": dict(THRESHOLDS)}, busy


def entry(before: Sample, after: Sample) -> dict[str, Any]:
    """One host's load over the interval, or an entry of NAs naming what was not read."""
    if isinstance(before, str) or isinstance(after, str):
        reasons = [f"{when}: {s}" for when, s in (("before", before), ("after", after))
                   if isinstance(s, str)]
        return {"busy": None, "busy_reasons": [], "notes": reasons}
    return host_load(before, after)
