"""A campaign's ``flows:`` list: several flows that share the path's bottleneck in one attempt.

A flow is either a QUIC (or any registry) implementation pair, ``{server: quiche, client:
quiche}``, or a kernel TCP reference flow, ``{tcp: cubic}`` (Debian's iperf3 with ``-C``, its
data in the same direction as the QUIC data: from the server node to the client node). Each
has its own congestion control and standard parameters, a start offset, and a size or a
duration (the client is stopped at the duration and what it received by then counts). On a
two-link path a flow may be pinned to one link (``link: 0`` or ``1``) or split over both
(``link: both``, the default there). docs/flows.md.
"""

from __future__ import annotations

import re
from typing import Any, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from interop_runner.config.params import CongestionControl, StandardParams
from interop_runner.config.workload import Workload
from interop_runner.config.written import (
    MAX_SECONDS,
    SECONDS_UNITS,
    SIZE_UNITS,
    parse_duration,
    refuse_bare,
)
from interop_runner.units import parse_seconds, positive_size

MAX_FLOWS = 32  # ports port .. port + 31 on each node; each flow's processes on both nodes
FlowKind = Literal["quic", "tcp"]
#: the implementation (implementations/tcp) both sides of a kernel TCP reference flow run
KERNEL_TCP = "tcp"
_LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,63}$")
_PIN = re.compile(r"@([01])(?=#\d+$|$)")  # a label's link pin: quic-go/reno@0, tcp/cubic@1#2


def written_seconds(value: Any, info: ValidationInfo) -> float:
    """A timeout in seconds of at most a day, from ``30s``, ``2min``, ``500ms``; a bare
    number only in a stored document."""
    refuse_bare(value, info, SECONDS_UNITS)
    seconds = parse_seconds(value)
    if seconds > MAX_SECONDS:
        raise ValueError(f"{value!r} is more than a day ({MAX_SECONDS:.0f} s)")
    return seconds


class FlowConfig(BaseModel):
    """One flow of ``flows:``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    server: str | None = None
    client: str | None = None
    tcp: CongestionControl | None = None  # a kernel TCP reference flow with this CC
    congestion_control: CongestionControl | None = None  # None: the campaign's params
    params: dict[str, Any] = {}  # other standard parameters of this flow (params: keys)
    start: float = 0.0  # seconds after the attempt's first flow starts
    duration: float | None = None  # seconds; None: the campaign's `duration`, else the size
    size: int | None = None  # bytes to download (QUIC: a file of this size; TCP: iperf3 -n)
    link: Literal["both", "0", "1"] | None = None  # two-link paths: pinned or split
    label: str | None = None  # a name for the flow (default from what it is)
    # what the flow moves (docs/workloads.md): kind, streams, connections; its amount is the
    # flow's `size` or `duration` (QUIC: the campaign's `file_size` per stream). None: one
    # download, as before flows had workloads
    workload: Workload | None = None

    @field_validator("start", mode="before")
    @classmethod
    def _start(cls, value: Any, info: ValidationInfo) -> float:
        refuse_bare(value, info, SECONDS_UNITS)
        seconds = parse_seconds(value)
        if seconds < 0:
            raise ValueError("a start offset cannot be negative")
        if seconds > MAX_SECONDS:
            raise ValueError(f"{value!r} is more than a day")
        return seconds

    @field_validator("duration", mode="before")
    @classmethod
    def _duration(cls, value: Any, info: ValidationInfo) -> float | None:
        refuse_bare(value, info, SECONDS_UNITS)
        return parse_duration(value)

    @field_validator("size", mode="before")
    @classmethod
    def _size(cls, value: Any, info: ValidationInfo) -> int | None:
        refuse_bare(value, info, SIZE_UNITS)
        return None if value is None else positive_size(value)

    @field_validator("label")
    @classmethod
    def _label(cls, value: str | None) -> str | None:
        # a label names the flow's directory (with '/' made '-') and joins a set's name
        if value is not None and (not _LABEL_RE.match(value) or ".." in value):
            raise ValueError(f"{value[:80]!r}: use letters, digits, '.', '_', '-' or '/' (at "
                             "most 64, no '..')")
        return value

    @field_validator("link", mode="before")
    @classmethod
    def _link(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("params")
    @classmethod
    def _params(cls, value: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(value) - set(StandardParams.model_fields))
        if unknown:
            raise ValueError(f"unknown standard parameter {unknown[0]!r} (known: "
                             f"{', '.join(StandardParams.model_fields)})")
        if "congestion_control" in value:
            raise ValueError("give the congestion control as the flow's congestion_control")
        return value

    @model_validator(mode="after")
    def _what(self) -> "FlowConfig":
        quic = self.server is not None or self.client is not None
        if quic == (self.tcp is not None):
            raise ValueError("a flow is either {server: ..., client: ...} or {tcp: cubic|bbr|"
                             "reno}")
        if quic and (self.server is None or self.client is None):
            raise ValueError("a flow needs both `server` and `client`")
        if self.tcp is not None and (self.congestion_control is not None or self.params):
            raise ValueError("a tcp flow's congestion control is its `tcp:` value; it takes "
                             "no params")
        if quic and self.size is not None:
            raise ValueError("a QUIC flow downloads the campaign's file: set `file_size` "
                             "(`size` is for tcp flows) or give a duration")
        if self.size is not None and self.duration is not None:
            raise ValueError("give a flow a size or a duration, not both")
        if self.workload is not None:
            self._check_workload(self.workload)
        return self

    def _check_workload(self, w: Workload) -> None:
        """A flow's workload says what it moves; how much is the flow's own key."""
        if w.size is not None or w.duration is not None:
            raise ValueError("workload: a flow's amount is its `size` (tcp) or the campaign's "
                             "`file_size` (QUIC), its time its `duration`: not workload.size "
                             "or workload.duration")
        if self.tcp is not None and (w.kind == "bidirectional" or w.streams > 1
                                     or w.connections > 1):
            raise ValueError("workload: a tcp flow is one iperf3 connection one way: kind "
                             "download or upload, no streams or connections")

    @property
    def work(self) -> Workload:
        """The flow's workload (the default download when it gives none)."""
        return self.workload if self.workload is not None else Workload()

    @property
    def sides(self) -> tuple[str, str]:
        """The server and client implementation as written (kernel TCP's for a tcp flow)."""
        if self.server is not None and self.client is not None:
            return self.server, self.client
        return KERNEL_TCP, KERNEL_TCP

    @property
    def kind(self) -> FlowKind:
        """``quic`` (an implementation pair) or ``tcp`` (a kernel reference flow)."""
        return "tcp" if self.tcp is not None else "quic"

    def runs_for(self, default: float | None) -> float | None:
        """How long the flow runs: its duration, else (without a size) the campaign's
        ``default``; None when it runs to the end of its size or file."""
        return self.duration if self.duration is not None else (
            default if self.size is None else None)

    def cc(self, params: StandardParams, offered: Sequence[str] = ()) -> str:
        """The congestion control the flow runs: its own (``tcp:`` or
        ``congestion_control``), else the campaign's where its server (the data sender)
        ``offered`` it (or offers no choice), else, as a pair would, the server's first."""
        own = self.tcp or self.congestion_control
        if own is not None:
            return own
        cc = params.congestion_control
        return cc if not offered or cc in offered else offered[0]

    def std_params(self, params: StandardParams) -> StandardParams:
        """The campaign's standard parameters with this flow's own."""
        update = {**self.params, "congestion_control": self.cc(params)}
        return StandardParams.model_validate({**params.model_dump(), **update})

    def default_label(self, params: StandardParams, offered: Sequence[str] = ()) -> str:
        """``quic-go/cubic``, ``quiche-lsquic/bbr`` (server-client when they differ),
        ``tcp/cubic``; a workload other than one download after it (``quiche/cubic/upload``,
        ``quinn/bbr/download-4x2``); ``@link`` when pinned."""
        what = "tcp" if self.tcp is not None else (
            self.server if self.server == self.client else f"{self.server}-{self.client}")
        pin = f"@{self.link}" if self.link in ("0", "1") else ""
        w = self.work
        # what a non-default workload adds: /upload, /download-4x2 (streams x connections)
        shape = "" if w.streams == w.connections == 1 else f"-{w.streams}x{w.connections}"
        work = "" if w.kind == "download" and not shape else f"/{w.kind}{shape}"
        return f"{what}/{self.cc(params, offered)}{work}{pin}"


class FlowSet(BaseModel):
    """The flows of one attempt, resolved against the campaign: label, size or duration."""

    model_config = ConfigDict(frozen=True)
    flows: tuple[FlowConfig, ...] = Field(min_length=1)

    def labels(self, params: StandardParams,
               offered: Sequence[Sequence[str]] | None = None) -> list[str]:
        """Each flow's label, unique (a repeated one gets ``#2``, ``#3``); ``offered``: the
        congestion controls each flow's server offers (:meth:`FlowConfig.cc`)."""
        out: list[str] = []
        for i, flow in enumerate(self.flows):
            base = flow.label or flow.default_label(params, offered[i] if offered else ())
            label, n = base, 1
            while label in out:
                n += 1
                label = f"{base}#{n}"
            out.append(label)
        return out

    def set_label(self, params: StandardParams,
                  offered: Sequence[Sequence[str]] | None = None) -> str:
        """The set's name in directories and cells: the labels joined by ``+``, ``/`` made
        ``-`` and a link pin ``@0`` ``-link0``; a variant's ``@`` stays
        (``picoquic@pr-cubic+tcp-cubic``), as in the directories of pairs."""
        return "+".join(_PIN.sub(r"-link\1", label).replace("/", "-")
                        for label in self.labels(params, offered))
