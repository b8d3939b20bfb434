"""The implementation matrix on the real namespace testbed.

Every implementation as server and as client against quic-go, and against itself (~20 MB);
cipher suite and congestion control verifiably taking effect for quic-go, quiche, quinn and
picoquic, and for native lsquic (AES-128-GCM vs ChaCha20, CUBIC vs BBR).
The first test builds every implementation (setup is cached afterwards).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from interop_runner.config.flows import KERNEL_TCP
from interop_runner.config.implementations import common_alpn, load_registry
from interop_runner.config.params import normalise_cc

from .test_campaign import assert_nodes_clean, campaign, execute

SIZE = 20 * 10**6
REGISTRY = load_registry()
# every QUIC stack and tcp-tls; kernel TCP runs only as a flow beside them
NAMES = sorted(name for name in REGISTRY if name != KERNEL_TCP)


def _matrix_pairs() -> list[tuple[str, str]]:
    pairs = []
    for name in NAMES:
        for pair in ((name, "quic-go"), ("quic-go", name), (name, name)):
            if pair not in pairs:
                pairs.append(pair)
    return pairs


@pytest.fixture(scope="module")
def matrix(tmp_path_factory, local_testbed):
    tmp = tmp_path_factory.mktemp("matrix")
    body = "\n".join(f"  - {{server: {s}, client: {c}}}" for s, c in _matrix_pairs())
    cfg = campaign(tmp, f"""name: matrix
file_size: {SIZE}B
repetitions: 1
port: 4440
monitors: [handshake]
timeouts: {{setup: 3000s, client: 240s}}
pairs:
{body}
""")
    result = execute(cfg, tmp)
    return result, local_testbed


def test_every_pair_that_shares_a_protocol_downloads_and_verifies(matrix):
    result, testbed = matrix
    by_pair = {(r.server.implementation, r.client.implementation): r for r in result.records}
    assert set(by_pair) == set(_matrix_pairs())
    problems = []
    for (server, client), rec in sorted(by_pair.items()):
        alpn = common_alpn(REGISTRY[server], REGISTRY[client])
        if alpn is None:
            if rec.status != "unsupported" or "no common protocol" not in (rec.reason or ""):
                problems.append(f"{server}->{client}: {rec.status} {rec.reason}")
            continue
        # HTTP/3 wherever both sides speak it, else hq-interop; recorded per run
        assert rec.alpn == alpn
        if alpn != "h3" and "h3" in REGISTRY[server].alpns and "h3" in REGISTRY[client].alpns:
            problems.append(f"{server}->{client}: {alpn} although both speak h3")
        if rec.status != "ok" or not rec.hash_ok or rec.bytes_received != SIZE:
            problems.append(f"{server}->{client} ({alpn}): {rec.status} {rec.reason}")
            continue
        assert rec.goodput_mbps and rec.goodput_mbps > 1
    assert problems == [], "\n".join(problems)
    assert_nodes_clean(testbed)


def test_versions_and_harness_hashes_are_recorded(matrix):
    result, _ = matrix
    campaign_json = json.loads((result.directory / "campaign.json").read_text())
    for key, entry in campaign_json["implementations"].items():
        assert entry.get("version"), f"{key}: no version ({entry.get('setup_error')})"
        assert len(entry["source_hash"]) == 64
    for rec in result.records:
        for side in (rec.server, rec.client):
            assert side.version and side.source_hash == REGISTRY[side.implementation].source_hash()
            assert side.effective["congestion_control"]


def test_quic_handshakes_seen_on_the_wire(matrix):
    """The handshake monitor decrypts each QUIC run's Initial packets."""
    result, _ = matrix
    for rec in result.records:
        if rec.status != "ok" or rec.alpn == "http/1.1":
            continue
        assert rec.handshake is not None, \
            f"{rec.server.implementation}->{rec.client.implementation}"
        assert rec.handshake["selected"] in rec.handshake["offered"]
        assert rec.alpn in rec.handshake["alpn_offered"]


VERIFY = [name for name in ("quic-go", "quiche", "quinn", "picoquic") if name in REGISTRY]


def check_params_take_effect(tmp_path: Path, names: list[str], cipher: str, cc: str) -> list:
    """Run each implementation against itself with ``cipher`` and ``cc``; check the wire, the
    recorded effective values and the library's own report; return the records."""
    pairs = "\n".join(f"  - {{server: {n}, client: {n}}}" for n in names)
    cfg = campaign(tmp_path, f"""name: params
file_size: 5MB
repetitions: 1
port: 4441
monitors: [handshake]
timeouts: {{setup: 3000s}}
params: {{cipher: {cipher}, congestion_control: {cc}}}
pairs:
{pairs}
""")
    result = execute(cfg, tmp_path)
    for rec in result.records:
        name = rec.server.implementation
        assert rec.status == "ok", f"{name}: {rec.reason}"
        # on the wire: the client offered only the asked suite and the server chose it
        assert rec.handshake["offered"] == [cipher] and rec.handshake["selected"] == cipher
        for side in (rec.server, rec.client):
            supported = REGISTRY[name].supports.congestion_control
            if cc in supported:
                assert side.effective["congestion_control"] == cc
                assert not [u for u in side.unhonoured if u["param"] == "congestion_control"]
            else:  # recorded, never silently ignored
                (note,) = [u for u in side.unhonoured if u["param"] == "congestion_control"]
                assert note["asked"] == cc and note["used"] == supported[0]
            # the library's own report, where its API has one
            reported = (side.negotiated or {}).get("congestion_control")
            if reported is not None:
                assert normalise_cc(reported) == side.effective["congestion_control"]
            reported_cipher = (side.negotiated or {}).get("cipher")
            if reported_cipher is not None:
                assert reported_cipher == cipher
        assert not [w for w in rec.warnings if "instead of" in w or "chose" in w], rec.warnings
    assert {r.server.implementation for r in result.records} == set(names)
    return list(result.records)


@pytest.mark.parametrize("cipher,cc", [("TLS_AES_256_GCM_SHA384", "reno"),
                                       ("TLS_CHACHA20_POLY1305_SHA256", "cubic")])
def test_cipher_and_congestion_control_take_effect(tmp_path, local_testbed, cipher, cc):
    check_params_take_effect(tmp_path, VERIFY, cipher, cc)
    assert_nodes_clean(local_testbed)


@pytest.mark.parametrize("cipher,cc", [("TLS_AES_128_GCM_SHA256", "cubic"),
                                       ("TLS_CHACHA20_POLY1305_SHA256", "bbr")])
def test_native_lsquic_cipher_and_congestion_control(tmp_path, local_testbed, cipher, cc):
    """lsquic's own report on both sides names the asked suite and controller (its log line
    `cubic: initialized` / `bbr: initialized`), and the wire shows the suite."""
    (rec,) = check_params_take_effect(tmp_path, ["lsquic"], cipher, cc)
    for side in (rec.server, rec.client):
        reported = side.negotiated or {}
        assert (reported.get("cipher"), reported.get("congestion_control")) == (cipher, cc), \
            side.negotiated
    assert_nodes_clean(local_testbed)


def test_interop_config_is_the_full_matrix():
    from interop_runner.config.loader import load_campaign

    cfg, _ = load_campaign(Path(__file__).parent.parent / "configs" / "interop.yml")
    assert set(cfg.servers) == set(cfg.clients) == set(NAMES)
