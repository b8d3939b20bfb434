"""aioquic on the real namespace testbed: with itself and against quic-go, both directions."""

from __future__ import annotations

from pathlib import Path

import pytest

from interop_runner.analysis import load_results

from .test_campaign import assert_nodes_clean, campaign, execute

WHEELS = Path("/var/cache/qir/wheels")
SIZE = 8 * 2**20

pytestmark = pytest.mark.skipif(
    not any(WHEELS.glob("aioquic-1.7.2-*.whl")),
    reason=f"{WHEELS} has no aioquic 1.7.2 wheel: the offline testbed nodes cannot install "
           "aioquic (fill it with pip download, see pos_scripts/install.sh)")


@pytest.mark.usefixtures("local_testbed")
def test_aioquic_interop(tmp_path, local_testbed):
    cfg = campaign(tmp_path, """name: aioquic
file_size: 8MiB
repetitions: 1
keylog: true
pairs:
  - {server: aioquic, client: aioquic}
  - {server: quic-go, client: aioquic}
  - {server: aioquic, client: quic-go}
""")
    result = execute(cfg, tmp_path)
    df = load_results(result.directory)
    assert len(df) == 3
    bad = df[df["status"] != "ok"]
    assert bad.empty, bad[["server", "client", "status", "reason"]].to_string()
    assert sorted(zip(df["server"], df["client"])) == [
        ("aioquic", "aioquic"), ("aioquic", "quic-go"), ("quic-go", "aioquic")]
    assert df["hash_ok"].all()
    assert (df["bytes_received"] == SIZE).all()
    assert (df["goodput_mbps"] > 0).all()
    assert set(df["alpn"]) == {"h3"}
    assert set(df.loc[df["server"] == "aioquic", "server_version"]) == {"1.7.2"}
    assert set(df.loc[df["client"] == "aioquic", "client_version"]) == {"1.7.2"}
    assert_nodes_clean(local_testbed)
