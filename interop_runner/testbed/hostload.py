"""How busy the hosts were during an attempt (or a path's calibration): a sample of each
node's load before and after (``/proc/loadavg``, ``/proc/stat``, ``/proc/pressure/cpu``,
read on the node through its executor), and of the management host's, turned into the
record's ``host_load`` and the flag ``host_busy`` (:mod:`interop_runner.parsers.hostload`;
thresholds and why: docs/paths.md, "A busy host").

A node that cannot be read has its entry with ``busy: None`` and the reason in ``notes``;
nothing here stops a campaign (a node that is really gone stops it elsewhere).
"""

from __future__ import annotations

import weakref
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
_MANAGEMENT_EXECUTOR = LocalExecutor(MANAGEMENT)
# each executor's kernel (boot id) once a sample said it: hosts on one kernel are sampled
# once per round (the namespace testbed's nodes are the management host's kernel)
_KERNELS: weakref.WeakKeyDictionary[Executor, str] = weakref.WeakKeyDictionary()


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
        self.executors = [(MANAGEMENT, _MANAGEMENT_EXECUTOR), *executors]
        self.before = self._samples()

    def _samples(self) -> dict[str, Sample]:
        """A sample of every host, one after the other (samplers at once on one kernel
        would count each other as other work); a host known to share the kernel of one
        sampled before it in this round gets that sample (the same /proc)."""
        taken: dict[str, Sample] = {}
        by_kernel: dict[str, LoadSample] = {}
        for name, ex in self.executors:
            kernel = _KERNELS.get(ex)
            shared = by_kernel.get(kernel) if kernel is not None else None
            got: Sample = shared if shared is not None else sample(ex)
            if shared is None and isinstance(got, LoadSample) and got.boot_id is not None:
                _KERNELS[ex] = got.boot_id  # known from the next sample on
                by_kernel.setdefault(got.boot_id, got)
            taken[name] = got
        return taken

    def finish(self) -> tuple[dict[str, Any], bool | None]:
        """``host_load`` (per host its load over the interval, and the thresholds) and
        ``host_busy`` (True: some host was busy; False: none was; None: none could be
        read)."""
        after = self._samples()
        nodes: dict[str, Any] = {}
        first: dict[tuple[int, int], str] = {}  # the first host of a pair of samples
        for name, _ in self.executors:
            nodes[name] = entry(self.before[name], after[name])
            owner = first.setdefault((id(self.before[name]), id(after[name])), name)
            if owner != name:  # both samples another host's (one kernel): said where from
                nodes[name]["notes"] = [*nodes[name]["notes"],
                                        f"the kernel of {owner}: its sample"]
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
