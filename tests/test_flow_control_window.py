"""The flow_control_window standard parameter (paper 003 section IV.C): its values, the
contract environment, resolution per role and pair, unsupported pairs in the plan, the ngtcp2
client's options, and the flow-control ceiling that uses the window the client ran."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Callable

import pytest
from pydantic import ValidationError

from interop_runner.analysis.theories.ceilings import asked_window
from interop_runner.config.implementations import common_alpn, load_registry, why_unsupported
from interop_runner.config.loader import load_campaign
from interop_runner.config.params import (
    LIBRARY_DEFAULT,
    MIN_FLOW_CONTROL_WINDOW,
    StandardParams,
    Supports,
    pair_unsupported,
    resolve,
)
from interop_runner.measure.plan import build_plan

from .conftest import ROOT, TESTBED_FILE, fake_gtlsclient, write
from .test_ceilings import LINK, derived

CUBIC: list[Any] = ["cubic"]  # so that nothing but the window is unhonoured
SETS = Supports(congestion_control=CUBIC, flow_control_window=True)
NONE = Supports(congestion_control=CUBIC)
KiB = 1024
WINDOW = StandardParams(flow_control_window="64KiB")
REASON = "lib cannot set flow_control_window as the client (the data receiver)"


def test_sizes_and_bounds() -> None:
    assert StandardParams().flow_control_window is None
    assert WINDOW.flow_control_window == 64 * KiB
    assert StandardParams(flow_control_window=100_000).flow_control_window == 100_000
    assert StandardParams(flow_control_window="100kB").flow_control_window == 100_000
    assert StandardParams(flow_control_window=MIN_FLOW_CONTROL_WINDOW).flow_control_window
    for bad in (0, MIN_FLOW_CONTROL_WINDOW - 1, "1KiB", 2**62, "lots", True, -1):
        with pytest.raises(ValidationError):
            StandardParams(flow_control_window=bad)


def test_the_contract_environment() -> None:
    assert resolve(WINDOW, NONE, "x", keylog=False, qlog=False).env["FLOW_CONTROL_WINDOW"] \
        == "65536"
    assert resolve(StandardParams(), NONE, "x", keylog=False, qlog=False) \
        .env["FLOW_CONTROL_WINDOW"] == ""


def test_a_client_that_sets_it_runs_it() -> None:
    res = resolve(WINDOW, SETS, "own", keylog=False, qlog=False, role="client", peer=NONE)
    assert res.effective["flow_control_window"] == 64 * KiB
    assert res.unhonoured == [] and res.unsupported == []


def test_a_client_that_cannot_makes_the_pair_unsupported_with_the_reason() -> None:
    res = resolve(WINDOW, NONE, "lib", keylog=False, qlog=False, role="client", peer=SETS)
    assert res.effective["flow_control_window"] == LIBRARY_DEFAULT
    assert res.unhonoured == [{"param": "flow_control_window", "asked": 64 * KiB,
                               "used": LIBRARY_DEFAULT, "reason": REASON}]
    assert res.unsupported == [REASON]
    assert pair_unsupported(WINDOW, SETS, NONE, "lib") == REASON
    assert pair_unsupported(StandardParams(), SETS, NONE, "lib") is None  # not asked


def test_the_server_keeps_its_own_window_and_never_blocks_the_pair() -> None:
    res = resolve(WINDOW, NONE, "srv", keylog=False, qlog=False, role="server", peer=SETS)
    assert res.effective["flow_control_window"] == LIBRARY_DEFAULT
    assert res.unhonoured == [] and res.unsupported == []
    assert pair_unsupported(WINDOW, NONE, SETS, "cli") is None


def test_the_registry_pairs() -> None:
    """What the meta.yml files declare: the aioquic, quic-go, ngtcp2, quiche, quinn, s2n-quic,
    msquic and lsquic clients set it (quic-go-qir: the quic-go client in an image), any server
    may serve them; every other client makes the pair unsupported."""
    reg = load_registry()
    assert sorted(n for n, m in reg.items() if m.supports.flow_control_window) == \
        ["aioquic", "lsquic", "msquic", "ngtcp2", "quic-go", "quic-go-qir", "quiche", "quinn",
         "s2n-quic"]

    def why(server: str, client: str) -> str | None:
        alpn = common_alpn(reg[server], reg[client])
        return why_unsupported(WINDOW, reg[server], reg[client], alpn)

    for client in ("aioquic", "lsquic", "msquic", "ngtcp2", "quic-go", "quiche", "quinn",
                   "s2n-quic"):
        assert why("picoquic", client) is None, client
    assert why("quic-go", "picoquic") == ("picoquic cannot set flow_control_window as the "
                                          "client (the data receiver)")


def test_the_plan_records_unsupported_pairs_per_window(tmp_path: Path) -> None:
    cfg, _ = load_campaign(write(tmp_path / "w.yml", f"""testbed: {TESTBED_FILE}
name: window-plan
repetitions: 1
pairs:
  - {{server: quic-go, client: quic-go}}
  - {{server: quic-go, client: picoquic}}
sweep:
  axes:
    - {{path: params.flow_control_window, values: [32KiB, null], name: window}}
"""))
    runs = {(r.client, r.variant.id): r.unsupported for r in build_plan(cfg, ["local"]).runs}
    assert runs == {
        ("quic-go", "window=32KiB"): None, ("quic-go", "window=None"): None,
        ("picoquic", "window=32KiB"): ("picoquic cannot set flow_control_window as the client "
                                       "(the data receiver)"),
        ("picoquic", "window=None"): None}


NGTCP2_DEFAULT = ["--max-data=32M", "--max-stream-data-bidi-local=16M", "--max-window=32M",
                  "--max-stream-window=16M"]
NGTCP2_64K = ["--max-data=65536", "--max-stream-data-bidi-local=65536", "--max-window=65536",
              "--max-stream-window=65536"]


@pytest.mark.parametrize(("window", "code", "expected"), [
    ("65536", 0, NGTCP2_64K),
    ("", 0, NGTCP2_DEFAULT),
    ("64KiB", 1, None),  # the runner passes bytes; anything else is a broken contract
])
def test_ngtcp2_client_options(tmp_path: Path, window: str, code: int,
                               expected: list[str] | None) -> None:
    env, args = fake_gtlsclient(tmp_path)
    res = subprocess.run([str(ROOT / "implementations/ngtcp2/run-client")],
                         env={**env, "FLOW_CONTROL_WINDOW": window}, capture_output=True,
                         text=True, timeout=30)
    assert res.returncode == code, res.stderr
    if expected is None:
        assert "FLOW_CONTROL_WINDOW" in res.stderr and not args.exists()
        return
    given = args.read_text().splitlines()
    assert [a for a in given if "window" in a or a.startswith("--max-")] == expected


# ------------------------------------------------------------------------ the ceiling

def ran_window(window: Any, client: str = "aioquic",
               rtt_ms: float = 50.0) -> Callable[[dict[str, Any]], None]:
    """A change of the ceilings' sample record: ``client`` ran ``window`` at ``rtt_ms``."""
    def change(record: dict[str, Any]) -> None:
        record["path"]["resolved"]["rtt_ms"] = rtt_ms
        record["client"].update(implementation=client, version="1.7.2")
        record["client"]["effective"]["flow_control_window"] = window
    return change


def test_the_window_the_client_ran_is_the_ceilings() -> None:
    # aioquic's own window has no bound; the one it ran gives 8 x 65536 B / 50 ms
    row = derived(ran_window(64 * KiB))
    assert row["ceiling_window_bytes"] == 64 * KiB
    assert row["ceiling_flow_control_mbps"] == pytest.approx(10.48576)
    assert (row["ceiling_mbps"], row["ceiling_basis"]) == (pytest.approx(10.48576),
                                                           "flow_control")
    assert row["ceiling_missing"] == "loss: no random loss on the path"
    # the sample's goodput (18.7 Mbit/s) is impossible through that window
    assert row["ceiling_exceeded"] is True
    assert row["ceiling_exceeded_by"].startswith("goodput 18.69 Mbit/s > flow_control ceiling "
                                                 "10.49 Mbit/s")


def test_a_large_window_leaves_the_link_binding() -> None:
    row = derived(ran_window(16 * 2**20, client="quic-go"))  # instead of quic-go's 6 MiB
    assert row["ceiling_window_bytes"] == 16 * 2**20
    assert (row["ceiling_mbps"], row["ceiling_basis"]) == (pytest.approx(LINK), "link")


def test_without_the_parameter_the_stacks_window_stays() -> None:
    assert asked_window({"effective": {"flow_control_window": LIBRARY_DEFAULT}}) is None
    assert asked_window({"effective": {"flow_control_window": True}}) is None
    assert asked_window({}) is None
    row = derived(ran_window(LIBRARY_DEFAULT, client="quic-go"))
    assert row["ceiling_window_bytes"] is None  # quic-go "1.7.2": no default read for it
    row = derived(ran_window(LIBRARY_DEFAULT))
    assert "aioquic grants credit without bound" in row["ceiling_missing"]
