"""What the caller of a campaign wires in: its hooks (what to tell, whom to ask, how a node is
reached) and the progress display. The measure layer calls them; it never imports the
analysis or the command line that provide them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Mapping, Protocol, Sequence, TypeVar

from interop_runner.config.testbed import NodeConfig
from interop_runner.measure.plan import PlannedRun
from interop_runner.storage.run_record import RunRecord
from interop_runner.testbed.node import Node

Item = TypeVar("Item")
OnRecord = Callable[[RunRecord], None]
# (node name, its config, campaign id, command timeout) -> a connected node
Connect = Callable[[str, NodeConfig, str, float], Node]
# the cells (server, client as written) whose A/B verdict is still open, from the records
# stored in a campaign directory
Undecided = Callable[[Path], set[tuple[str, str]]]


class Progress(Protocol):
    """Shows the campaign's progress: passes ``items`` on (one per finished run) while the
    campaign goes through ``runs`` (an adaptive round hands in its own runs)."""

    def __call__(self, items: Iterator[Item], runs: Sequence[PlannedRun], /
                 ) -> Iterator[Item]: ...


@dataclass(frozen=True)
class CampaignHooks:
    """The callbacks of a campaign; each default does nothing (or connects over SSH)."""

    # called with (message, log tail) when an implementation's setup fails
    on_setup_error: Callable[[str, str], None] | None = None
    # adaptive A/B: which cells need another round (the CLI wires in the analysis)
    undecided: Undecided | None = None
    # called with (campaign directory, stored run.json) from the deferred-work thread, in
    # order (several testbeds: in the worker process that stored it)
    on_stored: Callable[[Path, Path], None] | None = None
    # host keys accepted on first use by connections made before the campaign, per testbed
    trusted_before: Mapping[str, list[dict[str, str]]] = field(default_factory=dict)
    # how a node is reached: SSH (tests hand in nodes with a LocalExecutor)
    connect: Connect = Node.connect
