"""One side of a flow: its key in the preparation results and campaign.json, and its part of
run.json (the installed version and source hash, the parameters as it runs them)."""

from __future__ import annotations

from pathlib import Path

from interop_runner.config.implementations import load_registry
from interop_runner.config.params import StandardParams
from interop_runner.measure.side import ROLES, ImplKey, SidePlan

from .test_implementations import _node


def test_the_key_of_an_implementation_in_a_role() -> None:
    assert ROLES == ("server", "client")
    key = ImplKey("server", "quic-go@v0.64.0")
    assert key.label == "server:quic-go@v0.64.0"  # campaign.json's implementations key
    assert key == ("server", "quic-go@v0.64.0") and hash(key) == hash(tuple(key))


def test_a_sides_record_is_what_was_installed(tmp_path: Path) -> None:
    meta = load_registry()["quic-go"]
    side = SidePlan("server", meta, "v0.65.0", "ab" * 32, {"force_buffers": False})
    assert side.key == ImplKey("server", "quic-go")
    record = side.record(_node("server", tmp_path), StandardParams(socket_rcvbuf="4MiB"),
                         keylog=False, qlog=False)
    assert (record.implementation, record.version, record.source_hash, record.node) == \
        ("quic-go", "v0.65.0", "ab" * 32, "server")
    assert record.params == {"force_buffers": False}
    assert record.effective["congestion_control"] == "reno"  # quic-go runs NewReno only
    assert {u["param"] for u in record.unhonoured} == {"congestion_control", "socket_rcvbuf"}
