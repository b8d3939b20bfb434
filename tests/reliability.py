"""Measured reliability rows of the fault-injection suite (tests/test_faults.py).

Every fault test adds one :class:`Row` per fault it injected, with counts it computed from the
results directory, the nodes and the host; the last test of the module renders them as
docs/reliability.md (written with ``QIR_WRITE_RELIABILITY=1``, else compared to the committed
file). Nothing in a row is typed in by hand except the fault's name and the configured
reaction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "reliability.md"

HEADER = """# Reliability: faults injected on the local testbed

Produced by `tests/test_faults.py` (real sshd per node, real quic-go, a 32 MiB file over a
200 Mbit/s rate limit, host knobs `knobs.rmem: 2x` and `server_knobs.rate: 200mbit` set for
every attempt so that their restore is exercised). Each test injects one fault into a running
campaign of 3 repetitions (mid-transfer faults hit repetition 2), then checks and counts:

- **records lost**: planned repetitions without exactly one `ok` record after the resume, plus
  records duplicated, shifted (stored under another repetition/attempt than they say) or
  unexpected, plus a faulted attempt without a record of its own (status and reason);
- **processes left**: processes other than sshd in the two node namespaces after the
  faulted session ended (after the resume for the SIGKILLed runner, which cannot clean up
  itself: the next session does);
- **knobs not restored**: host items (buffer sysctls; per node MTU, offloads, qdisc, iptables;
  the restore journals) that differ from before the campaign, at the same moment;
- **resumed**: `run.py run --resume DIR` then ran every repetition without an `ok` record and
  ended with status `finished`, the nodes clean and the host as before.

Regenerate with `QIR_WRITE_RELIABILITY=1 pytest tests/test_faults.py` (as root, on the local
testbed); without the variable the suite checks that this file is current.

What the runner does about faults:

- `on_error: continue` (default) records a failed or timed-out attempt and goes on;
  `on_error: stop` records it and stops the campaign (`campaign.json` status `stopped: <run>
  attempt <n> <status>: <reason>`, exit 1 with that line). An unreachable node always stops it.
- A dropped SSH connection is re-established with exponential backoff (6 tries, 0.5 s doubling
  to 8 s, about 16 s); the command in flight is reported lost (its process group is killed
  after reconnecting) and its attempt recorded `failed` with the reason. When every try fails
  the run ends with one line naming the host.
- Every process group the runner starts on a node (server, samplers, the timed client) is
  noted in `<workdir>/procs` with its leader's start time until it is stopped; the next
  campaign start on that node kills the groups still provably the same and removes that
  campaign's scratch, then replays the knob journals. An attempt directory without a record
  (the runner died in it) gets one on resume (`interrupted: true`).
- `--resume` runs again every repetition without an `ok` (or `unsupported`) record, beside the
  stored attempts, which are never rewritten.
- One runner per node directory: a campaign holds a lease on each node (`flock` on
  `<workdir>/lease`, kept by a process reading the runner's SSH channel, so it ends with the
  connection, also when the runner is SIGKILLed). Another `run` or `testbed restore` there
  stops with one line naming the holder, so the journals above are only ever acted on for a
  runner that is gone.

| fault | reaction (on_error) | what happened | records lost | processes left | knobs not restored | resumed |
|---|---|---|---|---|---|---|
"""  # noqa: E501 - generated Markdown (compared with the committed file): a table row is one line


@dataclass
class Row:
    """One fault and what the suite measured after it."""

    fault: str
    reaction: str
    happened: str
    records_lost: int
    processes_left: int
    knobs_not_restored: int
    resumed: bool

    def markdown(self) -> str:
        """The row as a Markdown table line."""
        cells = [self.fault, self.reaction, self.happened.replace("|", "\\|"),
                 str(self.records_lost), str(self.processes_left),
                 str(self.knobs_not_restored), "yes" if self.resumed else "no"]
        return "| " + " | ".join(cells) + " |"


@dataclass
class Collector:
    """The rows of one test session, in the order of ``order`` (the suite's fault list)."""

    order: list[str]
    rows: dict[str, Row] = field(default_factory=dict)

    def add(self, row: Row) -> None:
        """Record a fault's row (a fault measured twice keeps the last measurement)."""
        if row.fault not in self.order:
            raise KeyError(f"unknown fault {row.fault!r}: add it to the suite's fault list")
        self.rows[row.fault] = row

    def missing(self) -> list[str]:
        """Faults of the list without a measured row (their test did not run or failed)."""
        return [f for f in self.order if f not in self.rows]

    def render(self) -> str:
        """docs/reliability.md: the header and one line per fault, in list order."""
        return HEADER + "".join(self.rows[f].markdown() + "\n" for f in self.order
                                if f in self.rows)
