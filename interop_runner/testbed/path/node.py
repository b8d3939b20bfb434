"""The node a path is built on (the router, or the server without one): its backend probe,
the delay line's build, applying a :class:`~.rules.PathSetup` with every undo journaled, the
path's counters, and removing it.

The undo commands go to the node's path journal (``<workdir>/path-restore.sh``, apart from
its knob journal), the delay lines are background process groups in its process journal: so a
runner killed with a path active leaves nothing that the next campaign's start or ``run.py
testbed restore`` does not remove.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass, field
from typing import Any

from interop_runner.errors import ExecutorError, PathError
from interop_runner.paths import PACKAGE_DIR
from interop_runner.remote.executor import Background
from interop_runner.testbed.knobs import Journal
from interop_runner.testbed.node import Node
from interop_runner.testbed.path.rules import (
    CHAIN,
    Backend,
    DelayLineSpec,
    PathSetup,
    Placement,
)

DELAYLINE_SOURCE = PACKAGE_DIR / "testbed" / "path" / "delayline.c"
READY_TIMEOUT_S = 10.0
# SCHED_FIFO priority of the delay lines: above every normal task, so other work on a busy
# host cannot hold a release back, and below the kernel's threaded interrupt handlers (50),
# which deliver the packets it releases (docs/paths.md, "A busy host")
RT_PRIORITY = 10
# the netem probe: on lo of a throw-away network namespace, nothing real is touched
_NETEM_PROBE = ["unshare", "-n", "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay",
                "1ms"]
# the bottleneck's qdisc every $1 s: one line "$EPOCHREALTIME" then its `tc -s -j` JSON (bash:
# no fork for the clock, `read -t` on an idle pipe as the sleep)
_SAMPLER = ('exec 3<> <(:); while :; do echo "$EPOCHREALTIME"; tc -s -j qdisc show dev "$0"; '
            'read -r -t "$1" -u 3 || :; done')
SAMPLE_INTERVAL_S = 0.05
_NFQUEUE_PROBE = ["unshare", "-n", "iptables", "-w", "-A", "OUTPUT", "-j", "NFQUEUE",
                  "--queue-num", "0"]
# wait until a file has a line starting with $1 (the delay line's "ready"), at most $2 s
_WAIT_READY = ('n=0; until grep -q "^$1" "$0" 2>/dev/null; do n=$((n+1)); '
               '[ "$n" -lt "$(($2 * 100))" ] || exit 1; sleep 0.01; done')
# ask each delay line (the child of its group's launcher shell, pid = pgid) to write its
# stats now, wait until its stats file changed (at most 1 s: it also writes every second),
# print "<file>\t<json>" per line (the JSON on one line)
_FRESH_STATS = ('for p in "$@"; do f=${p#*:}; pg=${p%%:*}; m=$(stat -c %y "$f" 2>/dev/null); '
                'pkill -USR1 -P "$pg" 2>/dev/null; n=0; while [ "$n" -lt 100 ] && '
                '[ "$(stat -c %y "$f" 2>/dev/null)" = "$m" ]; do sleep 0.01; n=$((n+1)); '
                'done; printf "%s\\t" "$f"; tr -d "\\n" <"$f" 2>/dev/null || printf null; '
                'echo; done')


@dataclass
class RunningLine:
    """A delay line started for the active path."""

    spec: DelayLineSpec
    proc: Background
    stats: str  # its stats file on the node


@dataclass
class ActivePath:
    """The path currently built on the node."""

    key: str
    setup: PathSetup
    lines: list[RunningLine] = field(default_factory=list)


class PathNode:
    """Builds paths on one node (``node``) at ``placement``."""

    def __init__(self, node: Node, placement: Placement, journal: Journal) -> None:
        self.node, self.placement, self.journal = node, placement, journal
        self.active: ActivePath | None = None
        self._program: str | None = None

    @property
    def workdir(self) -> str:
        """Where the delay line, its stats and logs live on the node."""
        return f"{self.node.cfg.workdir}/path"

    def _run(self, argv: list[str], timeout: float = 60.0, check: bool = True) -> str:
        try:
            return self.node.run(argv, timeout=timeout, check=check).stdout
        except ExecutorError as exc:
            raise PathError(f"{self.node.name}: {exc}") from None

    # -- backend -------------------------------------------------------------------------------
    def probe_backend(self, wanted: str, needs_delay_line: bool) -> Backend:
        """The backend this node uses for a path (:func:`probe_backend`)."""
        return probe_backend(self.node, wanted, needs_delay_line)

    def delay_line(self) -> str:
        """The delay line's binary on the node, compiled there from ``delayline.c`` when its
        source changed (its SHA-256 is the stamp next to the binary)."""
        if self._program is not None:
            return self._program
        source = DELAYLINE_SOURCE.read_bytes()
        digest = hashlib.sha256(source).hexdigest()
        program = f"{self.workdir}/qir-delayline"
        stamp = self._run(["sh", "-c", 'cat "$0.sha256" 2>/dev/null || true', program]).strip()
        if stamp != digest:
            self._run(["mkdir", "-p", self.workdir])
            self.node.executor.write_bytes(f"{self.workdir}/delayline.c", source)
            try:
                self.node.run(["gcc", "-O2", "-Wall", "-Wextra", "-o", program,
                               f"{self.workdir}/delayline.c", "-lnetfilter_queue", "-lm"],
                              timeout=300)
            except ExecutorError as exc:
                raise PathError(f"{self.node.name}: cannot build the delay line (needs gcc "
                                f"and libnetfilter-queue-dev: pos_scripts/prepare-node.sh "
                                f"--role router): {exc}") from None
            self.node.executor.write_text(f"{program}.sha256", digest + "\n")
        self._program = program
        return program

    # -- apply / remove ------------------------------------------------------------------------
    def apply(self, key: str, setup: PathSetup) -> ActivePath:
        """Build ``setup`` (the previous path removed first); delay lines start before the
        rules that queue packets to them, so no packet meets an empty queue."""
        if self.active is not None:
            self.remove()
        active = ActivePath(key, setup)
        self.active = active
        self._run(["mkdir", "-p", self.workdir])
        for spec in setup.delay_lines:
            active.lines.append(self._start_line(spec))
        for step in setup.steps:
            if step.undo is not None:
                self.journal.add(list(step.undo))
            if step.argv is not None:
                self._run(list(step.argv))
        return active

    def _start_line(self, spec: DelayLineSpec) -> RunningLine:
        base = f"{self.workdir}/line-{spec.direction}"
        stats = f"{base}.stats.json"
        self._run(["rm", "-f", stats, f"{base}.out", f"{base}.err"])
        argv = [*spec.args, "--stats", stats, "--rt-priority", str(RT_PRIORITY)]
        proc = self.node.executor.start(argv, stdout=f"{base}.out", stderr=f"{base}.err")
        ok = self.node.run(["sh", "-c", _WAIT_READY, f"{base}.out", "ready",
                            str(int(READY_TIMEOUT_S))], timeout=READY_TIMEOUT_S + 10,
                           check=False).ok
        if not ok:
            err = self._run(["sh", "-c", 'tail -n 3 "$0" 2>/dev/null || true', f"{base}.err"])
            self.node.executor.stop(proc)
            raise PathError(f"{self.node.name}: the {spec.direction} delay line did not start "
                            f"({shlex.join(argv)}): {err.strip() or 'no output'}")
        return RunningLine(spec, proc, stats)

    def remove(self) -> list[str]:
        """Remove the active path: undo the journaled changes, then stop the delay lines
        (they release what they still hold); return the undo lines that failed."""
        failed = self.journal.replay()
        if self.active is not None:
            self.node.executor.stop_many([line.proc for line in self.active.lines])
        self.active = None
        return failed

    # -- observing -----------------------------------------------------------------------------
    def observe(self, directory: str, captures: bool) -> list[Background]:
        """Start what watches the bottleneck during one attempt, writing below ``directory``
        on the node: the qdisc sampler (``qdisc-samples.txt``) and, with ``captures``,
        tcpdump on both sides of the router's queue (``bottleneck-in.pcap``: the data
        direction arriving, ``bottleneck-out.pcap``: leaving after the queue)."""
        self._run(["mkdir", "-p", directory])
        ex = self.node.executor
        procs = [ex.start(["bash", "-c", _SAMPLER, self.placement.data_if,
                           str(SAMPLE_INTERVAL_S)], stdout=f"{directory}/qdisc-samples.txt",
                          stderr=f"{directory}/qdisc-samples.err")]
        if captures and self.placement.kind == "router":
            # the side leaving the queue first (and stopped last), so that no packet at
            # either edge looks dropped or unmatched (analysis/frames/bottleneck.py)
            for name, dev, way in (("out", self.placement.data_if, "out"),
                                   ("in", self.placement.reverse_if, "in")):
                procs.append(ex.start(
                    ["tcpdump", "-i", dev, "-Q", way, "-s", "128", "-n", "--immediate-mode",
                     "--time-stamp-precision", "nano", "-w",
                     f"{directory}/bottleneck-{name}.pcap"],
                    stdout=f"{directory}/tcpdump-{name}.out",
                    stderr=f"{directory}/tcpdump-{name}.err"))
                # tcpdump says "listening on" once it captures
                self._run(["sh", "-c", _WAIT_READY, f"{directory}/tcpdump-{name}.err",
                           "tcpdump: listening", str(int(READY_TIMEOUT_S))],
                          timeout=READY_TIMEOUT_S + 10)
        return procs

    def stop_observing(self, procs: list[Background]) -> None:
        """Stop the attempt's sampler and captures, the capture of the queue's exit last
        (tcpdump writes what it holds on TERM)."""
        ex = self.node.executor
        ex.stop_many([p for p in procs if "bottleneck-out.pcap" not in " ".join(p.argv)],
                     grace=5)
        ex.stop_many([p for p in procs if "bottleneck-out.pcap" in " ".join(p.argv)], grace=5)

    def lines_alive(self) -> dict[str, bool]:
        """Whether each delay line of the active path still runs, by direction."""
        if self.active is None:
            return {}
        return {line.spec.direction: self.node.executor.alive(line.proc)
                for line in self.active.lines}

    def counters(self) -> dict[str, Any]:
        """The path's counters now: the data direction's bottleneck qdisc, the iptables rules
        of the path's chain, each delay line's stats (fresh: signalled and waited for)."""
        out: dict[str, Any] = {"qdisc": self._qdiscs(), "iptables": self._rules()}
        if self.active is not None and self.active.lines:
            out["delay_lines"] = self._line_stats(self.active.lines)
        return out

    def scheduling(self, counters: dict[str, Any] | None = None) -> dict[str, Any]:
        """How each delay line of the active path is scheduled, by direction: ``sched``
        (``fifo`` or ``other``), the ``rt_priority`` asked for and ``sched_error`` (why
        SCHED_FIFO was refused; None: it was not), from its stats (``counters``: taken
        before, else read now); None for a line whose stats could not be read."""
        if self.active is None or not self.active.lines:
            return {}
        lines = (counters if counters is not None else self.counters()).get("delay_lines")
        out: dict[str, Any] = {}
        for direction, stats in (lines or {}).items():
            out[direction] = ({k: stats.get(k) for k in ("sched", "rt_priority", "sched_error")}
                              if isinstance(stats, dict) else None)
        return out

    def _qdiscs(self) -> list[dict[str, Any]]:
        text = self._run(["tc", "-s", "-j", "qdisc", "show", "dev", self.placement.data_if])
        try:
            data = json.loads(text or "[]")
        except ValueError:
            return []
        return [q for q in data if isinstance(q, dict)]

    def _rules(self) -> str:
        return self._run(["sh", "-c", f'iptables -w -L {CHAIN} -n -v -x 2>/dev/null || true'])

    def _line_stats(self, lines: list[RunningLine]) -> dict[str, Any]:
        pids = [f"{line.proc.pgid}:{line.stats}" for line in lines]
        text = self._run(["sh", "-c", _FRESH_STATS, "stats", *pids], timeout=30)
        by_file: dict[str, Any] = {}
        for row in text.splitlines():
            if "\t" in row:
                name, _, body = row.partition("\t")
                try:
                    by_file[name] = json.loads(body)
                except ValueError:
                    by_file[name] = None
        return {line.spec.direction: by_file.get(line.stats) for line in lines}


def probe_backend(node: Node, wanted: str, needs_delay_line: bool) -> Backend:
    """The backend to use on ``node``: ``wanted`` if the node has it (else PathError naming
    what is missing), or for ``auto`` netem where the kernel has it and the path needs no
    delay line, else nfqueue. Probed in throw-away network namespaces (``unshare -n``)."""
    def has(argv: list[str]) -> bool:
        return node.run(argv, timeout=30, check=False).ok

    netem = wanted in ("auto", "netem") and has(_NETEM_PROBE)
    if wanted == "netem" and not netem:
        raise PathError(f"{node.name}: path.backend netem: this kernel has no netem (use "
                        "backend: nfqueue or auto)")
    if netem and not needs_delay_line:
        return "netem"
    if not has(_NFQUEUE_PROBE):
        raise PathError(f"{node.name}: path.backend nfqueue: iptables has no NFQUEUE target "
                        "here (xt_NFQUEUE)")
    return "nfqueue"
