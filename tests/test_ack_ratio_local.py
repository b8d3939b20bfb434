"""The ACK ratio takes effect on the namespace testbed (paper 003 section V): over an emulated
path with delay, quiche's client sends about one datagram per n it receives at ack_ratio n, and
a client that cannot set it is recorded as unsupported without running."""

from __future__ import annotations

from pathlib import Path

import pytest

from interop_runner.analysis.frames.results import load_results

from .conftest import TESTBED_FILE, campaign_dirs, write
from .test_campaign import run_cli

# datagrams the client sent per datagram it received, at ratio 1:n. Generous: the client also
# sends its requests, flow-control updates and handshake, and a held ACK leaves after 25 ms.
EXPECTED = {1: (0.8, 1.1), 2: (0.4, 0.6), 10: (0.07, 0.16)}


@pytest.mark.usefixtures("local_testbed")
def test_quiche_clients_ack_ratio_on_a_path_with_delay(tmp_path: Path) -> None:
    cfg = write(tmp_path / "ack.yml", f"""testbed: {TESTBED_FILE}
name: ack-test
file_size: 10MB
repetitions: 1
port: 4473
pairs:
  - {{server: quiche, client: quiche}}
  - {{server: quiche, client: quic-go}}
monitors: [nstat]
params: {{gso: false, gro: false}}
path: {{rate: 100mbit, rtt: 10ms, buffer: 1bdp, calibrate: warn}}
sweep:
  axes:
    - {{path: params.ack_ratio, values: [1, 2, 10], name: ack_ratio}}
""")
    proc = run_cli("run", str(cfg), "--results-dir", str(tmp_path / "results"), "--no-progress",
                   timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (camp,) = campaign_dirs(tmp_path / "results")
    df = load_results(camp)
    refused = df[df.client == "quic-go"]
    assert len(refused) == 3 and (refused.status == "unsupported").all()
    assert refused.reason.str.contains("quic-go cannot set ack_ratio as the client").all()
    assert refused.goodput_mbps.isna().all()  # not run
    ran = df[df.client == "quiche"].set_index("ack_ratio")
    assert (ran.status == "ok").all(), ran[["status", "reason"]]
    for n, (low, high) in EXPECTED.items():
        measured = ran.loc[n, "client_ack_ratio_measured"]
        assert low <= measured <= high, (n, measured, ran.loc[n, "ack_ratio_basis"])
    assert ran.loc[10, "client_udp_out_datagrams"] < ran.loc[1, "client_udp_out_datagrams"] / 5
