"""Calibrating a path before it is trusted: measure what it really does, compare with what
it was configured to do.

Four measurements, all between the endpoints over the path (ping and iperf3 from Debian; the
client node sends the pings, so a request crosses the reverse direction and its reply the
data direction with its bottleneck):

1. **base RTT**: the median of 50 pings on the idle path (200 on a path with jitter, whose
   check also allows three standard errors of that median);
2. **bottleneck rate**: one kernel TCP flow (iperf3, server -> client) for 5 s after a 2 s
   warm-up, with BBR where the node has it: BBR keeps the bottleneck busy at any buffer
   size and loss rate where CUBIC would leave it idle (0.5 BDP, 1 % loss); its payload rate
   is converted to the wire (tbf counts IP and Ethernet headers: MSS + 66 bytes per segment
   with TCP timestamps). Two links and traces: a UDP flow at 1.3 x the rate instead, as TCP
   over reordered links measures the transport, not the path; as batch splitting leaves a
   link idle while the other gets its batch, two links' sum is only an upper bound there;
3. **queueing delay at a full buffer**: pings while a UDP flow overloads the bottleneck
   (1.3 x its rate, so the buffer fills whatever the congestion control or loss; sent
   every 50 µs: with iperf3's default of a burst every 1 ms the queue drains between bursts):
   their 90th percentile minus that of the idle pings (a median under load samples a queue
   that also drains; the idle p90 takes the same share of jitter back out), against
   buffer / rate (a byte buffer holds whole packets and the packet ahead of a ping is partly
   sent, so at least two packets at the rate are allowed);
4. **loss**: 3000 pings 2 ms apart; the configured rate must lie in the binomial confidence
   interval of the measured one (Clopper-Pearson).

:func:`evaluate` is the pure comparison (tolerances: :class:`~interop_runner.config.path.
PathTolerance`, justified in docs/paths.md).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from scipy.stats import binomtest

from interop_runner.config.path import (
    WIRE_PACKET,
    PathTolerance,
    ResolvedPath,
    read_trace,
    trace_peak_bps,
    trace_window_bps,
)
from interop_runner.errors import ExecutorError, PathError
from interop_runner.parsers.common import ParseError
from interop_runner.parsers.iperf3 import IperfResult, parse_iperf3
from interop_runner.parsers.ping import PingResult, parse_ping
from interop_runner.testbed.node import Node

TCP_WIRE_OVERHEAD = 66  # IPv4 20 + TCP 20 + timestamps 12 + Ethernet 14 bytes per segment
UDP_WIRE_OVERHEAD = 42  # IPv4 20 + UDP 8 + Ethernet 14
UDP_PAYLOAD = 1448
OVERLOAD = 1.3  # the UDP flows' rate as a multiple of the bottleneck's
PACING_US = 50  # µs between the UDP overload's sends
RATE_SECONDS, WARMUP_SECONDS = 5, 2
RATE_TRIES = 3  # rate measurements while they fall short (see Calibrator._best_rate)
LOSS_PINGS = 3000
TRACE_RATE_REL = 0.10  # a trace's rate check (see evaluate)
QUEUE_PACKETS = 2  # the full-buffer check allows at least this many packets at the rate


@dataclass
class Check:
    """One calibrated parameter: configured, measured, allowed difference, verdict."""

    parameter: str
    unit: str
    configured: float
    measured: float | None
    tolerance: float | None  # absolute, in ``unit`` (loss: None, the interval decides)
    ok: bool
    detail: str = ""

    def line(self) -> str:
        """``rtt: configured 50 ms, measured 51.2 ms (allowed ±1 ms)``."""
        unit = f" {self.unit}" if self.unit else ""  # loss is a plain fraction
        measured = ("not measured" if self.measured is None
                    else f"measured {self.measured:.4g}{unit}")
        allowed = f" (allowed ±{self.tolerance:.3g}{unit})" if self.tolerance else ""
        extra = f"; {self.detail}" if self.detail else ""
        return (f"{self.parameter}: configured {self.configured:.4g}{unit}, "
                f"{measured}{allowed}{extra}")


@dataclass
class Measured:
    """What calibration measured (None: not measured, with the reason in ``notes``)."""

    rtt_ms: float | None = None
    rtt_samples: list[float] = field(default_factory=list)
    goodput_bps: float | None = None
    rate_wire_bps: float | None = None
    rate_method: str | None = None
    rate_expected_bps: float | None = None  # a trace: its rate over the measured window
    congestion: str | None = None
    queue_ms: float | None = None
    queue_samples: int = 0
    loaded_rtt_samples: list[float] = field(default_factory=list)  # pings under the overload
    loss: float | None = None
    loss_ci: tuple[float, float] | None = None
    loss_sent: int | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class Calibration:
    """A path's calibration: what was measured, each check, and the verdict."""

    measured: Measured
    checks: list[Check]
    started_at: float
    seconds: float

    @property
    def ok(self) -> bool:
        """Every check passed."""
        return all(c.ok for c in self.checks)

    def failures(self) -> list[Check]:
        """The checks that failed."""
        return [c for c in self.checks if not c.ok]

    def as_dict(self) -> dict[str, Any]:
        """The stored form (campaign.json ``paths.<key>.calibration``)."""
        return {"ok": self.ok, "started_at": self.started_at, "seconds": self.seconds,
                "measured": asdict(self.measured), "checks": [asdict(c) for c in self.checks]}


def jitter_sd_ms(path: ResolvedPath) -> float:
    """The standard deviation of a path's one-way delay (the largest of its links')."""
    if path.links is not None:
        return max(link.jitter * link.delay_ms for link in path.links)
    return path.jitter * path.data_delay_ms


def median_standard_error(sd_ms: float, samples: int) -> float:
    """Standard error of the median of ``samples`` normal values: 1.2533 x sd / sqrt(n)."""
    return 1.2533 * sd_ms / samples ** 0.5 if samples else 0.0


def _within(configured: float, measured: float, absolute: float, relative: float
            ) -> tuple[bool, float]:
    allowed = max(absolute, relative * configured)
    difference = abs(measured - configured)  # 19.2 - 10.2 is 8.999999999999998: not a miss
    return difference <= allowed or math.isclose(difference, allowed), allowed


def queue_packets_ms(rate_bps: float) -> float:
    """What a full buffer's queueing delay may exceed buffer / rate by: QUEUE_PACKETS
    wire-sized packets at ``rate_bps`` (the one in service and a buffer of whole packets)."""
    return QUEUE_PACKETS * WIRE_PACKET * 8000.0 / rate_bps


def evaluate(path: ResolvedPath, measured: Measured, tol: PathTolerance) -> list[Check]:
    """Compare what was measured with the configuration (pure)."""
    checks = []
    if measured.rtt_ms is not None:
        # a jittered path's median RTT is itself a sample: allow three standard errors of it
        spread = 3 * median_standard_error(jitter_sd_ms(path), len(measured.rtt_samples))
        absolute = max(tol.rtt_ms, spread)
        rtt, detail = measured.rtt_ms, ""
        if path.trace is not None and measured.rtt_samples:
            # a packet waits for the trace's next delivery opportunity, however idle the
            # path: the smallest RTT is the one that met an opportunity at once
            rtt, detail = min(measured.rtt_samples), "the smallest of the pings (a trace)"
        ok, allowed = _within(path.rtt_ms, rtt, absolute, tol.rtt_rel)
        if path.links is not None:  # either link's RTT is right
            ok = any(_within(link.delay_ms + path.reverse_delay_ms, rtt,
                             absolute, tol.rtt_rel)[0] for link in path.links)
        checks.append(Check("rtt", "ms", path.rtt_ms, rtt, allowed, ok, detail))
    if measured.rate_wire_bps is not None:
        configured, detail = path.rate_bps, f"at the wire; {measured.rate_method}"
        relative = tol.rate_rel
        if path.trace is not None and measured.rate_expected_bps is not None:
            # which seconds of the trace the flow measured is known to a few 100 ms only
            # (iperf3's start), and a cellular trace's rate moves by more than 3 % in that
            configured, relative = int(measured.rate_expected_bps), max(relative, TRACE_RATE_REL)
            detail += "; the trace's rate over the seconds measured"
        ok, allowed = _within(configured / 1e6, measured.rate_wire_bps / 1e6, 0.0, relative)
        if path.links is not None:
            # batch splitting leaves a link idle while the other one gets its batch, so the
            # sum of the links' rates is an upper bound, not what the path must deliver
            ok = measured.rate_wire_bps <= path.rate_bps * (1 + tol.rate_rel)
            detail += "; two links: recorded, only checked not to exceed the sum of the rates"
        checks.append(Check("rate", "Mbit/s", configured / 1e6,
                            measured.rate_wire_bps / 1e6, allowed, ok, detail))
    full = path.full_queue_ms
    if full is not None and measured.queue_ms is not None:
        # a ping finds the buffer short of full by up to two packets: it holds whole
        # packets only, and the one ahead is partly sent (1.2 ms at 20 Mbit/s)
        packets_ms = queue_packets_ms(path.rate_bps)
        ok, allowed = _within(full, measured.queue_ms, max(tol.queue_ms, packets_ms),
                              tol.queue_rel)
        checks.append(Check("queue", "ms", full, measured.queue_ms, allowed, ok,
                            "queueing delay of a full buffer (buffer / rate)"))
    if measured.loss is not None and measured.loss_ci is not None:
        low, high = measured.loss_ci
        ok = low <= path.loss <= high
        checks.append(Check("loss", "", path.loss, measured.loss, None, ok,
                            f"{tol.loss_confidence:.0%} interval [{low:.4g}, {high:.4g}] of "
                            f"{measured.loss_sent} pings"))
    return checks


def _udp_overload(path: ResolvedPath) -> list[str]:
    """iperf3 arguments of the UDP flow that overloads the bottleneck: 1.3 x its rate (a
    trace: x its highest rate over 100 ms, else its fast moments would drain the queue),
    sent every ``PACING_US`` (iperf3's default 1 ms timer sends bursts the queue drains
    between)."""
    rate = trace_peak_bps(read_trace(path.trace)) if path.trace is not None else path.rate_bps
    return ["-u", "-b", str(int(OVERLOAD * rate)), "-l", str(UDP_PAYLOAD),
            "--pacing-timer", str(PACING_US)]


def p90(values: "list[float] | tuple[float, ...]") -> float:
    """The 90th percentile (the queue is full at its peaks: a median under load is a
    sample of a queue that also drains; the base RTT's p90 takes the same share of jitter
    back out)."""
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


def loss_interval(lost: int, sent: int, confidence: float) -> tuple[float, float]:
    """Clopper-Pearson interval of a loss rate: ``lost`` of ``sent``."""
    ci = binomtest(lost, sent).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)


class Calibrator:
    """Runs the measurements between ``server`` and ``client`` over the path to
    ``server_ip``; iperf3 listens on ``port`` on the server (nothing else runs then)."""

    def __init__(self, server: Node, client: Node, server_ip: str, port: int,
                 trace_clock: Callable[[], float] | None = None) -> None:
        """``trace_clock``: for a path that follows a trace, the seconds since the trace
        started (the data delay line's clock), to know which part of it a flow measured."""
        self.server, self.client, self.ip, self.port = server, client, server_ip, port
        self.trace_clock = trace_clock

    def calibrate(self, path: ResolvedPath, tol: PathTolerance) -> Calibration:
        """Measure the path and evaluate it."""
        started, t0 = time.time(), time.monotonic()
        measured = Measured()
        # a jittered path gets more pings: its median is a sample of a spread
        base = self._ping(200 if jitter_sd_ms(path) else 50, 0.02)
        measured.rtt_samples = list(base.rtt_ms)
        if not base.rtt_ms:
            raise PathError(f"{self.client.name}: no ping reply from {self.ip} over the path")
        measured.rtt_ms = statistics.median(base.rtt_ms)
        self._best_rate(path, measured, tol)
        if path.full_queue_ms is not None:
            self._queue(path, measured)
        else:
            measured.notes.append("queue: not measured: two links have one buffer each, and a "
                                  "trace's buffer drains at the trace's varying rate")
        if path.loss:
            self._loss(path, tol, measured)
        return Calibration(measured, evaluate(path, measured, tol), started,
                           time.monotonic() - t0)

    # -- the measurements ----------------------------------------------------------------------
    def _ping(self, count: int, interval: float, wait_s: float = 0.0) -> PingResult:
        script = 'sleep "$0"; exec ping -n -c "$1" -i "$2" -W 2 "$3"'
        timeout = wait_s + count * interval + 30
        res = self.client.run(["sh", "-c", script, str(wait_s), str(count), str(interval),
                               self.ip], timeout=timeout, check=False)
        try:
            return parse_ping(res.stdout)
        except ParseError as exc:
            raise PathError(f"{self.client.name}: ping {self.ip}: {exc}") from None

    def _iperf(self, args: list[str], seconds: int) -> IperfResult:
        """One iperf3 test, server -> client (``-R``), with a one-off server."""
        tmp = self.server.scratch
        self.server.run(["mkdir", "-p", tmp])
        proc = self.server.executor.start(
            ["iperf3", "-s", "-1", "--forceflush", "-B", self.ip, "-p", str(self.port)],
            stdout=f"{tmp}/iperf3-server.out", stderr=f"{tmp}/iperf3-server.err")
        try:
            self.server.run(["sh", "-c", 'n=0; until grep -q "listening" "$0" 2>/dev/null; do '
                             'n=$((n+1)); [ $n -lt 500 ] || exit 1; sleep 0.01; done',
                             f"{tmp}/iperf3-server.out"], timeout=20)
            res = self.client.run(["iperf3", "-c", self.ip, "-p", str(self.port), "-R", "-J",
                                   "-t", str(seconds), *args], timeout=seconds + 60,
                                  check=False)
        except ExecutorError as exc:
            raise PathError(f"calibration: iperf3: {exc}") from None
        finally:
            self.server.executor.stop(proc, grace=2)
        try:
            return parse_iperf3(res.stdout)
        except ParseError as exc:
            raise PathError(f"{self.client.name}: calibration: {exc}") from None

    def _rate(self, path: ResolvedPath, measured: Measured) -> None:
        if path.links is None and path.trace is None:
            cc = "bbr" if self._has_bbr() else "cubic"
            res = self._iperf(["-C", cc, "-O", str(WARMUP_SECONDS)], RATE_SECONDS)
            mss = res.mss or 1448
            measured.goodput_bps = res.received_bps
            measured.rate_wire_bps = res.received_bps * (mss + TCP_WIRE_OVERHEAD) / mss
            measured.rate_method = f"one TCP flow ({res.congestion or cc}, MSS {mss})"
            measured.congestion = res.congestion or cc
            return
        start = self.trace_clock() if path.trace is not None and self.trace_clock else None
        res = self._iperf([*_udp_overload(path), "-O", str(WARMUP_SECONDS)], RATE_SECONDS)
        if start is not None and path.trace is not None:
            # the part of the trace the flow measured (iperf3 starts within ~0.1 s)
            measured.rate_expected_bps = trace_window_bps(
                read_trace(path.trace), start + WARMUP_SECONDS, start + WARMUP_SECONDS
                + RATE_SECONDS)
        measured.goodput_bps = res.received_bps
        measured.rate_wire_bps = res.received_bps * (UDP_PAYLOAD + UDP_WIRE_OVERHEAD) / UDP_PAYLOAD
        measured.rate_method = f"a UDP flow at {OVERLOAD:g} x the rate"

    def _best_rate(self, path: ResolvedPath, measured: Measured, tol: PathTolerance) -> None:
        """The rate, measured again (up to :data:`RATE_TRIES` times) while it falls short:
        the bottleneck never sends above its rate, so what lowers one measurement (a loaded
        host delaying the ACKs, a congestion control's probing) only ever lowers it, and the
        highest of the tries is the estimate."""
        self._rate(path, measured)
        method, tries = measured.rate_method, 1
        while tries < RATE_TRIES and any(c.parameter == "rate" and not c.ok
                                         for c in evaluate(path, measured, tol)):
            again, tries = Measured(), tries + 1
            self._rate(path, again)
            if (again.rate_wire_bps or 0.0) > (measured.rate_wire_bps or 0.0):
                for name in ("goodput_bps", "rate_wire_bps", "congestion"):
                    setattr(measured, name, getattr(again, name))
            measured.rate_method = f"{method}, the highest of {tries} tries"

    def _has_bbr(self) -> bool:
        res = self.server.run(["cat", "/proc/sys/net/ipv4/tcp_available_congestion_control"],
                              timeout=10, check=False)
        return "bbr" in res.stdout.split()

    def _queue(self, path: ResolvedPath, measured: Measured) -> None:
        """Pings from the 2nd second of a 5 s UDP overload, in the background on the client."""
        tmp = self.client.scratch
        self.client.run(["mkdir", "-p", tmp])
        pinger = self.client.executor.start(
            ["sh", "-c", 'sleep 2; exec ping -n -c 100 -i 0.02 -W 2 "$0"', self.ip],
            stdout=f"{tmp}/ping-load.out", stderr=f"{tmp}/ping-load.err")
        try:
            self._iperf(_udp_overload(path), 5)
            self.client.executor.wait(pinger, 30)
        finally:
            self.client.executor.stop(pinger, grace=1)
        loaded = parse_ping(self.client.run(["cat", f"{tmp}/ping-load.out"], timeout=10).stdout)
        measured.queue_samples = len(loaded.rtt_ms)
        measured.loaded_rtt_samples = list(loaded.rtt_ms)
        if len(loaded.rtt_ms) >= 10 and len(measured.rtt_samples) >= 10:
            measured.queue_ms = p90(loaded.rtt_ms) - p90(measured.rtt_samples)
        else:
            measured.notes.append(f"queue: {len(loaded.rtt_ms)} ping replies under load, "
                                  "too few to tell")

    def _loss(self, path: ResolvedPath, tol: PathTolerance, measured: Measured) -> None:
        res = self._ping(LOSS_PINGS, 0.002)
        measured.loss_sent = res.transmitted
        if res.transmitted:
            measured.loss = res.lost / res.transmitted
            measured.loss_ci = loss_interval(res.lost, res.transmitted, tol.loss_confidence)
