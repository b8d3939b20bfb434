"""The flow-control window takes effect on the namespace testbed (paper 003 section IV.C): over
an emulated 50 ms path, every native client that declares it (aioquic, quic-go, ngtcp2, quiche,
quinn, s2n-quic, msquic, lsquic) gets at most 8 x W / RTT (5.24 Mbit/s) at a fixed 32 KiB
window, well below what the same pair gets with its own windows, and a client that cannot set
it is recorded as unsupported without running."""

from __future__ import annotations

from pathlib import Path

import pytest

from interop_runner.analysis.ceilings import FLOW_CONTROL_TOLERANCE, flow_control_ceiling_mbps
from interop_runner.analysis.results import load_results

from .conftest import TESTBED_FILE, campaign_dirs, write
from .test_campaign import run_cli

WINDOW, RTT_MS = 32 * 1024, 50.0
CEILING = flow_control_ceiling_mbps(WINDOW, RTT_MS)  # 5.24 Mbit/s
STACKS = ("aioquic", "quic-go", "ngtcp2", "quiche", "quinn", "s2n-quic", "msquic", "lsquic")
# The pairs' own windows (16 MiB and more, auto-tuned) let them go past this multiple of the
# small window's ceiling: over 7.9 Mbit/s of a 50 Mbit/s path (a CPU-bound client, here at
# most aioquic, stays far above that).
FASTER = 1.5


@pytest.mark.usefixtures("local_testbed")
def test_a_small_window_bounds_the_goodput_by_window_over_rtt(tmp_path: Path) -> None:
    pairs = "".join(f"  - {{server: {s}, client: {s}}}\n" for s in STACKS)
    cfg = write(tmp_path / "window.yml", f"""testbed: {TESTBED_FILE}
name: window-test
file_size: 8MB
repetitions: 1
port: 4475
pairs:
{pairs}  - {{server: tcp-tls, client: tcp-tls}}
path: {{rate: 50mbit, rtt: {RTT_MS:g}ms, buffer: 1bdp, calibrate: warn}}
sweep:
  axes:
    - {{path: params.flow_control_window, values: [{WINDOW}, null], name: window}}
""")
    proc = run_cli("run", str(cfg), "--results-dir", str(tmp_path / "results"), "--no-progress",
                   timeout=1500)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (camp,) = campaign_dirs(tmp_path / "results")
    df = load_results(camp)
    windowed = df[df.flow_control_window == WINDOW]
    refused = windowed[windowed.client == "tcp-tls"]
    assert list(refused.status) == ["unsupported"]
    assert refused.reason.str.contains("tcp-tls cannot set flow_control_window as the "
                                       "client").all()
    assert refused.goodput_mbps.isna().all()  # not run
    quic = df[df.client.isin(STACKS)]
    assert (quic.status == "ok").all(), quic[["client", "flow_control_window", "status",
                                              "reason"]]
    small = windowed[windowed.client.isin(STACKS)].set_index("client").goodput_mbps
    own = quic[quic.flow_control_window.isna()].set_index("client").goodput_mbps
    assert sorted(small.index) == sorted(own.index) == sorted(STACKS)
    for client in STACKS:
        assert small[client] <= CEILING * (1 + FLOW_CONTROL_TOLERANCE), (client, small[client])
        assert own[client] >= FASTER * CEILING, (client, own[client])
    # where the path's calibration passed, the ceiling columns say the same
    checked = windowed[windowed.client.isin(STACKS) & windowed.ceiling_window_bytes.notna()]
    assert (checked.ceiling_window_bytes == WINDOW).all()
    assert (checked.ceiling_basis == "flow_control").all()
    assert not checked.ceiling_exceeded.fillna(False).any()
    assert checked.ceiling_flow_control_mbps.sub(CEILING).abs().lt(1e-9).all()
