"""The commands that build a path, as data: each change with the command that undoes it.

Pure: nothing here runs a command. :func:`path_setup` turns a
:class:`~interop_runner.config.path.ResolvedPath`, a backend and a :class:`Placement` into a
:class:`PathSetup`: tc/iptables steps in order (each undo is journaled before its change, so
replaying the journal backwards removes the path) and the delay lines to start. Which
backend does what (docs/paths.md):

* ``netem`` (kernels with netem, real testbeds): netem for delay, jitter and loss, with a tbf
  child as the bottleneck (its ``limit`` is the buffer);
* ``nfqueue`` (kernels without netem, such as this project's CI machine): tbf for the rate and
  buffer, iptables ``statistic`` for random loss (on the server's egress the delay line:
  :func:`loss_in_delay_line`), and the delay line (``delayline.c``) on NFQUEUE for delay,
  jitter, two links and traces.

Per-flow link pinning (paper 002's fairness experiment): ``pins`` maps a port to a link (0 or
1) of a path with two links; the data direction's delay line sends every packet with that
source or destination port over that link, outside the split (``--pin PORT=LINK``). Only the
nfqueue backend has two links, so only it pins.

Placements: ``router`` (a third node; the data direction leaves through its interface towards
the client, the reverse direction through its interface towards the server) or
``server-egress`` (no router: the data direction on the server's interface, the reverse
direction on the same interface's ingress, redirected into an IFB where a qdisc is needed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from interop_runner.config.path import WIRE_PACKET, ResolvedLink, ResolvedPath

Backend = Literal["netem", "nfqueue"]
CHAIN = "qir-path"  # the iptables chain holding every rule of the path
IFB = "qir-ifb0"  # the IFB of the reverse direction (server-egress placement)
DATA_QUEUE, REVERSE_QUEUE = 0, 1  # NFQUEUE numbers of the two directions
NETEM_LIMIT = 1_000_000  # packets netem may hold while they are delayed (not a bottleneck)
Pins = tuple[tuple[int, int], ...]  # (port, link) of each pinned flow, by port
PinsIn = Mapping[int, int] | Iterable[tuple[int, int]]  # what the callers may give


@dataclass(frozen=True)
class Placement:
    """Where the path is built."""

    kind: Literal["router", "server-egress"]
    data_if: str  # the data direction's egress (router: towards the client)
    reverse_if: str  # router: its interface towards the server; server-egress: its interface

    def towards_server(self) -> "Placement":
        """The placement of an upload's path, whose data go from the client to the server:
        a router's two interfaces swap roles. ValueError without a router (the data
        direction would be the server's ingress, which only holds the reverse direction)."""
        if self.kind != "router":
            raise ValueError("an upload over an emulated path needs a router node (without one "
                             "the path shapes the server's egress, the direction of a download)")
        return Placement(self.kind, self.reverse_if, self.data_if)

    @property
    def data_hook(self) -> list[str]:
        """iptables chain and match of the data direction's packets."""
        if self.kind == "router":
            return ["FORWARD", "-i", self.reverse_if, "-o", self.data_if]
        return ["OUTPUT", "-o", self.data_if]

    @property
    def reverse_hook(self) -> list[str]:
        """iptables chain and match of the reverse direction's packets."""
        if self.kind == "router":
            return ["FORWARD", "-i", self.data_if, "-o", self.reverse_if]
        return ["INPUT", "-i", self.reverse_if]

    @property
    def reverse_qdisc_if(self) -> str:
        """Where a qdisc of the reverse direction sits: the router's interface towards the
        server, or the IFB that the server's ingress is redirected into."""
        return self.reverse_if if self.kind == "router" else IFB


@dataclass(frozen=True)
class Step:
    """One change and the command that undoes it (None: it needs no undo of its own)."""

    argv: tuple[str, ...] | None  # None: only the undo is journaled
    undo: tuple[str, ...] | None


@dataclass(frozen=True)
class DelayLineSpec:
    """One delay line process: its direction and its arguments (``qir-delayline ...``)."""

    direction: Literal["data", "reverse"]
    queue: int
    args: tuple[str, ...]


@dataclass(frozen=True)
class PathSetup:
    """Everything that builds one path."""

    backend: Backend
    placement: Placement
    steps: tuple[Step, ...]
    delay_lines: tuple[DelayLineSpec, ...] = ()
    bottleneck: str | None = None  # "<dev> <handle>" of the data direction's bottleneck qdisc
    notes: tuple[str, ...] = field(default=())


# tokens for a late timer: how late tbf's watchdog may fire (its softirq delayed by other
# work on a busy host) before the bucket overflows and the time is lost (docs/paths.md,
# "A busy host")
TIMER_SLACK_MS = 2.0


def tbf_burst(rate_bps: int) -> int:
    """tbf's bucket in bytes: one packet plus :data:`TIMER_SLACK_MS` at the rate, at least
    two packets or 1 ms at the rate. A watchdog that fires late finds the tokens of the
    time it was late still in the bucket and sends them at once, so the rate holds; the
    extra tokens only fill while the queue is empty or the timer late, so a queue that
    stays busy sends at the rate (docs/paths.md, "A busy host")."""
    slack = WIRE_PACKET + int(rate_bps * TIMER_SLACK_MS / 8000)
    return max(2 * WIRE_PACKET, rate_bps // 8000, slack)


def tbf_args(rate_bps: int, limit_bytes: int) -> list[str]:
    """tbf as the bottleneck: ``limit`` is the droptail buffer, the bucket :func:`tbf_burst`."""
    return ["tbf", "rate", f"{rate_bps}bit", "burst", str(tbf_burst(rate_bps)), "limit",
            str(limit_bytes)]


def _ms(value: float) -> str:
    return f"{value:g}"


def _qdisc(dev: str, *args: str, parent: str = "root", handle: str = "1:") -> Step:
    add = ("tc", "qdisc", "replace", "dev", dev, *(("root",) if parent == "root"
                                                    else ("parent", parent)),
           "handle", handle, *args)
    undo = ("tc", "qdisc", "del", "dev", dev, "root") if parent == "root" else None
    return Step(add, undo)


def _ifb_steps(placement: Placement) -> list[Step]:
    """Redirect the server interface's ingress into the IFB (server-egress placement)."""
    dev = placement.reverse_if
    return [
        Step(("ip", "link", "add", IFB, "type", "ifb"), ("ip", "link", "del", IFB)),
        Step(("ip", "link", "set", IFB, "up"), None),
        Step(("tc", "qdisc", "add", "dev", dev, "handle", "ffff:", "ingress"),
             ("tc", "qdisc", "del", "dev", dev, "handle", "ffff:", "ingress")),
        Step(("tc", "filter", "add", "dev", dev, "parent", "ffff:", "protocol", "all", "u32",
              "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", IFB),
             None),
    ]


def _chain_steps(placement: Placement) -> list[Step]:
    """The path's own chain, jumped to from the hooks of both directions."""
    steps = [Step(("iptables", "-w", "-N", CHAIN), ("iptables", "-w", "-X", CHAIN))]
    for hook in sorted({placement.data_hook[0], placement.reverse_hook[0]}):
        steps.append(Step(("iptables", "-w", "-I", hook, "-j", CHAIN),
                          ("iptables", "-w", "-D", hook, "-j", CHAIN)))
    # replayed backwards, the flush comes first: the rules go before the jumps and the chain
    steps.append(Step(None, ("iptables", "-w", "-F", CHAIN)))
    return steps


def _rule(hook: list[str], *target: str) -> Step:
    """A rule in the path's chain matching one direction (hook: chain name, then matches)."""
    return Step(("iptables", "-w", "-A", CHAIN, *hook[1:], *target), None)


def nfqueue_setup(path: ResolvedPath, placement: Placement, program: str,
                  pins: PinsIn = ()) -> PathSetup:
    """The ``nfqueue`` backend: tbf, iptables and delay lines (``program``: the binary);
    ``pins`` (port -> link) go to the data direction's delay line (:func:`check_pins`)."""
    pinned = check_pins(path, pins)
    steps: list[Step] = []
    lines: list[DelayLineSpec] = []
    bottleneck = None
    if path.links is None and path.trace is None:
        assert path.buffer_bytes is not None
        steps.append(_qdisc(placement.data_if, *tbf_args(path.rate_bps, path.buffer_bytes)))
        bottleneck = f"{placement.data_if} 1:"
    if placement.kind == "server-egress" and path.reverse_rate_bps is not None:
        steps += _ifb_steps(placement)
    if path.reverse_rate_bps is not None:
        steps.append(_qdisc(placement.reverse_qdisc_if,
                            *tbf_args(path.reverse_rate_bps, 10 * 1000 * 1000)))
    steps += _chain_steps(placement)
    line_loss = loss_in_delay_line(path, placement)
    if path.loss and path.links is None and not line_loss:
        steps.append(_rule(placement.data_hook, "-m", "statistic", "--mode", "random",
                           "--probability", f"{path.loss:.6f}", "-j", "DROP"))
    if path.data_delay_line or line_loss:
        steps.append(_rule(placement.data_hook, "-j", "NFQUEUE", "--queue-num",
                           str(DATA_QUEUE)))
        lines.append(DelayLineSpec("data", DATA_QUEUE,
                                   (program, *data_line_args(path, line_loss, pinned))))
    if path.reverse_delay_ms > 0:
        steps.append(_rule(placement.reverse_hook, "-j", "NFQUEUE", "--queue-num",
                           str(REVERSE_QUEUE)))
        lines.append(DelayLineSpec("reverse", REVERSE_QUEUE,
                                   (program, "--queue", str(REVERSE_QUEUE), "--delay",
                                    _ms(path.reverse_delay_ms))))
    return PathSetup("nfqueue", placement, tuple(steps), tuple(lines), bottleneck)


def loss_in_delay_line(path: ResolvedPath, placement: Placement) -> bool:
    """Whether the delay line drops the random loss of the data direction (nfqueue backend).

    On the server's egress the packets are the node's own: an iptables DROP there is an error
    to the sender (EPERM from sendmsg: iperf3 and QUIC stacks give up, TCP retransmits at once
    without seeing a loss), while the delay line's verdict comes after sendmsg returned, as a
    loss on the wire does. On a router the packets are forwarded and iptables drops them."""
    return bool(path.loss) and path.links is None and placement.kind == "server-egress"


def check_pins(path: ResolvedPath, pins: PinsIn) -> Pins:
    """``pins`` (a mapping port -> link, or (port, link) pairs) sorted by port; ValueError
    naming the port for a port outside 1..65535, a link other than 0 or 1, a port pinned
    twice, or any pin on a path without two links."""
    items = list(pins.items()) if isinstance(pins, Mapping) else list(pins)
    seen: dict[int, int] = {}
    for port, link in items:
        if not 1 <= port <= 65535:
            raise ValueError(f"pinned port {port}: not a port (1..65535)")
        if link not in (0, 1):
            raise ValueError(f"pinned port {port}: link {link} is not 0 or 1")
        if port in seen:
            raise ValueError(f"pinned port {port}: pinned twice")
        if path.links is None:
            raise ValueError(f"pinned port {port}: pinning a flow to a link needs a path with "
                             "two links (`links`)")
        seen[port] = link
    return tuple(sorted(seen.items()))


def data_line_args(path: ResolvedPath, loss: bool = False, pins: Pins = ()) -> list[str]:
    """The data direction's delay line: one link with jitter, two links (with ``pins``, from
    :func:`check_pins`), or a trace; with ``loss``, it also drops the path's random loss
    (:func:`loss_in_delay_line`)."""
    args = ["--queue", str(DATA_QUEUE)]
    if path.links is not None:
        return args + _links_args(path, pins)
    if path.trace is not None:
        assert path.buffer_bytes is not None
        args += ["--trace", "TRACE", "--trace-buffer", str(path.buffer_bytes)]
    if path.data_delay_ms or path.jitter:
        args += ["--delay", _ms(path.data_delay_ms), "--jitter", f"{path.jitter:g}"]
    if loss:
        args += ["--loss", f"{path.loss:.6f}"]
    return args


def _links_args(path: ResolvedPath, pins: Pins) -> list[str]:
    """Two links: each link, the split, the reordering and the pinned flows."""
    assert path.links is not None and path.split is not None
    args: list[str] = []
    for link in path.links:
        args += ["--link", _link_arg(link)]
    args += ["--batch", str(path.split.batch), "--ratio", path.split.ratio]
    if path.reorder_timeout_ms:
        args += ["--reorder-timeout", _ms(path.reorder_timeout_ms)]
    for port, link_index in pins:
        args += ["--pin", f"{port}={link_index}"]
    return args


def _link_arg(link: ResolvedLink) -> str:
    return (f"rate={link.rate_bps},delay={_ms(link.delay_ms)},jitter={link.jitter:g},"
            f"loss={link.loss:g},buffer={link.buffer_bytes}")


def netem_setup(path: ResolvedPath, placement: Placement) -> PathSetup:
    """The ``netem`` backend: netem (delay, jitter, loss) with a tbf child as the bottleneck;
    netem on the reverse direction for its delay."""
    if path.links is not None or path.trace is not None:
        raise ValueError("two links and traces need the nfqueue backend (netem cannot split "
                         "or follow a trace)")
    assert path.buffer_bytes is not None
    steps: list[Step] = []
    netem = ["netem", "limit", str(NETEM_LIMIT), "delay", f"{_ms(path.data_delay_ms)}ms"]
    if path.jitter:
        netem += [f"{_ms(path.jitter * path.data_delay_ms)}ms", "distribution", "normal"]
    if path.loss:
        netem += ["loss", "random", f"{path.loss * 100:g}%"]
    steps.append(_qdisc(placement.data_if, *netem))
    steps.append(_qdisc(placement.data_if, *tbf_args(path.rate_bps, path.buffer_bytes),
                        parent="1:1", handle="2:"))
    if placement.kind == "server-egress":
        steps += _ifb_steps(placement)
    reverse = ["netem", "limit", str(NETEM_LIMIT), "delay", f"{_ms(path.reverse_delay_ms)}ms"]
    steps.append(_qdisc(placement.reverse_qdisc_if, *reverse))
    if path.reverse_rate_bps is not None:
        steps.append(_qdisc(placement.reverse_qdisc_if,
                            *tbf_args(path.reverse_rate_bps, 10 * 1000 * 1000),
                            parent="1:1", handle="2:"))
    return PathSetup("netem", placement, tuple(steps), (), f"{placement.data_if} 2:")


def path_setup(path: ResolvedPath, backend: Backend, placement: Placement,
               program: str, pins: PinsIn = ()) -> PathSetup:
    """The setup of ``path`` with ``backend`` at ``placement``; ``pins`` (port -> link) pin
    flows to one of the path's two links (:func:`check_pins`; nfqueue only: netem has no two
    links, and pins on a path without two links are refused before that)."""
    if backend == "netem":
        check_pins(path, pins)
        return netem_setup(path, placement)
    return nfqueue_setup(path, placement, program, pins)
