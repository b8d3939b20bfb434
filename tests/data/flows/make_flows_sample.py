#!/usr/bin/env python3
"""Make a real campaign of competing flows: tests/data/flows-sample/ (docs/flows.md).

Run as root: ``python3 tests/data/flows/make_flows_sample.py --out DIR``. Builds three
throw-away network namespaces of its own, ``qirfl-s`` -- ``qirfl-r`` -- ``qirfl-c`` (never
the testbed's ``qir-*``), with the namespace, address, offload, tbf and capture set-up of
``tests/data/bottleneck/make_captures.py`` (imported: its functions, our namespace names):
the server side is its ``a`` side, the client its ``b`` side, the bottleneck ``tbf rate RATE
burst 3028 limit 50000`` on the router's client-side interface. There is no delay: this
kernel has no netem (the base RTT is the veths', well below a millisecond).

Three iperf3 servers listen in ``qirfl-s`` (ports 5201-5203). Each attempt creates the qdisc
anew, starts ``tcpdump -Q out`` on the client side and ``tcpdump -Q in`` on the server side
of the router (``--immediate-mode -U -s 128 --time-stamp-precision nano``), starts one
client per flow in ``qirfl-c`` at its start offset (``iperf3 -c S -p PORT -R -C CC -n
BYTES -l 2K --repeating-payload --json``: the server sends, so a flow's data packets leave
the server from its port), reads ``tc -s qdisc``, waits until the captures hold what tc
counted and stores a ``run.json`` of schema 6 with ``flows`` filled from iperf3's JSON
(``bytes_received`` = ``end.sum_received.bytes``; ``start_ns``/``end_ns`` taken around the
client process on the client's clock, as the runner's wrapper does).

Flows of a size (``-n``), not of a duration (``-t``): with ``-R -t`` iperf3 stops counting
at the client's timer while what the server already wrote (its socket buffer, the queue)
still arrives, so ``sum_received`` fell 0.4-4.6 % short of the payload that left the
bottleneck (``sum_sent`` matched it); with ``-n`` the two agree to the byte. Small blocks
(``-l 2K``) keep what a last read leaves uncounted small. ``--repeating-payload`` makes the
captured payload bytes compressible (the pairing of the two captures uses the TCP header,
whose sequence numbers are unique). Each flow's iperf3 JSON is kept beside the record
(``client/flow-<i>.iperf3.json``).

The campaign sweeps the bottleneck rate (axis ``rate``: 20mbit and 10mbit) with
``--repetitions`` attempts each; the last repetition of the first rate runs without the
captures (``path.config.record_packets`` false in its record): an attempt with flows and no
packets. The namespaces are removed in a ``finally``, also after an error or Ctrl-C.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bottleneck"))
import make_captures as mc  # noqa: E402 (the bottleneck's set-up, our names below)

mc.NS_A, mc.NS_R, mc.NS_B = NS_S, NS_R, NS_C = "qirfl-s", "qirfl-r", "qirfl-c"
SERVER, CLIENT = mc.A4, mc.B4
# (congestion control, start offset in s): one kernel TCP flow each, ports 5201..
FLOWS = (("cubic", 0.0), ("bbr", 0.5), ("reno", 1.0))
SET_LABEL = "cubic-bbr-reno"
RATES = ("20mbit", "10mbit")
RATE_BPS = {"20mbit": 20_000_000, "10mbit": 10_000_000}
PORT0 = 5201
# iperf3 counts what it has read when the test ends: small blocks leave little uncounted
BLOCK = "2K"
IN_FILE, OUT_FILE = "path/bottleneck-in.pcap", "path/bottleneck-out.pcap"
TEMPLATE = Path(__file__).resolve().parent.parent / "path-sample"


def utc(ns: int) -> str:
    """An ISO time with milliseconds, as the runner writes ``started_at``."""
    stamp = dt.datetime.fromtimestamp(ns / 1e9, tz=dt.timezone.utc)
    return stamp.isoformat(timespec="milliseconds")


def run_flows(size: int) -> list[dict[str, Any]]:
    """Start every flow's client at its offset; the results in flow order."""
    t0 = time.monotonic()
    procs = []
    for i, (cc, offset) in enumerate(FLOWS):
        time.sleep(max(0.0, t0 + offset - time.monotonic()))
        start_ns = time.time_ns()
        proc = subprocess.Popen(["ip", "netns", "exec", NS_C, "iperf3", "-c", SERVER, "-p",
                                 str(PORT0 + i), "-R", "-C", cc, "-n", str(size),
                                 "-l", BLOCK, "--repeating-payload", "--json"],
                                stdout=subprocess.PIPE, text=True)
        procs.append((start_ns, proc))
    out = []
    for start_ns, proc in procs:
        text, _ = proc.communicate(timeout=300)
        out.append({"start_ns": start_ns, "end_ns": time.time_ns(), "json": json.loads(text),
                    "exit": proc.returncode})
    return out


def flow_entry(i: int, result: dict[str, Any], size: int) -> dict[str, Any]:
    """The record's dict of one flow (the contract's keys, docs/flows.md)."""
    cc, offset = FLOWS[i]
    end = result["json"].get("end") or {}
    received = (end.get("sum_received") or {}).get("bytes")
    ran = end.get("sender_tcp_congestion")
    ok = result["exit"] == 0 and received == size and ran == cc
    span_s = (result["end_ns"] - result["start_ns"]) / 1e9
    return {"index": i, "label": f"tcp/{cc}", "kind": "tcp", "server": None, "client": None,
            "congestion_control": cc, "link": None, "port": PORT0 + i,
            "start_offset_s": offset, "duration_s": None, "size_bytes": size,
            "status": "ok" if ok else "failed",
            "reason": None if ok else f"iperf3 exit {result['exit']}, sender cc {ran}",
            "start_ns": result["start_ns"], "end_ns": result["end_ns"],
            "bytes_received": received, "verified": "iperf3" if ok else None,
            "stopped_at_duration": False,
            "goodput_mbps": received * 8 / span_s / 1e6 if received else None}


def side(template: dict[str, Any], cc: str, node: str) -> dict[str, Any]:
    """A record side of a kernel TCP flow (iperf3: no version, no source)."""
    return {**template, "implementation": f"tcp-{cc}", "version": "iperf 3.12",
            "source_hash": None, "node": node, "params": {}, "effective":
            {"congestion_control": cc}, "unhonoured": [], "negotiated": None, "exit_code": 0,
            "cpu_user_s": None, "cpu_system_s": None, "pid": None, "container": None}


def path_entry(rate: str, counters: dict[str, Any] | None, captured: bool) -> dict[str, Any]:
    """The record's ``path``: the tbf bottleneck, no delay (``rtt_ms`` unknown: null)."""
    bps = RATE_BPS[rate]
    bottleneck = None if counters is None else {
        "sent_bytes": counters["sent_bytes"], "sent_packets": counters["sent_packets"],
        "drops": counters["dropped"], "overlimits": counters["overlimits"],
        "backlog_end_bytes": None}
    return {"key": f"path-{rate}", "config": {"rate": bps, "rtt": None, "buffer": mc.LIMIT,
                                              "record_packets": captured},
            "resolved": {"rate_bps": bps, "rtt_ms": None, "data_delay_ms": 0.0,
                         "reverse_delay_ms": 0.0, "buffer_bytes": mc.LIMIT, "loss": 0.0,
                         "jitter": 0.0, "links": None},
            "backend": "tbf (make_flows_sample.py)", "placement": "router", "node": "router",
            "calibration": None,
            "counters": {"bottleneck": bottleneck, "loss_rule_drops": None,
                         "delay_lines": {}}}


def record(base: dict[str, Any], campaign: str, rate: str, rep: int,
           results: list[dict[str, Any]], counters: dict[str, Any] | None, captured: bool,
           size: int) -> dict[str, Any]:
    """The attempt's run.json (schema 6)."""
    flows = [flow_entry(i, r, size) for i, r in enumerate(results)]
    start, end = min(f["start_ns"] for f in flows), max(f["end_ns"] for f in flows)
    total = sum(f["bytes_received"] or 0 for f in flows)
    bad = [f["label"] for f in flows if f["status"] != "ok"]
    cc0 = FLOWS[0][0]
    base = {k: v for k, v in base.items() if k != "schema_version"}  # last, as RunRecord
    return {**base, "campaign": campaign, "testcase": "goodput", "repetition": rep,
            "attempt": 1, "server": side(base["server"], cc0, "server"),
            "client": side(base["client"], cc0, "client"),
            "status": "failed" if bad else "ok",
            "reason": f"flows not ok: {', '.join(bad)}" if bad else None, "alpn": None,
            "params": {}, "variant": f"rate={rate}", "axes": {"rate": rate},
            "cell": {"server": "flows", "client": SET_LABEL}, "handshake": None,
            "file_size": None, "bytes_received": total, "hash_algorithm": None,
            "digest_expected": None, "digest_received": None, "hash_ok": None,
            "start_ns": start, "end_ns": end, "duration_s": (end - start) / 1e9,
            "goodput_mbps": total * 8 / ((end - start) / 1e9) / 1e6,
            "started_at": utc(start), "finished_at": utc(end), "testbed": "qirfl",
            "warnings": [], "path": path_entry(rate, counters, captured), "flows": flows,
            "schema_version": 6}


def attempt(out: Path, base: dict[str, Any], campaign: str, rate: str, rep: int,
            captured: bool, size: int) -> None:
    """One attempt: the qdisc, the captures (when ``captured``), the flows, the record."""
    directory = out / campaign / f"flows_{SET_LABEL}" / "goodput" / f"rate={rate}" / \
        str(rep) / "attempt-1"
    (directory / "path").mkdir(parents=True)
    (directory / "client").mkdir()
    mc.qdisc(rate)
    pin, pout = directory / IN_FILE, directory / OUT_FILE
    dumps = []
    if captured:
        nano = ("--time-stamp-precision", "nano")
        dumps = [mc.start_tcpdump("r-b", "out", pout, *nano),
                 mc.start_tcpdump("r-a", "in", pin, *nano)]
    results = run_flows(size)
    counters = mc.tc_counters()
    if captured:
        sent, dropped = int(counters["sent_packets"]), int(counters["dropped"])
        mc.wait_for_packets(pin, sent + dropped - mc.OWN_PACKETS)
        mc.wait_for_packets(pout, sent - mc.OWN_PACKETS)
        for proc in dumps:
            mc.stop_tcpdump(proc)
        for p in (pin, pout):
            with p.open("rb") as src, gzip.open(p.with_name(p.name + ".gz"), "wb", 9) as dst:
                shutil.copyfileobj(src, dst)
            p.unlink()
    for i, result in enumerate(results):
        (directory / "client" / f"flow-{i}.iperf3.json").write_text(
            json.dumps(result["json"], indent=1) + "\n")
    data = record(base, campaign, rate, rep, results, counters, captured, size)
    (directory / "run.json").write_text(json.dumps(data, indent=2) + "\n")
    print(f"{rate} rep {rep}: {data['status']}, tc sent {counters['sent_packets']} "
          f"dropped {counters['dropped']}, flows " + ", ".join(
              f"{f['label']} {f['goodput_mbps']:.2f}" for f in data["flows"]))


def campaign_json(campaign: str, repetitions: int, size: int) -> dict[str, Any]:
    """campaign.json: path-sample's, renamed, with this campaign's sweep and status."""
    meta: dict[str, Any] = json.loads((TEMPLATE / "campaign.json").read_text())
    config = meta["config"]
    config.update(name=campaign.split("_")[0], repetitions=repetitions, pairs=[],
                  sweep={**config["sweep"], "axes": [{"path": "path.rate", "name": "rate",
                                                     "values": list(RATES)}]})
    config["path"] = {**config["path"], "rate": RATE_BPS[RATES[0]], "rtt": None,
                      "buffer": mc.LIMIT, "record_packets": True, "calibrate": "off"}
    meta.update(campaign=campaign, status="finished", paths={}, synthetic=False,
                planned_runs=len(RATES) * repetitions,
                runner={"note": f"tests/data/flows/make_flows_sample.py, {size} B flows"})
    return meta


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--bytes", type=int, default=5 << 20,
                    help="iperf3 -n of every flow (5 MiB)")
    ap.add_argument("--repetitions", type=int, default=3)
    args = ap.parse_args()
    now = dt.datetime.now(dt.timezone.utc)
    campaign = f"flowsample_{now:%Y%m%dT%H%M%SZ}"
    base = json.loads(next(TEMPLATE.glob("*/goodput/1/attempt-1/run.json")).read_text())
    mc.teardown()  # leftovers of an earlier run of this script (our names only)
    servers: list[subprocess.Popen[bytes]] = []
    try:
        mc.build()
        for i in range(len(FLOWS)):
            servers.append(subprocess.Popen(
                ["ip", "netns", "exec", NS_S, "iperf3", "-s", "-p", str(PORT0 + i)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            mc.wait_for_listener(NS_S, PORT0 + i)
        started = now.isoformat(timespec="milliseconds")
        for rate in RATES:
            for rep in range(1, args.repetitions + 1):
                captured = not (rate == RATES[0] and rep == args.repetitions)
                attempt(args.out, base, campaign, rate, rep, captured, args.bytes)
        meta = campaign_json(campaign, args.repetitions, args.bytes)
        meta.update(started_at=started, finished_at=dt.datetime.now(dt.timezone.utc).isoformat())
        (args.out / campaign / "campaign.json").write_text(json.dumps(meta, indent=2) + "\n")
    finally:
        for srv in servers:
            srv.terminate()
            srv.wait(timeout=10)
        mc.teardown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
