"""The workload model (config/workload.py): kinds, limits, transfers and their names, what a
harness offers, and how a campaign carries it (``workload.size`` is ``file_size``)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from interop_runner.config.campaign import CampaignConfig
from interop_runner.config.implementations import load_registry, workload_unsupported
from interop_runner.config.sweep import Axis
from interop_runner.config.workload import (
    MAX_CONNECTIONS,
    MAX_STREAMS,
    Workload,
    WorkloadSupport,
    transfer_names,
    transfers,
    workload_label,
)
from interop_runner.config.written import WRITTEN

BASE = {"name": "w", "testbed": "t.yml", "pairs": [{"server": "quic-go", "client": "quic-go"}]}


def config(**extra: object) -> CampaignConfig:
    return CampaignConfig.model_validate({**BASE, **extra}, context=WRITTEN)


def test_the_default_is_one_download_on_one_stream():
    w = Workload()
    assert (w.kind, w.streams, w.connections, w.directions) == ("download", 1, 1, ("download",))
    assert w.is_default and w.env() == {"WORKLOAD": "download", "STREAMS": "1",
                                        "CONNECTIONS": "1"}


@pytest.mark.parametrize("kind, directions", [("download", ("download",)),
                                              ("upload", ("upload",)),
                                              ("bidirectional", ("download", "upload"))])
def test_directions_follow_the_kind(kind, directions):
    w = Workload(kind=kind)
    assert w.directions == directions
    assert (w.downloads, w.uploads) == ("download" in directions, "upload" in directions)


@pytest.mark.parametrize("key, value", [("streams", 0), ("streams", MAX_STREAMS + 1),
                                        ("connections", 0),
                                        ("connections", MAX_CONNECTIONS + 1)])
def test_streams_and_connections_outside_their_limits_are_refused(key, value):
    with pytest.raises(ValidationError, match=key):
        Workload.model_validate({key: value})


def test_an_unknown_kind_and_a_bare_size_are_refused():
    with pytest.raises(ValidationError, match="kind"):
        Workload.model_validate({"kind": "sideways"})
    with pytest.raises(ValidationError, match="has no unit"):
        Workload.model_validate({"size": 1024}, context=WRITTEN)


def test_transfer_names_are_the_file_for_one_and_links_for_several():
    assert transfer_names("goodput-8.bin", 1) == ["goodput-8.bin"]
    assert transfer_names("goodput-8.bin", 3) == ["goodput-8-1of3.bin", "goodput-8-2of3.bin",
                                                  "goodput-8-3of3.bin"]
    assert transfer_names("noext", 2) == ["noext-1of2", "noext-2of2"]


def test_transfers_go_connection_by_connection_then_stream_by_stream():
    got = transfers(Workload(kind="bidirectional", streams=2, connections=2), "d.bin", "u.bin")
    assert [(t.direction, t.connection, t.stream, t.name) for t in got] == [
        ("download", 0, 0, "d-1of4.bin"), ("download", 0, 1, "d-2of4.bin"),
        ("download", 1, 0, "d-3of4.bin"), ("download", 1, 1, "d-4of4.bin"),
        ("upload", 0, 0, "u-1of4.bin"), ("upload", 0, 1, "u-2of4.bin"),
        ("upload", 1, 0, "u-3of4.bin"), ("upload", 1, 1, "u-4of4.bin")]


def test_labels_name_the_shape_only_when_there_is_one():
    assert workload_label("upload", 1, 1) == "upload"
    assert Workload(kind="download", streams=4, connections=2).label == "download 4x2"


def test_support_says_why_a_workload_cannot_run():
    offer = WorkloadSupport(kinds=["download", "upload"], streams=4, connections=1,
                            note="no more wired")
    assert offer.why_not(Workload(kind="upload", streams=4), "x") is None
    assert offer.why_not(Workload(kind="bidirectional"), "x") == (
        "x does not run bidirectional workloads (it runs: download, upload): no more wired")
    assert offer.why_not(Workload(streams=8), "x") == "x runs at most 4 streams (asked for 8)"
    assert offer.why_not(Workload(connections=2), "x") == \
        "x runs at most 1 connections (asked for 2)"


def test_an_upload_over_hq_interop_is_unsupported_whatever_the_harness_offers():
    registry = load_registry()
    why = workload_unsupported(Workload(kind="upload"), registry["tcp-tls"],
                               registry["tcp-tls"], "hq-interop")
    assert why == "hq-interop requests carry no body: no upload over hq-interop"
    assert workload_unsupported(Workload(kind="upload"), registry["tcp-tls"],
                                registry["tcp-tls"], "http/1.1") is None


def test_every_meta_file_offers_at_least_the_default_download():
    for name, meta in load_registry().items():
        assert "download" in meta.workloads.kinds, name
        if meta.workloads.kinds == ["download"]:
            assert meta.workloads.note, f"{name}: say why it offers only downloads"


def test_workload_size_is_file_size_and_both_must_agree():
    cfg = config(workload={"kind": "upload", "size": "1MiB"})
    assert cfg.file_size == 2**20 and cfg.workload.size is None
    assert cfg.transfer_bytes() == 2**20
    assert config(file_size="1MiB", workload={"size": "1MiB"}).file_size == 2**20
    with pytest.raises(ValidationError, match="same setting"):
        config(file_size="2MiB", workload={"size": "1MiB"})


def test_transfer_bytes_and_the_client_timeout_count_every_stream_and_direction():
    cfg = config(file_size="1MiB", workload={"kind": "bidirectional", "streams": 4,
                                             "connections": 2})
    assert cfg.transfer_bytes() == 16 * 2**20
    assert cfg.client_timeout() == pytest.approx(60 + 16 * 2**20 * 8 / 50e6)


def test_a_flows_campaign_takes_its_workloads_per_flow():
    """The campaign's workload would say nothing of which flow moves what: refused; each
    flow gives its own, and over a path they all go one way (its bottleneck shapes one)."""
    body = {k: v for k, v in BASE.items() if k != "pairs"}
    flows = [{"server": "quic-go", "client": "quic-go", "duration": "5s"}]
    with pytest.raises(ValidationError, match="gives each flow its own"):
        CampaignConfig.model_validate({**body, "flows": flows, "workload": {"kind": "upload"}},
                                      context=WRITTEN)
    up = {"server": "quiche", "client": "quiche", "duration": "5s",
          "workload": {"kind": "upload", "streams": 2}}
    cfg = CampaignConfig.model_validate({**body, "flows": [*flows, up, {
        "tcp": "cubic", "duration": "5s", "workload": {"kind": "upload"}}]}, context=WRITTEN)
    assert [w.kind for w in cfg.workloads()] == ["download", "upload", "upload"]
    assert cfg.data_directions() == {"download", "upload"}
    assert [w.streams for w in cfg.file_workloads()] == [1, 2]  # iperf3 sends no file
    path = {"rate": "20mbit", "rtt": "10ms"}
    with pytest.raises(ValidationError, match="every flow's data must go one way"):
        CampaignConfig.model_validate({**body, "flows": [*flows, up], "path": path},
                                      context=WRITTEN)
    both = {**up, "workload": {"kind": "bidirectional"}}
    with pytest.raises(ValidationError, match=r"flows\[0\].workload: a bidirectional"):
        CampaignConfig.model_validate({**body, "flows": [both], "path": path}, context=WRITTEN)


@pytest.mark.parametrize("workload, message", [
    ({"kind": "upload", "size": "1MB"}, "a flow's amount is its `size`"),
    ({"kind": "upload", "duration": "2s"}, "a flow's amount is its `size`"),
])
def test_a_flows_amount_is_the_flows_own(workload: dict[str, str], message: str) -> None:
    body = {k: v for k, v in BASE.items() if k != "pairs"}
    flows = [{"server": "quiche", "client": "quiche", "duration": "5s", "workload": workload}]
    with pytest.raises(ValidationError, match=message):
        CampaignConfig.model_validate({**body, "flows": flows}, context=WRITTEN)


def test_a_tcp_flow_moves_one_way_on_one_connection() -> None:
    body = {k: v for k, v in BASE.items() if k != "pairs"}
    for workload in ({"kind": "bidirectional"}, {"kind": "upload", "streams": 2}):
        with pytest.raises(ValidationError, match="a tcp flow is one iperf3 connection"):
            CampaignConfig.model_validate({**body, "flows": [
                {"tcp": "cubic", "duration": "5s", "workload": workload}]}, context=WRITTEN)


def test_the_kind_sweeps_and_the_size_does_not():
    assert Axis(path="workload.kind", values=["download", "upload"]).label == "kind"
    with pytest.raises(ValidationError, match="prepared once per campaign"):
        Axis(path="workload.size", values=["1MiB"])


@pytest.mark.parametrize("param, value", [("ack_ratio", 10), ("max_ack_delay", "25ms"),
                                          ("flow_control_window", "64KiB")])
def test_receiver_parameters_of_the_client_are_refused_for_an_upload(param, value):
    with pytest.raises(ValidationError, match=f"params.{param} is asked of the client"):
        config(params={param: value}, workload={"kind": "upload"})
    assert config(params={param: value}).params is not None


def test_a_bidirectional_workload_over_a_path_is_refused():
    with pytest.raises(ValidationError, match="bidirectional workload over `path`"):
        config(path={"rate": "20mbit", "rtt": "50ms"}, workload={"kind": "bidirectional"})


def test_a_duration_carries_its_unit_and_bounds_the_client_timeout():
    cfg = config(file_size="8GiB", workload={"kind": "upload", "duration": "10s"})
    assert cfg.workload.duration == 10.0 and not cfg.workload.is_default
    assert cfg.client_timeout() == 70.0
    with pytest.raises(ValidationError, match="has no unit"):
        config(workload={"duration": 10})
