"""A flow's workload: which way its data go, how much, on how many streams and connections.

``workload: {kind: download, size: 8GiB}`` is the default (the client downloads one file of
``file_size`` bytes on one stream of one connection, the paper's measurement). ``upload`` sends
the same amount from the client to the server, ``bidirectional`` both at once. ``streams: N``
runs N bulk streams at once in each connection, ``connections: M`` M parallel connections of
the client; every stream moves ``size`` bytes in each direction of the workload (secnetperf's
and iperf3's rule: the amount is per stream), so an attempt moves
``size x streams x connections`` bytes per direction.

The harness gets it as ``WORKLOAD``, ``STREAMS`` and ``CONNECTIONS`` (docs/implementations.md,
"Workloads"); which kinds and how many streams and connections a harness runs is its
``meta.yml`` ``workloads`` (:class:`WorkloadSupport`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from interop_runner.config.strict import Strict
from interop_runner.config.written import SECONDS_UNITS, SIZE_UNITS, parse_duration, refuse_bare
from interop_runner.units import positive_size

WorkloadKind = Literal["download", "upload", "bidirectional"]
Direction = Literal["download", "upload"]
KINDS: tuple[WorkloadKind, ...] = ("download", "upload", "bidirectional")
# the documented limits: each stream of each direction is a file on a node's tmpfs, each
# connection a socket the monitors follow
MAX_STREAMS = 64
MAX_CONNECTIONS = 16
# protocols whose requests carry no body, so nothing can be uploaded over them (hq-interop:
# "GET /path\r\n" and FIN)
BODYLESS_ALPNS = ("hq-interop",)
_DIRECTIONS: dict[str, tuple[Direction, ...]] = {
    "download": ("download",), "upload": ("upload",), "bidirectional": ("download", "upload")}


class Workload(Strict):
    """``workload:`` of a campaign: kind, size per stream, streams, connections."""

    kind: WorkloadKind = "download"
    # bytes each stream moves in each direction; None: the campaign's `file_size`
    size: int | None = None
    # seconds after which the client is stopped (what moved by then counts, verified as a
    # prefix); with a size, whichever comes first ends it. None: until the size is moved
    duration: float | None = None
    streams: int = Field(1, ge=1, le=MAX_STREAMS)
    connections: int = Field(1, ge=1, le=MAX_CONNECTIONS)

    @field_validator("size", mode="before")
    @classmethod
    def _size(cls, value: Any, info: ValidationInfo) -> int | None:
        refuse_bare(value, info, SIZE_UNITS)
        return None if value is None else positive_size(value)

    @field_validator("duration", mode="before")
    @classmethod
    def _duration(cls, value: Any, info: ValidationInfo) -> float | None:
        refuse_bare(value, info, SECONDS_UNITS)
        return parse_duration(value)

    @property
    def directions(self) -> tuple[Direction, ...]:
        """The directions its data go: download (server to client), upload, or both."""
        return _DIRECTIONS[self.kind]

    @property
    def uploads(self) -> bool:
        """Whether the client sends data (upload, bidirectional)."""
        return "upload" in self.directions

    @property
    def downloads(self) -> bool:
        """Whether the server sends data (download, bidirectional)."""
        return "download" in self.directions

    @property
    def is_default(self) -> bool:
        """One download on one stream of one connection: what a QIR image runs."""
        return self.kind == "download" and self.streams == 1 and self.connections == 1 \
            and self.duration is None

    @property
    def label(self) -> str:
        """Short label for tables and plots (:func:`workload_label`)."""
        return workload_label(self.kind, self.streams, self.connections)

    def env(self) -> dict[str, str]:
        """The harness's ``WORKLOAD``, ``STREAMS`` and ``CONNECTIONS``."""
        return {"WORKLOAD": self.kind, "STREAMS": str(self.streams),
                "CONNECTIONS": str(self.connections)}


#: the label of the default workload (one download on one stream of one connection): what
#: every record from before workloads has; compare and history leave it out of their keys
DEFAULT_WORKLOAD_LABEL = "download"


def workload_label(kind: Any, streams: Any, connections: Any) -> str:
    """``upload``, ``download 4x2`` (streams x connections, when more than one of either)."""
    shape = "" if streams == connections == 1 else f" {streams}x{connections}"
    return f"{kind}{shape}"


class WorkloadSupport(BaseModel):
    """``workloads:`` in meta.yml: what the harness runs (default: one download on one
    stream of one connection, what every QIR endpoint runs)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kinds: list[WorkloadKind] = ["download"]
    streams: int = Field(1, ge=1, le=MAX_STREAMS)  # the most streams per connection it runs
    connections: int = Field(1, ge=1, le=MAX_CONNECTIONS)
    note: str = ""  # why it offers no more (the support table shows it)

    @property
    def summary(self) -> str:
        """``download, upload (streams <= 64, connections <= 16)``."""
        return f"{', '.join(self.kinds)} (streams <= {self.streams}, connections <= " \
               f"{self.connections})"

    def why_not(self, workload: Workload, name: str) -> str | None:
        """Why implementation ``name`` cannot run ``workload`` (None: it can)."""
        if workload.kind not in self.kinds:
            return f"{name} does not run {workload.kind} workloads (it runs: " \
                   f"{', '.join(self.kinds)})" + (f": {self.note}" if self.note else "")
        for what, asked, most in (("streams", workload.streams, self.streams),
                                  ("connections", workload.connections, self.connections)):
            if asked > most:
                return f"{name} runs at most {most} {what} (asked for {asked})"
        return None


@dataclass(frozen=True)
class Transfer:
    """One file one stream of one connection moves in one direction."""

    direction: Direction
    connection: int  # from 0
    stream: int  # from 0, within its connection and direction
    name: str  # the file's name at both ends (the URL's last path segment)


def transfer_names(file_name: str, count: int) -> list[str]:
    """The names of ``count`` transfers of one direction: the file's own name for one,
    ``<stem>-<i>of<count><ext>`` (hard links to it) for several."""
    if count == 1:
        return [file_name]
    stem, dot, ext = file_name.rpartition(".")
    stem, ext = (stem, dot + ext) if dot else (file_name, "")
    return [f"{stem}-{i + 1}of{count}{ext}" for i in range(count)]


def transfers(workload: Workload, file_name: str, upload_name: str) -> list[Transfer]:
    """Every transfer of ``workload``: per direction, connection by connection, stream by
    stream (the order of ``REQUESTS`` and ``UPLOAD_REQUESTS``)."""
    count = workload.streams * workload.connections
    out = []
    for direction in workload.directions:
        names = transfer_names(file_name if direction == "download" else upload_name, count)
        out += [Transfer(direction, i // workload.streams, i % workload.streams, name)
                for i, name in enumerate(names)]
    return out
