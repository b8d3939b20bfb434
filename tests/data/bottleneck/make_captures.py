#!/usr/bin/env python3
"""Make real captures at a tbf bottleneck: tests/data/bottleneck/ and bench/bottleneck_packets.py.

Run as root: ``python3 tests/data/bottleneck/make_captures.py --out DIR``. Builds three
throw-away network namespaces of its own, ``qirbn-a`` -- ``qirbn-r`` -- ``qirbn-b`` (veth
pairs; never the testbed's ``qir-*``), a router in the middle (IPv4/IPv6 forwarding on;
tso/gso/gro off on all four veth ends: a veth passes a sender's GSO super-packet through
unsegmented, so the a side needs them off too, or ``in`` would see 64 KB packets that leave
as 45 segments) and ``tbf rate RATE burst 3028 limit 50000`` on the router's b-side
interface. For each scenario it starts, in the router, ``tcpdump -i r-b -Q out`` (dequeue)
and then ``tcpdump -i r-a -Q in`` (enqueue), both ``-s 128 --time-stamp-precision nano``,
runs one iperf3 client in ``qirbn-a`` against the server in ``qirbn-b``, reads ``tc -s
qdisc``, and stops the captures once their files hold what tc counted (``in``: sent +
dropped, ``out``: sent, each less the router's own few ARP/ND packets, which ``in`` never
sees and the cooked capture's filter leaves out), polled against a deadline. Both run with
``--immediate-mode -U``: otherwise libpcap's TPACKET_V3 ring hands packets over in blocks
retired after a 1 s timeout, and a capture stopped soon after the traffic loses the last,
unretired block (tried: ~100 packets short of tc's count).

Scenarios (each a directory DIR/NAME/path/ with bottleneck-in.pcap and bottleneck-out.pcap,
gzipped with ``--gzip``, and DIR/NAME/tc.json with the qdisc's counters):

- ``tcp``: ``iperf3 -c B -t SECONDS`` (one kernel TCP flow, cubic);
- ``udp``: ``iperf3 -c B -u -b UDP_RATE -t SECONDS`` (UDP above the bottleneck rate);
- ``v6sll`` (unless ``--no-v6``): ``iperf3 -6 -u -b 10M -t 1`` over IPv6 (below the rate: no
  drops), the ``out`` capture in Linux cooked mode with microsecond timestamps (``tcpdump -i
  any -y LINUX_SLL -Q out ... ip6 and dst net fd00:12::/64``: a veth offers no cooked mode,
  "any" does): another link type, snap length after it and precision than ``in``.

The qdisc is created anew for each scenario, so its counters are the scenario's. The
namespaces are removed in a ``finally``, also after an error or Ctrl-C.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

NS_A, NS_R, NS_B = "qirbn-a", "qirbn-r", "qirbn-b"
A4, RA4, RB4, B4 = "198.19.11.1", "198.19.11.254", "198.19.12.254", "198.19.12.1"
A6, RA6, RB6, B6 = "fd00:11::1", "fd00:11::fe", "fd00:12::fe", "fd00:12::1"
BURST, LIMIT, SNAPLEN = 3028, 50000, 128
OWN_PACKETS = 8  # ARP/ND the router itself sends on r-b: counted by tc, never seen by `in`


def sh(*argv: str, ns: str | None = None, check: bool = True) -> str:
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(argv)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if check and proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


def teardown() -> None:
    for ns in (NS_A, NS_R, NS_B):
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True,
                              text=True).stdout.split()
        for pid in pids:  # our iperf3 server / tcpdumps, if an error left them
            subprocess.run(["kill", "-9", pid], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def build() -> None:
    for ns in (NS_A, NS_R, NS_B):
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "set", "lo", "up", ns=ns)
    sh("ip", "link", "add", "a0", "netns", NS_A, "type", "veth", "peer", "r-a", "netns", NS_R)
    sh("ip", "link", "add", "b0", "netns", NS_B, "type", "veth", "peer", "r-b", "netns", NS_R)
    for ns, dev, v4, v6 in ((NS_A, "a0", A4, A6), (NS_R, "r-a", RA4, RA6),
                            (NS_R, "r-b", RB4, RB6), (NS_B, "b0", B4, B6)):
        sh("ip", "addr", "add", f"{v4}/24", "dev", dev, ns=ns)
        sh("ip", "-6", "addr", "add", f"{v6}/64", "dev", dev, "nodad", ns=ns)
        sh("ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off", ns=ns)
        sh("ip", "link", "set", dev, "up", ns=ns)
    sh("sysctl", "-qw", "net.ipv4.ip_forward=1", ns=NS_R)
    sh("sysctl", "-qw", "net.ipv6.conf.all.forwarding=1", ns=NS_R)
    sh("ip", "route", "add", "default", "via", RA4, ns=NS_A)
    sh("ip", "-6", "route", "add", "default", "via", RA6, ns=NS_A)
    sh("ip", "route", "add", "default", "via", RB4, ns=NS_B)
    sh("ip", "-6", "route", "add", "default", "via", RB6, ns=NS_B)
    for family, addr in (("-4", B4), ("-6", B6)):  # ARP/ND resolved before any capture
        for _ in range(20):
            if subprocess.run(["ip", "netns", "exec", NS_A, "ping", family, "-c1", "-W1", addr],
                              capture_output=True).returncode == 0:
                break
        else:
            raise RuntimeError(f"{NS_A} cannot ping {addr}")


def qdisc(rate: str) -> None:
    """The bottleneck, anew (its counters from zero)."""
    sh("tc", "qdisc", "del", "dev", "r-b", "root", ns=NS_R, check=False)
    sh("tc", "qdisc", "add", "dev", "r-b", "root", "tbf", "rate", rate, "burst", str(BURST),
       "limit", str(LIMIT), ns=NS_R)


def tc_counters() -> dict[str, object]:
    text = sh("tc", "-s", "qdisc", "show", "dev", "r-b", ns=NS_R)
    m = re.search(r"Sent (\d+) bytes (\d+) pkt \(dropped (\d+), overlimits (\d+) "
                  r"requeues (\d+)\)", text)
    assert m, text
    sent_b, sent_p, dropped, over, requeues = map(int, m.groups())
    return {"qdisc": " ".join(text.split("\n", 1)[0].split()), "sent_bytes": sent_b,
            "sent_packets": sent_p, "dropped": dropped, "overlimits": over,
            "requeues": requeues, "tc_s_qdisc": text.strip()}


def start_tcpdump(dev: str, direction: str, path: Path, *extra: str,
                  filt: tuple[str, ...] = ()) -> subprocess.Popen[str]:
    proc = subprocess.Popen(["ip", "netns", "exec", NS_R, "tcpdump", "-i", dev, "-Q", direction,
                             "-s", str(SNAPLEN), "-B", "8192", "-n", "--immediate-mode", "-U",
                             *extra, "-w", str(path), *filt],
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:  # "tcpdump: listening on ...": the capture is open
        if "listening on" in line:
            return proc
        if "data link type" not in line:  # -y's note comes first
            break
    raise RuntimeError(f"tcpdump on {dev}: {line.strip()}")


def pcap_records(path: Path) -> int:
    """Complete records in a pcap file that tcpdump may still be writing."""
    data = path.read_bytes() if path.exists() else b""
    if len(data) < 24:
        return 0
    order = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    count, at = 0, 24
    while at + 16 <= len(data):
        caplen = struct.unpack_from(order + "I", data, at + 8)[0]
        if at + 16 + caplen > len(data):
            break
        count, at = count + 1, at + 16 + caplen
    return count


def wait_for_packets(path: Path, at_least: int, deadline_s: float = 20.0) -> None:
    """Poll until the capture holds ``at_least`` packets; an error after the deadline."""
    deadline = time.monotonic() + deadline_s
    while (have := pcap_records(path)) < at_least:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{path}: {have} packets after {deadline_s:.0f} s, "
                               f"tc counted {at_least}")
        time.sleep(0.05)


def wait_for_listener(ns: str, port: int, deadline_s: float = 10.0) -> None:
    """Poll until a TCP socket listens on the port in the namespace (iperf3 -s started)."""
    deadline = time.monotonic() + deadline_s
    while f":{port} " not in sh("ss", "-Hltn", f"sport = :{port}", ns=ns):
        if time.monotonic() > deadline:
            raise RuntimeError(f"iperf3 -s in {ns}: not listening on {port} after {deadline_s} s")
        time.sleep(0.05)


def stop_tcpdump(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=10)
    return err.strip()


def scenario(out: Path, name: str, client: list[str], rate: str, compress: bool,
             out_dev: str = "r-b",
             out_extra: tuple[str, ...] = ("--time-stamp-precision", "nano"),
             out_filter: tuple[str, ...] = ()) -> None:
    qdisc(rate)
    d = out / name / "path"
    d.mkdir(parents=True, exist_ok=True)
    pin, pout = d / "bottleneck-in.pcap", d / "bottleneck-out.pcap"
    tout = start_tcpdump(out_dev, "out", pout, *out_extra, filt=out_filter)
    tin = start_tcpdump("r-a", "in", pin, "--time-stamp-precision", "nano")
    iperf = sh("iperf3", "-c", client[0], *client[1:], "--json", ns=NS_A)
    counters = tc_counters()
    sent, dropped = int(counters["sent_packets"]), int(counters["dropped"])
    wait_for_packets(pin, sent + dropped - OWN_PACKETS)
    wait_for_packets(pout, sent - OWN_PACKETS)
    err_in = stop_tcpdump(tin)
    err_out = stop_tcpdump(tout)
    summary = json.loads(iperf)["end"]
    facts = {"scenario": name, "rate": rate, "burst": BURST, "limit": LIMIT,
             "iperf3": ["iperf3", "-c", *client], "tc": counters,
             "tcpdump_in": err_in.splitlines(), "tcpdump_out": err_out.splitlines(),
             "iperf3_end": {k: summary[k] for k in ("sum_sent", "sum_received", "sum")
                            if k in summary}}
    (out / name / "tc.json").write_text(json.dumps(facts, indent=1) + "\n")
    if compress:
        for p in (pin, pout):
            with p.open("rb") as src, gzip.open(p.with_name(p.name + ".gz"), "wb", 9) as dst:
                shutil.copyfileobj(src, dst)
            p.unlink()
    print(f"{name}: tc {counters['sent_packets']} sent, {counters['dropped']} dropped; "
          f"tcpdump in: {err_in.splitlines()[-1:]}, out: {err_out.splitlines()[-1:]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rate", default="20mbit", help="tbf rate (default 20mbit)")
    ap.add_argument("--udp-rate", default="30M", help="iperf3 -b of the UDP flow (30M)")
    ap.add_argument("--seconds", default="2", help="iperf3 -t (2)")
    ap.add_argument("--length", default=None, help="iperf3 -l of the UDP flow (its default)")
    ap.add_argument("--only", choices=("tcp", "udp", "v6sll"), action="append")
    ap.add_argument("--gzip", action="store_true", help="store the captures as .pcap.gz")
    ap.add_argument("--no-v6", action="store_true")
    args = ap.parse_args()
    only = set(args.only or ("tcp", "udp", "v6sll"))
    if args.no_v6:
        only.discard("v6sll")
    udp_len = ["-l", args.length] if args.length else []
    teardown()  # leftovers of an earlier run of this script (our names only)
    srv: subprocess.Popen[bytes] | None = None
    try:
        build()
        srv = subprocess.Popen(["ip", "netns", "exec", NS_B, "iperf3", "-s"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_listener(NS_B, 5201)
        if "tcp" in only:
            scenario(args.out, "tcp", [B4, "-t", args.seconds], args.rate, args.gzip)
        if "udp" in only:
            scenario(args.out, "udp", [B4, "-u", "-b", args.udp_rate, "-t", args.seconds,
                                       *udp_len], args.rate, args.gzip)
        if "v6sll" in only:
            # a veth offers no cooked mode: "any" does, restricted to the b side's prefix
            scenario(args.out, "v6sll", [B6, "-6", "-u", "-b", "10M", "-t", "1"], args.rate,
                     args.gzip, out_dev="any", out_extra=("-y", "LINUX_SLL"),
                     out_filter=("ip6", "and", "dst", "net", "fd00:12::/64"))
    finally:
        if srv is not None:
            srv.terminate()
            srv.wait(timeout=10)
        teardown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
