"""The path's delay line (interop_runner/testbed/path/delayline.c) on the real kernel: built with
gcc, bound to an NFQUEUE queue in a router namespace of its own, between two end namespaces
(a: 10.203.0.1 -- r -- b: 10.203.1.1, and fd03:203::1 -- r -- fd03:203:1::1). Delay, loss,
jitter, two links, flows pinned to a link, a trace, bad input, SIGTERM and one TCP flow at
100 Mbit/s are checked against what the ends see and against the
delay line's own counters (its --stats file, fresh on SIGUSR1).

The namespaces are this run's own (``qirdl-test-<pid>-*``), never the project's testbed
(qir-server, qir-client, qir-router), and are removed at the end even after a failure.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from .conftest import ROOT, wait_until

SOURCE = ROOT / "interop_runner" / "testbed" / "path" / "delayline.c"
HEADER = Path("/usr/include/libnetfilter_queue/libnetfilter_queue.h")
TOOLS = ("gcc", "ip", "iptables", "ip6tables", "tc", "ping")
PREFIX = "qirdl-test-"
QUEUE = 0
A_IP, B_IP = "10.203.0.1", "10.203.1.1"
A_IP6, B_IP6 = "fd03:203::1", "fd03:203:1::1"
# the router's interfaces: toward a (where a->b packets come in) and toward b
R_A_IF, R_B_IF = "dlra", "dlrb"
PORT = 40000

Stats = dict[str, Any]


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, iptables, NFQUEUE)"
    tools = [t for t in TOOLS if shutil.which(t) is None]
    if tools:
        return f"missing {', '.join(tools)} (pos_scripts/install.sh installs them)"
    if not HEADER.exists():
        return "missing libnetfilter-queue-dev (pos_scripts/install.sh installs it)"
    return None


pytestmark = [pytest.mark.testbed,
              pytest.mark.skipif(_missing() is not None, reason=_missing() or "")]


def run(argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run a command; fail the test with its output when it fails."""
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{argv}: {proc.stdout}{proc.stderr}"
    return proc


# ------------------------------------------------------------------------------- the network --

@dataclass(frozen=True)
class Net:
    """a -- r -- b, with forwarding on in r."""

    a: str
    r: str
    b: str

    def argv(self, ns: str, *cmd: str) -> list[str]:
        return ["ip", "netns", "exec", ns, *cmd]

    def run(self, ns: str, *cmd: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return run(self.argv(ns, *cmd), timeout=timeout)

    def popen(self, ns: str, *cmd: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self.argv(ns, *cmd), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def reset_router(self) -> None:
        """No NFQUEUE rule and no qdisc of a test left in the router."""
        self.run(self.r, "iptables", "-F", "FORWARD")
        self.run(self.r, "ip6tables", "-F", "FORWARD")
        for dev in (R_A_IF, R_B_IF):
            subprocess.run(self.argv(self.r, "tc", "qdisc", "del", "dev", dev, "root"),
                           capture_output=True, timeout=10)


def make_net(prefix: str) -> Net:
    """Three namespaces named prefix + a/r/b; the veths are made inside them (their names never
    exist in the root namespace)."""
    net = Net(prefix + "a", prefix + "r", prefix + "b")
    for ns in (net.a, net.r, net.b):
        run(["ip", "netns", "add", ns])
        run(["ip", "-n", ns, "link", "set", "lo", "up"])
    for end, end_if, r_if in ((net.a, "dla", R_A_IF), (net.b, "dlb", R_B_IF)):
        run(["ip", "link", "add", end_if, "netns", end, "type", "veth", "peer", "name", r_if,
             "netns", net.r])
    for ns, dev, addr, via in ((net.a, "dla", A_IP, "10.203.0.254"),
                               (net.b, "dlb", B_IP, "10.203.1.254")):
        run(["ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev])
        run(["ip", "-n", ns, "link", "set", dev, "up"])
        run(["ip", "-n", ns, "route", "add", "default", "via", via])
        # TCP buffers for one flow at 100 Mbit/s and more over tens of ms (per namespace)
        net.run(ns, "sysctl", "-qw", "net.ipv4.tcp_rmem=4096 131072 67108864",
                "net.ipv4.tcp_wmem=4096 16384 67108864")
    for dev, addr in ((R_A_IF, "10.203.0.254/24"), (R_B_IF, "10.203.1.254/24")):
        run(["ip", "-n", net.r, "addr", "add", addr, "dev", dev])
        run(["ip", "-n", net.r, "link", "set", dev, "up"])
    net.run(net.r, "sysctl", "-qw", "net.ipv4.ip_forward=1")
    add_ipv6(net)
    return net


def add_ipv6(net: Net) -> None:
    """The same network in IPv6 (no duplicate address detection: usable at once)."""
    for ns, dev, addr, via in ((net.a, "dla", A_IP6, "fd03:203::fe"),
                               (net.b, "dlb", B_IP6, "fd03:203:1::fe")):
        run(["ip", "-n", ns, "addr", "add", f"{addr}/64", "dev", dev, "nodad"])
        run(["ip", "-n", ns, "-6", "route", "add", "default", "via", via])
    for dev, addr in ((R_A_IF, "fd03:203::fe/64"), (R_B_IF, "fd03:203:1::fe/64")):
        run(["ip", "-n", net.r, "addr", "add", addr, "dev", dev, "nodad"])
    net.run(net.r, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")


def remove_namespace(ns: str) -> None:
    """End the processes left in it (ours: nothing else runs there), then delete it."""
    pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True,
                          timeout=10).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)


def remove_stale_namespaces() -> None:
    """Namespaces of an earlier run of these tests that died before its finalizer."""
    for name in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                               timeout=10).stdout.split():
        m = re.fullmatch(re.escape(PREFIX) + r"(\d+)-[arb]", name)
        if m and not Path(f"/proc/{m.group(1)}").exists():
            remove_namespace(name)


def build(out: Path) -> Path:
    """The binary, built as on a router node."""
    binary = out / "qir-delayline"
    run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(binary), str(SOURCE),
         "-lnetfilter_queue", "-lm"], timeout=120)
    return binary


# ---------------------------------------------------------------------------- the delay line --

@dataclass
class DelayLine:
    """One running delay line in the router namespace."""

    proc: subprocess.Popen[str]
    stats_path: Path
    log_path: Path | None = None
    final: Stats = field(default_factory=dict)

    def stats(self, cond: Callable[[Stats], bool] = lambda s: True, timeout: float = 10,
              what: str = "the delay line's stats") -> Stats:
        """Fresh stats (SIGUSR1 writes them at once), polled until ``cond`` holds."""
        def fresh() -> Stats:  # {}: not yet
            self.proc.send_signal(signal.SIGUSR1)
            time.sleep(0.02)  # the file is rewritten within the loop's next turn
            s: Stats = json.loads(self.stats_path.read_text())
            return s if cond(s) else {}
        return wait_until(fresh, timeout=timeout, interval=0.03, what=what)

    def stop(self) -> Stats:
        """SIGTERM: held packets go, the final stats are written, exit 0."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail("the delay line did not exit on SIGTERM")
        stderr = self.proc.stderr.read() if self.proc.stderr else ""
        assert rc == 0, f"delay line exit {rc}: {stderr}"
        self.final = json.loads(self.stats_path.read_text())
        return self.final


def read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    """One line of a child's stdout, waiting at most ``timeout`` s ('' when none came)."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return proc.stdout.readline() if ready else ""


@dataclass
class Router:
    """Starts delay lines and their iptables rules in the router; the fixture stops them."""

    net: Net
    binary: Path
    tmp: Path
    lines: list[DelayLine] = field(default_factory=list)

    def start(self, *args: str, rules: tuple[str, ...] = (R_A_IF,),
              log: bool = False) -> DelayLine:
        """Start the delay line, wait for "ready", then send the forwarded packets that come
        in on each of ``rules``' interfaces to it (not before: unbound, they are dropped)."""
        n = len(self.lines)
        stats = self.tmp / f"stats{n}.json"
        log_path = self.tmp / f"log{n}.csv" if log else None
        argv = [str(self.binary), "--queue", str(QUEUE), "--stats", str(stats), *args]
        if log_path:
            argv += ["--log", str(log_path)]
        line = DelayLine(self.net.popen(self.net.r, *argv), stats, log_path)
        self.lines.append(line)
        first = read_line(line.proc, 10)
        if first != f"ready queue={QUEUE}\n":
            line.proc.kill()
            pytest.fail(f"the delay line did not start: {first!r} {line.proc.communicate()[1]}")
        for dev in rules:
            for tables in ("iptables", "ip6tables"):
                self.net.run(self.net.r, tables, "-A", "FORWARD", "-i", dev, "-j", "NFQUEUE",
                             "--queue-num", str(QUEUE))
        return line

    def tbf(self, dev: str, rate_mbit: float, limit_bytes: int) -> None:
        burst = max(64 * 1024, int(rate_mbit * 1e6 / 8 / 1000))  # >= 1 ms at the rate
        self.net.run(self.net.r, "tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate",
                     f"{rate_mbit}mbit", "burst", str(burst), "limit", str(limit_bytes))

    def close(self) -> None:
        self.net.reset_router()
        for line in self.lines:
            if line.proc.poll() is None:
                line.proc.send_signal(signal.SIGTERM)
            try:
                line.proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                line.proc.kill()
                line.proc.communicate()


@pytest.fixture(scope="module")
def binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("delayline"))


@pytest.fixture(scope="module")
def net() -> Iterator[Net]:
    remove_stale_namespaces()
    prefix = f"{PREFIX}{os.getpid()}-"
    try:
        yield make_net(prefix)
    finally:
        for end in "arb":
            remove_namespace(prefix + end)


@pytest.fixture
def router(net: Net, binary: Path, tmp_path: Path) -> Iterator[Router]:
    r = Router(net, binary, tmp_path)
    try:
        yield r
    finally:
        r.close()


# ------------------------------------------------------------------------------ the traffic --

def ping(net: Net, count: int, interval: float, wait: float = 1) -> tuple[int, list[float]]:
    """ping a -> b: (replies, RTTs in ms); exit 1 (some lost) is no failure here."""
    out = subprocess.run(net.argv(net.a, "ping", "-n", "-c", str(count), "-i", str(interval),
                                  "-W", str(wait), B_IP),
                         capture_output=True, text=True, timeout=60 + count * interval).stdout
    m = re.search(r"(\d+) packets transmitted, (\d+) received", out)
    assert m and int(m.group(1)) == count, out
    return int(m.group(2)), [float(t) for t in re.findall(r"time=([\d.]+) ms", out)]


# A UDP receiver in b: numbered datagrams (8-byte big-endian number first) until `expect` came
# or nothing came for `idle` s; prints one JSON line: count, out of order (a number below the
# highest seen before it), IP bytes and the rate between the first and the last arrival.
RECEIVER = r"""
import json, socket, sys, time
port, expect, idle = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, 33, 32 << 20)  # SO_RCVBUFFORCE (no name in socket)
s.bind(("0.0.0.0", port))
s.settimeout(30)
print("ready", flush=True)
n = ooo = nbytes = 0
top = -1
first = last = 0.0
first_size = 0
while n < expect:
    try:
        data = s.recv(65535)
    except socket.timeout:
        break
    last = time.monotonic()
    seq = int.from_bytes(data[:8], "big")
    if n == 0:
        first, first_size = last, len(data) + 28
        s.settimeout(idle)
    n += 1
    nbytes += len(data) + 28
    if seq < top:
        ooo += 1
    top = max(top, seq)
span = last - first
rate = (nbytes - first_size) * 8 / span if span > 0 else 0.0
print(json.dumps({"count": n, "out_of_order": ooo, "bytes": nbytes, "rate_bps": rate}))
"""

# A UDP sender in a: `count` numbered datagrams of `size` bytes at `rate` bit/s of IP packets
# (0: as fast as it goes), paced in bursts of at most 1 ms, from source port `sport` (0: any).
SENDER = r"""
import socket, sys, time
dst, port, count, size, rate, sport = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
                                       int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]))
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", sport))
pad = bytes(size - 8)
gap = (size + 28) * 8 / rate if rate > 0 else 0.0
t0 = time.monotonic()
for i in range(count):
    if gap:
        ahead = t0 + i * gap - time.monotonic()
        if ahead > 0.001:
            time.sleep(ahead)
    s.sendto(i.to_bytes(8, "big") + pad, (dst, port))
"""


@dataclass(frozen=True)
class Flow:
    """Numbered datagrams a -> b: to ``port``, from ``sport`` (0: any)."""

    count: int
    size: int
    rate_bps: float
    port: int = PORT
    sport: int = 0


def udp(net: Net, count: int, size: int, rate_bps: float, idle: float = 0.5,
        expect: int | None = None) -> dict[str, Any]:
    """Send numbered datagrams a -> b; what the receiver saw."""
    return udp_flows(net, [Flow(count, size, rate_bps)], idle, expect)[0]


def udp_flows(net: Net, flows: list[Flow], idle: float = 0.5,
              expect: int | None = None) -> list[dict[str, Any]]:
    """Send the flows at once; what each receiver saw."""
    receivers: list[subprocess.Popen[str]] = []
    senders: list[subprocess.Popen[str]] = []
    try:
        for f in flows:
            rx = net.popen(net.b, sys.executable, "-c", RECEIVER, str(f.port),
                           str(expect or f.count), str(idle))
            receivers.append(rx)
            if read_line(rx, 10) != "ready\n":
                pytest.fail(f"the UDP receiver did not start: {rx.communicate()[1]}")
        senders += [net.popen(net.a, sys.executable, "-c", SENDER, B_IP, str(f.port),
                              str(f.count), str(f.size), str(f.rate_bps), str(f.sport))
                    for f in flows]
        for tx in senders:
            _, err = tx.communicate(timeout=60)
            assert tx.returncode == 0, err
        return [_received(rx) for rx in receivers]
    finally:
        for proc in receivers + senders:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


def _received(rx: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = rx.communicate(timeout=60)
    assert rx.returncode == 0, err
    got: dict[str, Any] = json.loads(out)
    return got


def binomial_interval(n: int, p: float, level: float) -> tuple[int, int]:
    from scipy.stats import binom

    lo, hi = binom.interval(level, n, p)
    return int(lo), int(hi)


# ------------------------------------------------------------------------------------ tests --

def test_delay_adds_its_delay_to_the_rtt(router: Router) -> None:
    replies, rtts = ping(router.net, 20, 0.05)
    assert replies == 20
    baseline = statistics.median(rtts)
    line = router.start("--delay", "20")  # a -> b only: the rule matches the a-side interface
    replies, rtts = ping(router.net, 20, 0.05)
    assert replies == 20
    assert abs(statistics.median(rtts) - (baseline + 20)) <= 1.5, (baseline, rtts)
    s = line.stats(lambda s: s["delivered"] >= 20, what="20 pings delivered")
    assert s["mode"] == "delay"
    assert s["received"] == s["delivered"] == 20
    assert s["dropped_loss"] == s["dropped_buffer"] == s["reordered"] == 0
    assert s["bytes_received"] == s["bytes_delivered"] == 20 * 84  # IPv4 + ICMP + 56 bytes
    assert s["held"] == 0 and s["held_max"] >= 1


def test_loss_drops_its_share(router: Router) -> None:
    line = router.start("--loss", "0.3", "--seed", "1")
    replies, _ = ping(router.net, 400, 0.002)
    s = line.stats(lambda s: s["received"] == 400, what="400 pings received")
    lo, hi = binomial_interval(400, 0.3, 0.999)
    assert lo <= s["dropped_loss"] <= hi, (lo, s["dropped_loss"], hi)
    assert 400 - replies == s["dropped_loss"]  # only the requests pass the delay line
    assert s["delivered"] == replies and s["dropped_buffer"] == 0
    assert s["links"] == [{"packets": 400, "bytes": 400 * 84, "dropped_loss": s["dropped_loss"],
                           "dropped_buffer": 0, "pinned": 0}]


def test_jitter_reorders_and_the_count_matches_the_receiver(router: Router) -> None:
    line = router.start("--delay", "10", "--jitter", "0.5", "--seed", "3", log=True)
    rx = udp(router.net, 2000, 100, 16e6)
    s = line.stats(lambda s: s["delivered"] == 2000, what="2000 datagrams delivered")
    assert rx["count"] == s["received"] == 2000
    assert rx["out_of_order"] > 0
    assert s["reordered"] == rx["out_of_order"]
    final = line.stop()  # the log is complete at exit
    assert final["delivered"] == 2000
    assert line.log_path is not None
    rows = [r.split(",") for r in line.log_path.read_text().splitlines()]
    assert rows[0] == ["arrival_ns", "release_ns", "size", "link", "fate", "proto", "src",
                       "sport", "dst", "dport"]
    assert len(rows) == 2001
    for arrival, release, size, link, fate, proto, src, _sport, dst, dport in rows[1:]:
        assert (size, link, fate, proto, src, dst, dport) == (
            "128", "0", "d", "17", A_IP, B_IP, str(PORT))
        assert 0 <= int(release) - int(arrival) < 60e6  # N(10, 5^2) ms, within 10 sd
    now = time.time_ns()
    assert abs(int(rows[1][0]) - now) < 60e9  # realtime, not monotonic


LINK = "rate=20e6,delay=10,jitter=0.1,loss=0,buffer=200000"


@pytest.mark.parametrize("timeout", [200, 0])
def test_two_links_reorder_back_into_sequence(router: Router, timeout: int) -> None:
    line = router.start("--link", LINK, "--link", LINK, "--batch", "100", "--ratio", "1:1",
                        "--reorder-timeout", str(timeout))
    rx = udp(router.net, 1000, 1000, 16e6)
    s = line.stats(lambda s: s["delivered"] == 1000, what="1000 datagrams delivered")
    assert s["mode"] == "links"
    assert rx["count"] == 1000 and s["dropped_loss"] == s["dropped_buffer"] == 0
    assert [link["packets"] for link in s["links"]] == [500, 500]
    if timeout:
        assert rx["out_of_order"] == s["reordered"] == s["reorder_timeouts"] == 0
    else:
        assert rx["out_of_order"] > 0
        assert s["reordered"] == rx["out_of_order"]


@pytest.mark.parametrize("timeout", [0, 200])
def test_two_links_deliver_their_summed_rate(router: Router, timeout: int) -> None:
    link = "rate=10e6,delay=5,buffer=60000"
    line = router.start("--link", link, "--link", link, "--reorder-timeout", str(timeout))
    count = 10500  # 2 s at 60 Mbit/s of 1428-byte IP packets
    rx = udp(router.net, count, 1400, 60e6)
    s = line.stats(lambda s: s["received"] == count and s["held"] == 0,
                   what="the blast received and released")
    assert rx["rate_bps"] == pytest.approx(20e6, rel=0.05)
    assert s["dropped_buffer"] > count / 2 and s["dropped_loss"] == 0
    assert s["delivered"] == rx["count"] == count - s["dropped_buffer"]
    assert sum(link["dropped_buffer"] for link in s["links"]) == s["dropped_buffer"]
    if timeout:
        # a full link's queue drains in 48 ms, well within the timeout; a dropped packet
        # must not hold up the ones after it (its number is done at once)
        assert rx["out_of_order"] == s["reordered"] == s["reorder_timeouts"] == 0


def test_reorder_timeout_gives_up_a_gap(router: Router) -> None:
    """Link 0 is 55 ms slower than link 1. Each switch to link 1 (packets 100-199, 300-399)
    leaves a gap: link 0's last packets are still on their way when link 1's first arrive.
    After 20 ms the gap is given up once: the waiting packet and every one ready after it go
    (one timeout per switch, not one per packet), and link 0's stragglers go late, out of
    order, as they come."""
    slow, fast = "rate=100e6,delay=60,buffer=1000000", "rate=100e6,delay=5,buffer=1000000"
    line = router.start("--link", slow, "--link", fast, "--reorder-timeout", "20")
    rx = udp(router.net, 400, 100, 128 * 8 * 1000)  # one packet per ms
    s = line.stats(lambda s: s["delivered"] == 400, what="400 datagrams delivered")
    assert rx["count"] == 400
    assert s["reorder_timeouts"] == 2
    assert 0 < rx["out_of_order"] == s["reordered"]


def test_pinned_flows_keep_their_link(router: Router) -> None:
    """Two flows pinned next to a split one (paper 002's fairness experiment): one by its
    destination port to the slow link 1, one by its source port to the fast link 0. The split
    flow's batches and ratio count only its own packets (3 batches of 10 on link 0, 1 on link
    1) and come back in sequence; a pinned packet is not held back by the reordering: those on
    link 0 take its 5 ms while the split packets on link 1 take 40."""
    fast, slow = "rate=20e6,delay=5,buffer=1000000", "rate=20e6,delay=40,buffer=1000000"
    line = router.start("--link", fast, "--link", slow, "--batch", "10", "--ratio", "3:1",
                        "--reorder-timeout", "200", "--pin", "40001=1", "--pin", "40102=0",
                        log=True)
    split, to_1, to_0 = udp_flows(router.net, [Flow(400, 1000, 4e6),
                                               Flow(100, 1000, 1e6, port=40001),
                                               Flow(100, 1000, 1e6, port=40002, sport=40102)])
    assert [split["count"], to_1["count"], to_0["count"]] == [400, 100, 100]
    assert split["out_of_order"] == to_1["out_of_order"] == to_0["out_of_order"] == 0
    s = line.stop()
    assert s["delivered"] == 600 and s["reordered"] == s["reorder_timeouts"] == 0
    assert [(x["packets"], x["pinned"]) for x in s["links"]] == [(400, 100), (200, 100)]
    assert line.log_path is not None
    rows = [r.split(",") for r in line.log_path.read_text().splitlines()[1:]]
    links = {port: [r[3] for r in rows if r[9] == port] for port in ("40000", "40001", "40002")}
    assert links["40000"] == (["0"] * 30 + ["1"] * 10) * 10  # delivered in sequence
    assert links["40001"] == ["1"] * 100 and links["40002"] == ["0"] * 100
    held_ms = [(int(r[1]) - int(r[0])) / 1e6 for r in rows if r[7] == "40102"]
    assert max(held_ms) < 20, max(held_ms)


# A TCP sink in b: accepts one connection on ($1, $2), prints the bytes it read.
TCP_SINK = r"""
import socket, sys
s = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(1)
print("ready", flush=True)
c, _ = s.accept()
n = 0
while data := c.recv(65536):
    n += len(data)
print(n)
"""


def tcp(net: Net, dst: str, port: int, nbytes: int) -> int:
    """One TCP connection a -> b carrying ``nbytes``; what b read."""
    sink = net.popen(net.b, sys.executable, "-c", TCP_SINK, dst, str(port))
    try:
        if read_line(sink, 10) != "ready\n":
            pytest.fail(f"the TCP sink did not start: {sink.communicate()[1]}")
        net.run(net.a, sys.executable, "-c", "import socket, sys; c = socket.create_connection("
                "(sys.argv[1], int(sys.argv[2])), timeout=30); c.sendall(bytes(int(sys.argv[3])))"
                "; c.close()", dst, str(port), str(nbytes), timeout=60)
        out, err = sink.communicate(timeout=60)
    finally:
        if sink.poll() is None:
            sink.kill()
            sink.communicate()
    assert sink.returncode == 0, err
    return int(out)


@pytest.mark.parametrize(("dst", "src"), [(B_IP, A_IP), (B_IP6, A_IP6)])
def test_pinned_tcp_over_ipv4_and_ipv6(router: Router, dst: str, src: str) -> None:
    """A TCP connection pinned by its destination port: every packet of the data direction
    (the handshake's SYN and final ACK included) takes link 1, none is split."""
    line = router.start("--link", LINK, "--link", LINK, "--reorder-timeout", "200", "--pin",
                        "5301=1", log=True)
    assert tcp(router.net, dst, 5301, 300_000) == 300_000
    s = line.stop()
    assert s["received"] == s["delivered"] > 200_000 // 1500
    assert [(x["packets"], x["pinned"]) for x in s["links"]] == [(0, 0), (s["received"],) * 2]
    assert line.log_path is not None
    rows = [r.split(",") for r in line.log_path.read_text().splitlines()[1:]]
    assert {(r[3], r[5], r[6], r[8], r[9]) for r in rows} == {("1", "6", src, dst, "5301")}


# IP size -> rate: an opportunity carries 1500 bytes of whole packets (two of 750 bytes, but
# only one of 1000: the second waits for the next opportunity)
@pytest.mark.parametrize(("ip_size", "rate"), [(1500, 12e6), (750, 12e6), (1000, 8e6)])
def test_trace_sets_the_rate(router: Router, ip_size: int, rate: float) -> None:
    trace = router.tmp / "12mbit.trace"
    trace.write_text("".join(f"{ms}\n" for ms in range(1, 11)))  # 1500 bytes each ms
    line = router.start("--trace", str(trace), "--trace-buffer", "60000")
    count = int(2 * 30e6 / 8 / ip_size)  # 2 s at 30 Mbit/s
    rx = udp(router.net, count, ip_size - 28, 30e6)
    s = line.stats(lambda s: s["received"] == count and s["held"] == 0,
                   what="the blast received and released")
    assert s["mode"] == "trace"
    assert rx["rate_bps"] == pytest.approx(rate, rel=0.05)
    assert s["dropped_buffer"] > 0 and s["delivered"] == rx["count"]


BAD_INPUT = [
    (["--delay", "x"], "--delay: not a number: 'x'"),
    (["--frobnicate"], "unknown option '--frobnicate'"),
    (["--link", "rate=1e6,buffer=10000"], "--link: give it exactly twice"),
    (["--pin", "443=0"], "--pin: only with two --link"),
    ([*["--link", "rate=1e6,buffer=10000"] * 2, "--pin", "443"], "--pin: not PORT=LINK: '443'"),
    ([*["--link", "rate=1e6,buffer=10000"] * 2, "--pin", "0=1"],
     "--pin: PORT: out of range [1, 65535]: '0'"),
    ([*["--link", "rate=1e6,buffer=10000"] * 2, "--pin", "443=2"], "--pin: LINK is 0 or 1"),
    ([*["--link", "rate=1e6,buffer=10000"] * 2, "--pin", "443=0", "--pin", "443=1"],
     "--pin: port 443 given twice"),
    (["--trace", "/nonexistent/qirdl.trace", "--trace-buffer", "1000"],
     "/nonexistent/qirdl.trace: No such file"),
    (["--trace", "{bad}", "--trace-buffer", "1000"], "bad.trace:3: not a number of ms: 'x1'"),
]


@pytest.mark.parametrize(("args", "message"), BAD_INPUT)
def test_bad_input_exits_2_with_one_line(net: Net, binary: Path, tmp_path: Path,
                                         args: list[str], message: str) -> None:
    bad = tmp_path / "bad.trace"
    bad.write_text("1\n2\nx1\n4\n")
    argv = [a.replace("{bad}", str(bad)) for a in args]
    proc = subprocess.run(net.argv(net.r, str(binary), "--queue", str(QUEUE), *argv),
                          capture_output=True, text=True, timeout=10)
    assert proc.returncode == 2
    assert proc.stdout == ""  # no "ready": nothing was bound
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("qir-delayline: "), proc.stderr
    assert message in lines[0]


def test_sigterm_releases_held_packets(router: Router) -> None:
    # 2 s: all 10 pings are seen held (in ~0.1 s) long before the first is due, even on a
    # slow machine; a reply in well under that proves SIGTERM let them go
    delay_ms = 2000
    line = router.start("--delay", str(delay_ms))
    pinger = router.net.popen(router.net.a, "ping", "-n", "-c", "10", "-i", "0.01", "-W", "5",
                              B_IP)
    try:
        line.stats(lambda s: s["held"] == 10, what="10 pings held")
        stopped = time.monotonic()
        final = line.stop()
        out, _ = pinger.communicate(timeout=10)
        after = time.monotonic() - stopped
    finally:
        if pinger.poll() is None:
            pinger.kill()
            pinger.communicate()
    assert "10 received" in out, out
    rtts = [float(t) for t in re.findall(r"time=([\d.]+) ms", out)]
    assert len(rtts) == 10 and max(rtts) < delay_ms / 2, rtts  # released early, not delayed
    assert after < 1.5
    assert final["received"] == final["delivered"] == 10 and final["held"] == 0


@pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 is not installed")
def test_one_tcp_flow_at_100_mbits(router: Router, capsys: pytest.CaptureFixture[str]) -> None:
    net = router.net
    line = router.start("--delay", "25")  # the data direction a -> b
    # ~2.5 BDP (100 Mbit/s x 25 ms is 312 kB): the link stays busy through a stall of some ms
    # of the delay line on a loaded machine (seen: up to 30 ms on a 2-core VM)
    router.tbf(R_B_IF, 100, 800_000)
    server = net.popen(net.b, "iperf3", "-s", "-1", "-B", B_IP, "-p", "5201")
    try:
        wait_until(lambda: net.run(net.b, "ss", "-Hltn", "sport = :5201").stdout.strip(),
                   timeout=10, what="iperf3 listening")
        out = net.run(net.a, "iperf3", "-c", B_IP, "-p", "5201", "-C", "cubic", "-t", "3",
                      "-O", "1", "-J", timeout=60).stdout
        server.communicate(timeout=10)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    goodput = json.loads(out)["end"]["sum_received"]["bits_per_second"]
    s = line.stop()
    cpu = (s["cpu_user_s"] + s["cpu_sys_s"]) / s["wall_s"]
    with capsys.disabled():  # shown in every run, not only -s
        print(f"\ndelay line at {goodput / 1e6:.1f} Mbit/s goodput: {cpu:.3f} CPU s/s, "
              f"{s['received']} packets, held max {s['held_max']}, release late by "
              f"{s['late_mean_us']:.0f} us mean, {s['late_max_us']:.0f} us max, "
              f"ENOBUFS {s['nfq_enobufs']}")
    assert goodput >= 90e6
    assert s["nfq_enobufs"] == 0 and s["verdict_errors"] == 0
    assert cpu < 0.3
