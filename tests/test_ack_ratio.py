"""The ACK frequency standard parameters (ack_ratio, max_ack_delay; paper 003 section V):
resolution per role and pair, unsupported pairs with the reason, the contract environment, the
ngtcp2 client's options and exit 127, and the measured ratio column."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from interop_runner.analysis.frames.ack_ratio import BASIS, NAME, ack_ratio_measured
from interop_runner.config.implementations import common_alpn, load_registry, why_unsupported
from interop_runner.config.params import (
    ASKED_BY_SERVER,
    LIBRARY_DEFAULT,
    StandardParams,
    Supports,
    pair_unsupported,
    resolve,
)

from .conftest import ROOT, fake_gtlsclient

CUBIC: list[Any] = ["cubic"]  # so that nothing but the ACK parameters is unhonoured
OWN = Supports(congestion_control=CUBIC, ack_ratio=True, max_ack_delay=True)
RATIO_ONLY = Supports(congestion_control=CUBIC, ack_ratio=True)
ASKS = Supports(congestion_control=CUBIC, ack_frequency=True)  # quinn: asks and obeys
NONE = Supports(congestion_control=CUBIC)
TEN = StandardParams(ack_ratio=10)


def test_values_are_checked() -> None:
    assert StandardParams().ack_ratio is None and StandardParams().max_ack_delay is None
    for bad in ({"ack_ratio": 0}, {"max_ack_delay": 0}, {"max_ack_delay": 2**14}):
        with pytest.raises(ValidationError):
            StandardParams.model_validate(bad)


def test_the_contract_environment() -> None:
    env = resolve(StandardParams(ack_ratio=2, max_ack_delay=10), NONE, "x", keylog=False,
                  qlog=False).env
    assert (env["ACK_RATIO"], env["MAX_ACK_DELAY_MS"]) == ("2", "10")
    env = resolve(StandardParams(), NONE, "x", keylog=False, qlog=False).env
    assert (env["ACK_RATIO"], env["MAX_ACK_DELAY_MS"]) == ("", "")


def test_a_client_that_sets_it_itself_runs_it() -> None:
    res = resolve(StandardParams(ack_ratio=10, max_ack_delay=5), OWN, "own", keylog=False,
                  qlog=False, role="client", peer=NONE)
    assert res.effective["ack_ratio"] == 10 and res.effective["max_ack_delay"] == 5
    assert res.unhonoured == [] and res.unsupported == [] and "ack_policy" not in res.effective


def test_a_client_that_cannot_makes_the_pair_unsupported_with_the_reason() -> None:
    res = resolve(TEN, NONE, "lib", keylog=False, qlog=False, role="client", peer=NONE)
    assert res.effective["ack_ratio"] == LIBRARY_DEFAULT
    assert [u["param"] for u in res.unhonoured] == ["ack_ratio"]
    assert res.unsupported == ["lib cannot set ack_ratio as the client (the data receiver)"]
    assert pair_unsupported(TEN, NONE, NONE, "lib") == res.unsupported[0]
    # only what is asked for counts: the ratio alone is fine for a client without a delay
    assert pair_unsupported(TEN, NONE, RATIO_ONLY, "ng") is None
    reason = pair_unsupported(StandardParams(ack_ratio=2, max_ack_delay=5), NONE, RATIO_ONLY,
                              "ng")
    assert reason == "ng cannot set max_ack_delay as the client (the data receiver)"


def test_the_server_keeps_its_own_acks_and_never_blocks_the_pair() -> None:
    res = resolve(StandardParams(ack_ratio=10, max_ack_delay=5), NONE, "srv", keylog=False,
                  qlog=False, role="server", peer=OWN)
    assert res.effective["ack_ratio"] == LIBRARY_DEFAULT == res.effective["max_ack_delay"]
    assert res.unhonoured == [] and res.unsupported == []


def test_a_servers_ack_frequency_request_carries_the_ratio_only() -> None:
    res = resolve(TEN, ASKS, "quinn", keylog=False, qlog=False, role="client", peer=ASKS)
    assert res.effective["ack_ratio"] == 10 and res.effective["ack_policy"] == ASKED_BY_SERVER
    assert res.unsupported == []
    # the client must obey the request, and the delay the server asks for is capped at the RTT
    assert pair_unsupported(TEN, ASKS, NONE, "lib") is not None
    assert pair_unsupported(StandardParams(ack_ratio=2, max_ack_delay=5), ASKS, ASKS,
                            "quinn") is not None


def test_the_registry_pairs() -> None:
    """What the meta.yml files declare: ngtcp2, quiche and aioquic set it as clients, quinn's
    server asks a quinn client; the others make the pair unsupported."""
    reg = load_registry()

    def why(server: str, client: str, params: StandardParams = TEN) -> str | None:
        alpn = common_alpn(reg[server], reg[client])
        return why_unsupported(params, reg[server], reg[client], alpn)

    for client in ("ngtcp2", "quiche", "aioquic"):
        assert why("quic-go", client) is None, client
    assert why("quinn", "quinn") is None
    assert why("quiche", "quic-go") == ("quic-go cannot set ack_ratio as the client (the data "
                                        "receiver)")
    assert why("quiche", "ngtcp2", StandardParams(ack_ratio=2, max_ack_delay=5)) is not None
    assert why("quiche", "quiche", StandardParams(max_ack_delay=5)) is None
    assert why("quiche", "msquic") == ("msquic cannot set ack_ratio as the client (the data "
                                       "receiver)")
    # no common protocol is the first reason
    assert why("ngtcp2", "msquic") == ("no common protocol: server speaks h3, client speaks "
                                       "hq-interop")


@pytest.mark.parametrize(("extra", "code", "thresh"), [
    ({"ACK_RATIO": "10"}, 0, "--ack-thresh=10"),
    ({"ACK_RATIO": ""}, 0, None),
    ({"ACK_RATIO": "101"}, 127, None),
    ({"ACK_RATIO": "2", "MAX_ACK_DELAY_MS": "5"}, 127, None),
])
def test_ngtcp2_client_options(tmp_path: Path, extra: dict[str, str], code: int,
                               thresh: str | None) -> None:
    env, args = fake_gtlsclient(tmp_path)
    res = subprocess.run([str(ROOT / "implementations/ngtcp2/run-client")],
                         env={**env, **extra}, capture_output=True, text=True, timeout=30)
    assert res.returncode == code, res.stderr
    if code == 0:
        given = args.read_text().splitlines()
        assert [a for a in given if a.startswith("--ack-thresh")] == ([thresh] if thresh else [])
    else:
        assert "unsupported" in res.stderr and not args.exists()


def test_measured_ratio_and_its_reason() -> None:
    seg, basis = ack_ratio_measured({"client_udp_out_datagrams": 100.0,
                                     "client_udp_in_datagrams": 1000.0})
    assert seg.names == (NAME,) and seg.values == [0.1] and basis == BASIS
    seg, basis = ack_ratio_measured({"client_udp_in_datagrams": 1000.0})
    assert seg.values == [None] and basis is not None and "client_udp_out_datagrams" in basis
    seg, basis = ack_ratio_measured({"client_udp_out_datagrams": 3.0,
                                     "client_udp_in_datagrams": 0.0})
    assert seg.values == [None] and basis == "NA: the client received no datagrams"


def test_the_summary_per_pair_rtt_and_ratio() -> None:
    import pandas as pd

    from interop_runner.analysis.frames.ack_ratio import ack_ratio_summary

    rows = [("ok", 2, 50.0, 100, 1000), ("ok", 2, 70.0, 120, 1000), ("ok", 10, 40.0, 100, 1000),
            ("failed", 10, None, None, None)]
    frame = pd.DataFrame(
        [{"server": "q", "client": "q", "path_rtt_ms": 10.0, "status": s, "ack_ratio": n,
          "goodput_mbps": g, "client_udp_out_datagrams": o, "client_udp_in_datagrams": i,
          NAME: None if o is None else o / i} for s, n, g, o, i in rows])
    out = ack_ratio_summary(frame).set_index("ack_ratio")
    assert list(out["n"]) == [2, 1]  # the failed attempt is left out
    assert out.loc[2, "goodput_mean"] == 60.0 and out.loc[2, "sent"] == 110
    assert out.loc[2, "ratio_min"] == pytest.approx(0.1) and out.loc[2, "ratio_max"] == 0.12
    assert ack_ratio_summary(frame[frame.status == "failed"]).empty
