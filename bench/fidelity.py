#!/usr/bin/env python3
"""Fidelity: goodput reported by the runner / goodput of the same client and server binaries
started by hand in the same namespaces (1 GiB, median of 5; target >= 0.98).

"By hand" means: `ip netns exec` the built quic-go server and client directly, with the same
file, certificates and contract environment, timing the client process from this process.
Runner and hand runs are interleaved so slow drift affects both alike.

Usage (root): .venv/bin/python bench/fidelity.py [--runs 5] [--size 1073741824]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import time
from pathlib import Path

from common import local, machine, run_campaign

BIN = Path(local.SERVER.workdir) / "setup" / "quic-go" / "bin"
CLIENT_BIN = Path(local.CLIENT.workdir) / "setup" / "quic-go" / "bin" / "client"
HAND = Path("/dev/shm/qir-bench-hand")
PORT = "4433"


def prepare_hand(size: int) -> None:
    """File, certificate and directories for the hand-started pair."""
    shutil.rmtree(HAND, ignore_errors=True)
    (HAND / "www").mkdir(parents=True)
    (HAND / "downloads").mkdir()
    (HAND / "certs").mkdir()
    (HAND / "logs").mkdir()
    with open(HAND / "www" / "file.bin", "wb") as fh, open("/dev/urandom", "rb") as rnd:
        left = size
        while left:
            chunk = rnd.read(min(left, 1 << 24))
            fh.write(chunk)
            left -= len(chunk)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj", "/CN=qir",
                    "-addext", f"subjectAltName=IP:{local.SERVER.data_ip}", "-keyout",
                    str(HAND / "certs" / "priv.key"), "-out", str(HAND / "certs" / "cert.pem")],
                   check=True, capture_output=True)
    shutil.copy(HAND / "certs" / "cert.pem", HAND / "certs" / "ca.pem")


def hand_run(size: int) -> float:
    """One by-hand transfer; returns goodput in Mbit/s."""
    env = {**os.environ, "TESTCASE": "goodput", "IP": local.SERVER.data_ip, "PORT": PORT,
           "ALPN": "h3", "CERTS": str(HAND / "certs"), "LOGS": str(HAND / "logs"),
           "SSLKEYLOGFILE": "", "QLOGDIR": "", "WWW": str(HAND / "www"),
           "DOWNLOADS": str(HAND / "downloads"),
           "REQUESTS": f"https://{local.SERVER.data_ip}:{PORT}/file.bin"}
    server = subprocess.Popen(["ip", "netns", "exec", local.SERVER.namespace,
                               str(BIN / "server")], env={**env, "ROLE": "server"},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            out = subprocess.run(["ip", "netns", "exec", local.SERVER.namespace, "ss", "-Hlun",
                                  f"sport = :{PORT}"], capture_output=True, text=True).stdout
            if out.strip():
                break
            time.sleep(0.01)
        start = time.monotonic_ns()
        subprocess.run(["ip", "netns", "exec", local.CLIENT.namespace, str(CLIENT_BIN)],
                       env={**env, "ROLE": "client"}, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        seconds = (time.monotonic_ns() - start) / 1e9
    finally:
        os.killpg(server.pid, 15)
        server.wait()
    got = HAND / "downloads" / "file.bin"
    assert got.stat().st_size == size
    got.unlink()
    return 8 * size / seconds / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--size", type=int, default=2**30)
    args = parser.parse_args()
    run_campaign("fidelity-warmup", 10_000_000, 1)  # ensures the binaries are built
    prepare_hand(args.size)
    runner, hand = [], []
    try:
        for _ in range(args.runs):
            result = run_campaign("fidelity", args.size, 1)
            (record,) = result.records
            assert record.status == "ok", record.reason
            runner.append(record.goodput_mbps)
            hand.append(hand_run(args.size))
    finally:
        shutil.rmtree(HAND, ignore_errors=True)
    ratio = statistics.median(runner) / statistics.median(hand)
    print(json.dumps({
        "machine": machine(), "size_bytes": args.size, "runs": args.runs,
        "runner_mbps": [round(x, 1) for x in runner], "hand_mbps": [round(x, 1) for x in hand],
        "runner_median_mbps": round(statistics.median(runner), 1),
        "hand_median_mbps": round(statistics.median(hand), 1),
        "ratio": round(ratio, 4), "target": 0.98,
    }, indent=2))


if __name__ == "__main__":
    main()
