#!/usr/bin/env python3
"""Fidelity: goodput reported by the runner / goodput of the same client and server binaries
started by hand in the same namespaces (1 GiB, median of 5; target >= 0.98).

"By hand" means: `ip netns exec` the built quic-go server and client directly, with the same
file, certificates and contract environment, timing the client process from this process.
Runner and hand runs alternate inside one campaign (the hand run happens between two attempts,
reusing the campaign's file and certificates), so drift and file placement affect both alike.

Usage (root): .venv/bin/python bench/fidelity.py [--runs 5] [--size 1073741824]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from common import local, machine, run_campaign

SERVER_BIN = Path(local.SERVER.workdir) / "setup" / "quic-go" / "bin" / "server"
CLIENT_BIN = Path(local.CLIENT.workdir) / "setup" / "quic-go" / "bin" / "client"
PORT = "4433"


def hand_run(campaign_id: str, file_name: str, size: int) -> float:
    """One by-hand transfer of the campaign's own file and certificates; returns Mbit/s."""
    s_scratch = Path(local.SERVER.tmpdir) / campaign_id
    c_scratch = Path(local.CLIENT.tmpdir) / campaign_id
    logs = Path(tempfile.mkdtemp(prefix="qir-hand-"))
    env = {**os.environ, "TESTCASE": "goodput", "IP": local.SERVER.data_ip, "PORT": PORT,
           "ALPN": "h3", "LOGS": str(logs), "SSLKEYLOGFILE": "", "QLOGDIR": ""}
    server = subprocess.Popen(
        ["ip", "netns", "exec", local.SERVER.namespace, str(SERVER_BIN)],
        env={**env, "ROLE": "server", "WWW": str(s_scratch / "www"),
             "CERTS": str(s_scratch / "certs")},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    downloads = c_scratch / "downloads"
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            out = subprocess.run(["ip", "netns", "exec", local.SERVER.namespace, "ss", "-Hlun",
                                  f"sport = :{PORT}"], capture_output=True, text=True).stdout
            if out.strip():
                break
            time.sleep(0.01)
        start = time.monotonic_ns()
        subprocess.run(
            ["ip", "netns", "exec", local.CLIENT.namespace, str(CLIENT_BIN)],
            env={**env, "ROLE": "client", "CERTS": str(c_scratch / "certs"),
                 "DOWNLOADS": str(downloads),
                 "REQUESTS": f"https://{local.SERVER.data_ip}:{PORT}/{file_name}"},
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seconds = (time.monotonic_ns() - start) / 1e9
    finally:
        os.killpg(server.pid, 15)
        server.wait()
        shutil.rmtree(logs, ignore_errors=True)
    got = downloads / file_name
    assert got.stat().st_size == size
    got.unlink()
    return 8 * size / seconds / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--size", type=int, default=2**30)
    args = parser.parse_args()
    runner: list[float] = []
    hand: list[float] = []

    def after_each(record) -> None:  # type: ignore[no-untyped-def]
        assert record.status == "ok", record.reason
        runner.append(record.goodput_mbps)
        hand.append(hand_run(record.campaign, f"goodput-{args.size}.bin", args.size))

    run_campaign("fidelity", args.size, args.runs, on_record=after_each)
    ratio = statistics.median(runner) / statistics.median(hand)
    print(json.dumps({
        "machine": machine(), "size_bytes": args.size, "runs": args.runs,
        "runner_mbps": [round(x, 1) for x in runner], "hand_mbps": [round(x, 1) for x in hand],
        "runner_median_mbps": round(statistics.median(runner), 1),
        "hand_median_mbps": round(statistics.median(hand), 1),
        "ratio": round(ratio, 4), "target": 0.98,
        # each runner attempt / the hand run right after it: robust against slow drift
        "paired_ratio_median": round(statistics.median(r / h for r, h in zip(runner, hand)), 4),
    }, indent=2))


if __name__ == "__main__":
    main()
