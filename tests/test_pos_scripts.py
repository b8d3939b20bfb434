"""The node preparation and testbed check scripts (pos_scripts/), without the local testbed.

Tests that change interfaces do so only in private network namespaces named ``qir-pt-*`` that
they create and delete; SSH tests use a private sshd inside such a namespace.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from interop_runner.testbed.files import HASH_COMMANDS
from interop_runner.testbed.node import REQUIRED_TOOLS, ROUTER_TOOLS

ROOT = Path(__file__).resolve().parent.parent
PREPARE = ROOT / "pos_scripts" / "prepare-node.sh"
CHECK = ROOT / "pos_scripts" / "check-testbed.sh"
INSTALL = ROOT / "pos_scripts" / "install.sh"
QUICKSTART, TEST_SH = ROOT / "quickstart.sh", ROOT / "test.sh"
EXAMPLE = ROOT / "configs" / "testbeds" / "example-baremetal.yml"
EXAMPLE_ROUTER = ROOT / "configs" / "testbeds" / "example-router.yml"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPQ7rHhzWV0Yd7yXw0qVdAqS4S6zhyq3nL8b3mM1n0Yj mgmt@qir"

is_root = os.geteuid() == 0
needs_root = pytest.mark.skipif(not is_root, reason="needs root (network namespaces)")


def run(argv: list[str | Path], *, input: str | None = None, env: dict[str, str] | None = None,
        timeout: float = 60, netns: str | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [str(a) for a in argv]
    if netns:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    return subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def prepare(*args: str | Path, **kw) -> subprocess.CompletedProcess[str]:
    return run(["bash", PREPARE, *args], **kw)


def plus_lines(out: str) -> list[str]:
    """The commands a dry run prints."""
    return [ln[2:] for ln in out.splitlines() if ln.startswith("+ ")]


# ------------------------------------------------------------------------------ shellcheck --
@pytest.mark.parametrize("script", [PREPARE, CHECK, INSTALL, QUICKSTART, TEST_SH],
                         ids=lambda p: p.name)
def test_shellcheck(script: Path) -> None:
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck not installed (pos_scripts/install.sh installs it)")
    res = run(["shellcheck", "-x", script])
    assert res.returncode == 0, res.stdout + res.stderr


def test_scripts_are_strict_bash() -> None:
    for script in (PREPARE, CHECK, INSTALL, QUICKSTART, TEST_SH):
        text = script.read_text()
        assert text.startswith("#!/usr/bin/env bash\n")
        assert "\nset -euo pipefail\n" in text
        assert os.access(script, os.X_OK), f"{script.name} is not executable"


# --------------------------------------------------------------------- prepare-node: dry run --
def test_dry_run_prints_the_commands(tmp_path: Path) -> None:
    ak = tmp_path / "ssh" / "authorized_keys"
    res = prepare("--dry-run", "--no-install", "--role", "server", "--iface", "lo",
                  "--addr", "10.0.0.1/24", "--mtu", "9000", "--workdir", tmp_path / "w",
                  "--tmpdir", tmp_path / "t", "--authorized-key-text", KEY,
                  "--authorized-keys-file", ak, "--peer", "10.0.0.2", "--peer-wait", "3")
    assert res.returncode == 0, res.stderr
    cmds = plus_lines(res.stdout)
    assert "ip addr replace 10.0.0.1/24 dev lo" in cmds
    assert "ip link set dev lo mtu 9000" in cmds
    assert f"mkdir -p -m 0755 {tmp_path}/w {tmp_path}/t" in cmds
    assert f"mkdir -p -m 0700 {tmp_path}/ssh" in cmds
    assert any(c.startswith("printf ") and KEY in c and c.endswith(f">> {ak}") for c in cmds)
    assert "ping -n -c 1 -w 3 -I lo 10.0.0.2" in cmds
    assert not any("apt-get" in c for c in cmds)  # --no-install
    # nothing changed
    assert not (tmp_path / "w").exists() and not ak.parent.exists()
    assert "dry run: nothing changed" in res.stdout
    assert re.search(r"^  role +server$", res.stdout, re.M)


def test_dry_run_defaults_follow_the_role() -> None:
    res = prepare("--dry-run", "--no-install", "--role", "client", "--iface", "lo",
                  "--addr", "fd00:0:0:7::2/64")
    assert res.returncode == 0, res.stderr
    cmds = plus_lines(res.stdout)
    assert "ip addr replace fd00:0:0:7::2/64 dev lo" in cmds
    assert "mkdir -p -m 0755 /var/tmp/qir/client /dev/shm/qir/client" in cmds
    assert not any("mtu" in c for c in cmds)  # MTU only when asked
    assert not any("authorized_keys" in c for c in cmds)


def test_standalone_over_stdin_runs_to_the_end() -> None:
    """`ssh node 'bash -s' -- ARGS < prepare-node.sh`: the script reads no stdin of its own."""
    res = run(["bash", "-s", "--", "--dry-run", "--no-install", "--role", "server",
               "--iface", "lo", "--addr", "10.0.0.1/24", "--peer", "10.0.0.2"],
              input=PREPARE.read_text())
    assert res.returncode == 0, res.stderr
    assert "ip addr replace 10.0.0.1/24 dev lo" in res.stdout
    assert "toolchains" in res.stdout.splitlines()[-1]


def test_settings_from_environment() -> None:
    env = {"QIR_ROLE": "client", "QIR_IFACE": "lo", "QIR_ADDR": "10.0.0.2/24", "QIR_MTU": "1400",
           "QIR_WORKDIR": "/var/tmp/qir-env/c", "QIR_DRY_RUN": "1", "QIR_NO_INSTALL": "yes"}
    res = prepare(env=env)
    assert res.returncode == 0, res.stderr
    cmds = plus_lines(res.stdout)
    assert "ip addr replace 10.0.0.2/24 dev lo" in cmds
    assert "ip link set dev lo mtu 1400" in cmds
    assert "mkdir -p -m 0755 /var/tmp/qir-env/c /dev/shm/qir/client" in cmds
    # the command line wins over the environment
    res = prepare("--addr", "10.0.0.3/24", env=env)
    assert "ip addr replace 10.0.0.3/24 dev lo" in plus_lines(res.stdout)


def test_settings_from_pos_variables(tmp_path: Path) -> None:
    """Where pos_get_variable exists (a pos node), missing settings come from pos variables."""
    fake = tmp_path / "bin" / "pos_get_variable"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\n'
                    'case "$1 $2" in\n'
                    '  "qir_role ") echo server ;;\n'
                    '  "qir_iface ") echo lo ;;\n'
                    '  "qir_addr ") echo 10.0.0.1/24 ;;\n'
                    '  "qir_mtu --from-global") echo 9000 ;;\n'
                    '  *) echo "variable $1 unknown"; exit 1 ;;\n'
                    'esac\n')
    fake.chmod(0o755)
    res = prepare("--dry-run", "--no-install",
                  env={"PATH": f"{fake.parent}:{os.environ['PATH']}"})
    assert res.returncode == 0, res.stderr
    cmds = plus_lines(res.stdout)
    assert "ip addr replace 10.0.0.1/24 dev lo" in cmds
    assert "ip link set dev lo mtu 9000" in cmds  # a global variable


def test_dry_run_lists_missing_packages(tmp_path: Path) -> None:
    """Package installation: dpkg-query says nothing is installed -> apt-get for all of them."""
    fake = tmp_path / "bin" / "dpkg-query"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    res = prepare("--dry-run", "--role", "server", "--iface", "lo", "--addr", "10.0.0.1/24",
                  env={"PATH": f"{fake.parent}:{os.environ['PATH']}"})
    assert res.returncode == 0, res.stderr
    packages = prepare("--list-packages").stdout.split()
    install = [c for c in plus_lines(res.stdout) if "apt-get install" in c]
    assert len(install) == 1 and install[0].split()[-len(packages):] == packages


def test_package_list_covers_what_the_runner_uses() -> None:
    packages = set(prepare("--list-packages").stdout.split())
    lists = sorted(ROOT.glob("implementations/*/apt-packages"))
    assert len(lists) >= 3, lists  # the loop below checks the lists, not nothing
    for lst in lists:
        for line in lst.read_text().splitlines():
            name = line.split("#")[0].strip()
            if name:
                assert name in packages, f"{name} ({lst.parent.name}/apt-packages) missing"
    # node-side packages of install.sh (the management-only ones excluded)
    text = INSTALL.read_text()
    block = " ".join(re.sub(r"#[^\n]*", "", m) for m in
                     re.findall(r"^[A-Z_]*PACKAGES=\(([^)]*)\)", text, re.M))
    assert {"openssh-server", "docker.io", "chromium"} <= set(block.split())  # all three lists
    management_only = {"openssh-client", "git", "shellcheck", "chromium", "chromium-driver",
                       "fonts-dejavu-core",  # the report test's browser
                       "mmdebstrap", "busybox-static",  # base images; the engine tests' image
                       "gcc", "libc6-dev", "python3-dev",  # the parsers' compiled loops
                       # the local testbed's path router (a namespace of the management host):
                       # the delay line's build; not a server's or client's
                       "libnetfilter-queue-dev"}
    for name in set(block.split()) - management_only:
        assert name in packages, f"{name} (install.sh) missing"
    # the tools the runner and the monitors call: the packages that provide them
    from interop_runner.monitors import MONITORS as MONITOR_SPECS
    provider = {"bash": "bash", "sha256sum": "coreutils", "stat": "coreutils", "ss": "iproute2",
                "head": "coreutils", "df": "coreutils", "env": "coreutils", "shred": "coreutils",
                "b3sum": "b3sum",
                "setsid": "util-linux", "openssl": "openssl", "ps": "procps",
                "find": "findutils", "ethtool": "ethtool", "grep": "grep", "nstat": "iproute2",
                "tc": "iproute2", "mpstat": "sysstat", "pidstat": "sysstat", "pgrep": "procps",
                "ifstat": "ifstat", "perf": "linux-perf", "zstd": "zstd", "tcpdump": "tcpdump",
                "timeout": "coreutils", "iperf3": "iperf3"}
    tools = set(REQUIRED_TOOLS) | set(HASH_COMMANDS.values()) | \
        {t for spec in MONITOR_SPECS.values() for t in spec.tools} | {"timeout", "iperf3"}
    for tool in tools:
        assert tool in provider, f"tool {tool!r}: add its Debian package to this test"
        assert provider[tool] in packages, f"{provider[tool]} (for {tool}) missing"


# ------------------------------------------------------------------ prepare-node: errors --
@pytest.mark.parametrize("args, message", [
    (["--addr", "10.0.0.1/24", "--iface", "qir-pt-nope0"], "interface 'qir-pt-nope0' not found"),
    (["--addr", "10.0.0.1", "--iface", "lo"], "--addr '10.0.0.1' needs a prefix length"),
    (["--addr", "10.0.0.300/24", "--iface", "lo"], "is not an IPv4 or IPv6 address"),
    (["--addr", "10.0.0.1/33", "--iface", "lo"], "prefix length must be 0..32"),
    (["--addr", "10.0.0.1/24", "--iface", "lo", "--mtu", "9k"], "--mtu must be a number"),
    (["--addr", "10.0.0.1/24", "--iface", "lo", "--workdir", "/qir"], "--workdir '/qir'"),
    (["--addr", "10.0.0.1/24", "--iface", "lo", "--authorized-key-text", "hello"],
     "not an OpenSSH public key"),
    (["--addr", "10.0.0.1/24", "--iface", "lo", "--bogus"], "unknown argument '--bogus'"),
    (["--iface", "lo"], "--addr is required"),
])
def test_errors_are_one_line(args: list[str], message: str) -> None:
    res = prepare("--dry-run", "--no-install", "--role", "server", *args)
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("prepare-node: ") and message in lines[0], lines[0]


def test_bad_role() -> None:
    res = prepare("--dry-run", "--role", "bridge", "--iface", "lo", "--addr", "10.0.0.1/24")
    assert res.returncode != 0
    assert res.stderr.strip() == ("prepare-node: --role must be server, client or router, "
                                  "got 'bridge'")


ROUTER_ARGS = ["--role", "router", "--iface", "lo", "--addr", "10.0.2.254/24"]


@pytest.mark.parametrize("args, message", [
    (ROUTER_ARGS + ["--server-addr", "10.0.1.254/24"], "--server-iface is required for a router"),
    (ROUTER_ARGS + ["--server-iface", "eth1"], "--server-addr is required for a router"),
    (ROUTER_ARGS + ["--server-iface", "eth1", "--server-addr", "10.0.1.254"],
     "--server-addr '10.0.1.254' needs a prefix length"),
    (ROUTER_ARGS + ["--server-iface", "lo", "--server-addr", "10.0.1.254/24"],
     "--server-iface and --iface must differ"),
    (ROUTER_ARGS + ["--server-iface", "qir-pt-nope0", "--server-addr", "10.0.1.254/24"],
     "interface 'qir-pt-nope0' not found"),
    (ROUTER_ARGS + ["--server-iface", "eth1", "--server-addr", "10.0.1.254/24", "--route",
                    "10.0.1.0/24", "--via", "10.0.2.1"],
     "--route and --via are for server and client"),
    (["--role", "server", "--iface", "lo", "--addr", "10.0.1.1/24", "--server-iface", "eth1"],
     "--server-iface and --server-addr are only for --role router"),
    (["--role", "server", "--iface", "lo", "--addr", "10.0.1.1/24", "--route", "10.0.2.0/24"],
     "--route and --via go together"),
    (["--role", "server", "--iface", "lo", "--addr", "10.0.1.1/24", "--via", "10.0.1.254"],
     "--route and --via go together"),
    (["--role", "client", "--iface", "lo", "--addr", "10.0.2.1/24", "--route", "10.0.1.0",
      "--via", "10.0.2.254"], "--route '10.0.1.0' needs a prefix length"),
    (["--role", "client", "--iface", "lo", "--addr", "10.0.2.1/24", "--route", "10.0.1.0/24",
      "--via", "10.0.2"], "--via '10.0.2' is not an IP address"),
], ids=["no-server-iface", "no-server-addr", "server-addr-prefix", "same-iface",
        "server-iface-missing", "route-on-router", "server-iface-on-server", "route-alone",
        "via-alone", "route-prefix", "via-bad"])
def test_router_and_route_errors_are_one_line(args: list[str], message: str) -> None:
    res = prepare("--dry-run", "--no-install", *args)
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("prepare-node: ") and message in lines[0], \
        res.stderr


def test_router_packages() -> None:
    """--role router lists the router's packages: what the emulated path and the runner's
    lease need, and none of the implementations' build packages."""
    router = prepare("--role", "router", "--list-packages").stdout.split()
    assert {"iproute2", "iptables", "iperf3", "iputils-ping", "ethtool", "tcpdump", "gcc",
            "libc6-dev", "libnetfilter-queue-dev", "procps", "openssh-server",
            "util-linux"} <= set(router)
    assert "docker.io" not in router and "nginx" not in router
    assert prepare("--role", "server", "--list-packages").stdout == \
        prepare("--list-packages").stdout  # an endpoint's, as before
    provider = {"bash": "bash", "flock": "util-linux", "setsid": "util-linux", "ip": "iproute2",
                "tc": "iproute2", "iptables": "iptables", "ethtool": "ethtool",
                "sysctl": "procps"}
    for tool in ROUTER_TOOLS:
        assert provider[tool] in router, f"{provider[tool]} (for {tool}) missing"
    res = prepare("--role", "hub", "--list-packages")
    assert res.returncode != 0 and "--role must be server, client or router" in res.stderr


def test_dry_run_route_through_a_router() -> None:
    res = prepare("--dry-run", "--no-install", "--role", "server", "--iface", "lo",
                  "--addr", "10.0.1.1/24", "--route", "10.0.2.0/24", "--via", "10.0.1.254")
    assert res.returncode == 0, res.stderr
    assert "ip route replace 10.0.2.0/24 via 10.0.1.254 dev lo" in plus_lines(res.stdout)
    assert re.search(r"^  route +10\.0\.2\.0/24 via 10\.0\.1\.254 dev lo$", res.stdout, re.M)


@needs_root
def test_not_root_is_refused_but_dry_run_works() -> None:
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) missing")
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bash", "-s", "--",
              "--no-install", "--role", "server", "--iface", "lo", "--addr", "10.0.0.1/24"]
    res = run(nobody, input=PREPARE.read_text())
    assert res.returncode != 0
    assert res.stderr.strip() == ("prepare-node: must run as root (it changes interfaces, "
                                  "packages and root's SSH keys); --dry-run works without")
    res = run(nobody + ["--dry-run"], input=PREPARE.read_text())
    assert res.returncode == 0, res.stderr


# ------------------------------------------------------- prepare-node: the real thing, netns --
@pytest.fixture
def netns():
    """A private network namespace with a veth pair qir-pt-a <-> qir-pt-b (both inside)."""
    if not is_root:
        pytest.skip("needs root (network namespaces)")
    name = f"qir-pt-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "add", "qir-pt-a", "type", "veth", "peer",
                        "name", "qir-pt-b"], check=True)
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def addrs(ns: str, dev: str) -> list[str]:
    out = run(["ip", "-n", ns, "-o", "-4", "addr", "show", "dev", dev]).stdout
    return [ln.split()[3] for ln in out.splitlines()]


def link(ns: str, dev: str) -> str:
    return run(["ip", "-n", ns, "-o", "link", "show", "dev", dev]).stdout


def test_prepare_sets_interface_idempotently(netns: str, tmp_path: Path) -> None:
    ak = tmp_path / "ssh" / "authorized_keys"
    keyfile = tmp_path / "mgmt.pub"
    keyfile.write_text(KEY + "\n")
    args = ["--no-install", "--role", "server", "--iface", "qir-pt-a", "--addr", "10.0.0.1/24",
            "--mtu", "9000", "--workdir", tmp_path / "w" / "server",
            "--tmpdir", tmp_path / "t" / "server", "--authorized-key", keyfile,
            "--authorized-keys-file", ak]
    for attempt in range(2):
        res = prepare(*args, netns=netns)
        assert res.returncode == 0, res.stderr
        assert addrs(netns, "qir-pt-a") == ["10.0.0.1/24"], f"attempt {attempt}"
        assert " mtu 9000 " in link(netns, "qir-pt-a")
        assert ",UP" in link(netns, "qir-pt-a").split(">")[0]
        assert ak.read_text() == KEY + "\n"  # once, even after a re-run
        assert oct(ak.stat().st_mode & 0o777) == "0o600"
        assert oct(ak.parent.stat().st_mode & 0o777) == "0o700"
        assert (tmp_path / "w" / "server").is_dir() and (tmp_path / "t" / "server").is_dir()
    assert "0 added, 1 already present" in res.stdout
    assert re.search(r"^  addresses +10\.0\.0\.1/24", res.stdout, re.M)
    # a different prefix length replaces the address instead of adding a second one
    res = prepare(*args[:6], "10.0.0.1/16", *args[7:], netns=netns)
    assert res.returncode == 0, res.stderr
    assert addrs(netns, "qir-pt-a") == ["10.0.0.1/16"]
    # the untouched peer end stays as it was
    assert addrs(netns, "qir-pt-b") == [] and " mtu 1500 " in link(netns, "qir-pt-b")


def test_prepare_keeps_existing_keys(netns: str, tmp_path: Path) -> None:
    ak = tmp_path / "authorized_keys"
    other = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7 someone@else"
    ak.write_text(other)  # no final newline
    res = prepare("--no-install", "--role", "client", "--iface", "qir-pt-b", "--addr",
                  "10.0.0.2/24", "--workdir", tmp_path / "w", "--tmpdir", tmp_path / "t",
                  "--authorized-key-text", KEY, "--authorized-keys-file", ak, netns=netns)
    assert res.returncode == 0, res.stderr
    assert ak.read_text() == f"{other}\n{KEY}\n"


def test_prepare_mtu_error_names_the_command(netns: str, tmp_path: Path) -> None:
    res = prepare("--no-install", "--role", "server", "--iface", "qir-pt-a", "--addr",
                  "10.0.0.1/24", "--mtu", "65535", "--workdir", tmp_path / "w",
                  "--tmpdir", tmp_path / "t", netns=netns)
    if res.returncode == 0:  # a veth takes 65535 on some kernels: then it must be set
        assert " mtu 65535 " in link(netns, "qir-pt-a")
    else:
        lines = res.stderr.strip().splitlines()
        assert "'ip link set dev qir-pt-a mtu 65535' failed" in lines[-1]


def test_prepare_peer(netns: str, tmp_path: Path) -> None:
    common = ["--no-install", "--workdir", tmp_path / "w", "--tmpdir", tmp_path / "t"]
    assert prepare("--role", "server", "--iface", "qir-pt-a", "--addr", "10.0.0.1/24", *common,
                   netns=netns).returncode == 0
    res = prepare("--role", "client", "--iface", "qir-pt-b", "--addr", "10.0.0.2/24", *common,
                  "--peer", "10.0.0.99", "--peer-wait", "1", netns=netns)
    assert res.returncode != 0
    if shutil.which("ping") is None:
        assert "ping not found (install iputils-ping" in res.stderr
        return
    assert "peer 10.0.0.99 not reachable over qir-pt-b within 1s" in res.stderr
    res = prepare("--role", "client", "--iface", "qir-pt-b", "--addr", "10.0.0.2/24", *common,
                  "--peer", "10.0.0.1", "--peer-wait", "5", netns=netns)
    assert res.returncode == 0 or "not reachable" in res.stderr  # same-namespace peer


def features(ns: str, dev: str) -> dict[str, bool]:
    """The interface's offloads: name -> on."""
    from interop_runner.parsers.ethtool import parse_ethtool_features

    out = run(["ip", "netns", "exec", ns, "ethtool", "-k", dev]).stdout
    return {name: on for name, (on, _fixed) in parse_ethtool_features(out).items()}


def sysctl(ns: str, key: str) -> str:
    return run(["ip", "netns", "exec", ns, "sysctl", "-n", key]).stdout.strip()


def test_prepare_router(netns: str, tmp_path: Path) -> None:
    """--role router: both interfaces with their addresses, IPv4 forwarding on, the offloads
    off; a dry run first changes nothing, a second run changes nothing more."""
    if shutil.which("ethtool") is None:
        pytest.skip("ethtool missing")
    run(["ip", "netns", "exec", netns, "sysctl", "-qw", "net.ipv4.ip_forward=0"])
    args = ["--no-install", "--role", "router", "--iface", "qir-pt-b", "--addr", "10.0.2.254/24",
            "--server-iface", "qir-pt-a", "--server-addr", "10.0.1.254/24", "--mtu", "9000",
            "--workdir", tmp_path / "w", "--tmpdir", tmp_path / "t"]
    dry = prepare("--dry-run", *args, netns=netns)
    assert dry.returncode == 0, dry.stderr
    cmds = plus_lines(dry.stdout)
    assert "ip addr replace 10.0.2.254/24 dev qir-pt-b" in cmds
    assert "ip addr replace 10.0.1.254/24 dev qir-pt-a" in cmds
    assert "ip link set dev qir-pt-a mtu 9000" in cmds
    assert "sysctl -qw net.ipv4.ip_forward=1" in cmds
    offloads = [c for c in cmds if c.startswith("ethtool -K ")]
    assert [c.split()[2] for c in offloads] == ["qir-pt-b", "qir-pt-a"]
    assert all(" tso off" in c and " gso off" in c for c in offloads)  # on for a new veth
    assert sysctl(netns, "net.ipv4.ip_forward") == "0" and addrs(netns, "qir-pt-a") == []
    for attempt in range(2):
        res = prepare(*args, netns=netns)
        assert res.returncode == 0, res.stderr
        assert sysctl(netns, "net.ipv4.ip_forward") == "1", attempt
        assert addrs(netns, "qir-pt-b") == ["10.0.2.254/24"]
        assert addrs(netns, "qir-pt-a") == ["10.0.1.254/24"]
        for dev in ("qir-pt-a", "qir-pt-b"):
            on = features(netns, dev)
            for name in ("tcp-segmentation-offload", "generic-segmentation-offload",
                         "generic-receive-offload", "tx-udp-segmentation"):
                assert not on.get(name, False), (dev, name)
    lines = res.stdout.splitlines()
    assert re.search(r"^  role +router$", res.stdout, re.M)
    assert any(re.match(r"^  server-if +qir-pt-a \(state \w+, mtu 9000; towards the server\)$",
                        ln) for ln in lines), lines
    assert "  forwarding  net.ipv4.ip_forward=1" in lines
    assert "  engine      not used (a router runs no implementation)" in lines
    assert not any(ln.startswith("  toolchains") for ln in lines)
    # prepared: a dry run has nothing left to change on the interfaces and sysctls
    again = plus_lines(prepare("--dry-run", *args, netns=netns).stdout)
    assert not any(c.startswith(("sysctl", "ethtool", "ip link")) for c in again), again


def test_prepare_router_defaults_match_the_example(netns: str) -> None:
    """The router's default directories are the ones example-router.yml uses."""
    router = yaml.safe_load(EXAMPLE_ROUTER.read_text())["nodes"]["router"]
    res = prepare("--dry-run", "--no-install", "--role", "router", "--iface", "qir-pt-b",
                  "--addr", f"{router['ip']}/24", "--server-iface", "qir-pt-a",
                  "--server-addr", "10.0.1.254/24", netns=netns)
    assert res.returncode == 0, res.stderr
    assert f"mkdir -p -m 0755 {router['workdir']} {router['tmpdir']}" in plus_lines(res.stdout)


# ------------------------------------------------------------------------- check-testbed --
def node_yaml(name: str, role: str, host: str, port: int, key: Path, known: Path, iface: str,
              ip: str, base: Path, timeout: float = 5) -> dict:
    return {name: {"role": role, "ssh": {"host": host, "port": port, "user": "root",
                                         "key": str(key), "known_hosts": str(known),
                                         "connect_timeout": f"{timeout}s"},
                   "interface": iface, "ip": ip, "workdir": f"{base}/w/{name}",
                   "tmpdir": f"{base}/t/{name}"}}


def write_testbed(path: Path, *nodes: dict) -> Path:
    merged: dict = {}
    for n in nodes:
        merged.update(n)
    path.write_text(yaml.safe_dump({"name": "pt", "nodes": merged}))
    return path


@pytest.fixture
def keypair(tmp_path: Path) -> tuple[Path, Path]:
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen missing")
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "qir-pt", "-f", key],
                   check=True)
    return key, key.with_suffix(".pub")


def test_check_unreachable_host_fails_naming_the_node(tmp_path: Path, keypair) -> None:
    key, _ = keypair
    known = tmp_path / "known_hosts"
    known.write_text("")
    tb = write_testbed(
        tmp_path / "tb.yml",
        node_yaml("alpha", "server", "198.18.255.254", 22, key, known, "eth9", "10.0.0.1",
                  tmp_path, timeout=1),
        node_yaml("beta", "client", "198.18.255.253", 22, key, known, "eth9", "10.0.0.2",
                  tmp_path, timeout=1))
    t0 = time.monotonic()
    res = run([CHECK, tb], timeout=60)
    assert res.returncode == 1, res.stdout + res.stderr
    assert time.monotonic() - t0 < 30
    lines = res.stdout.splitlines()
    for node, host in (("alpha", "198.18.255.254"), ("beta", "198.18.255.253")):
        assert any(ln.startswith(f"FAIL {node}: ssh root@{host}:22") for ln in lines), lines
    assert any(ln.startswith("skip beta: ping 10.0.0.1 (alpha)") for ln in lines)
    assert lines[-1] == "check-testbed: 2 of 2 checks failed"


def test_check_usage() -> None:
    res = run([CHECK, "--help"])
    assert res.returncode == 0 and res.stdout.startswith("Usage: pos_scripts/check-testbed.sh")
    assert "--facts" in res.stdout
    res = run([CHECK])
    assert res.returncode == 2 and "Usage:" in res.stderr
    res = run([CHECK, "--bogus", EXAMPLE])
    assert res.returncode == 2 and "unknown option '--bogus'" in res.stderr


def test_check_missing_key_and_bad_file(tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text("")
    tb = write_testbed(
        tmp_path / "tb.yml",
        node_yaml("s", "server", "198.18.255.254", 22, tmp_path / "nokey", known, "e", "10.0.0.1",
                  tmp_path, timeout=1),
        node_yaml("c", "client", "198.18.255.253", 22, tmp_path / "nokey", tmp_path / "nokh",
                  "e", "10.0.0.2", tmp_path, timeout=1))
    res = run([CHECK, tb])
    assert res.returncode == 1
    assert f"FAIL s: ssh root@198.18.255.254:22: key {tmp_path}/nokey not found" in res.stdout
    bad = tmp_path / "bad.yml"
    bad.write_text("name: x\nnodes: {}\nextra: 1\n")
    res = run([CHECK, bad])
    assert res.returncode == 2
    assert f"error: {bad}: extra: unknown key 'extra'" in res.stderr


@pytest.fixture
def sshd_netns(netns: str, tmp_path: Path, keypair):
    """A private sshd on 127.0.0.1 inside the namespace; the node side set up by prepare-node."""
    sshd = shutil.which("sshd", path="/usr/sbin:/usr/bin")
    if sshd is None or not Path("/run/sshd").is_dir():
        pytest.skip("openssh-server missing")
    key, pub = keypair
    state = tmp_path / "sshd"
    state.mkdir()
    hostkey = state / "host_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", hostkey], check=True)
    with socket.socket() as s:  # a free port (the namespace has its own port space anyway)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ak = state / "authorized_keys"
    # ping on the node is a stand-in (a real one may be missing, and both "nodes" share one
    # namespace): it records its arguments and answers as iputils-ping does
    fakebin = state / "bin"
    fakebin.mkdir()
    (fakebin / "ping").write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$*" >>{state}/ping.args\n'
        f'n=$(cat {state}/ping.replies 2>/dev/null || echo 3)\n'
        'printf "PING x\\n\\n--- x ping statistics ---\\n"\n'
        'echo "3 packets transmitted, $n received, $((100 - n * 100 / 3))% packet loss, '
        'time 2003ms"\n'
        '[ "$n" -gt 0 ] || exit 1\n'
        'echo "rtt min/avg/max/mdev = 0.041/0.052/0.061/0.008 ms"\n')
    (fakebin / "ping").chmod(0o755)
    (state / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {hostkey}\nPidFile {state}/sshd.pid\n"
        f"AuthorizedKeysFile {ak}\nStrictModes no\nPermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
        f"SetEnv PATH={fakebin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n")
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{port} {(state / 'host_ed25519.pub').read_text()}")
    # both nodes are prepared by the script under test, the key goes to sshd's file
    for role, dev, addr in (("server", "qir-pt-a", "10.0.0.1/24"),
                            ("client", "qir-pt-b", "10.0.0.2/24")):
        res = prepare("--no-install", "--role", role, "--iface", dev, "--addr", addr,
                      "--mtu", "9000", "--workdir", tmp_path / "w" / role,
                      "--tmpdir", tmp_path / "t" / role, "--authorized-key", pub,
                      "--authorized-keys-file", ak, netns=netns)
        assert res.returncode == 0, res.stderr
    proc = subprocess.Popen(["ip", "netns", "exec", netns, sshd, "-D", "-e",
                             "-f", str(state / "sshd_config")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while run(["ip", "netns", "exec", netns, "ss", "-Hltn", f"sport = :{port}"]).stdout == "":
            assert proc.poll() is None, "sshd exited"
            assert time.monotonic() < deadline, "sshd did not listen"
            time.sleep(0.1)
        yield {"ns": netns, "port": port, "key": key, "known": known, "state": state}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


def test_check_reachable_nodes(sshd_netns: dict, tmp_path: Path) -> None:
    s = sshd_netns
    tb = write_testbed(
        tmp_path / "tb.yml",
        node_yaml("srv", "server", "127.0.0.1", s["port"], s["key"], s["known"], "qir-pt-a",
                  "10.0.0.1", tmp_path),
        node_yaml("cli", "client", "127.0.0.1", s["port"], s["key"], s["known"], "qir-pt-b",
                  "10.0.0.2", tmp_path))
    res = run(["ip", "netns", "exec", s["ns"], CHECK, "--facts", tb], timeout=120)
    lines = res.stdout.splitlines()
    for node, dev, ip in (("srv", "qir-pt-a", "10.0.0.1"), ("cli", "qir-pt-b", "10.0.0.2")):
        assert f"ok   {node}: ssh root@127.0.0.1:{s['port']}" in lines, res.stdout + res.stderr
        assert any(ln.startswith(f"ok   {node}: interface {dev} (state ") and "mtu 9000" in ln
                   for ln in lines), lines
        assert f"ok   {node}: address {ip} on {dev}" in lines
        assert f"ok   {node}: required tools ({len(REQUIRED_TOOLS)})" in lines
    assert "ok   cli: ping 10.0.0.1 (srv) over qir-pt-b: 3/3 replies, avg rtt 0.052 ms" in lines
    assert (s["state"] / "ping.args").read_text() == "-n -q -c 3 -W 1 -I qir-pt-b 10.0.0.1\n"
    assert not [ln for ln in lines if ln.startswith("FAIL")]
    assert res.returncode == 0 and lines[-1] == "check-testbed: all 9 checks passed"
    # host facts: the runner's summary of each node, as JSON
    text = res.stdout
    assert "facts srv (127.0.0.1, qir-pt-a):" in text and "facts cli (127.0.0.1, qir-pt-b):" in text
    block = text.split("facts srv (127.0.0.1, qir-pt-a):\n", 1)[1].split("\nfacts cli")[0]
    facts = json.loads(block)
    assert facts["mtu"] == 9000 and facts["cores"] == os.cpu_count()


def test_check_wrong_address_and_interface(sshd_netns: dict, tmp_path: Path) -> None:
    s = sshd_netns
    tb = write_testbed(
        tmp_path / "tb.yml",
        node_yaml("srv", "server", "127.0.0.1", s["port"], s["key"], s["known"], "qir-pt-zz",
                  "10.0.0.1", tmp_path),
        node_yaml("cli", "client", "127.0.0.1", s["port"], s["key"], s["known"], "qir-pt-b",
                  "10.0.0.7", tmp_path))
    res = run(["ip", "netns", "exec", s["ns"], CHECK, tb], timeout=120)
    assert res.returncode == 1
    lines = res.stdout.splitlines()
    assert any(ln.startswith("FAIL srv: interface qir-pt-zz does not exist (") for ln in lines)
    assert "FAIL cli: address 10.0.0.7 not on qir-pt-b (has: 10.0.0.2/24)" in lines, \
        "\n".join(lines)


@pytest.mark.parametrize("via", [False, True], ids=["through-the-router", "via-router"])
def test_check_a_router(sshd_netns: dict, tmp_path: Path, via: bool) -> None:
    """A router is checked for its two interfaces, its forwarding and its own tools (not the
    endpoints' nor the monitors'); the client's ping goes through it: to the server's `ip`
    when that is on the path, else (via_router, the local testbed's way) to its via_router
    address after the direct one."""
    s = sshd_netns
    run(["ip", "netns", "exec", s["ns"], "sysctl", "-qw", "net.ipv4.ip_forward=1"])
    common = ("127.0.0.1", s["port"], s["key"], s["known"])
    srv = node_yaml("srv", "server", *common, "qir-pt-a", "10.0.0.1", tmp_path)
    cli = node_yaml("cli", "client", *common, "qir-pt-b", "10.0.0.2", tmp_path)
    rtr = node_yaml("rtr", "router", *common, "qir-pt-b", "10.0.0.2", tmp_path)
    rtr["rtr"]["server_interface"] = "qir-pt-a"
    if via:  # a direct link on lo, the path over the veths
        for node, addr in ((srv["srv"], "10.0.0.1"), (cli["cli"], "10.0.0.2")):
            node["via_router"] = {"interface": node["interface"], "ip": addr}
            node["interface"], node["ip"] = "lo", "127.0.0.1"
    tb = write_testbed(tmp_path / "tb.yml", srv, rtr, cli)
    res = run(["ip", "netns", "exec", s["ns"], CHECK, tb], timeout=120)
    lines = res.stdout.splitlines()
    assert any(ln.startswith("ok   rtr: server_interface qir-pt-a (state ") for ln in lines), lines
    assert "ok   rtr: address 10.0.0.2 on qir-pt-b" in lines
    assert "ok   rtr: IPv4 forwarding on" in lines
    assert f"ok   rtr: required tools ({len(ROUTER_TOOLS)})" in lines
    assert not any(ln.startswith("warn rtr: monitor") for ln in lines)
    pings = [ln for ln in lines if ": ping " in ln]
    through = "ok   cli: ping 10.0.0.1 (srv) over qir-pt-b through rtr: 3/3 replies, " \
              "avg rtt 0.052 ms"
    if via:
        assert pings == ["ok   cli: ping 127.0.0.1 (srv) over lo: 3/3 replies, avg rtt 0.052 ms",
                         through]
        assert (s["state"] / "ping.args").read_text().splitlines() == [
            "-n -q -c 3 -W 1 -I lo 127.0.0.1", "-n -q -c 3 -W 1 -I qir-pt-b 10.0.0.1"]
    else:
        assert pings == [through]
    assert res.returncode == 0 and lines[-1].startswith("check-testbed: all "), res.stdout
    # a router that does not forward fails
    run(["ip", "netns", "exec", s["ns"], "sysctl", "-qw", "net.ipv4.ip_forward=0"])
    res = run(["ip", "netns", "exec", s["ns"], CHECK, tb], timeout=120)
    assert res.returncode == 1
    assert [ln for ln in res.stdout.splitlines() if ln.startswith("FAIL")] == [
        "FAIL rtr: IPv4 forwarding off (net.ipv4.ip_forward=0; pos_scripts/prepare-node.sh "
        "--role router turns it on)"]


@pytest.mark.parametrize("replies", [0, 2])
def test_check_ping_losses_fail(sshd_netns: dict, tmp_path: Path, replies: int) -> None:
    s = sshd_netns
    (s["state"] / "ping.replies").write_text(str(replies))
    tb = write_testbed(
        tmp_path / "tb.yml",
        node_yaml("srv", "server", "127.0.0.1", s["port"], s["key"], s["known"], "qir-pt-a",
                  "10.0.0.1", tmp_path),
        node_yaml("cli", "client", "127.0.0.1", s["port"], s["key"], s["known"], "qir-pt-b",
                  "10.0.0.2", tmp_path))
    res = run(["ip", "netns", "exec", s["ns"], CHECK, tb], timeout=120)
    assert res.returncode == 1
    failed = [ln for ln in res.stdout.splitlines() if ln.startswith("FAIL")]
    want = {0: "3 packets transmitted, 0 received, 100% packet loss, time 2003ms",
            2: "2/3 replies"}[replies]
    assert failed == [f"FAIL cli: ping 10.0.0.1 (srv) over qir-pt-b: {want}"], res.stdout


def test_check_through_a_jump_host(sshd_netns: dict, tmp_path: Path) -> None:
    """ssh.jump becomes a ProxyCommand with the jump host's own key and known_hosts."""
    s = sshd_netns
    tb_nodes = [node_yaml("srv", "server", "127.0.0.1", s["port"], s["key"], s["known"],
                          "qir-pt-a", "10.0.0.1", tmp_path),
                node_yaml("cli", "client", "127.0.0.1", s["port"], s["key"], s["known"],
                          "qir-pt-b", "10.0.0.2", tmp_path)]
    tb_nodes[0]["srv"]["ssh"]["jump"] = {"host": "127.0.0.1", "port": s["port"], "user": "root",
                                         "key": str(s["key"]), "known_hosts": str(s["known"])}
    tb = write_testbed(tmp_path / "tb.yml", *tb_nodes)
    res = run(["ip", "netns", "exec", s["ns"], CHECK, tb], timeout=120)
    assert f"ok   srv: ssh root@127.0.0.1:{s['port']} via 127.0.0.1" in res.stdout.splitlines()
    assert res.returncode == 0, res.stdout
    # a jump host whose key is unknown fails the node
    empty = tmp_path / "empty"
    empty.write_text("")
    tb_nodes[0]["srv"]["ssh"]["jump"]["known_hosts"] = str(empty)
    write_testbed(tb, *tb_nodes)
    res = run(["ip", "netns", "exec", s["ns"], CHECK, tb], timeout=120)
    assert res.returncode == 1
    assert any(ln.startswith(f"FAIL srv: ssh root@127.0.0.1:{s['port']} via 127.0.0.1: ")
               for ln in res.stdout.splitlines()), res.stdout


def test_check_unknown_host_key_is_refused(sshd_netns: dict, tmp_path: Path) -> None:
    s = sshd_netns
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    tb = write_testbed(
        tmp_path / "tb.yml",
        node_yaml("srv", "server", "127.0.0.1", s["port"], s["key"], empty, "qir-pt-a",
                  "10.0.0.1", tmp_path),
        node_yaml("cli", "client", "127.0.0.1", s["port"], s["key"], s["known"], "qir-pt-b",
                  "10.0.0.2", tmp_path))
    res = run(["ip", "netns", "exec", s["ns"], CHECK, tb], timeout=120)
    assert res.returncode == 1
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("FAIL srv: ssh"))
    assert "Host key verification failed" in line or "No ED25519 host key" in line, line


# ----------------------------------------------------------------------- example testbed --
def test_example_testbed_validates(tmp_path: Path) -> None:
    from interop_runner.config.loader import load_campaign, load_testbed

    tb = load_testbed(EXAMPLE)
    assert not tb.local
    server, client = tb.node("server")[1], tb.node("client")[1]
    assert (server.ip, client.ip) == ("10.0.0.1", "10.0.0.2")
    assert server.interface == client.interface == "enp65s0f0np0"
    assert server.ssh.host == "server.example.net" and client.ssh.host == "client.example.net"
    assert server.workdir.startswith("/var/tmp/qir/") and client.tmpdir.startswith("/dev/shm/qir/")
    # a campaign pointing at it validates too (what docs/testbeds.md tells users to do)
    campaign = tmp_path / "lab.yml"
    campaign.write_text(f"name: lab\ntestbed: {EXAMPLE}\nfile_size: 1GiB\nrepetitions: 2\n"
                        "pairs: [{server: quic-go, client: quic-go}]\n")
    cfg, testbed = load_campaign(campaign)
    assert testbed.name == "example-baremetal" and cfg.repetitions == 2


def test_example_router_testbed_validates(tmp_path: Path) -> None:
    from interop_runner.config.loader import load_campaign, load_testbed

    tb = load_testbed(EXAMPLE_ROUTER)
    name, router = tb.router()
    assert name == "router" and not tb.local
    assert (router.interface, router.ip, router.server_interface) == (
        "enp65s0f1np1", "10.0.2.254", "enp65s0f0np0")
    server, client = (node for _, node in tb.endpoint_nodes())
    assert server.via_router is None and client.via_router is None  # on the path already
    # the endpoints are in the subnets of the router's two sides
    assert (server.ip, client.ip) == ("10.0.1.1", "10.0.2.1")
    campaign = tmp_path / "lab.yml"
    campaign.write_text(f"name: lab\ntestbed: {EXAMPLE_ROUTER}\nfile_size: 1GiB\n"
                        "repetitions: 2\npairs: [{server: quic-go, client: quic-go}]\n")
    assert load_campaign(campaign)[1].name == "example-router"


def test_example_defaults_match_prepare_node() -> None:
    """prepare-node.sh's default directories are the ones the example testbed uses."""
    tb = yaml.safe_load(EXAMPLE.read_text())
    for node in tb["nodes"].values():
        res = prepare("--dry-run", "--no-install", "--role", node["role"], "--iface", "lo",
                      "--addr", f"{node['ip']}/24")
        assert f"mkdir -p -m 0755 {node['workdir']} {node['tmpdir']}" in plus_lines(res.stdout)


def test_check_trust_on_first_use_adds_the_key_as_the_runner_does(sshd_netns: dict,
                                                                 tmp_path: Path) -> None:
    """ssh.trust_on_first_use: a missing known_hosts is created with the node's key (0600 in
    a 0700 directory) and a warning; a changed key is still refused."""
    s = sshd_netns
    known = tmp_path / "new" / "known_hosts"
    nodes = [node_yaml("srv", "server", "127.0.0.1", s["port"], s["key"], known, "qir-pt-a",
                       "10.0.0.1", tmp_path),
             node_yaml("cli", "client", "127.0.0.1", s["port"], s["key"], s["known"], "qir-pt-b",
                       "10.0.0.2", tmp_path)]
    nodes[0]["srv"]["ssh"]["trust_on_first_use"] = True
    tb = write_testbed(tmp_path / "tb.yml", *nodes)
    res = run(["ip", "netns", "exec", s["ns"], CHECK, tb], timeout=120)
    lines = res.stdout.splitlines()
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"ok   srv: ssh root@127.0.0.1:{s['port']}" in lines
    assert (f"warn srv: ssh.trust_on_first_use: an unknown host key is accepted and added to "
            f"{known} (a changed one is still refused)") in lines
    host_key = (s["state"] / "host_ed25519.pub").read_text().split()[1]
    assert host_key in known.read_text()
    assert stat.S_IMODE(known.parent.stat().st_mode) == 0o700
    # a changed key is refused even so
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other], check=True)
    known.write_text(f"[127.0.0.1]:{s['port']} {other.with_suffix('.pub').read_text()}")
    res = run(["ip", "netns", "exec", s["ns"], CHECK, tb], timeout=120)
    assert res.returncode == 1
    assert any(ln.startswith(f"FAIL srv: ssh root@127.0.0.1:{s['port']}: ")
               for ln in res.stdout.splitlines()), res.stdout


# ------------------------------------------------------------------- install.sh targets --
def install_plan(*args: str) -> list[str]:
    """``install.sh --plan ARGS``: the steps it would take, one per line (nothing installed;
    the package's helper runs in this interpreter)."""
    res = run(["bash", INSTALL, "--plan", *args], env={"QIR_INSTALL_PYTHON": sys.executable})
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()


def test_install_plan_for_the_default_campaign() -> None:
    """quickstart's campaign needs its two implementations' caches, nothing else."""
    assert install_plan("--for", "configs/local.yml") == ["core", "impl quic-go",
                                                          "impl tcp-tls"]
    assert "tool inferno" in install_plan("--for", "configs/profile.yml")  # perf monitor


def test_install_plan_of_an_image_implementation() -> None:
    """An image needs its base image and the native build it copies (quic-go)."""
    assert install_plan("--impl", "quic-go-qir") == [
        "core", "base debian-trixie", "impl quic-go", "impl quic-go-qir"]
    assert install_plan("--impl", "quic-go@v0.64.0") == ["core", "impl quic-go"]
    assert install_plan("--notebook") == ["core", "notebook"]
    assert install_plan("--no-core", "--base", "debian-trixie") == ["base debian-trixie"]


def test_install_plan_all_is_the_default() -> None:
    from interop_runner.config.implementations import load_registry

    plan = install_plan()
    assert plan == install_plan("--all")
    assert plan[:3] == ["core", "notebook", "tests"] and "tool inferno" in plan
    assert {f"impl {name}" for name in load_registry()} <= set(plan)


@pytest.mark.parametrize("args, message", [
    (["--impl", "nope"], "error: unknown implementation 'nope'"),
    (["--for", "configs/nope.yml"], "install: --for: no campaign file 'configs/nope.yml'"),
    (["--for"], "install: --for needs a value"),
    (["--tool", "gdb"], "install: --tool: unknown tool 'gdb' (known: inferno)"),
    (["--bogus"], "install: unknown argument '--bogus' (see --help)"),
])
def test_install_errors_are_one_line(args: list[str], message: str) -> None:
    res = run(["bash", INSTALL, "--plan", *args], env={"QIR_INSTALL_PYTHON": sys.executable})
    assert res.returncode != 0 and res.stderr.strip() == message


def test_quickstart_installs_for_its_campaign_and_test_sh_all() -> None:
    quick = QUICKSTART.read_text()
    assert 'pos_scripts/install.sh --for "$config"' in quick
    # the notebook tools come after the table (the run), not before it
    assert (quick.index('run.py run "$config"')
            < quick.index("\nbash pos_scripts/install.sh --notebook"))
    assert "pos_scripts/install.sh --all" in TEST_SH.read_text()


@pytest.fixture
def stamps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("QIR_INSTALL_STAMPS", str(tmp_path / "stamps"))
    return tmp_path / "stamps"


def test_stamps_say_what_is_installed(stamps: Path, tmp_path: Path) -> None:
    from interop_runner.config import needs

    target = needs.Target("impl", "quic-go")
    assert needs.missing([target]) == [target]
    cache = tmp_path / "gomod"
    cache.mkdir()
    needs.write_stamp(target, [str(cache)])
    assert needs.missing([target]) == []
    (stamps / "impl-quic-go").write_text("0" * 64 + f"\n{cache}\n")  # go.sum changed since
    assert needs.missing([target]) == [target]
    needs.write_stamp(target, [str(cache)])
    cache.rmdir()  # the cache was emptied
    assert needs.missing([target]) == [target]


def test_run_on_the_local_testbed_names_the_install_command(
        stamps: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not root (or no install.sh): one line naming the exact command, nothing run."""
    from interop_runner.cli import testbed as cli_testbed
    from interop_runner.config.loader import load_campaign
    from interop_runner.errors import UserError

    cfg, _ = load_campaign(ROOT / "configs" / "local.yml")
    monkeypatch.setattr(cli_testbed.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(cli_testbed.subprocess, "run", lambda *a, **k: pytest.fail("ran"))
    with pytest.raises(UserError) as err:
        cli_testbed.ensure_installed(cfg)
    assert str(err.value) == (f"campaign local needs impl quic-go, impl tcp-tls, not installed: "
                              f"run {INSTALL} --no-core --impl quic-go --impl tcp-tls as root")


def test_run_fills_what_is_missing_with_install_sh(stamps: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from interop_runner.cli import testbed as cli_testbed
    from interop_runner.config.loader import load_campaign
    from interop_runner.config.needs import Target, write_stamp

    cfg, _ = load_campaign(ROOT / "configs" / "local.yml")
    write_stamp(Target("impl", "tcp-tls"), [])
    calls = []
    monkeypatch.setattr(cli_testbed.os, "geteuid", lambda: 0)
    def install(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        calls.append((argv, kw["env"]["QIR_INSTALL_PYTHON"]))
        write_stamp(Target("impl", "quic-go"), [])  # what install.sh does when it succeeds
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(cli_testbed.subprocess, "run", install)
    cli_testbed.ensure_installed(cfg)
    assert calls == [(["bash", str(INSTALL), "--no-core", "--impl", "quic-go"], sys.executable)]
    err = capsys.readouterr().err
    assert "campaign local needs impl quic-go: " in err and "installed impl quic-go in " in err


@pytest.mark.parametrize("exit_code, why", [(1, "exit 1"), (0, "still missing: impl quic-go")])
def test_run_goes_on_with_a_warning_when_install_sh_fails(
        stamps: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        exit_code: int, why: str) -> None:
    """A failed install (no network, no cargo for inferno) is one warning line: the campaign
    still runs, and a cache that is really missing fails its implementation's setup."""
    from interop_runner.cli import testbed as cli_testbed
    from interop_runner.config.loader import load_campaign
    from interop_runner.config.needs import Target, write_stamp

    cfg, _ = load_campaign(ROOT / "configs" / "local.yml")
    write_stamp(Target("impl", "tcp-tls"), [])
    monkeypatch.setattr(cli_testbed.os, "geteuid", lambda: 0)
    monkeypatch.setattr(cli_testbed.subprocess, "run",
                        lambda argv, **kw: subprocess.CompletedProcess(argv, exit_code))
    cli_testbed.ensure_installed(cfg)
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == (f"warning: {INSTALL} --no-core --impl quic-go did not install everything "
                    f"({why}; its output is above); the campaign goes on with what is there")


@pytest.mark.testbed  # install.sh runs as root only
def test_install_stops_at_a_failed_cache_fill_and_stamps_nothing(stamps: Path,
                                                                  tmp_path: Path) -> None:
    """A download that fails inside install.sh's command substitutions stops it: nothing is
    stamped as installed (bash ignores such failures unless inherit_errexit is set)."""
    env = {"QIR_INSTALL_PYTHON": sys.executable, "PIP_NO_INDEX": "1",
           "PIP_FIND_LINKS": str(tmp_path)}  # an empty wheel source: pip download fails
    res = run(["bash", INSTALL, "--no-core", "--impl", "aioquic"], env=env, timeout=300)
    assert res.returncode != 0, res.stderr
    assert not (stamps / "impl-aioquic").exists()
    assert "[install] done" not in res.stderr
    res = run(["bash", INSTALL, "--no-core", "--impl", "nosuch"], env=env)
    assert res.returncode != 0 and "[install] done" not in res.stderr
