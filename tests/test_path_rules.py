"""The tc/iptables steps and delay lines that build a path (testbed/path/rules.py, pure).

The commands of two paths are compared with what ran on this machine's kernel
(tests/data/path/setup-*.txt: built by these functions, applied in throw-away namespaces and
removed by replaying their undo commands backwards). Every change must be undone by the
journal: by its own undo, or by an undo journaled earlier that removes it with its parent
(a child qdisc with its root, a filter with its ingress qdisc, a rule with the chain's flush).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from interop_runner.config.path import PathConfig, ResolvedPath
from interop_runner.testbed.path import rules
from interop_runner.testbed.path.rules import (
    CHAIN,
    DATA_QUEUE,
    IFB,
    NETEM_LIMIT,
    REVERSE_QUEUE,
    TIMER_SLACK_MS,
    DelayLineSpec,
    PathSetup,
    Placement,
    Step,
    check_pins,
    data_line_args,
    loss_in_delay_line,
    netem_setup,
    nfqueue_setup,
    path_setup,
    tbf_args,
    tbf_burst,
)

DATA = Path(__file__).parent / "data" / "path"
PROGRAM = "/tmp/qirpt/qir-delayline"  # where the captured setups' delay line was
ROUTER = Placement("router", "rc", "rs")
EGRESS = Placement("server-egress", "s0", "s0")
TRACE = DATA / "verizon-lte-down-10s.trace"


def resolved(**kwargs: object) -> ResolvedPath:
    return PathConfig.model_validate(kwargs).resolved(base=DATA)


def commands(setup: PathSetup) -> list[str]:
    return [" ".join(step.argv) for step in setup.steps if step.argv is not None]


def undos(setup: PathSetup) -> list[tuple[str, ...]]:
    return [step.undo for step in setup.steps if step.undo is not None]


# -- tbf ---------------------------------------------------------------------------------------
def test_tbf_args() -> None:
    # the bucket: one packet plus 2 ms at the rate (TIMER_SLACK_MS), at least two packets
    assert tbf_args(20_000_000, 50_000) == ["tbf", "rate", "20000000bit", "burst", "6514",
                                            "limit", "50000"]
    assert tbf_args(100_000_000, 62_500)[4] == "26514"
    assert tbf_args(10**9, 125_000)[4] == "251514"
    assert tbf_args(1_000_000, 10_000)[4] == "3028"  # 1514 + 250: two packets are more
    assert TIMER_SLACK_MS == 2.0


def test_tbf_burst_without_slack_is_the_old_bucket(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bench's --before: two packets or 1 ms at the rate, whichever is more."""
    monkeypatch.setattr(rules, "TIMER_SLACK_MS", 0.0)
    assert [tbf_burst(r) for r in (20_000_000, 100_000_000)] == [3028, 12500]


# -- placements --------------------------------------------------------------------------------
def test_placements() -> None:
    assert ROUTER.data_hook == ["FORWARD", "-i", "rs", "-o", "rc"]
    assert ROUTER.reverse_hook == ["FORWARD", "-i", "rc", "-o", "rs"]
    assert ROUTER.reverse_qdisc_if == "rs"
    assert EGRESS.data_hook == ["OUTPUT", "-o", "s0"]
    assert EGRESS.reverse_hook == ["INPUT", "-i", "s0"]
    assert EGRESS.reverse_qdisc_if == IFB == "qir-ifb0"


# -- what ran on this kernel -------------------------------------------------------------------
def captured(name: str) -> list[str]:
    return (DATA / name).read_text().splitlines()


def test_router_setup_as_it_ran() -> None:
    setup = path_setup(resolved(rate="20mbit", rtt="10ms", buffer="1bdp", loss=0.01), "nfqueue",
                       ROUTER, PROGRAM)
    lines = captured("setup-router.txt")
    assert commands(setup) + [" ".join(x.args) for x in setup.delay_lines] == lines
    assert setup.bottleneck == "rc 1:"
    assert setup.delay_lines == (DelayLineSpec("reverse", REVERSE_QUEUE,
                                               (PROGRAM, "--queue", "1", "--delay", "10")),)


def test_egress_setup_as_it_ran() -> None:
    """On the server's egress the random loss is the data delay line's (an iptables DROP in
    OUTPUT fails the sender's sendmsg with EPERM: tests/data/path/iperf3-udp-eperm.json)."""
    path = resolved(rate="20mbit", rtt="10ms", buffer="1bdp", loss=0.05)
    setup = path_setup(path, "nfqueue", EGRESS, PROGRAM)
    lines = captured("setup-egress.txt")
    assert commands(setup) + [" ".join(x.args) for x in setup.delay_lines] == lines
    assert not any("DROP" in line for line in lines)
    assert [x.direction for x in setup.delay_lines] == ["data", "reverse"]
    assert loss_in_delay_line(path, EGRESS) and not loss_in_delay_line(path, ROUTER)


# -- every change undone -----------------------------------------------------------------------
def _covering_undo(argv: tuple[str, ...]) -> tuple[str, ...]:
    """The earlier-journaled undo that removes a change without an undo of its own."""
    if argv[:3] == ("tc", "qdisc", "replace"):
        return ("tc", "qdisc", "del", "dev", argv[4], "root")  # a child: with its root
    if argv[:3] == ("ip", "link", "set"):
        return ("ip", "link", "del", argv[3])
    if argv[:3] == ("tc", "filter", "add"):
        return ("tc", "qdisc", "del", "dev", argv[4], "handle", "ffff:", "ingress")
    if argv[:4] == ("iptables", "-w", "-A", CHAIN):
        return ("iptables", "-w", "-F", CHAIN)
    raise AssertionError(f"no undo covers {argv}")


def _inverse(argv: tuple[str, ...]) -> tuple[str, ...]:
    """The undo a change with its own undo must have."""
    table = {("tc", "qdisc", "replace"): lambda a: ("tc", "qdisc", "del", "dev", a[4], "root"),
             ("tc", "qdisc", "add"): lambda a: ("tc", "qdisc", "del", *a[3:]),
             ("ip", "link", "add"): lambda a: ("ip", "link", "del", a[3]),
             ("iptables", "-w", "-N"): lambda a: ("iptables", "-w", "-X", a[3]),
             ("iptables", "-w", "-I"): lambda a: ("iptables", "-w", "-D", *a[3:])}
    key = argv[:3]
    assert key in table, argv
    return table[key](argv)


def _setups() -> list[tuple[str, PathSetup]]:
    paths = {
        "plain": resolved(rate="20mbit", rtt="50ms"),
        "jitter-loss-reverse-rate": resolved(rate="100mbit", rtt="10ms", jitter=0.1, loss=0.01,
                                             reverse_rate="10mbit"),
        "no-delay": resolved(rate="20mbit", rtt=0, buffer="100p"),
        "links": resolved(links=[{"rate": "20mbit", "delay": 10, "loss": 0.01},
                                 {"rate": "20mbit", "delay": 10, "jitter": 0.1}],
                          reorder_timeout=200, reverse_rate="5mbit"),
        "trace": resolved(trace=TRACE.name, rtt="50ms", loss=0.02, reverse_rate="5mbit"),
    }
    out = []
    for name, path in paths.items():
        for placement in (ROUTER, EGRESS):
            out.append((f"nfqueue-{name}-{placement.kind}",
                        path_setup(path, "nfqueue", placement, PROGRAM)))
            if path.links is None and path.trace is None:
                out.append((f"netem-{name}-{placement.kind}",
                            path_setup(path, "netem", placement, PROGRAM)))
    return out


SETUPS = _setups()


@pytest.mark.parametrize("name, setup", SETUPS, ids=[n for n, _ in SETUPS])
def test_every_change_is_undone(name: str, setup: PathSetup) -> None:
    journal: list[tuple[str, ...]] = []
    for step in setup.steps:
        assert step.argv is not None or step.undo is not None, step  # no empty step
        if step.undo is not None:
            journal.append(step.undo)  # the node journals the undo before the change
            if step.argv is not None:
                assert step.undo == _inverse(step.argv), step
        elif step.argv is not None:
            assert _covering_undo(step.argv) in journal, (name, step.argv, journal)
    # replayed backwards: the rules are flushed before the jumps go, the jumps before the
    # chain; an IFB's own qdisc goes before the IFB
    replay = list(reversed(journal))
    if ("iptables", "-w", "-N", CHAIN) in [s.argv for s in setup.steps]:
        flush = replay.index(("iptables", "-w", "-F", CHAIN))
        jumps = [i for i, u in enumerate(replay) if u[2] == "-D"]
        assert jumps and flush < min(jumps) and max(jumps) < replay.index(
            ("iptables", "-w", "-X", CHAIN))
    if ("ip", "link", "del", IFB) in replay:
        link = replay.index(("ip", "link", "del", IFB))
        assert all(i < link for i, u in enumerate(replay) if u[:5] == ("tc", "qdisc", "del",
                                                                       "dev", IFB))


def test_undo_journal_of_the_router_path() -> None:
    setup = path_setup(resolved(rate="20mbit", rtt="10ms", loss=0.01), "nfqueue", ROUTER,
                       PROGRAM)
    assert list(reversed(undos(setup))) == [
        ("iptables", "-w", "-F", CHAIN),
        ("iptables", "-w", "-D", "FORWARD", "-j", CHAIN),
        ("iptables", "-w", "-X", CHAIN),
        ("tc", "qdisc", "del", "dev", "rc", "root"),
    ]
    assert Step(("iptables", "-w", "-N", CHAIN), ("iptables", "-w", "-X", CHAIN)) in setup.steps


# -- the nfqueue backend -----------------------------------------------------------------------
def test_nfqueue_plain_path() -> None:
    setup = nfqueue_setup(resolved(rate="20mbit", rtt="50ms"), EGRESS, PROGRAM)
    assert setup.backend == "nfqueue" and setup.bottleneck == "s0 1:"
    assert commands(setup) == [
        "tc qdisc replace dev s0 root handle 1: tbf rate 20000000bit burst 6514 limit 125000",
        f"iptables -w -N {CHAIN}", f"iptables -w -I INPUT -j {CHAIN}",
        f"iptables -w -I OUTPUT -j {CHAIN}",
        f"iptables -w -A {CHAIN} -i s0 -j NFQUEUE --queue-num 1",
    ]
    # no jitter: all of the base delay on the reverse direction, none on the data
    assert setup.delay_lines == (DelayLineSpec("reverse", REVERSE_QUEUE,
                                               (PROGRAM, "--queue", "1", "--delay", "50")),)


def test_nfqueue_jitter_halves_the_delay() -> None:
    setup = nfqueue_setup(resolved(rate="20mbit", rtt="50ms", jitter=0.1), ROUTER, PROGRAM)
    data, reverse = setup.delay_lines
    assert data == DelayLineSpec("data", DATA_QUEUE, (PROGRAM, "--queue", "0", "--delay", "25",
                                                      "--jitter", "0.1"))
    assert reverse.args == (PROGRAM, "--queue", "1", "--delay", "25")
    assert commands(setup)[-2:] == [
        f"iptables -w -A {CHAIN} -i rs -o rc -j NFQUEUE --queue-num 0",
        f"iptables -w -A {CHAIN} -i rc -o rs -j NFQUEUE --queue-num 1"]


def test_nfqueue_loss_where_it_is_dropped() -> None:
    path = resolved(rate="20mbit", rtt="50ms", loss=0.001)
    router = nfqueue_setup(path, ROUTER, PROGRAM)
    assert (f"iptables -w -A {CHAIN} -i rs -o rc -m statistic --mode random --probability "
            "0.001000 -j DROP") in commands(router)
    assert [x.direction for x in router.delay_lines] == ["reverse"]
    egress = nfqueue_setup(path, EGRESS, PROGRAM)
    assert not [c for c in commands(egress) if "statistic" in c]
    assert egress.delay_lines[0].args == (PROGRAM, "--queue", "0", "--loss", "0.001000")
    assert data_line_args(path) == ["--queue", "0"]  # without loss: nothing to do


def test_nfqueue_no_delay_no_delay_line() -> None:
    setup = nfqueue_setup(resolved(rate="20mbit", rtt=0, buffer="64KiB"), ROUTER, PROGRAM)
    assert setup.delay_lines == ()
    assert not [c for c in commands(setup) if "NFQUEUE" in c]
    assert commands(setup)[0].endswith("limit 65536")


def test_nfqueue_reverse_rate() -> None:
    path = resolved(rate="20mbit", rtt="50ms", reverse_rate="1mbit")
    router = commands(nfqueue_setup(path, ROUTER, PROGRAM))
    assert router[1] == ("tc qdisc replace dev rs root handle 1: tbf rate 1000000bit burst 3028 "
                         "limit 10000000")
    egress = nfqueue_setup(path, EGRESS, PROGRAM)
    assert commands(egress)[1:6] == [
        f"ip link add {IFB} type ifb", f"ip link set {IFB} up",
        "tc qdisc add dev s0 handle ffff: ingress",
        "tc filter add dev s0 parent ffff: protocol all u32 match u32 0 0 action mirred egress "
        f"redirect dev {IFB}",
        f"tc qdisc replace dev {IFB} root handle 1: tbf rate 1000000bit burst 3028 limit 10000000"]
    # without a reverse rate no IFB is made
    assert not [c for c in commands(nfqueue_setup(resolved(rate="20mbit", rtt=50), EGRESS,
                                                  PROGRAM)) if IFB in c]


def test_nfqueue_two_links() -> None:
    path = resolved(links=[{"rate": "20mbit", "delay": 10, "loss": 0.01},
                           {"rate": "30mbit", "delay": "20ms", "jitter": 0.1, "buffer": "10p"}],
                    split={"batch": 50, "ratio": "2:1"}, reorder_timeout="200ms")
    setup = nfqueue_setup(path, EGRESS, PROGRAM)
    assert setup.bottleneck is None  # each link has its own buffer in the delay line
    assert not [c for c in commands(setup) if c.startswith("tc ") or "DROP" in c]
    data, reverse = setup.delay_lines
    assert data.args == (PROGRAM, "--queue", "0",
                         "--link", "rate=20000000,delay=10,jitter=0,loss=0.01,buffer=50000",
                         "--link", "rate=30000000,delay=20,jitter=0.1,loss=0,buffer=15140",
                         "--batch", "50", "--ratio", "2:1", "--reorder-timeout", "200")
    assert reverse.args == (PROGRAM, "--queue", "1", "--delay", "10")


TWO_LINKS = {"links": [{"rate": "20mbit", "delay": 10}, {"rate": "20mbit", "delay": 30}]}


@pytest.mark.parametrize("pins", [{5201: 1, 443: 0}, ((5201, 1), (443, 0))])
def test_nfqueue_pins_go_to_the_data_line(pins: dict[int, int] | tuple[tuple[int, int], ...]
                                          ) -> None:
    path = resolved(**TWO_LINKS)
    data, reverse = path_setup(path, "nfqueue", ROUTER, PROGRAM, pins=pins).delay_lines
    assert data.args[-4:] == ("--pin", "443=0", "--pin", "5201=1")  # sorted by port
    assert data.args[:-4] == (PROGRAM, *data_line_args(path))
    assert "--pin" not in reverse.args
    assert nfqueue_setup(path, ROUTER, PROGRAM, pins) == path_setup(path, "nfqueue", ROUTER,
                                                                    PROGRAM, pins)
    assert check_pins(path, pins) == ((443, 0), (5201, 1))
    assert "--pin" not in nfqueue_setup(path, ROUTER, PROGRAM).delay_lines[0].args


@pytest.mark.parametrize(("kwargs", "pins", "message"), [
    ({"rate": "20mbit", "rtt": "50ms"}, {4433: 1}, "pinned port 4433: .* two links"),
    ({"rate": "20mbit", "rtt": "50ms", "jitter": 0.1}, {4433: 0}, "pinned port 4433: .* two "
     "links"),
    (TWO_LINKS, {0: 1}, "pinned port 0: not a port"),
    (TWO_LINKS, {70000: 1}, "pinned port 70000: not a port"),
    (TWO_LINKS, {443: 2}, "pinned port 443: link 2 is not 0 or 1"),
    (TWO_LINKS, ((443, 0), (443, 1)), "pinned port 443: pinned twice"),
])
def test_pins_refused(kwargs: dict[str, object], pins: dict[int, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        path_setup(resolved(**kwargs), "nfqueue", ROUTER, PROGRAM, pins=pins)


def test_netem_refuses_pins() -> None:
    """netem has no two links: pins are refused on its paths (and with two links, the
    path itself needs the nfqueue backend)."""
    with pytest.raises(ValueError, match="pinned port 4433: .* two links"):
        path_setup(resolved(rate="20mbit", rtt="50ms"), "netem", ROUTER, PROGRAM, {4433: 1})
    with pytest.raises(ValueError, match="need the nfqueue backend"):
        path_setup(resolved(**TWO_LINKS), "netem", ROUTER, PROGRAM, {4433: 1})


def test_nfqueue_trace() -> None:
    path = resolved(trace=TRACE.name, rtt="40ms", buffer="100p", loss=0.01)
    router = nfqueue_setup(path, ROUTER, PROGRAM)
    assert router.bottleneck is None
    assert router.delay_lines[0].args == (PROGRAM, "--queue", "0", "--trace", "TRACE",
                                          "--trace-buffer", "151400")
    assert [c for c in commands(router) if "statistic" in c]  # forwarded: iptables drops
    egress = nfqueue_setup(path, EGRESS, PROGRAM)
    assert egress.delay_lines[0].args[-2:] == ("--loss", "0.010000")
    assert not [c for c in commands(egress) if "statistic" in c]


# -- the netem backend -------------------------------------------------------------------------
def test_netem_router() -> None:
    setup = netem_setup(resolved(rate="20mbit", rtt="50ms", loss=0.001), ROUTER)
    assert setup.backend == "netem" and setup.delay_lines == ()
    assert setup.bottleneck == "rc 2:"  # the tbf child of netem
    assert commands(setup) == [
        f"tc qdisc replace dev rc root handle 1: netem limit {NETEM_LIMIT} delay 0ms loss "
        "random 0.1%",
        "tc qdisc replace dev rc parent 1:1 handle 2: tbf rate 20000000bit burst 6514 limit "
        "125000",
        f"tc qdisc replace dev rs root handle 1: netem limit {NETEM_LIMIT} delay 50ms"]


def test_netem_jitter_egress_reverse_rate() -> None:
    setup = netem_setup(resolved(rate="100mbit", rtt="20ms", jitter=0.2, loss=0.01,
                                 reverse_rate="10mbit"), EGRESS)
    lines = commands(setup)
    assert lines[0] == (f"tc qdisc replace dev s0 root handle 1: netem limit {NETEM_LIMIT} delay "
                        "10ms 2ms distribution normal loss random 1%")
    assert lines[2] == f"ip link add {IFB} type ifb"
    assert lines[-2:] == [
        f"tc qdisc replace dev {IFB} root handle 1: netem limit {NETEM_LIMIT} delay 10ms",
        f"tc qdisc replace dev {IFB} parent 1:1 handle 2: tbf rate 10000000bit burst 4014 limit "
        "10000000"]


@pytest.mark.parametrize("kwargs", [
    {"links": [{"rate": "20mbit", "delay": 10}] * 2},
    {"trace": TRACE.name, "rtt": 50},
])
def test_netem_refuses_links_and_traces(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="need the nfqueue backend"):
        path_setup(resolved(**kwargs), "netem", ROUTER, PROGRAM)
    assert path_setup(resolved(**kwargs), "nfqueue", ROUTER, PROGRAM).backend == "nfqueue"


def test_path_setup_dispatches() -> None:
    path = resolved(rate="20mbit", rtt="50ms")
    assert path_setup(path, "netem", ROUTER, PROGRAM) == netem_setup(path, ROUTER)
    assert path_setup(path, "nfqueue", ROUTER, PROGRAM) == nfqueue_setup(path, ROUTER, PROGRAM)


def test_an_upload_path_swaps_the_routers_interfaces() -> None:
    up = ROUTER.towards_server()
    assert (up.data_if, up.reverse_if) == ("rs", "rc")
    assert up.data_hook == ["FORWARD", "-i", "rc", "-o", "rs"]
    setup = path_setup(resolved(rate="20mbit", rtt="50ms", buffer="1bdp"), "nfqueue", up,
                       PROGRAM)
    assert any(" dev rs " in f" {c} " and "tbf" in c for c in commands(setup))
    assert not any(" dev rc " in f" {c} " and "tbf" in c for c in commands(setup))
    with pytest.raises(ValueError, match="needs a router node"):
        EGRESS.towards_server()
