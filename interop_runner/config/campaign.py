"""The campaign file's model: what to measure (pairs or flows, file size or duration,
parameters, knobs, monitors, path, sweep), validated into a typed, frozen ``CampaignConfig``;
and every variant of its sweep as a config of its own. Reading files, the checks against the
registry and the testbeds are in :mod:`interop_runner.config.loader`."""

from __future__ import annotations

import re
import shlex
from typing import Any, Literal

from pydantic import (
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from interop_runner.config.flows import (
    MAX_FLOWS,
    FlowConfig,
    FlowSet,
    written_seconds,
)
from interop_runner.config.implementations import (
    VariantSpec,
)
from interop_runner.config.knobs import Knobs
from interop_runner.config.params import StandardParams
from interop_runner.config.path import PathConfig
from interop_runner.config.strict import Strict
from interop_runner.config.sweep import Sweep, Variant, apply, variants
from interop_runner.config.workload import Workload
from interop_runner.config.written import (
    SECONDS_UNITS,
    SIZE_UNITS,
    parse_duration,
    refuse_bare,
    written,
)
from interop_runner.monitors import MONITORS as MONITOR_REGISTRY
from interop_runner.units import positive_size

DEFAULT_FILE_SIZE = 8 * 2**30
MAX_FILE_SIZE = 2**50  # 1 PiB: the file lives on the nodes' tmpfs
MONITORS = tuple(MONITOR_REGISTRY)
# standard parameters the harnesses set on the client, the receiver of a download
RECEIVER_PARAMS = ("ack_ratio", "max_ack_delay", "flow_control_window")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class Pair(Strict):
    """One server/client combination."""

    server: str
    client: str


class Timeouts(Strict):
    """Timeouts in seconds; ``client`` None means: derived from the file size."""

    setup: float = Field(1800, gt=0)
    server_ready: float = Field(15, gt=0)
    client: float | None = Field(None, gt=0)
    command: float = Field(120, gt=0)

    @field_validator("setup", "server_ready", "client", "command", mode="before")
    @classmethod
    def _seconds(cls, value: Any, info: ValidationInfo) -> float | None:
        return None if value is None else written_seconds(value, info)


class PerfOptions(Strict):
    """perf record settings (paper: system-wide, -g, about 2 kHz)."""

    frequency: int = Field(999, ge=1, le=50000)
    call_graph: Literal["fp", "dwarf"] = "fp"
    event: str | None = None  # None: cycles where the CPU counts them, else cpu-clock
    roles: list[Literal["server", "client"]] = ["server", "client"]


class TcpdumpOptions(Strict):
    """tcpdump settings; the default filter is the measurement's own port."""

    snaplen: int = Field(96, ge=64, le=262144)
    filter: str | None = None
    roles: list[Literal["server", "client"]] = ["server", "client"]

    @field_validator("filter")
    @classmethod
    def _filter(cls, value: str | None) -> str | None:
        try:  # monitors.session passes shlex.split(filter) to tcpdump as argv
            if value is not None and not shlex.split(value):
                raise ValueError("empty filter (use null for the default)")
        except ValueError as exc:
            raise ValueError(f"cannot split filter {value!r}: {exc}") from None
        return value


class MonitorOptions(Strict):
    """Options of the monitors that have any."""

    perf: PerfOptions = Field(default_factory=PerfOptions)
    tcpdump: TcpdumpOptions = Field(default_factory=TcpdumpOptions)


class CampaignConfig(Strict):
    """One measurement campaign."""

    name: str
    testbed: str | None = None  # a testbed file, or:
    testbeds: list[str] = []  # several: runs go to them in parallel, one at a time on each
    distribute: Literal["spread", "each"] = "spread"  # each: every run on every testbed
    testcase: Literal["goodput"] = "goodput"
    file_size: int = DEFAULT_FILE_SIZE
    repetitions: int = Field(10, ge=1, le=100000)
    servers: list[str] = []
    clients: list[str] = []
    pairs: list[Pair] | None = None
    params: StandardParams = Field(default_factory=StandardParams)
    knobs: Knobs = Field(default_factory=Knobs)  # host knobs for both nodes
    server_knobs: Knobs = Field(default_factory=Knobs)  # ... for one node (wins over knobs)
    client_knobs: Knobs = Field(default_factory=Knobs)
    server_params: dict[str, dict[str, Any]] = {}
    client_params: dict[str, dict[str, Any]] = {}
    monitors: list[str] = []
    monitor_options: MonitorOptions = Field(default_factory=MonitorOptions)
    port: int = Field(4433, ge=1, le=65535)
    keylog: bool = False
    qlog: bool = False
    keep_files: bool = False
    # how downloads are verified: BLAKE3 (b3sum, several GB/s) or SHA-256 (sha256sum)
    verify_hash: Literal["blake3", "sha256"] = "blake3"
    # keep the generated file on the server node for the next campaign of the same size
    # (checked against its digest before each use); false: a fresh file, and the node's
    # cached files are removed at the end
    file_cache: bool = True
    # a failed or timed-out attempt: record it and go on, or record it and stop the campaign
    on_error: Literal["continue", "stop"] = "continue"
    timeouts: Timeouts = Field(default_factory=Timeouts)
    results_dir: str = "results"
    sweep: Sweep = Field(default_factory=Sweep)
    # implementation variants (other versions, source trees, build options), by name; an
    # undeclared "<name>@<version>" is that release of <name>
    implementations: dict[str, VariantSpec] = {}
    # which implementation plays a name of `pairs`/`servers`/`clients`, e.g.
    # {quic-go: quic-go@v0.64.0}; sweepable (axis path impl.<name>) for A/B comparisons
    impl: dict[str, str] = {}
    # an emulated path between the nodes (docs/paths.md); None: the direct link
    path: PathConfig | None = None
    # several flows per attempt instead of pairs (docs/flows.md); `duration`: how long each
    # flow runs unless it gives a size or a duration of its own
    flows: list[FlowConfig] | None = None
    duration: float | None = None
    # what each attempt moves: which way, on how many streams and connections (docs/
    # workloads.md); its `size` is `file_size`, the bytes of each stream
    workload: Workload = Field(default_factory=Workload)

    @model_validator(mode="before")
    @classmethod
    def _workload_size(cls, data: Any) -> Any:
        """``workload.size`` is ``file_size`` (the one file prepared per campaign) written
        where the workload is: folded into ``file_size``, and refused when both differ."""
        if not isinstance(data, dict) or not isinstance(data.get("workload"), dict) \
                or data["workload"].get("size") is None:
            return data
        workload = dict(data["workload"])
        size = workload.pop("size")
        if "file_size" in data and data["file_size"] != size:
            raise ValueError(f"workload.size ({size}) and file_size ({data['file_size']}) "
                             "are the same setting: give one of them")
        return {**data, "file_size": size, "workload": workload}

    @field_validator("duration", mode="before")
    @classmethod
    def _duration(cls, value: Any, info: ValidationInfo) -> float | None:
        refuse_bare(value, info, SECONDS_UNITS)
        return parse_duration(value)

    @field_validator("path", "flows", mode="before")
    @classmethod
    def _not_empty(cls, value: Any, info: ValidationInfo) -> Any:
        # `path:` with nothing below it would run over the direct link without a word
        if value is None and written(info):
            raise ValueError("empty: give its keys, or leave the key out (no "
                             f"{info.field_name}: " + ("the direct link)" if info.field_name
                                                       == "path" else "pairs)"))
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME_RE.match(value):
            raise ValueError("use letters, digits, '.', '_' or '-' (at most 64)")
        return value

    @field_validator("file_size", mode="before")
    @classmethod
    def _size(cls, value: Any, info: ValidationInfo) -> int:
        refuse_bare(value, info, SIZE_UNITS)
        size = positive_size(value)
        if size > MAX_FILE_SIZE:
            raise ValueError(f"{value!r} is larger than 1 PiB, the most a node can hold")
        return size

    @field_validator("monitors")
    @classmethod
    def _monitors(cls, value: list[str]) -> list[str]:
        for name in value:
            if name not in MONITORS:
                raise ValueError(f"unknown monitor {name!r} (known: {', '.join(MONITORS)})")
        return value

    @model_validator(mode="after")
    def _has_pairs(self) -> "CampaignConfig":
        if self.flows is not None:
            self._has_flows()
        elif self.pairs is None and (not self.servers or not self.clients):
            raise ValueError("give `servers` and `clients`, or `pairs` (or `flows`)")
        if self.pairs is not None and (self.servers or self.clients):
            # both would silently drop one of them: the user meant one
            both = "`servers`" if self.servers else "`clients`"
            raise ValueError(f"`pairs` and {both} are both given: give `pairs`, or "
                             "`servers` and `clients` (their cross product), not both")
        if bool(self.servers) != bool(self.clients):
            raise ValueError("give `servers` and `clients` together (their cross product)")
        _refuse_repeated(self)
        if (self.testbed is None) == (not self.testbeds):
            raise ValueError("give either `testbed` (one file) or `testbeds` (a list of files)")
        return self

    @model_validator(mode="after")
    def _workload_runs(self) -> "CampaignConfig":
        """A workload the runner cannot carry out is refused, also when a sweep made it."""
        if self.flows is not None and not self.workload.is_default:
            raise ValueError("workload: a `flows:` campaign gives each flow its own "
                             "(flows[i].workload): leave the campaign's out")
        for key, work, params in self._workloads_with_params():
            if self.path is not None and work.kind == "bidirectional":
                raise ValueError(f"{key}: a bidirectional workload over `path` needs a "
                                 "calibrated bottleneck in each direction, which paths do not "
                                 "build yet: measure download and upload apart")
            receiver_only = [k for k in RECEIVER_PARAMS if getattr(params, k) is not None]
            if work.uploads and receiver_only:
                raise ValueError(f"params.{receiver_only[0]} is asked of the client as the "
                                 f"data receiver, but in {key}'s {work.kind} workload the "
                                 "server receives: it would not take effect")
        if self.path is not None and len(self.data_directions()) > 1:
            raise ValueError("flows: over `path` every flow's data must go one way (its "
                             "bottleneck shapes one direction), but some flows download and "
                             "some upload: measure them in two campaigns")
        return self

    def _workloads_with_params(self) -> list[tuple[str, Workload, StandardParams]]:
        """(key, workload, standard parameters) of each workload that runs: the campaign's,
        or each flow's."""
        if self.flows is None:
            return [("workload", self.workload, self.params)]
        return [(f"flows[{i}].workload", f.work, f.std_params(self.params))
                for i, f in enumerate(self.flows)]

    def workloads(self) -> list[Workload]:
        """Every workload an attempt runs: the campaign's, or each of its flows'."""
        return [work for _, work, _ in self._workloads_with_params()]

    def file_workloads(self) -> list[Workload]:
        """The workloads whose bytes are files on the nodes: the campaign's, or its QUIC
        flows' (a kernel TCP flow's iperf3 sends no file)."""
        if self.flows is None:
            return [self.workload]
        return [f.work for f in self.flows if f.kind == "quic"]

    def data_directions(self) -> set[str]:
        """The directions the attempts' data go: ``download`` and/or ``upload``."""
        return {d for w in self.workloads() for d in w.directions}

    @model_validator(mode="after")
    def _takes_effect(self, info: ValidationInfo) -> "CampaignConfig":
        """Keys a user wrote that would change nothing are refused (stored configs hold
        every key, so only what a user wrote is checked)."""
        if not written(info):
            return self
        if self.flows is None and self.duration is not None:
            raise ValueError("`duration` is how long each of `flows` runs: a campaign of "
                             "pairs downloads `file_size` (give `flows`, or leave it out)")
        if len(self.testbed_files()) < 2 and "distribute" in self.model_fields_set:
            raise ValueError("`distribute` spreads runs over several `testbeds`: with one "
                             "testbed it changes nothing")
        for name in sorted(self.monitor_options.model_fields_set):
            if name not in self.monitors:
                raise ValueError(f"monitor_options.{name}: the {name} monitor is not in "
                                 "`monitors`, so its options change nothing")
        return self

    def _has_flows(self) -> None:
        """At least one flow, one port per flow, a duration or size for TCP flows."""
        assert self.flows is not None
        if not self.flows:
            raise ValueError("`flows` is empty")
        if len(self.flows) > MAX_FLOWS:
            raise ValueError(f"{len(self.flows)} flows: at most {MAX_FLOWS} per attempt (one "
                             "server port each)")
        if self.port + len(self.flows) - 1 > 65535:
            raise ValueError(f"{len(self.flows)} flows need ports {self.port}.."
                             f"{self.port + len(self.flows) - 1}: past 65535 (lower `port`)")
        for i, flow in enumerate(self.flows):
            if flow.kind == "tcp" and flow.size is None and flow.duration is None \
                    and self.duration is None:
                raise ValueError(f"flows[{i}]: a tcp flow needs a size or a duration (or the "
                                 "campaign's `duration`)")

    def flow_set(self) -> FlowSet | None:
        """The attempt's flows (None: a campaign of pairs)."""
        return FlowSet(flows=tuple(self.flows)) if self.flows is not None else None

    def testbed_files(self) -> list[str]:
        """The testbed file(s) as written in the config."""
        return [self.testbed] if self.testbed is not None else list(self.testbeds)

    def written_pairs(self) -> list[Pair]:
        """The pairs measured one per attempt, as written: ``pairs`` if given, else servers
        x clients (none in a campaign of flows only)."""
        if self.pairs is not None:
            return list(self.pairs)
        return [Pair(server=s, client=c) for s in self.servers for c in self.clients]

    def flow_pairs(self) -> list[Pair]:
        """The distinct implementation pairs of ``flows``, as written (``tcp``, ``tcp`` for
        kernel TCP reference flows: implementations/tcp)."""
        seen = {f.sides: None for f in self.flows or []}
        return [Pair(server=str(s), client=str(c)) for s, c in seen]

    def substitute(self, pair: Pair) -> Pair:
        """The pair with ``impl`` substitutions applied (what actually runs)."""
        return Pair(server=self.impl.get(pair.server, pair.server),
                    client=self.impl.get(pair.client, pair.client))

    def pair_list(self) -> list[Pair]:
        """Every pair that runs (those of ``flows`` too), after ``impl`` substitutions."""
        pairs = [self.substitute(p) for p in self.written_pairs() + self.flow_pairs()]
        return list({(p.server, p.client): p for p in pairs}.values())

    def side_knobs(self, role: str) -> Knobs:
        """The knobs of one node: ``knobs`` overridden by ``<role>_knobs``."""
        return self.knobs.merged(getattr(self, f"{role}_knobs"))

    def transfer_bytes(self) -> int:
        """The bytes an attempt moves in all: ``file_size`` per stream, connection and
        direction of the workload (of flows: the largest flow's)."""
        return max(self.file_size * w.streams * w.connections * len(w.directions)
                   for w in self.workloads())

    def client_timeout(self) -> float:
        """Client timeout: configured, else 60 s plus the transfer time at 50 Mbit/s."""
        if self.timeouts.client is not None:
            return self.timeouts.client
        at_rate = 60.0 + self.transfer_bytes() * 8 / 50e6
        duration = self.workload.duration
        return at_rate if duration is None else min(at_rate, 60.0 + duration)



def _refuse_repeated(cfg: "CampaignConfig") -> None:
    """A pair (or a server or client of the cross product) listed twice would be measured
    twice as one pair; refuse it rather than guess: ``repetitions`` says how often."""
    for key in ("servers", "clients"):
        names: list[str] = getattr(cfg, key)
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"`{key}` lists {', '.join(twice)} more than once; list each "
                             "once (`repetitions` sets how often a pair is measured)")
    first: dict[tuple[str, str], int] = {}
    for i, pair in enumerate(cfg.pairs or []):
        j = first.setdefault((pair.server, pair.client), i)
        if j != i:
            raise ValueError(f"pairs[{j}] and pairs[{i}] are the same pair ({pair.server} -> "
                             f"{pair.client}); list it once (`repetitions` sets how often it "
                             "is measured)")


def variant_configs(cfg: CampaignConfig) -> list[tuple[Variant, CampaignConfig]]:
    """Every variant of the sweep with its own config (the base config without axes)."""
    data = cfg.model_dump(mode="json")
    return [(v, CampaignConfig.model_validate(apply(data, cfg.sweep, v)) if v.values else cfg)
            for v in variants(cfg.sweep)]
