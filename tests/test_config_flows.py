"""A campaign's ``flows:`` list (config/flows.py and its checks in config/campaign.py): what a
flow is, its defaults and labels, every refused input as one line naming the key, ``--set``
overrides, sweeping sets of flows, and the plan of a campaign of flows."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from interop_runner.config.flows import FlowConfig, FlowSet
from interop_runner.config.loader import load_campaign_testbeds
from interop_runner.config.overrides import apply_overrides
from interop_runner.config.params import StandardParams
from interop_runner.config.sweep import slug
from interop_runner.errors import ConfigError
from interop_runner.measure.plan import plan_runs

from .conftest import TESTBED_FILE, write

TWO_LINKS = """path:
  links:
    - {rate: 10mbit, delay: 20ms}
    - {rate: 10mbit, delay: 20ms}
"""


def load(tmp_path: Path, body: str, overrides: list[str] | None = None):
    cfg, _ = load_campaign_testbeds(write(tmp_path / "c.yml", f"testbed: {TESTBED_FILE}\n"
                                          f"name: f\n{body}"), overrides)
    return cfg


def errors(tmp_path: Path, body: str, overrides: list[str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, body, overrides)
    return info.value.lines


def flow(**kwargs: object) -> FlowConfig:
    return FlowConfig.model_validate(kwargs)


def refused(**kwargs: object) -> str:
    with pytest.raises(ValidationError) as info:
        FlowConfig.model_validate(kwargs)
    (error,) = info.value.errors()
    return str(error["msg"])


def test_a_pair_flow_and_a_tcp_flow() -> None:
    params = StandardParams(congestion_control="cubic")
    quic = flow(server="quiche", client="quiche", start="5s", duration="1min")
    tcp = flow(tcp="bbr", link=1)
    assert (quic.kind, quic.start, quic.duration, quic.cc(params)) == ("quic", 5.0, 60.0, "cubic")
    assert (tcp.kind, tcp.link, tcp.cc(params)) == ("tcp", "1", "bbr")
    assert quic.std_params(params).congestion_control == "cubic"
    reno = flow(server="quic-go", client="quic-go", congestion_control="reno",
                params={"socket_rcvbuf": "8MiB"})
    assert reno.std_params(params).congestion_control == "reno"
    assert reno.std_params(params).socket_rcvbuf == 8 * 2**20


def test_labels_are_unique_and_name_the_set() -> None:
    params = StandardParams()
    flows = FlowSet(flows=(flow(tcp="cubic"), flow(tcp="cubic"),
                           flow(server="quic-go", client="quiche", congestion_control="reno",
                                link="0"), flow(tcp="bbr", label="ref")))
    assert flows.labels(params) == ["tcp/cubic", "tcp/cubic#2", "quic-go-quiche/reno@0", "ref"]
    assert flows.set_label(params) == "tcp-cubic+tcp-cubic#2+quic-go-quiche-reno-link0+ref"


@pytest.mark.parametrize("kwargs, message", [
    ({}, "a flow is either"),
    ({"server": "quiche", "client": "quiche", "tcp": "cubic"}, "a flow is either"),
    ({"server": "quiche"}, "needs both `server` and `client`"),
    ({"tcp": "cubic", "congestion_control": "bbr"}, "its `tcp:` value"),
    ({"tcp": "vegas"}, "Input should be"),
    ({"tcp": "cubic", "size": "1MB", "duration": "5s"}, "a size or a duration, not both"),
    ({"server": "quiche", "client": "quiche", "size": "1MB"}, "set `file_size`"),
    ({"tcp": "cubic", "start": "-1s"}, "cannot parse"),
    ({"tcp": "cubic", "duration": 0}, "must be positive"),
    ({"tcp": "cubic", "link": 2}, "Input should be"),
    ({"server": "quiche", "client": "quiche", "params": {"congestion_control": "bbr"}},
     "the flow's congestion_control"),
    ({"server": "quiche", "client": "quiche", "params": {"window": 1}},
     "unknown standard parameter 'window'"),
])
def test_refused_flows(kwargs: dict[str, object], message: str) -> None:
    assert message in refused(**kwargs)


@pytest.mark.parametrize("body, expected", [
    ("flows: [{server: quic-go, client: nosuch}]\n",
     "flows[0].client: unknown implementation 'nosuch'"),
    ("flows: [{tcp: cubic, link: 0}]\nduration: 5s\n",
     "flows[0].link: link 0 needs a path with two links (path.links)"),
    ("flows: [{tcp: cubic}]\n", "flows[0]: a tcp flow needs a size or a duration"),
    ("flows: []\nduration: 1s\n", "`flows` is empty"),
    ("flows: [{tcp: cubic}]\nduration: 1s\nservers: [quic-go]\n",
     "give `servers` and `clients` together"),
    ("duration: 1s\nflows: [" + ", ".join(["{tcp: cubic}"] * 33) + "]\n",
     "33 flows: at most 32 per attempt"),
    ("port: 65530\nduration: 1s\nflows: [" + ", ".join(["{tcp: cubic}"] * 8) + "]\n",
     "8 flows need ports 65530..65537: past 65535"),
])
def test_bad_campaigns_name_the_key(tmp_path: Path, body: str, expected: str) -> None:
    lines = errors(tmp_path, body)
    assert len(lines) == 1 and expected in lines[0], lines
    assert lines[0].startswith(str(tmp_path / "c.yml")), lines


def test_a_role_the_implementation_cannot_play(tmp_path: Path) -> None:
    lines = errors(tmp_path, "flows: [{server: quic-go, client: quic-go}, "
                             "{server: tcp-tls, client: nosuch}]\n")
    assert any("flows[1].client" in line for line in lines), lines


def test_pinned_flows_on_a_two_link_path(tmp_path: Path) -> None:
    cfg = load(tmp_path, TWO_LINKS + "duration: 5s\nflows: [{tcp: cubic, link: both}, "
                                     "{tcp: cubic, link: 0}, {tcp: reno, link: 1}]\n")
    assert [f.link for f in cfg.flows or []] == ["both", "0", "1"]


def test_overrides(tmp_path: Path) -> None:
    cfg = load(tmp_path, "duration: 5s\nflows: [{tcp: cubic}]\n",
               ["duration=2min", "repetitions=7", "path.rate=20mbit", "path.rtt=50ms"])
    assert (cfg.duration, cfg.repetitions) == (120.0, 7)
    assert cfg.path is not None and cfg.path.rate == 20_000_000
    assert apply_overrides({"a": {"b": 1}}, ["a.c=[1, 2]"], "x") == {"a": {"b": 1, "c": [1, 2]}}
    # a number indexes a list; the caller's data is not changed
    data = {"sweep": {"axes": [{"values": [1]}, {"values": [2, 3]}]}}
    assert apply_overrides(data, ["sweep.axes.1.values=[9]"], "x")["sweep"]["axes"] == [
        {"values": [1]}, {"values": [9]}]
    assert data["sweep"]["axes"][1] == {"values": [2, 3]}
    with pytest.raises(ConfigError, match=r"x: --set sweep.axes.2.values: sweep.axes has 2 "
                                          r"items: no item '2'"):
        apply_overrides(data, ["sweep.axes.2.values=[9]"], "x")
    (line,) = errors(tmp_path, "duration: 5s\nflows: [{tcp: cubic}]\n", ["duration"])
    assert "--set 'duration': expected KEY=VALUE" in line
    (line,) = errors(tmp_path, "duration: 5s\nflows: [{tcp: cubic}]\n", ["duration=0s"])
    assert "duration" in line and "must be positive" in line


def test_sets_of_flows_are_swept_and_planned(tmp_path: Path) -> None:
    cfg = load(tmp_path, """duration: 10s
repetitions: 2
flows: [{tcp: cubic}]
sweep:
  axes:
    - name: set
      path: flows
      values:
        - [{tcp: cubic}, {tcp: bbr, start: 5s, duration: 20s}]
        - [{server: quic-go, client: quic-go, congestion_control: reno}]
""")
    runs = plan_runs(cfg, seed=1)
    assert len(runs) == 4 and {r.server for r in runs} == {"flows"}
    assert {r.client for r in runs} == {"tcp-cubic+tcp-bbr", "quic-go-reno"}
    assert {r.alpn for r in runs} == {"tcp", "h3"}
    by_set = {r.client: r for r in runs}
    assert by_set["tcp-cubic+tcp-bbr"].scheduled_s == 1.0 + 25.0  # the bbr flow ends last
    assert by_set["quic-go-reno"].scheduled_s == 11.0
    assert by_set["quic-go-reno"].variant.id == "set=quic-go-quic-go-reno"
    assert slug([{"tcp": "cubic"}, {"tcp": "bbr"}]) == "cubic+bbr"


def test_pairs_beside_flows_are_planned_together(tmp_path: Path) -> None:
    """Pairs measured one per attempt and a set of flows in the same campaign (without a
    sweep the order is sequential, as for pairs alone)."""
    cfg = load(tmp_path, """duration: 5s
repetitions: 3
pairs: [{server: quic-go, client: quic-go}, {server: quiche, client: quiche}]
flows: [{server: quic-go, client: quic-go, congestion_control: reno}, {tcp: reno}]
""")
    runs = plan_runs(cfg, seed=3)
    assert len(runs) == 9
    assert sorted(r.repetition for r in runs) == [1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert {(r.server, r.client) for r in runs} == {
        ("quic-go", "quic-go"), ("quiche", "quiche"), ("flows", "quic-go-reno+tcp-reno")}
    # the kernel TCP flow is the pair tcp-tcp (implementations/tcp), installed as the others
    assert {(p.server, p.client) for p in cfg.pair_list()} == {("quic-go", "quic-go"),
                                                               ("quiche", "quiche"),
                                                               ("tcp", "tcp")}
    assert [r.scheduled_s for r in runs if r.server != "flows"] == [None] * 6


def test_a_pair_flow_without_duration_is_not_scheduled(tmp_path: Path) -> None:
    cfg = load(tmp_path, "file_size: 10MB\nflows: [{server: quic-go, client: quic-go}]\n")
    (run, *_) = plan_runs(cfg, seed=1)
    assert run.scheduled_s is None


def test_a_planned_run_knows_its_paths_rate(tmp_path: Path) -> None:
    """The estimate caps a transfer at it: the bottleneck's rate, or two links' sum."""
    cfg = load(tmp_path, """file_size: 10MB
pairs: [{server: quic-go, client: quic-go}]
sweep: {axes: [{path: path, name: path, values: [{rate: 20mbit, rtt: 10ms},
  {links: [{rate: 10mbit, delay: 5ms}, {rate: 30mbit, delay: 5ms}]}]}]}
""")
    assert {r.path_rate_mbps for r in plan_runs(cfg, seed=1)} == {20.0, 40.0}
    unshaped = load(tmp_path, "file_size: 10MB\npairs: [{server: quic-go, client: quic-go}]\n")
    assert plan_runs(unshaped, seed=1)[0].path_rate_mbps is None


def test_the_tools_flows_need_on_the_nodes(tmp_path: Path) -> None:
    """Checked by the preflight with the others: a missing iperf3 is one line naming it."""
    from interop_runner.measure.prepare import flow_tools

    tcp = load(tmp_path, "duration: 5s\nflows: [{tcp: cubic}]\n")
    quic = load(tmp_path, "flows: [{server: quic-go, client: quic-go}]\n")
    pairs = load(tmp_path, "pairs: [{server: quic-go, client: quic-go}]\n")
    assert flow_tools(tcp) == ("timeout", "iperf3")
    assert flow_tools(quic) == ("timeout",)
    assert flow_tools(pairs) == ()


def _ab_flows(tmp_path: Path) -> str:
    """A campaign of flows whose stack is swept over builds (an A/B of a source variant)."""
    tree = tmp_path / "picoquic-tree"
    tree.mkdir(exist_ok=True)
    return f"""duration: 30s
repetitions: 2
implementations:
  picoquic@pr: {{base: picoquic, source: {tree}}}
flows: [{{server: picoquic, client: picoquic, congestion_control: cubic}}, {{tcp: cubic}}]
sweep:
  order: paired
  axes: [{{path: impl.picoquic, values: [picoquic, picoquic@pr], name: build}}]
"""


def test_an_impl_axis_swaps_the_build_of_a_flow_under_its_written_name(tmp_path: Path
                                                                        ) -> None:
    """Every arm of an `impl.<name>` axis runs the set as written (one cell, one directory
    name, the flow labelled by the written name), each with its own build."""
    from interop_runner.config.implementations import load_registry, resolve
    from interop_runner.measure.attempt import AttemptPlan
    from interop_runner.measure.flow_plan import first_pair, plan_flows
    from interop_runner.measure.side import ImplKey, SidePlan

    cfg = load(tmp_path, _ab_flows(tmp_path))
    runs = plan_runs(cfg, seed=1)
    assert len(runs) == 4 and {r.client for r in runs} == {"picoquic-cubic+tcp-cubic"}
    assert {r.cell for r in runs} == {("flows", "picoquic-cubic+tcp-cubic")}
    assert {r.variant.id for r in runs} == {"build=picoquic", "build=picoquic-pr"}
    registry = load_registry()

    def side(key: ImplKey, vcfg: object) -> SidePlan:
        return SidePlan(key.role, resolve(key.name, registry, cfg.implementations))

    played = {}
    for run in runs:
        assert run.cfg is not None
        base = AttemptPlan("c", "local", "goodput", run.repetition, 1, side(ImplKey(
            "server", "tcp-tls"), None), side(ImplKey("client", "tcp-tls"), None), "h3",
            4433, "f", 1, "d", 1.0, 1.0)
        quic, tcp = plan_flows(run.cfg, base, 4433, side)
        assert (quic.label, tcp.label) == ("picoquic/cubic", "tcp/cubic")
        # the kernel flow runs implementations/tcp on its own port, sized by its flow
        assert (tcp.pair.server.meta.name, tcp.pair.client.meta.name) == ("tcp", "tcp")
        assert (tcp.pair.port, tcp.pair.std_params.congestion_control) == (4434, "cubic")
        assert (tcp.pair.duration_s, tcp.pair.flow, tcp.unsupported) == (30.0, "flow-1", None)
        assert quic.pair.cell == ("picoquic", "picoquic")
        assert quic.record().server == "picoquic"  # the written name, as in the cell
        played[run.variant.id] = (quic.pair.server.meta.name, quic.pair.client.meta.name,
                                  first_pair(run.cfg))
    assert played == {
        "build=picoquic": ("picoquic", "picoquic", ("picoquic", "picoquic")),
        "build=picoquic-pr": ("picoquic@pr", "picoquic@pr", ("picoquic@pr", "picoquic@pr"))}
    assert {p.server for p in cfg.pair_list()} == {"picoquic", "tcp"}  # the base config's


def test_a_variant_written_into_the_flows_keeps_its_name(tmp_path: Path) -> None:
    """A variant named in the flows is another set (its own cell): its `@` stays, only a
    link pin's becomes `-link`."""
    body = _ab_flows(tmp_path).split("flows:")[0] + (
        "flows: [{server: picoquic@pr, client: picoquic@pr, congestion_control: cubic}, "
        "{tcp: cubic}]\n")
    cfg = load(tmp_path, body)
    (run, _) = plan_runs(cfg, seed=1)
    assert run.client == "picoquic@pr-cubic+tcp-cubic"
    assert {(p.server, p.client) for p in cfg.pair_list()} == {("picoquic@pr", "picoquic@pr"),
                                                               ("tcp", "tcp")}
    pinned = FlowSet(flows=(flow(server="quic-go@v0.64.0", client="quic-go@v0.64.0",
                                 link="1"), flow(tcp="cubic", link=1), flow(tcp="cubic",
                                                                            link=1)))
    assert pinned.set_label(StandardParams()) == \
        "quic-go@v0.64.0-cubic-link1+tcp-cubic-link1+tcp-cubic-link1#2"


def test_a_flow_without_its_own_congestion_control_runs_what_a_pair_would(
        tmp_path: Path) -> None:
    """quic-go offers only Reno: beside a kernel flow it runs Reno (labelled so, as a pair
    would with a note), and only a congestion control written on the flow makes it
    unsupported, which the plan (and so --dry-run) says."""
    cfg = load(tmp_path, "repetitions: 1\nduration: 5s\nflows: [{server: quic-go, client: "
                         "quic-go}, {tcp: cubic}]\n")
    (run,) = plan_runs(cfg)
    assert (run.client, run.unsupported) == ("quic-go-reno+tcp-cubic", None)
    cfg = load(tmp_path, "repetitions: 1\nduration: 5s\nflows: [{server: quic-go, client: "
                         "quic-go, congestion_control: cubic}, {tcp: cubic}]\n")
    (run,) = plan_runs(cfg)
    assert run.unsupported == "flow 0: quic-go (server) offers no cubic (it offers: reno)"
    # the flow's own label and the data sender's congestion control of a pair
    assert flow(server="quic-go", client="quic-go").cc(StandardParams(), ["reno"]) == "reno"
    assert flow(server="quiche", client="quiche").cc(StandardParams(), ["cubic", "reno"]) \
        == "cubic"


def test_bare_numbers_are_refused_where_a_user_writes_them(tmp_path: Path) -> None:
    """A user's `start: 5` is refused with its key and units; the same number in a stored
    config (validated without the user context) is the model's unit, as it was stored."""
    (line,) = errors(tmp_path, "duration: 5s\nflows: [{tcp: cubic, start: 5}]\n")
    assert line.endswith("flows[0].start: 5 has no unit: give one (ms, s or min, e.g. 60s)")
    (line,) = errors(tmp_path, "duration: 5s\nflows: [{tcp: cubic}]\n", ["duration=30"])
    assert line.endswith("duration: 30 has no unit: give one (ms, s or min, e.g. 60s)")
    assert flow(tcp="cubic", start=5).start == 5.0  # stored: seconds
    cfg = load(tmp_path, "duration: 1.5min\nflows: [{tcp: cubic, start: 500ms}]\n")
    assert (cfg.duration, cfg.flows[0].start if cfg.flows else None) == (90.0, 0.5)


@pytest.mark.parametrize("body, key", [
    ("pairs: [{server: tcp, client: quiche}]\n", "pairs[0].server"),
    ("servers: [quiche]\nclients: [tcp]\n", "clients[0]"),
    ("duration: 5s\nflows: [{server: tcp, client: tcp}]\n", "flows[0].server"),
])
def test_kernel_tcp_runs_only_as_a_flow(tmp_path: Path, body: str, key: str) -> None:
    """implementations/tcp is the reference of flows: ({tcp: cubic}); a pair of it (whose
    bytes no file would carry) is refused, naming the key."""
    lines = errors(tmp_path, body)
    assert any(f"{key}: 'tcp' is the kernel TCP reference" in line for line in lines), lines
    assert load(tmp_path, "duration: 5s\nflows: [{tcp: cubic}]\n").pair_list()[0].server == "tcp"


def test_a_flows_label_names_a_workload_other_than_one_download() -> None:
    params = StandardParams()
    assert flow(server="quiche", client="quiche", workload={"kind": "upload"}
                ).default_label(params) == "quiche/cubic/upload"
    assert flow(server="quinn", client="quinn", congestion_control="bbr", workload={
        "streams": 4, "connections": 2}).default_label(params) == "quinn/bbr/download-4x2"
    assert flow(tcp="reno", workload={"kind": "upload"}, link=1).default_label(params) == \
        "tcp/reno/upload@1"
    # one download is what every flow did before workloads: its label is unchanged
    assert flow(tcp="reno", workload={"kind": "download"}).default_label(params) == "tcp/reno"
