"""Config validation: every bad case names its key path in one line."""

from pathlib import Path

import pytest

from interop_runner.cli.main import main
from interop_runner.config.campaign import DEFAULT_FILE_SIZE
from interop_runner.config.loader import load_campaign, load_campaign_testbeds, load_testbed
from interop_runner.errors import ConfigError

from .conftest import TESTBED_FILE, write

GOOD = """name: t1
servers: [quic-go]
clients: [quic-go, tcp-tls]
repetitions: 3
file_size: 50MiB
"""


def errors_of(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_campaign(path)
    return info.value.lines


def test_good_config_defaults(campaign_file):
    cfg, testbed = load_campaign(campaign_file(GOOD))
    assert cfg.file_size == 50 * 2**20
    assert cfg.repetitions == 3
    assert [(p.server, p.client) for p in cfg.pair_list()] == [
        ("quic-go", "quic-go"), ("quic-go", "tcp-tls")]
    assert testbed.name == "local"
    assert testbed.node("server")[1].ip == "198.19.0.1"


def test_default_file_size_is_8_gib(campaign_file):
    cfg, _ = load_campaign(campaign_file("name: x\nservers: [quic-go]\nclients: [quic-go]\n"))
    assert cfg.file_size == DEFAULT_FILE_SIZE == 8 * 2**30
    assert cfg.client_timeout() == pytest.approx(60 + 8 * 2**30 * 8 / 50e6)


@pytest.mark.parametrize("body,expected", [
    (GOOD + "repetitons: 4\n",
     "c.yml: repetitons: unknown key 'repetitons' (did you mean 'repetitions'?)"),
    (GOOD.replace("repetitions: 3", "repetitions: three"), "c.yml: repetitions: "),
    (GOOD.replace("[quic-go, tcp-tls]", "[quic-go, quic-goo]"),
     "c.yml: clients[1]: unknown implementation 'quic-goo'"),
    (GOOD + "timeouts: {clinet: 3}\n",
     "c.yml: timeouts.clinet: unknown key 'clinet' (did you mean 'client'?)"),
    (GOOD + "file_size: 8 gigs\n", None),  # duplicate key: YAML keeps the last; checked below
    (GOOD.replace("file_size: 50MiB", "file_size: 8 gigs"), "c.yml: file_size: cannot parse size"),
    (GOOD + "server_params: {quic-go: {force_buffers: maybe}}\n",
     "c.yml: server_params.quic-go.force_buffers: expected true/false"),
    (GOOD + "params: {congestion_control: vegas}\n", "c.yml: params.congestion_control: "),
    (GOOD + "params: {cipher: TLS_AES_128_CCM_SHA256}\n", "c.yml: params.cipher: "),
    (GOOD + "params: {socket_rcvbuf: lots}\n", "c.yml: params.socket_rcvbuf: cannot parse size"),
    (GOOD + "params: {gos: false}\n", "c.yml: params.gos: unknown key 'gos' (did you mean 'gso'?)"),
    (GOOD + "client_params: {quic-go: {buffer: 3}}\n",
     "c.yml: client_params.quic-go.buffer: unknown parameter for quic-go"),
    (GOOD + "monitors: [pidstat, tcpdumb]\n", "c.yml: monitors: unknown monitor 'tcpdumb'"),
    (GOOD + "pairs: [{server: quic-go, clinet: tcp-tls}]\n", "c.yml: pairs[0].clinet: unknown key"),
    ("name: x\nservers: [quic-go]\n",
     "c.yml: (top level): give `servers` and `clients`, or `pairs`"),
    (GOOD.replace("name: t1", "name: 'bad name/'"), "c.yml: name: use letters"),
    (GOOD + "port: 70000\n", "c.yml: port: "),
])
def test_bad_config_names_key(campaign_file, body, expected):
    path = campaign_file(body)
    if expected is None:
        lines = errors_of(path)
        assert any("file_size" in line for line in lines)
        return
    lines = errors_of(path)
    assert any(line.endswith(expected) or line.startswith(str(path.parent / expected))
               or expected in line for line in lines), lines
    assert all("\n" not in line for line in lines)


def test_missing_name_and_testbed(tmp_path):
    path = write(tmp_path / "c.yml", "servers: [quic-go]\nclients: [quic-go]\n")
    lines = errors_of(path)
    assert f"{path}: name: required key is missing" in lines
    path = write(tmp_path / "d.yml", "name: d\nservers: [quic-go]\nclients: [quic-go]\n")
    assert errors_of(path) == [f"{path}: (top level): give either `testbed` (one file) or "
                               "`testbeds` (a list of files)"]


def test_testbed_file_missing(tmp_path):
    path = write(tmp_path / "c.yml", "name: x\ntestbed: nowhere.yml\npairs: []\n")
    assert errors_of(path) == [f"{path}: testbed: file not found: {tmp_path / 'nowhere.yml'}"]


def test_yaml_syntax_error_has_line(tmp_path):
    path = write(tmp_path / "c.yml", "name: x\nservers: [quic-go\n")
    (line,) = errors_of(path)
    assert line.startswith(f"{path}:") and "YAML syntax error" in line


def test_not_a_mapping(tmp_path):
    path = write(tmp_path / "c.yml", "- a\n- b\n")
    assert errors_of(path) == [f"{path}: (top level): expected a mapping of keys"]


def test_role_mismatch_and_params_for_unknown_impl(campaign_file):
    lines = errors_of(campaign_file(GOOD + "server_params: {nosuchquic: {x: 1}}\n"))
    assert any("server_params.nosuchquic: unknown implementation 'nosuchquic'" in ln
               for ln in lines)


def test_testbed_validation(tmp_path):
    text = TESTBED_FILE.read_text()
    bad = write(tmp_path / "tb.yml", text.replace("ip: 198.19.0.2", "ip: 198.19.0.999")
                .replace("role: client", "role: server"))
    with pytest.raises(ConfigError) as info:
        load_testbed(bad)
    joined = "\n".join(info.value.lines)
    assert "nodes.client.ip:" in joined
    shared = write(tmp_path / "tb2.yml", text.replace("/var/tmp/qir/client", "/var/tmp/qir/server"))
    with pytest.raises(ConfigError) as info:
        load_testbed(shared)
    assert "must not share directories" in info.value.lines[0]
    typo = write(tmp_path / "tb3.yml", text.replace("interface: data0", "interfce: data0", 1))
    with pytest.raises(ConfigError) as info:
        load_testbed(typo)
    assert any("nodes.server.interfce: unknown key 'interfce' (did you mean 'interface'?)" in ln
               for ln in info.value.lines)


ROUTER_TESTBED = TESTBED_FILE.parent / "example-router.yml"
LOCAL_B = TESTBED_FILE.parent / "local-b.yml"
SECOND_ROUTER = """  router2:
    role: router
    ssh: {host: router2.example.net}
    interface: eth1
    ip: 10.0.3.254
    server_interface: eth0
    workdir: /var/tmp/qir/router2
    tmpdir: /dev/shm/qir/router2
"""
SERVER_VIA = "    via_router: {interface: path0, ip: 10.0.1.1}\n"
CLIENT_VIA = "    via_router: {interface: path0, ip: 10.0.2.1}\n"


def with_via(text: str, server: bool = True, client: bool = True) -> str:
    """The example with via_router on the endpoints (as the local testbed has it)."""
    if server:
        text = text.replace("    workdir: /var/tmp/qir/server\n",
                            SERVER_VIA + "    workdir: /var/tmp/qir/server\n")
    if client:
        text = text.replace("    workdir: /var/tmp/qir/client\n",
                            CLIENT_VIA + "    workdir: /var/tmp/qir/client\n")
    return text


def test_router_node(tmp_path):
    tb = load_testbed(ROUTER_TESTBED)
    name, router = tb.router()
    assert name == "router" and tb.node("router") == (name, router)
    assert (router.interface, router.ip, router.server_interface) == (
        "enp65s0f1np1", "10.0.2.254", "enp65s0f0np0")
    assert [n for n, _ in tb.endpoint_nodes()] == ["server", "client"]
    server, client = (node for _, node in tb.endpoint_nodes())
    # without via_router, `interface`/`ip` already go through the router (real testbeds)
    assert server.via_router is None and server.server_interface is None
    assert (server.through_router().interface, server.through_router().ip) == (
        "enp65s0f0np0", "10.0.1.1")
    # with it, `interface`/`ip` are a direct link and via_router the path (local testbed)
    via = load_testbed(write(tmp_path / "tb.yml", with_via(ROUTER_TESTBED.read_text())))
    client = via.node("client")[1]
    assert client.through_router() == client.via_router
    assert (client.via_router.interface, client.via_router.ip) == ("path0", "10.0.2.1")
    # a testbed without a router: server and client only, as before
    direct = load_testbed(LOCAL_B)
    assert direct.router() is None and len(direct.endpoint_nodes()) == 2
    with pytest.raises(KeyError, match="no node with role router"):
        direct.node("router")


@pytest.mark.parametrize("change, expected", [
    (lambda t: t + SECOND_ROUTER,
     "nodes: at most one node may have role router (got router, router2)"),
    (lambda t: t.replace("    server_interface: enp65s0f0np0", "    #"),
     "nodes.router.server_interface: required for a node with role router (its interface "
     "towards the server)"),
    (lambda t: t.replace("    workdir: /var/tmp/qir/server\n", "    server_interface: eth1\n"
                         "    workdir: /var/tmp/qir/server\n"),
     "nodes.server.server_interface: only a router has one (this node's role is server)"),
    (lambda t: with_via(t).replace("    workdir: /var/tmp/qir/router", "    via_router: {"
                                   "interface: x, ip: 10.0.9.1}\n    workdir: /var/tmp/qir/router"),
     "nodes.router.via_router: only an endpoint (server, client) has one: a router's "
     "`interface` and `ip` are already on the path"),
    (lambda t: with_via(t, client=False),
     "nodes: server has via_router but client has not (give both endpoints their address "
     "through the router, or neither)"),
    (lambda t: with_via(t).split("  router:\n")[0],
     "nodes: via_router (on server, client) needs a node with role router"),
    (lambda t: with_via(t).replace("ip: 10.0.1.1}", "ip: 10.0.1}"),
     "nodes.server.via_router.ip: '10.0.1' does not appear to be an IPv4 or IPv6 address"),
    (lambda t: t.replace("tmpdir: /dev/shm/qir/router", "tmpdir: /dev/shm/qir/client/r"),
     "(top level): nodes must not share directories (/dev/shm/qir/client and "
     "/dev/shm/qir/client/r overlap)"),
], ids=["two-routers", "router-without-server-interface", "server-interface-on-server",
        "via-router-on-router", "via-router-on-one-endpoint", "via-router-without-router",
        "via-router-bad-ip", "router-shares-a-directory"])
def test_router_errors_name_the_key(tmp_path, change, expected):
    path = write(tmp_path / "tb.yml", change(ROUTER_TESTBED.read_text()))
    with pytest.raises(ConfigError) as info:
        load_testbed(path)
    assert info.value.lines == [f"{path}: {expected}"]


def test_jump_host_parses(tmp_path):
    text = TESTBED_FILE.read_text().replace(
        "user: root, key:", "user: root, jump: {host: bastion.example, user: me}, key:", 1)
    tb = load_testbed(write(tmp_path / "tb.yml", text))
    assert tb.node("server")[1].ssh.jump.host == "bastion.example"


def test_cli_validate_exit_codes(campaign_file, capsys):
    assert main(["validate", str(campaign_file(GOOD))]) == 0
    assert "2 pair(s) x 3 repetition(s)" in capsys.readouterr().out
    bad = campaign_file(GOOD + "repetitons: 4\n", name="bad.yml")
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {bad}: repetitons: unknown key 'repetitons' "
                   "(did you mean 'repetitions'?)"]


SHIPPED = ["ab.yml", "buffers.yml", "crypto.yml", "hardware.yml", "interop.yml", "local.yml",
           "offload.yml", "pinning.yml", "profile.yml", "flows-tcp-sanity.yml",
           "flows-bbr-cubic.yml", "flows-quic-tcp.yml", "flows-share-matrix.yml",
           "flows-quic-vs-tcp-grid.yml", "flows-dc-throughput.yml", "flows-dc-fairness.yml",
           "flows-four.yml", "closed-form.yml"]
SHIPPED_TESTBEDS = ["example-baremetal.yml", "example-router.yml", "local-b.yml",
                    "local.yml"]


def _local_trees(path: Path) -> list[str]:
    """Overrides for the source trees a config names that are not on this machine (the
    conformance A/B names the measuring machine's picoquic tree): the configs folder
    instead, a directory that exists."""
    import yaml

    variants = (yaml.safe_load(path.read_text()) or {}).get("implementations") or {}
    return [f"implementations.{name}.source={path.parent}" for name, spec in variants.items()
            if spec.get("source") and not Path(spec["source"]).expanduser().is_dir()]


def test_shipped_configs_validate():
    root = Path(__file__).resolve().parent.parent / "configs"
    paths = sorted(root.glob("*.yml"))
    # the glob found the files (a moved folder must not make this test pass on nothing);
    # a new config is validated too
    assert set(SHIPPED) <= {p.name for p in paths}, paths
    for path in paths:
        cfg, (testbed, *_) = load_campaign_testbeds(path, _local_trees(path))
        assert cfg.name and (cfg.pair_list() or cfg.flows) and testbed.nodes, path
    testbeds = sorted((root / "testbeds").glob("*.yml"))
    assert set(SHIPPED_TESTBEDS) <= {p.name for p in testbeds}, testbeds
    for path in testbeds:
        roles = sorted(n.role for n in load_testbed(path).nodes.values())
        assert roles in (["client", "server"], ["client", "router", "server"]), path
