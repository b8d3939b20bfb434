"""The campaign's ``path:`` block (config/path.py): units, resolved numbers, refused input,
traces, and what the campaign loader adds (relative traces, every variant's path resolved)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from interop_runner.config.campaign import CampaignConfig
from interop_runner.config.loader import load_campaign_testbeds
from interop_runner.config.path import (
    TRACE_OPPORTUNITY,
    WIRE_PACKET,
    Buffer,
    LinkConfig,
    PathConfig,
    PathTolerance,
    ResolvedLink,
    SplitConfig,
    parse_buffer,
    read_trace,
    trace_rate_bps,
)
from interop_runner.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "path"
TRACE = DATA / "verizon-lte-down-10s.trace"
BASE_TESTBED = ROOT / "tests" / "data" / "bad_input" / "testbeds" / "base.yml"


def path(**kwargs: object) -> PathConfig:
    return PathConfig.model_validate(kwargs)


def refused(**kwargs: object) -> str:
    with pytest.raises(ValidationError) as info:
        PathConfig.model_validate(kwargs)
    (error,) = info.value.errors()
    return str(error["msg"])


# -- units (the rates and times themselves: tests/test_units.py) --------------------------------
@pytest.mark.parametrize("text, buffer", [
    ("1bdp", Buffer(1.0, "bdp")), ("0.5bdp", Buffer(0.5, "bdp")), ("5 BDP", Buffer(5.0, "bdp")),
    ("100p", Buffer(100.0, "packets")), ("2pkt", Buffer(2.0, "packets")),
    ("3 packets", Buffer(3.0, "packets")), ("64KiB", Buffer(65536.0, "bytes")),
    ("10MB", Buffer(10e6, "bytes")), (1514, Buffer(1514.0, "bytes")),
])
def test_parse_buffer(text: object, buffer: Buffer) -> None:
    assert parse_buffer(text) == buffer


def test_buffer_bytes() -> None:
    rate, rtt = 20_000_000, 50.0  # one BDP: 20 Mbit/s x 50 ms = 125000 bytes
    assert parse_buffer("1bdp").bytes(rate, rtt) == 125_000
    assert parse_buffer("0.5bdp").bytes(rate, rtt) == 62_500
    assert parse_buffer("5bdp").bytes(100_000_000, 10.0) == 625_000
    assert parse_buffer("100p").bytes(None, None) == 100 * WIRE_PACKET == 151_400
    assert parse_buffer("64KiB").bytes(None, None) == 65_536
    with pytest.raises(ValueError, match="a buffer in bdp needs `rate` and `rtt`"):
        parse_buffer("1bdp").bytes(None, 50.0)
    for bad in ("-1p", "12 parsecs", 1000.5, -1):
        with pytest.raises(ValueError):
            parse_buffer(bad)


# -- resolved numbers --------------------------------------------------------------------------
def test_resolved_without_jitter_puts_the_base_delay_on_the_reverse_direction() -> None:
    resolved = path(rate="20mbit", rtt="50ms").resolved()
    assert (resolved.rate_bps, resolved.rtt_ms) == (20_000_000, 50.0)
    assert resolved.buffer_bytes == 125_000  # the default buffer: 1 BDP
    assert (resolved.data_delay_ms, resolved.reverse_delay_ms) == (0.0, 50.0)
    assert resolved.full_queue_ms == pytest.approx(50.0)
    assert not resolved.data_delay_line  # the data direction needs only tbf
    assert (resolved.loss, resolved.jitter, resolved.reverse_rate_bps) == (0.0, 0.0, None)
    assert (resolved.links, resolved.split, resolved.trace) == (None, None, None)


def test_resolved_with_jitter_splits_the_delay() -> None:
    resolved = path(rate="100mbit", rtt="10ms", buffer="0.5bdp", jitter=0.1, loss=0.01,
                    reverse_rate="10mbit").resolved()
    assert (resolved.data_delay_ms, resolved.reverse_delay_ms) == (5.0, 5.0)
    assert resolved.buffer_bytes == 62_500
    assert resolved.full_queue_ms == pytest.approx(5.0)
    assert resolved.data_delay_line
    assert (resolved.loss, resolved.jitter, resolved.reverse_rate_bps) == (0.01, 0.1, 10**7)


def test_buffer_in_bytes_and_packets() -> None:
    assert path(rate="20mbit", rtt="50ms", buffer="64KiB").resolved().buffer_bytes == 65_536
    resolved = path(rate="20mbit", rtt="50ms", buffer="100p").resolved()
    assert resolved.buffer_bytes == 151_400
    assert resolved.full_queue_ms == pytest.approx(151_400 * 8 / 20e6 * 1000)
    assert path(rate="20mbit", rtt="50ms", buffer=WIRE_PACKET).resolved().buffer_bytes == 1514


def test_two_links() -> None:
    cfg = path(links=[{"rate": "20mbit", "delay": "10ms", "jitter": 0.1},
                      {"rate": "30mbit", "delay": "30ms", "loss": 0.01, "buffer": "50p"}],
               split={"batch": 50, "ratio": "2:1"}, reorder_timeout="200ms")
    resolved = cfg.resolved()
    # the reverse direction's delay defaults to the shorter link's; the RTT is over that link
    assert (resolved.reverse_delay_ms, resolved.rtt_ms, resolved.data_delay_ms) == (10, 20, 0)
    assert resolved.rate_bps == 50_000_000
    assert resolved.links == (ResolvedLink(20_000_000, 10.0, 0.1, 0.0, 50_000),  # 1 BDP
                              ResolvedLink(30_000_000, 30.0, 0.0, 0.01, 50 * WIRE_PACKET))
    assert resolved.split == SplitConfig(batch=50, ratio="2:1")
    assert resolved.reorder_timeout_ms == 200.0
    assert (resolved.buffer_bytes, resolved.full_queue_ms) == (None, None)  # one per link
    assert resolved.data_delay_line


def test_two_links_with_a_reverse_delay() -> None:
    resolved = path(links=[{"rate": "20mbit", "delay": 10}, {"rate": "20mbit", "delay": 20}],
                    reverse_delay="5ms").resolved()
    assert (resolved.reverse_delay_ms, resolved.rtt_ms) == (5.0, 15.0)
    assert resolved.links is not None
    # each link's BDP: its rate x (its delay + the reverse delay)
    assert [x.buffer_bytes for x in resolved.links] == [37_500, 62_500]
    assert resolved.split == SplitConfig()  # batch 100, ratio 1:1 (paper 002)


def test_defaults() -> None:
    cfg = path(rate="20mbit", rtt=50)
    assert (cfg.backend, cfg.calibrate, cfg.record_packets) == ("auto", "strict", False)
    assert cfg.tolerance == PathTolerance(rtt_ms=0.5, rtt_rel=0.02, rate_rel=0.03, queue_ms=1.0,
                                          queue_rel=0.10, loss_confidence=0.99)
    assert LinkConfig.model_validate({"rate": "1mbit", "delay": 0}).buffer == "1bdp"


# -- traces ------------------------------------------------------------------------------------
def test_real_trace() -> None:
    stamps = read_trace(TRACE)
    assert (len(stamps), stamps[0], stamps[-1]) == (5768, 0, 10_000)
    assert stamps == sorted(stamps)
    # 5768 opportunities of 1500 bytes in 10 s
    assert trace_rate_bps(TRACE) == 5768 * TRACE_OPPORTUNITY * 8 // 10 == 6_921_600


def test_trace_path_resolved(tmp_path: Path) -> None:
    cfg = path(trace=TRACE.name, rtt="50ms")
    resolved = cfg.resolved(base=DATA)
    assert resolved.trace == TRACE
    assert resolved.rate_bps == 6_921_600
    assert resolved.buffer_bytes == round(6_921_600 * 50 / 8000)  # 1 BDP at the trace's mean
    assert (resolved.data_delay_ms, resolved.reverse_delay_ms) == (0.0, 50.0)
    assert resolved.data_delay_line  # the trace is played by the delay line
    absolute = path(trace=str(TRACE), rtt=50).resolved(base=tmp_path)
    assert absolute.trace == TRACE


@pytest.mark.parametrize("text, message", [
    ("0\n5\n3\n10\n", "line 3: times must not decrease"),
    ("0\n1\nfast\n", "line 3: 'fast' is not a time in ms"),
    ("0\n1.5\n", "line 2: '1.5' is not a time in ms"),
    ("-1\n3\n", "line 1: times must not decrease"),
    ("", "no delivery opportunity after 0 ms"),
    ("0\n0\n", "no delivery opportunity after 0 ms"),
])
def test_bad_traces(tmp_path: Path, text: str, message: str) -> None:
    trace = tmp_path / "t.trace"
    trace.write_text(text)
    with pytest.raises(ValueError, match=message) as info:
        read_trace(trace)
    assert str(trace) in str(info.value)


def test_trace_blank_lines_and_missing_file(tmp_path: Path) -> None:
    trace = tmp_path / "t.trace"
    trace.write_text("\n1\n\n1\n2\n")
    assert read_trace(trace) == [1, 1, 2]
    assert trace_rate_bps(trace) == 3 * 1500 * 8000 // 2  # 18 Mbit/s
    with pytest.raises(ValueError, match="No such file or directory"):
        read_trace(tmp_path / "missing.trace")
    with pytest.raises(ValueError, match="missing.trace: No such file"):
        path(trace="missing.trace", rtt=50).resolved(base=tmp_path)


# -- refused -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, message", [
    ({"rate": "20mbit", "rtt": "50ms", "buffer": 1000}, "buffer 1000 is smaller than one packet"),
    ({"rate": "20mbit", "rtt": "50ms", "buffer": "0.5p"}, "smaller than one packet (1514 bytes"),
    ({"rate": "20mbit", "rtt": 0}, "buffer 1bdp (the default) is smaller than"),
    ({"rate": "20mbit", "buffer": "1bdp"}, "a path needs `rate` and `rtt`"),
    ({"rtt": "50ms"}, "a path needs `rate` and `rtt`"),
    ({}, "a path needs `rate` and `rtt`"),
    ({"trace": "x.trace"}, "a path with a `trace` needs `rtt`"),
    ({"trace": "x.trace", "rtt": 50, "rate": "20mbit"}, "give `trace` or `rate`, not both"),
    ({"links": [{"rate": "20mbit", "delay": 10}]}, "two links, got 1"),
    ({"links": [{"rate": "20mbit", "delay": 10}] * 3}, "two links, got 3"),
    ({"links": [], "rate": "20mbit", "rtt": 50}, "two links, got 0"),
    ({"links": [{"rate": "20mbit", "delay": 10}] * 2, "rate": "20mbit"},
     "give `links` or `rate`/`trace`, not both"),
    ({"links": [{"rate": "20mbit", "delay": 10}] * 2, "trace": "x"}, "not both"),
    ({"links": [{"rate": "20mbit", "delay": 10}] * 2, "jitter": 0.1},
     "with `links`, give jitter and loss per link"),
    ({"links": [{"rate": "20mbit", "delay": 10}] * 2, "loss": 0.01}, "jitter and loss per link"),
    ({"links": [{"rate": "20mbit", "delay": 10}] * 2, "rtt": 99}, "not `rtt` or `buffer`"),
    ({"links": [{"rate": "20mbit", "delay": 10}] * 2, "buffer": "5p"}, "not `rtt` or `buffer`"),
    ({"rate": "20mbit", "rtt": 50, "reorder_timeout": "200ms"},
     "`reorder_timeout` reorders packets split over two links: give `links`"),
])
def test_refused(kwargs: dict[str, object], message: str) -> None:
    assert message in refused(**kwargs)


@pytest.mark.parametrize("kwargs, message", [
    ({"backend": "tofu"}, "Input should be 'auto', 'netem' or 'nfqueue'"),
    ({"calibrate": "maybe"}, "Input should be 'strict', 'warn' or 'off'"),
    ({"loss": 1.0}, "less than 1"),
    ({"loss": -0.1}, "greater than or equal to 0"),
    ({"jitter": 1.5}, "less than or equal to 1"),
    ({"rtt_ms": 50}, "Extra inputs are not permitted"),
    ({"rate": "20mbps"}, "cannot parse rate"),
    ({"rate": float("inf")}, "rate inf is not a finite number"),
    ({"rtt": "-5ms"}, "cannot parse time"),
    ({"buffer": "12 parsecs"}, "cannot parse size"),
    ({"split": {"ratio": "1:0"}}, "must look like '1:1'"),
    ({"split": {"batch": 0}}, "greater than or equal to 1"),
    ({"tolerance": {"rate_rel": -1}}, "greater than or equal to 0"),
])
def test_refused_fields(kwargs: dict[str, object], message: str) -> None:
    data = {"rate": "20mbit", "rtt": "50ms", **kwargs}
    with pytest.raises(ValidationError, match=message.replace("(", r"\(")):
        PathConfig.model_validate(data)


def test_link_buffer_below_a_packet_refused_when_resolved() -> None:
    with pytest.raises(ValueError, match="link buffer 1000 is smaller than one packet"):
        path(links=[{"rate": "20mbit", "delay": 10, "buffer": 1000},
                    {"rate": "20mbit", "delay": 10}]).resolved()
    with pytest.raises(ValidationError, match="cannot parse size"):
        LinkConfig.model_validate({"rate": "20mbit", "delay": 10, "buffer": "lots"})


# -- in a campaign -----------------------------------------------------------------------------
def campaign(tmp_path: Path, body: str) -> Path:
    text = (f"name: pathtest\ntestbed: {BASE_TESTBED}\nfile_size: 1MiB\nrepetitions: 1\n"
            f"pairs: [{{server: quic-go, client: quic-go}}]\n{body}")
    file = tmp_path / "campaigns" / "c.yml"
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)
    return file


@pytest.fixture
def at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the corpus testbed's key paths are relative to the repository


def test_relative_trace_made_absolute(tmp_path: Path, at_root: None) -> None:
    file = campaign(tmp_path, "path: {trace: ../traces/v.trace, rtt: 50ms}\n")
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "v.trace").write_bytes(TRACE.read_bytes())
    cfg, _ = load_campaign_testbeds(file)
    assert cfg.path is not None
    assert cfg.path.trace == str((tmp_path / "traces" / "v.trace").resolve())
    assert cfg.path.resolved().rate_bps == 6_921_600  # resolves from any directory
    assert cfg.path.rtt == 50.0


def test_path_in_campaign_and_sweep(tmp_path: Path, at_root: None) -> None:
    file = campaign(tmp_path, "path: {rate: 20mbit, rtt: 50ms}\nsweep: {axes: [{path: "
                              "path.buffer, values: [0.5bdp, 1bdp, 5bdp]}]}\n")
    cfg, _ = load_campaign_testbeds(file)
    assert isinstance(cfg, CampaignConfig) and cfg.path is not None
    assert cfg.path.resolved().buffer_bytes == 125_000
    assert [axis.values for axis in cfg.sweep.axes] == [["0.5bdp", "1bdp", "5bdp"]]


@pytest.mark.parametrize("body, line", [
    ("path: {rate: 20mbit, rtt: 50ms, buffer: 1000B}\n",
     "c.yml: path: buffer '1000B' is smaller than one packet (1514 bytes at the bottleneck)"),
    ("path: {trace: nowhere.trace, rtt: 50ms}\n", "c.yml: path: trace "),
    ("path: {rate: 20mbit, rtt: 50ms}\nsweep: {axes: [{path: path.buffer, values: [1bdp, 10B]}]}\n",
     "c.yml: sweep.axes[0].values[1] (path.buffer='10B'): buffer '10B' is smaller than one "
     "packet"),
    ("path: {links: [{rate: 20mbit, delay: 10ms}, {rate: 20mbit, delay: 10ms}]}\nsweep: {axes: "
     "[{path: path.links, name: links, values: [[{rate: 20mbit, delay: 10ms}, {rate: 20mbit, "
     "delay: 10ms}], [{rate: 20mbit, delay: 10ms, buffer: 100B}, {rate: 20mbit, delay: 10ms}]]}]}"
     "\n",
     "c.yml: path (variant links="),  # the model cannot see a link's buffer in bytes
])
def test_refused_in_campaign(tmp_path: Path, at_root: None, body: str, line: str) -> None:
    file = campaign(tmp_path, body)
    with pytest.raises(ConfigError) as info:
        load_campaign_testbeds(file)
    (error,) = info.value.lines
    assert line in error, error
    if "links" in body:
        assert error.endswith("link buffer '100B' is smaller than one packet")
    if "nowhere" in body:
        assert str((file.parent / "nowhere.trace").resolve()) in error
        assert error.endswith("No such file or directory")


def test_a_traces_rate_over_a_window_and_its_peak() -> None:
    from interop_runner.config.path import read_trace, trace_peak_bps, trace_window_bps

    every_ms = list(range(1, 11))  # one 1500-byte opportunity per ms for 10 ms: 12 Mbit/s
    assert trace_window_bps(every_ms, 0.0005, 0.0105) == pytest.approx(12e6)
    assert trace_window_bps(every_ms, 0.0055, 0.0255) == pytest.approx(12e6)  # repeats
    bursty = [1, 1, 1, 1, 100]  # 4 at once, then nothing until the period's end
    assert trace_window_bps(bursty, 0.0, 0.05) == pytest.approx(4 * 1500 * 8 / 0.05)
    assert trace_window_bps(bursty, 0.05, 0.1) == 0.0
    assert trace_peak_bps(bursty, window_ms=10) == pytest.approx(4 * 1500 * 8 / 0.01)
    real = read_trace(Path(__file__).parent / "data" / "path" / "verizon-lte-down-10s.trace")
    # [0, 10 s) leaves out the opportunity at 10000 ms
    assert trace_window_bps(real, 0.0, 10.0) == pytest.approx(5767 * 12000 / 10)
    assert trace_peak_bps(real) > 2 * trace_window_bps(real, 0.0, 10.0)  # a bursty link
