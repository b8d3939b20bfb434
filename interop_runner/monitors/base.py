"""What a monitor is: how it starts on a node, what files it leaves, which columns it yields.

Pure definitions (no command is run here): :mod:`interop_runner.measure.monitor_session` runs
the commands on a node, the loaders in :mod:`interop_runner.analysis` call the extractors on
the files. One :class:`Monitor` object per monitor lives in :mod:`.registry`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np

# S_TIME_FORMAT=ISO makes sysstat print ISO dates; TZ=UTC makes its clock times UTC, which is
# what the parsers assume (mpstat JSON has only a clock, no epoch).
SYSSTAT_ENV = {"S_TIME_FORMAT": "ISO", "LC_ALL": "C", "TZ": "UTC"}
ROLES = ("server", "client")


@dataclass(frozen=True)
class SnapshotCommand:
    """A command whose output is saved before and after the transfer
    (``<file>-before.txt``, ``<file>-after.txt``)."""

    file: str
    argv: tuple[str, ...]


@dataclass(frozen=True)
class SeriesCommand:
    """A background command running during the transfer (stopped with ``stop_signal``)."""

    file: str
    """Output goes to ``<file>`` when it has a suffix, else ``<file>.txt``."""
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    stop_signal: str = "INT"
    stderr: str | None = None
    """Its stderr file (default ``<file stem>.err``)."""
    ready_marker: str | None = None
    """Text its stderr shows once it runs; the transfer waits for it (tcpdump: listening)."""

    @property
    def stdout_name(self) -> str:
        """The file its standard output goes to."""
        return self.file if "." in self.file else f"{self.file}.txt"

    @property
    def stderr_name(self) -> str:
        """The file its standard error goes to."""
        return self.stderr or f"{self.file.split('.')[0]}.err"


@dataclass(frozen=True)
class StartContext:
    """What a monitor's commands depend on, on one node for one attempt."""

    iface: str
    port: int = 4433
    perf_event: str | None = None
    perf_frequency: int = 99
    perf_call_graph: str = "fp"
    tcpdump_snaplen: int = 96
    tcpdump_filter: str | None = None
    pids: str | None = None
    """Comma-separated PIDs to follow (the server's process group), when known."""


class SideFiles(Protocol):
    """Read access to one role's files of one attempt, by the monitor's file names."""

    def text(self, name: str) -> str | None:
        """The file's text, ``None`` when it does not exist."""

    def exists(self, name: str) -> bool:
        """True when the file exists."""

    def path(self, name: str) -> str:
        """Where the file is (for extractors that stream a file)."""


@dataclass(frozen=True)
class SideInput:
    """Everything an extractor sees of one role of one attempt."""

    role: str
    files: SideFiles
    window: tuple[float, float] | None
    """The transfer window (epoch seconds), ``None`` when the transfer never started."""
    implementation: str | None = None
    run: dict[str, Any] = field(default_factory=dict)
    """The attempt's record (run.json, current schema)."""
    counter_format: str = "nstat"
    """``nstat`` (``nstat -asz``) or ``netstat-s`` (``netstat -s``, predecessor trees)."""
    snapshot_names: tuple[str, str] = ("before", "after")
    """Suffixes of the two snapshot files (predecessor trees: ``start``/``stop``)."""


@dataclass(frozen=True)
class Column:
    """One column of the results frame that a monitor yields (per role: ``<role>_<name>``)."""

    name: str
    """Without the role prefix; a family's name holds ``<counter>``."""
    unit: str
    source: str
    description: str = ""
    family: bool = False
    """One column per counter the tool reports (driver-dependent): the name is a pattern and
    the columns are those any attempt of the loaded campaigns reported."""

    def full_name(self, role: str) -> str:
        """The frame column for ``role``."""
        return f"{role}_{self.name}"


class ValueBlock(Mapping[str, float]):
    """Many values of one extractor as a names tuple and a parallel vector; a ``None``
    value is a value the tool did not produce (not in the mapping). Blocks of snapshots
    with one layout share their ``names`` tuple, so whatever is derived from the names
    (prefixed column names, column positions) is computed once per layout."""

    __slots__ = ("names", "vector", "complete", "_dict")

    def __init__(self, names: tuple[str, ...], vector: Sequence[float | None] | np.ndarray,
                 complete: bool) -> None:
        self.names = names
        self.vector = vector
        """``vector[i]`` is the value of ``names[i]``."""
        self.complete = complete
        """True when no value is ``None``."""
        self._dict: dict[str, float] | None = None

    def _mapping(self) -> dict[str, float]:
        if self._dict is None:
            self._dict = {n: v for n, v in zip(self.names, self.vector) if v is not None}
        return self._dict

    def __getitem__(self, name: str) -> float:
        return self._mapping()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._mapping())

    def __len__(self) -> int:
        return len(self._mapping())


Extractor = Callable[[SideInput], Mapping[str, float]]
"""Monitor files of one role -> values by column name WITHOUT the role prefix (a dict, or a
:class:`ValueBlock` for many values). Raises ``ParseError`` (or ``OSError``/``ValueError``)
with the reason when the files are unusable; a value the tool did not produce is simply
left out (NA in the frame)."""


class NoValue(Exception):
    """The monitor's files are fine but hold no value for this attempt (the message says
    why, e.g. no sample inside the transfer window); its columns stay NA."""


def _no_commands(ctx: StartContext) -> list[SeriesCommand]:
    return []


def _no_snapshots(iface: str) -> list[SnapshotCommand]:
    return []


@dataclass(frozen=True)
class Monitor:
    """One monitor: the tools it needs, how it starts, what it leaves, what it yields."""

    name: str
    tools: tuple[str, ...]
    description: str
    files: tuple[str, ...] = ()
    """The files it leaves in ``<attempt>/<role>/`` (``*`` stands for any name)."""
    columns: tuple[Column, ...] = ()
    snapshots: Callable[[str], list[SnapshotCommand]] = _no_snapshots
    series: Callable[[StartContext], list[SeriesCommand]] = _no_commands
    extract: Extractor | None = None
    roles: tuple[str, ...] = ROLES
    """The roles it yields columns for."""
    always: bool = False
    """Runs in every attempt without being asked for (the CPU time of both sides)."""

    def column_names(self, role: str) -> list[str]:
        """The fixed (non-family) frame columns it yields for ``role``."""
        if role not in self.roles:
            return []
        return [c.full_name(role) for c in self.columns if not c.family]

