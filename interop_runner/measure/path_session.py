"""A campaign's emulated paths: built where the testbed puts them, calibrated before the
first attempt of each, observed around every attempt, removed at the end.

The path of a run is its variant's ``path`` block. Consecutive runs over the same path keep
it; another path replaces it. Each path is calibrated once per campaign (stored in
``campaign.json`` under ``paths.<key>``); with ``calibrate: strict`` a path that misses its
configuration stops the campaign with one line naming the parameter. Every attempt's record
gets the path it ran over, its backend, placement, calibration key and the counters of the
bottleneck and the delay lines during the attempt (``run.json`` ``path``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from interop_runner.config.flows import MAX_FLOWS
from interop_runner.config.path import PathConfig, ResolvedPath
from interop_runner.config.testbed import NodeConfig, TestbedConfig
from interop_runner.config.workload import Direction
from interop_runner.errors import PathError
from interop_runner.parsers.tc import parse_qdisc_samples
from interop_runner.remote.executor import Background, Executor
from interop_runner.storage.campaign_record import CampaignRecord
from interop_runner.testbed.hostload import HostLoad
from interop_runner.testbed.knobs import Journal
from interop_runner.testbed.leftovers import path_journal
from interop_runner.testbed.node import Node
from interop_runner.testbed.path.calibrate import Calibration, Calibrator
from interop_runner.testbed.path.counters import attempt_counters
from interop_runner.testbed.path.node import PathNode
from interop_runner.testbed.path.rules import PathSetup, Placement, path_setup

#: how many times a calibration that failed on a busy host is repeated before it counts
BUSY_RECALIBRATIONS = 2


def path_key(path: PathConfig, pins: Mapping[int, int] | None = None) -> str:
    """A path's key: what the path does (not how it is calibrated), hashed; with the ports
    of flows pinned to one of its two links (``pins``: port -> link), when there are any."""
    data: dict[str, Any] = path.model_dump(mode="json",
                                           exclude={"calibrate", "tolerance", "backend"})
    if pins:
        data["pins"] = sorted(pins.items())
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]
    return f"path-{digest}"


def calibrate_port(port: int, pins: Mapping[int, int] | None) -> int:
    """The port the calibration's traffic uses: the campaign's, or with pinned flows one past
    every flow's port (a pinned port would send the calibration over one link only)."""
    return port + MAX_FLOWS if pins else port


def path_journal_leftovers(nodes: list[Node]) -> dict[str, list[str]]:
    """Replay the path journals a killed runner left on ``nodes``: node -> what was undone
    (each line that failed is named, the others are just counted)."""
    out: dict[str, list[str]] = {}
    for node in nodes:
        journal = path_journal(node)
        if journal.pending():
            failed = journal.replay()
            out[node.name] = ["removed an emulated path left by a killed runner"] + [
                f"failed: {line}" for line in failed]
    return out


def routed(cfg: NodeConfig) -> NodeConfig:
    """An endpoint as a campaign with a path sees it: its address through the router."""
    via = cfg.via_router
    if via is None:
        return cfg
    return cfg.model_copy(update={"interface": via.interface, "ip": via.ip})


def placement_of(testbed: TestbedConfig) -> Placement:
    """The router's interfaces, or the server's egress (with an IFB for the reverse
    direction) when the testbed has no router."""
    router = testbed.router()
    if router is not None:
        cfg = router[1]
        assert cfg.server_interface is not None
        return Placement("router", cfg.interface, cfg.server_interface)
    server = testbed.node("server")[1]
    return Placement("server-egress", server.interface, server.interface)


@dataclass
class PathRun:
    """The path of one attempt: what it is, its counters before the transfer, and what
    watches its bottleneck meanwhile (files below ``directory`` on the path's node)."""

    key: str
    before: dict[str, Any]
    directory: str
    observers: list[Background]


class PathSession:
    """The paths of one campaign session on one testbed.

    ``host``: the node the path is built on (router, or server); ``save``: writes the
    campaign record (after a calibration).
    """

    def __init__(self, host: Node, placement: Placement, server: Node, client: Node,
                 port: int, doc: CampaignRecord, save: Callable[[], None]) -> None:
        self.node = PathNode(host, placement, path_journal(host))
        self.placement = placement
        self.server, self.client, self.port = server, client, port
        self.doc, self.save = doc, save
        self._attempts = 0  # attempts observed: each gets its own directory on the node
        self._observing: list[Background] = []  # the observers of the attempt under way
        self.direction: Direction = "download"  # of the active path's data

    def _placement(self) -> Placement:
        """Where the active direction's path goes (an upload's: towards the server)."""
        if self.direction == "download":
            return self.placement
        try:
            return self.placement.towards_server()
        except ValueError as exc:
            raise PathError(f"{self.node.node.name}: {exc}") from None

    @property
    def journal(self) -> Journal:
        """The journal of the path's changes on its node."""
        return self.node.journal

    # -- around the runs -----------------------------------------------------------------------
    def activate(self, path: PathConfig | None, observe: bool = True,
                 pins: Mapping[int, int] | None = None,
                 direction: Direction = "download") -> PathRun | None:
        """Make ``path`` the active one (None: no path) and return its run handle with the
        counters before the attempt and, with ``observe``, the bottleneck's observers
        started; calibrates a path the campaign has not calibrated. ``pins``: the ports of
        flows pinned to one of a two-link path's links (port -> link); ``direction``: which
        way the workload's data go (an upload's bottleneck is on the way to the server)."""
        if path is None:
            if self.node.active is not None:
                self.node.remove()
            return None
        key = path_key(path, pins) + ("-upload" if direction == "upload" else "")
        if self.node.active is not None and self.dead_lines():
            self.node.remove()  # a delay line died (its attempt failed): build the path anew
        if self.node.active is None or self.node.active.key != key:
            if self.node.active is not None:
                self.node.remove()  # before its placement changes: its undo uses it
            self.direction = direction
            self.node.placement = self._placement()
            resolved = path.resolved()
            setup = self._setup(path, resolved, pins or {})
            self.node.apply(key, setup)
            self._record(key, path, resolved, setup, calibrate_port(self.port, pins))
        self._attempts += 1
        directory = f"{self.node.node.scratch}/path-{self._attempts}"
        before = self.node.counters()
        observers = self.node.observe(directory, path.record_packets) if observe else []
        self._observing = observers
        return PathRun(key, before, directory, observers)

    def _setup(self, path: PathConfig, resolved: ResolvedPath,
               pins: Mapping[int, int]) -> PathSetup:
        backend = self.node.probe_backend(path.backend, resolved.data_delay_line)
        program = self.node.delay_line() if backend == "nfqueue" else "qir-delayline"
        try:
            setup = path_setup(resolved, backend, self.node.placement, program, pins)
        except ValueError as exc:
            raise PathError(f"{self.node.node.name}: {exc}") from None
        if resolved.trace is not None:
            remote = self._upload_trace(resolved)
            lines = tuple(type(line)(line.direction, line.queue,
                                     tuple(remote if a == "TRACE" else a for a in line.args))
                          for line in setup.delay_lines)
            setup = PathSetup(setup.backend, setup.placement, setup.steps, lines,
                              setup.bottleneck, setup.notes)
        return setup

    def _upload_trace(self, resolved: ResolvedPath) -> str:
        assert resolved.trace is not None
        data = resolved.trace.read_bytes()
        remote = f"{self.node.workdir}/trace-{hashlib.sha256(data).hexdigest()[:12]}.txt"
        self.node.node.executor.write_bytes(remote, data)
        return remote

    def _record(self, key: str, path: PathConfig, resolved: ResolvedPath,
                setup: PathSetup, port: int) -> None:
        """Calibrate a path seen for the first time; store it in campaign.json."""
        paths = self.doc.paths = self.doc.paths or {}
        if key in paths:
            return
        entry: dict[str, Any] = {
            "config": path.model_dump(mode="json"), "resolved": _resolved_dict(resolved),
            "backend": setup.backend, "placement": self.placement.kind,
            "direction": self.direction,
            "node": self.node.node.name, "bottleneck": setup.bottleneck,
            "commands": [list(s.argv) for s in setup.steps if s.argv is not None],
            "delay_lines": [list(line.args) for line in setup.delay_lines],
            "delay_line_sched": self.node.scheduling(), "calibration": None}
        paths[key] = entry
        if path.calibrate != "off":
            calibration = self._calibrate(entry, resolved, path, port)
            if not calibration.ok and path.calibrate == "strict":
                first = calibration.failures()[0]
                raise PathError(f"path {key}: calibration failed: {first.line()} "
                                "(calibrate: warn records this and measures anyway)")
        self.save()

    def _calibrate(self, entry: dict[str, Any], resolved: ResolvedPath, path: PathConfig,
                   port: int) -> Calibration:
        """Calibrate, and again (up to BUSY_RECALIBRATIONS times) while a failed calibration
        ran on a busy host: a hypervisor that takes a vCPU away (steal) or a burst of other
        work can make one measurement miss that the path holds on the next. Every
        calibration is kept: the last is ``calibration``, the ones before it are its
        ``earlier`` list; a failure on an idle host is final at once."""
        earlier: list[dict[str, Any]] = []
        while True:
            load = HostLoad(self.load_hosts())
            # the sending node takes iperf3's server role (it sends, -R), the other pings it
            sender, receiver = (self.server, self.client) if self.direction == "download" \
                else (self.client, self.server)
            calibration = Calibrator(sender, receiver, sender.cfg.ip, port, self._trace_clock
                                     ).calibrate(resolved, path.tolerance)
            record = calibration.as_dict()
            record["host_load"], record["host_busy"] = load.finish()
            entry["calibration"] = {**record, "earlier": earlier}
            self.save()
            if calibration.ok or not record["host_busy"] or len(earlier) >= BUSY_RECALIBRATIONS:
                return calibration
            earlier = [*earlier, record]

    def load_hosts(self) -> list[tuple[str, Executor]]:
        """The nodes a calibration or an attempt over the path runs on (server, client and
        the path's node), by name, for their host load."""
        nodes = [self.server, self.client]
        if self.node.node not in nodes:
            nodes.append(self.node.node)
        return [(n.name, n.executor) for n in nodes]

    def _trace_clock(self) -> float:
        """Seconds since the data delay line (and so its trace) started."""
        stats = (self.node.counters().get("delay_lines") or {}).get("data") or {}
        return float(stats.get("wall_s") or 0.0)

    def finish(self, run: PathRun, out: Path) -> dict[str, Any]:
        """The ``path`` of the attempt's record: key, configuration, backend, placement,
        calibration, the counters over the transfer (with the peak backlog the sampler saw),
        and whether each delay line survived it. The sampler's file and any captures go to
        ``out/path/``."""
        active = self.node.active
        assert active is not None
        alive = self.node.lines_alive()
        entry = (self.doc.paths or {}).get(run.key, {})
        after = self.node.counters()
        self.node.stop_observing(run.observers)
        self._observing = []
        files = self.node.node.fetch_dir(run.directory, out / "path")
        self.node.node.run(["rm", "-rf", "--", run.directory], check=False)
        counters = attempt_counters(run.before, after, active.setup.bottleneck)
        if active.setup.bottleneck is not None and "qdisc-samples.txt" in files:
            counters["bottleneck"].update(backlog_peak(
                (out / "path" / "qdisc-samples.txt").read_text(),
                active.setup.bottleneck.split()[-1]))
        return {"key": run.key, "config": entry.get("config"), "resolved": entry.get("resolved"),
                "backend": active.setup.backend, "placement": self.placement.kind,
                "node": self.node.node.name, "calibration": _summary(entry.get("calibration")),
                "counters": counters, "files": sorted(f"path/{f}" for f in files),
                "delay_lines_alive": alive, "delay_line_sched": self.node.scheduling(after)}

    def dead_lines(self) -> list[str]:
        """The directions whose delay line has died (the attempt cannot be trusted)."""
        return [d for d, ok in self.node.lines_alive().items() if not ok]

    def close(self) -> list[str]:
        """Stop observers still running (an interrupted attempt) and remove the active path;
        the undo lines that failed."""
        if self._observing:
            self.node.stop_observing(self._observing)
            self._observing = []
        return self.node.remove()


def backlog_peak(samples_text: str, handle: str) -> dict[str, Any]:
    """The peak backlog of the bottleneck among the sampler's samples, and their number."""
    samples = parse_qdisc_samples(samples_text, handle)
    return {"backlog_peak_bytes": max((x.backlog_bytes for x in samples), default=None),
            "backlog_peak_packets": max((x.backlog_packets for x in samples), default=None),
            "backlog_samples": len(samples)}


def _summary(calibration: dict[str, Any] | None) -> dict[str, Any] | None:
    """What an attempt's record keeps of its path's calibration: verdict and the measured
    values (the samples stay in campaign.json)."""
    if calibration is None:
        return None
    measured = calibration.get("measured", {})
    keys = ("rtt_ms", "rate_wire_bps", "goodput_bps", "queue_ms", "loss", "loss_ci")
    return {"ok": calibration.get("ok"), **{k: measured.get(k) for k in keys}}


def _resolved_dict(path: ResolvedPath) -> dict[str, Any]:
    return {"rate_bps": path.rate_bps, "rtt_ms": path.rtt_ms,
            "data_delay_ms": path.data_delay_ms, "reverse_delay_ms": path.reverse_delay_ms,
            "buffer_bytes": path.buffer_bytes, "full_queue_ms": path.full_queue_ms,
            "loss": path.loss, "jitter": path.jitter, "reverse_rate_bps": path.reverse_rate_bps,
            "links": None if path.links is None else [vars(x) for x in path.links],
            "reorder_timeout_ms": path.reorder_timeout_ms,
            "trace": None if path.trace is None else str(path.trace)}
