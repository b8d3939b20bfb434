"""Campaign and testbed configuration: YAML files validated into typed pydantic models.

Every problem becomes one line ``<file>: <key.path>: <message>``, so a user sees which key to fix.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
import shlex
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from interop_runner.config.flows import (
    MAX_FLOWS,
    FlowConfig,
    FlowSet,
    parse_duration,
    written_seconds,
)
from interop_runner.config.implementations import (
    ImplementationMeta,
    VariantSpec,
    load_registry,
    resolve,
)
from interop_runner.config.knobs import Knobs
from interop_runner.config.params import StandardParams
from interop_runner.config.path import PathConfig
from interop_runner.config.sweep import Sweep, Variant, apply, set_at, variants
from interop_runner.config.written import (
    SECONDS_UNITS,
    SIZE_UNITS,
    WRITTEN,
    bare_message,
    is_bare,
    refuse_bare,
    written,
)
from interop_runner.config.yaml12 import key_path, load_yaml12, read_config_yaml
from interop_runner.errors import ConfigError, RegistryError
from interop_runner.monitors import MONITORS as MONITOR_REGISTRY
from interop_runner.units import positive_size

DEFAULT_FILE_SIZE = 8 * 2**30
MAX_FILE_SIZE = 2**50  # 1 PiB: the file lives on the nodes' tmpfs
MONITORS = tuple(MONITOR_REGISTRY)
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # .inf: no


# --------------------------------------------------------------------------- testbed file ----
class SSHConfig(_Strict):
    """How the management node reaches a node."""

    host: str
    port: int = Field(22, ge=1, le=65535)
    user: str = "root"
    key: str | None = None
    known_hosts: str | None = None
    jump: "SSHConfig | None" = None
    connect_timeout: float = Field(10.0, gt=0)

    @field_validator("connect_timeout", mode="before")
    @classmethod
    def _timeout(cls, value: Any, info: ValidationInfo) -> float:
        return written_seconds(value, info)
    # an unknown host key is refused unless this is set: then it is trusted on first use,
    # appended to `known_hosts` and recorded in campaign.json; a changed key is always refused
    trust_on_first_use: bool = False


def _ip_address(value: str) -> str:
    ipaddress.ip_address(value)
    return value


IPText = Annotated[str, AfterValidator(_ip_address)]  # an IP address, kept as written


class RoutedAddress(_Strict):
    """An endpoint's interface and address on the path through the router."""

    interface: str
    ip: IPText


ENDPOINT_ROLES = ("server", "client")


class NodeConfig(_Strict):
    """One node: a measurement endpoint (server, client) or the router between them."""

    role: Literal["server", "client", "router"]
    ssh: SSHConfig
    # an endpoint's data-plane interface and address; a router's interface towards the client
    # (the data direction's egress, where a bottleneck goes) and its address there
    interface: str
    ip: IPText
    workdir: str
    tmpdir: str = "/dev/shm/qir"
    # the node's Docker Engine, as the node's own docker CLI addresses it (``docker -H``); the
    # management node reaches it through the node's SSH connection (``docker system
    # dial-stdio``), never through an open port. The local testbed gives each node its own.
    docker_host: str = Field("unix:///var/run/docker.sock", pattern=r"^(unix|tcp|ssh|fd)://\S+$")
    # a router only (required there): its interface towards the server (the reverse
    # direction's egress)
    server_interface: str | None = Field(None, validate_default=True)
    # an endpoint only: its interface and address on the path through the router, where
    # `interface`/`ip` are a direct link that bypasses the router (the local testbed); without
    # it, on a testbed with a router, `interface`/`ip` already go through the router
    via_router: RoutedAddress | None = Field(None, validate_default=True)

    @field_validator("workdir", "tmpdir")
    @classmethod
    def _abs(cls, value: str) -> str:
        path = PurePosixPath(value)
        if not path.is_absolute() or len(path.parts) < 3:
            raise ValueError(f"must be an absolute path at least two levels deep, got {value!r}")
        if ".." in path.parts:  # /var/tmp/../.. would put (and later rm -rf) files elsewhere
            raise ValueError(f"must not contain '..', got {value!r}")
        return str(path)

    @field_validator("server_interface")
    @classmethod
    def _server_interface(cls, value: str | None, info: ValidationInfo) -> str | None:
        role = info.data.get("role")  # absent when the role itself was invalid
        if role == "router" and value is None:
            raise ValueError("required for a node with role router (its interface towards "
                             "the server)")
        if role in ENDPOINT_ROLES and value is not None:
            raise ValueError(f"only a router has one (this node's role is {role})")
        return value

    @field_validator("via_router")
    @classmethod
    def _via_router(cls, value: RoutedAddress | None,
                    info: ValidationInfo) -> RoutedAddress | None:
        if info.data.get("role") == "router" and value is not None:
            raise ValueError("only an endpoint (server, client) has one: a router's "
                             "`interface` and `ip` are already on the path")
        return value

    def through_router(self) -> RoutedAddress:
        """The endpoint's interface and address on the path through the router
        (``via_router``, else its own ``interface`` and ``ip``)."""
        return self.via_router or RoutedAddress(interface=self.interface, ip=self.ip)


class TestbedConfig(_Strict):
    """A testbed file: the nodes of one host pair, and at most one router between them."""

    name: str
    local: bool = False
    nodes: dict[str, NodeConfig]
    # measurement port on this testbed (default: the campaign's `port`); lets two testbeds that
    # share hosts measure side by side
    port: int | None = Field(None, ge=1, le=65535)

    @field_validator("nodes")
    @classmethod
    def _roles(cls, nodes: dict[str, NodeConfig]) -> dict[str, NodeConfig]:
        roles = sorted(n.role for n in nodes.values() if n.role != "router")
        if roles != ["client", "server"]:
            raise ValueError("needs exactly one node with role server and one with role client "
                             f"(got {', '.join(roles) or 'no node'})")
        routers = [k for k, n in nodes.items() if n.role == "router"]
        if len(routers) > 1:
            raise ValueError(f"at most one node may have role router (got {', '.join(routers)})")
        return nodes

    @field_validator("nodes")
    @classmethod
    def _via_router(cls, nodes: dict[str, NodeConfig]) -> dict[str, NodeConfig]:
        endpoints = [(k, n) for k, n in nodes.items() if n.role in ENDPOINT_ROLES]
        have = [k for k, n in endpoints if n.via_router is not None]
        if not have:
            return nodes
        lack = [k for k, n in endpoints if n.via_router is None]
        if lack:
            raise ValueError(f"{have[0]} has via_router but {lack[0]} has not (give both "
                             "endpoints their address through the router, or neither)")
        if not any(n.role == "router" for n in nodes.values()):
            raise ValueError(f"via_router (on {', '.join(have)}) needs a node with role router")
        return nodes

    @model_validator(mode="after")
    def _dirs(self) -> "TestbedConfig":
        dirs = [PurePosixPath(d) for n in self.nodes.values() for d in (n.workdir, n.tmpdir)]
        for i, a in enumerate(dirs):
            for b in dirs[i + 1:]:
                if a == b or a in b.parents or b in a.parents:
                    raise ValueError(f"nodes must not share directories ({a} and {b} overlap)")
        return self

    def node(self, role: str) -> tuple[str, NodeConfig]:
        """The (name, node) with the given role (KeyError: the testbed has none)."""
        found = next(((k, n) for k, n in self.nodes.items() if n.role == role), None)
        if found is None:
            raise KeyError(f"testbed {self.name} has no node with role {role}")
        return found

    def router(self) -> tuple[str, NodeConfig] | None:
        """The (name, node) of the router, or None when server and client are linked
        directly."""
        return next(((k, n) for k, n in self.nodes.items() if n.role == "router"), None)

    def endpoint_nodes(self) -> list[tuple[str, NodeConfig]]:
        """(name, node) of the server, then the client: the nodes a campaign measures on."""
        return [self.node(role) for role in ENDPOINT_ROLES]


# -------------------------------------------------------------------------- campaign file ----
class Pair(_Strict):
    """One server/client combination."""

    server: str
    client: str


class Timeouts(_Strict):
    """Timeouts in seconds; ``client`` None means: derived from the file size."""

    setup: float = Field(1800, gt=0)
    server_ready: float = Field(15, gt=0)
    client: float | None = Field(None, gt=0)
    command: float = Field(120, gt=0)

    @field_validator("setup", "server_ready", "client", "command", mode="before")
    @classmethod
    def _seconds(cls, value: Any, info: ValidationInfo) -> float | None:
        return None if value is None else written_seconds(value, info)


class PerfOptions(_Strict):
    """perf record settings (paper: system-wide, -g, about 2 kHz)."""

    frequency: int = Field(999, ge=1, le=50000)
    call_graph: Literal["fp", "dwarf"] = "fp"
    event: str | None = None  # None: cycles where the CPU counts them, else cpu-clock
    roles: list[Literal["server", "client"]] = ["server", "client"]


class TcpdumpOptions(_Strict):
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


class MonitorOptions(_Strict):
    """Options of the monitors that have any."""

    perf: PerfOptions = Field(default_factory=PerfOptions)
    tcpdump: TcpdumpOptions = Field(default_factory=TcpdumpOptions)


class CampaignConfig(_Strict):
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
        """The distinct implementation pairs of ``flows``, as written."""
        seen = {(f.server, f.client): None for f in self.flows or [] if f.kind == "quic"}
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

    def client_timeout(self) -> float:
        """Client timeout: configured, else 60 s plus the transfer time at 50 Mbit/s."""
        if self.timeouts.client is not None:
            return self.timeouts.client
        return 60.0 + self.file_size * 8 / 50e6


# ------------------------------------------------------------------------------- loading ----
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


def _format_errors(source: str, exc: ValidationError, model: type[BaseModel]) -> list[str]:
    lines = []
    errors = [(err, tuple(p for p in err["loc"]
                          if not (isinstance(p, str) and p.startswith("function-"))))
              for err in exc.errors()]
    # a misspelt required key is one problem: "unknown key 'x' (did you mean 'y'?)" says it all,
    # so "y: required key is missing" is left out
    typos = {loc[:-1] + (hint,) for err, loc in errors if err["type"] == "extra_forbidden"
             for hint in difflib.get_close_matches(str(loc[-1]), _known_keys(model, loc[:-1]),
                                                   n=1)}
    for err, loc in errors:
        if err["type"] == "missing" and loc in typos:
            continue
        key = key_path(loc)
        if err["type"] == "extra_forbidden":
            known = _known_keys(model, loc[:-1])
            hint = difflib.get_close_matches(str(loc[-1]), known, n=1)
            msg = (f"unknown key {str(loc[-1])!r}"
                   + (f" (did you mean {hint[0]!r}?)" if hint else ""))
        elif err["type"] == "missing":
            msg = "required key is missing"
        else:
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] not in ("value_error", "assertion_error") and "input" in err:
                msg += f" (got {err['input']!r})"
        lines.append(f"{source}: {key}: {msg}")
    return lines


def _known_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Field names of the (sub)model at ``loc``, for 'did you mean' hints."""
    current: Any = model
    skip_next = False  # the next loc part is a dict key or list index, not a field
    for part in loc:
        if skip_next or isinstance(part, int):
            skip_next = False
            continue
        fields = getattr(current, "model_fields", {})
        if part not in fields:
            return []
        annotation = fields[part].annotation
        current, skip_next = _model_in(annotation)
    return list(getattr(current, "model_fields", {}).keys()) if current else []


def _model_in(annotation: Any) -> tuple[Any, bool]:
    """The pydantic model inside an annotation and whether it sits in a dict/list."""
    args = getattr(annotation, "__args__", ())
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    origin = getattr(annotation, "__origin__", None)
    for arg in args:
        model, _ = _model_in(arg)
        if model is not None:
            return model, origin in (dict, list) or _model_in(arg)[1]
    return None, False


def load_testbed(path: Path | str) -> TestbedConfig:
    """Read and validate a testbed file."""
    path = Path(path)
    data = read_config_yaml(path)
    try:
        return TestbedConfig.model_validate(data, context=WRITTEN)
    except ValidationError as exc:
        raise ConfigError(_format_errors(str(path), exc, TestbedConfig)) from None


class _ImplementationCheck:
    """Checks every implementation name and parameter a campaign uses against the registry;
    ``errors`` collects one ``file: key: message`` line per problem."""

    def __init__(self, source: str, cfg: CampaignConfig,
                 registry: dict[str, ImplementationMeta]) -> None:
        self.source, self.cfg, self.registry = source, cfg, registry
        self.known = ", ".join(sorted(registry)) or "none"
        self.errors: list[str] = []

    def name(self, key: str, name: str, role: str) -> None:
        """``name`` must resolve (registry or variant) and have ``role``."""
        try:
            meta = resolve(name, self.registry, self.cfg.implementations)
        except KeyError as exc:
            base = str(exc.args[0])
            hint = difflib.get_close_matches(base, list(self.registry), n=1)
            did = f"; did you mean {hint[0]!r}?" if hint else ""
            self.errors.append(f"{self.source}: {key}: unknown implementation {base!r} "
                               f"(known: {self.known}{did})")
            return
        except ValueError as exc:
            self.errors.append(f"{self.source}: {key}: {name}: {exc}")
            return
        if role not in meta.roles:
            self.errors.append(f"{self.source}: {key}: implementation {name!r} has no "
                               f"{role} role")

    def variants(self) -> None:
        """``implementations:``: variant names, their base and source tree."""
        for name, spec in self.cfg.implementations.items():
            where = f"implementations.{name}"
            if name in self.registry:
                self.errors.append(f"{self.source}: {where}: {name!r} is a registry "
                                   "implementation; give the variant another name (e.g. "
                                   "<name>@<label>)")
                continue
            self.name(where, name, "server" if "server" in getattr(
                self.registry.get(spec.base), "roles", ["server"]) else "client")
            if spec.source is not None:
                src = Path(spec.source).expanduser()
                if not src.is_dir():
                    self.errors.append(f"{self.source}: {where}.source: not a directory: {src}")
            self.release_archive(where, spec)

    def release_archive(self, where: str, spec: VariantSpec) -> None:
        """A version variant of an implementation built from upstream archives names the
        release's archive; only those take one."""
        base = self.registry.get(spec.base)
        if base is None:
            return
        if spec.archive is not None and not base.sources:
            self.errors.append(f"{self.source}: {where}.archive: {spec.base} is not built from "
                               "upstream source archives (give version alone)")
        elif spec.version is not None and spec.archive is None and base.sources:
            self.errors.append(f"{self.source}: {where}: {spec.base} builds from upstream "
                               "source archives: a version variant needs archive: {file, "
                               "sha256, url} of that release")

    def pairs(self) -> None:
        """``impl:``, ``servers:``/``clients:`` and ``pairs:``."""
        cfg = self.cfg
        for as_written, name in cfg.impl.items():
            self.name(f"impl.{as_written}", name, "server" if any(
                p.server == as_written for p in cfg.written_pairs() + cfg.flow_pairs())
                else "client")
        for i, name in enumerate(cfg.servers):
            self.name(f"servers[{i}]", name, "server")
        for i, name in enumerate(cfg.clients):
            self.name(f"clients[{i}]", name, "client")
        for i, pair in enumerate(cfg.pairs or []):
            self.name(f"pairs[{i}].server", pair.server, "server")
            self.name(f"pairs[{i}].client", pair.client, "client")
        for i, flow in enumerate(cfg.flows or []):
            if flow.server is not None and flow.client is not None:
                self.name(f"flows[{i}].server", flow.server, "server")
                self.name(f"flows[{i}].client", flow.client, "client")

    def parameters(self, side: str) -> None:
        """``<side>_params:``: every key declared by the implementation, every value valid."""
        for impl, params in getattr(self.cfg, f"{side}_params").items():
            base = f"{side}_params.{impl}"
            try:
                specs = resolve(impl, self.registry, self.cfg.implementations).parameters
            except (KeyError, ValueError):
                self.name(base, impl, side)
                continue
            for key, value in (params or {}).items():
                if key not in specs:
                    names = ", ".join(sorted(specs)) or "none"
                    self.errors.append(f"{self.source}: {base}.{key}: unknown parameter for "
                                       f"{impl} (it accepts: {names})")
                    continue
                if specs[key].type == "bytes" and is_bare(value):
                    self.errors.append(f"{self.source}: {base}.{key}: "
                                       f"{bare_message(value, SIZE_UNITS)}")
                    continue
                try:
                    specs[key].to_env(value)
                except ValueError as exc:
                    self.errors.append(f"{self.source}: {base}.{key}: {exc}")


def _check_implementations(
    source: str, cfg: CampaignConfig, registry: dict[str, ImplementationMeta]
) -> list[str]:
    check = _ImplementationCheck(source, cfg, registry)
    check.variants()
    check.pairs()
    check.parameters("server")
    check.parameters("client")
    return check.errors


def _check_sweep(source: str, data: dict[str, Any], cfg: CampaignConfig,
                 registry: dict[str, ImplementationMeta]) -> list[str]:
    """Validate every axis value on its own, so an error names the axis and the value, then
    (when those pass) every combination the sweep makes, named by its values."""
    errors: list[str] = []
    for i, axis in enumerate(cfg.sweep.axes):
        for j, value in enumerate(axis.values):
            single = cfg.sweep.model_copy(update={"axes": [axis]})
            where = f"{source}: sweep.axes[{i}].values[{j}] ({axis.path}={value!r})"
            errors += _check_variant(where, data, single, Variant("", ((axis.label, value),)),
                                     registry)
    labels = [axis.label for axis in cfg.sweep.axes]
    for label in {x for x in labels if labels.count(x) > 1}:
        errors.append(f"{source}: sweep.axes: two axes are named {label!r}; give one a `name`")
    if errors or len(cfg.sweep.axes) < 2:
        return errors
    for variant in variants(cfg.sweep):
        named = ", ".join(f"{axis.path}={value!r}"
                          for axis, (_, value) in zip(cfg.sweep.axes, variant.values))
        errors += _check_variant(f"{source}: sweep ({named})", data, cfg.sweep, variant,
                                 registry, keep_key=True)[:1]  # one line per combination
    return errors


def _check_variant(where: str, data: dict[str, Any], sweep: Sweep, variant: Variant,
                   registry: dict[str, ImplementationMeta], keep_key: bool = False
                   ) -> list[str]:
    """The problems of one variant's config, each ``where: message`` (``where: key:
    message`` with ``keep_key``)."""
    try:
        vcfg = CampaignConfig.model_validate(apply(data, sweep, variant), context=WRITTEN)
    except ValidationError as exc:
        lines = _format_errors("-", exc, CampaignConfig)  # "-: key: message"
    except ValueError as exc:  # apply: an axis indexes a list past its end
        return [f"{where}: {exc}"]
    else:
        lines = _check_implementations("-", vcfg, registry)
    return [f"{where}: {line.split(': ', 1 if keep_key else 2)[-1]}" for line in lines]


def _absolute_trace(path: Path, data: dict[str, Any], cfg: CampaignConfig
                    ) -> tuple[dict[str, Any], CampaignConfig]:
    """A relative ``path.trace`` is relative to the campaign file: made absolute, so the
    stored config names the file that was used."""
    if cfg.path is None or cfg.path.trace is None or Path(cfg.path.trace).is_absolute():
        return data, cfg
    trace = str((path.parent / cfg.path.trace).resolve())
    data = {**data, "path": {**data["path"], "trace": trace}}
    return data, cfg.model_copy(update={"path": cfg.path.model_copy(update={"trace": trace})})


def _check_paths(source: str, cfg: CampaignConfig) -> list[str]:
    """Each variant's path resolves: its trace exists and parses, its link buffers hold a
    packet (what the models cannot check on their own)."""
    errors: list[str] = []
    for variant, vcfg in variant_configs(cfg):
        if vcfg.path is None:
            continue
        try:
            vcfg.path.resolved()
        except ValueError as exc:
            where = f" (variant {variant.id})" if variant.id else ""
            errors.append(f"{source}: path{where}: {exc}")
    return sorted(set(errors + _check_flow_links(source, cfg)))


def _check_flow_links(source: str, cfg: CampaignConfig) -> list[str]:
    """A flow pinned to a link (or split over both) needs a path with two links."""
    errors: list[str] = []
    for variant, vcfg in variant_configs(cfg):
        two_links = vcfg.path is not None and vcfg.path.links is not None
        for i, flow in enumerate(vcfg.flows or []):
            if flow.link is not None and not two_links:
                where = f" (variant {variant.id})" if variant.id else ""
                errors.append(f"{source}: flows[{i}].link{where}: link {flow.link} needs a "
                              "path with two links (path.links)")
    return errors


def variant_configs(cfg: CampaignConfig) -> list[tuple[Variant, CampaignConfig]]:
    """Every variant of the sweep with its own config (the base config without axes)."""
    data = cfg.model_dump(mode="json")
    return [(v, CampaignConfig.model_validate(apply(data, cfg.sweep, v)) if v.values else cfg)
            for v in variants(cfg.sweep)]


def load_campaign(path: Path | str) -> tuple[CampaignConfig, TestbedConfig]:
    """Read and validate a campaign file and its (first) testbed file.

    The testbed path is resolved relative to the campaign file. Raises ConfigError.
    """
    cfg, testbeds = load_campaign_testbeds(path)
    return cfg, testbeds[0]


def apply_overrides(data: dict[str, Any], overrides: list[str], source: str
                    ) -> dict[str, Any]:
    """The campaign data with each ``KEY.PATH=VALUE`` (VALUE in YAML) set, e.g.
    ``duration=120s`` or ``path.buffer=5bdp`` (ConfigError naming the bad one)."""
    out = dict(data)
    for item in overrides:
        key, sep, text = item.partition("=")
        parts = key.strip().split(".")
        if not sep or not all(parts):
            raise ConfigError([f"{source}: --set {item!r}: expected KEY=VALUE, e.g. "
                               "duration=120s"])
        try:
            value = load_yaml12(text)
        except yaml.YAMLError as exc:
            raise ConfigError([f"{source}: --set {key}: not a YAML value: "
                               f"{str(exc).splitlines()[0]}"]) from None
        _set_path(out, parts, value, f"{source}: --set {key}")
    return out


def _set_path(data: dict[str, Any], parts: list[str], value: Any, where: str) -> None:
    try:
        set_at(data, parts, value)
    except ValueError as exc:
        raise ConfigError([f"{where}: {exc}"]) from None


def load_campaign_testbeds(path: Path | str, overrides: list[str] | None = None
                           ) -> tuple[CampaignConfig, list[TestbedConfig]]:
    """Read and validate a campaign file (with ``--set`` ``overrides``, see
    :func:`apply_overrides`) and every testbed file it names."""
    path = Path(path)
    data = apply_overrides(read_config_yaml(path), overrides or [], str(path))
    try:
        cfg = CampaignConfig.model_validate(data, context=WRITTEN)
    except ValidationError as exc:
        raise ConfigError(_format_errors(str(path), exc, CampaignConfig)) from None
    try:
        registry = load_registry()
    except RegistryError as exc:
        raise ConfigError([str(exc)]) from None
    data, cfg = _absolute_trace(path, data, cfg)
    errors = _check_implementations(str(path), cfg, registry)
    errors += _check_sweep(str(path), data, cfg, registry)
    errors += [] if errors else _check_paths(str(path), cfg)  # needs every variant valid
    key = "testbed" if cfg.testbed is not None else "testbeds"
    paths = [resolve_testbed_path(path, f) for f in cfg.testbed_files()]
    for i, testbed_path in enumerate(paths):
        where = key if key == "testbed" else f"testbeds[{i}]"
        if not testbed_path.is_file():
            errors.append(f"{path}: {where}: file not found: {testbed_path}")
    if errors:
        raise ConfigError(errors)
    testbeds = [load_testbed(p) for p in paths]
    names = [t.name for t in testbeds]
    for name in sorted({n for n in names if names.count(n) > 1}):
        errors.append(f"{path}: testbeds: two testbeds are named {name!r}")
    errors += [f"{path}: {line}" for t, f in zip(testbeds, cfg.testbed_files())
               for line in _testbed_problems(cfg, t, f)]
    if len(testbeds) > 1 and sum(t.local for t in testbeds) > 1 and any(
            v.side_knobs(r).rmem or v.side_knobs(r).wmem
            for _, v in variant_configs(cfg) for r in ("server", "client")):
        errors.append(f"{path}: testbeds: local testbeds share the host's net.core sysctls, so "
                      "rmem/wmem knobs cannot be used with more than one of them")
    if errors:
        raise ConfigError(errors)
    return cfg, testbeds


def _testbed_problems(cfg: CampaignConfig, testbed: TestbedConfig, file: str) -> list[str]:
    """What a campaign asks of a testbed that it cannot do, found before anything runs."""
    problems = []
    port = testbed.port or cfg.port
    last = port + max(len(cfg.flows or []), 1) - 1
    clash = [f"{name} ({node.ssh.port})" for name, node in testbed.endpoint_nodes()
             if port <= node.ssh.port <= last]
    if clash:
        ports = f"ports {port}..{last}" if last > port else f"port {port}"
        problems.append(f"port: the measurement's {ports} would take the SSH port of node "
                        f"{', '.join(clash)} (testbed {file}): choose another `port`")
    if testbed.router() is None and any(
            v.path is not None and v.path.record_packets for _, v in variant_configs(cfg)):
        problems.append(f"path.record_packets: testbed {file} has no router, where the "
                        "bottleneck's packets are captured")
    return problems


def resolve_testbed_path(config_path: Path, testbed_file: str) -> Path:
    """Path of a testbed file named in a campaign (relative paths: relative to the config)."""
    candidate = Path(testbed_file).expanduser()
    return candidate if candidate.is_absolute() else (config_path.parent / candidate)


def check_ssh_files(config_path: Path, cfg: CampaignConfig,
                    testbeds: list[TestbedConfig]) -> None:
    """Raise ConfigError naming every SSH key / known_hosts file of a real-host testbed that is
    missing on this machine (a local testbed creates its own with `testbed up`)."""
    errors: list[str] = []
    for file, testbed in zip(cfg.testbed_files(), testbeds):
        if testbed.local:
            continue
        source = resolve_testbed_path(config_path, file)
        for name, node in testbed.nodes.items():
            ssh: SSHConfig | None = node.ssh
            where = f"nodes.{name}.ssh"
            while ssh is not None:
                for key in ("key", "known_hosts"):
                    value = getattr(ssh, key)
                    if key == "known_hosts" and ssh.trust_on_first_use:
                        continue  # created on first use
                    if value is not None and not Path(value).expanduser().is_file():
                        errors.append(f"{source}: {where}.{key}: file not found: "
                                      f"{Path(value).expanduser()}")
                ssh, where = ssh.jump, where + ".jump"
    if errors:
        raise ConfigError(errors)
