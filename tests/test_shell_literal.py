"""Shell metacharacters in config values reach the node's scripts as literal data.

No testbed: the SSH executor's real ``_exec`` (the command string it builds with shlex.join)
runs against a fake paramiko channel whose "sshd" is ``bash -c <command>`` (or ``sh -c``) on
this machine, exactly what OpenSSH does with an exec request for a user whose shell is bash.
The values travel the way the orchestrator sends them: an implementation parameter declared
as a free string becomes ``PARAM_<NAME>`` (``ParameterSpec.to_env`` -> ``Node.script_env``),
node directories with metacharacters become ``LOGS``/``CERTS``/``SETUP_DIR`` and the scripts'
working directory, and ``Attempt.run_script`` / ``Attempt._run_client`` / ``Executor.start`` run
them. Every value must arrive byte for byte, and no ``touch`` hidden in a value may run.

(No shipped implementation declares a free string parameter: msquic's ``execution_profile``
has choices, so a ``$(...)`` value is refused by validation, see bad_input/param-shell.yml;
the tests declare one of their own.)
"""

from __future__ import annotations

import hashlib
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from interop_runner.config.campaign import CampaignConfig
from interop_runner.config.implementations import ImplementationMeta, ParameterSpec
from interop_runner.config.testbed import NodeConfig
from interop_runner.measure.attempt import Attempt, AttemptPlan
from interop_runner.measure.side import SidePlan
from interop_runner.remote.executor import Executor, LocalExecutor
from interop_runner.remote.ssh import SSHExecutor, SSHTarget
from interop_runner.storage.layout import new_campaign_dir
from interop_runner.testbed.node import Node

CANARY = "PWNED"  # every hostile value tries to create a file of this name


def hostile_values(trap: Path) -> list[str]:
    """Values that would create ``trap/PWNED*`` if any shell evaluated them."""
    t = shlex.quote(str(trap / CANARY))
    return [
        f"a; touch {t}1",
        f"$(touch {t}2)",
        f"`touch {t}3`",
        f"'; touch {t}4; '",
        f"\"; touch {t}5; \"",
        f"line one\nline two; touch {t}6\n",
        f"x && touch {t}7 || touch {t}8 | cat > {t}9",
        f"$(printf '%s' \"$(touch {t}10)\")",
        "$HOME ${PATH} $$ $0 $@ $1 \\ \\n %s %d %%",
        "* ? [a-z]* ~root ~ {a,b} !! #comment",
        "-n",
        "--help",
        "",
        " leading and trailing spaces ",
        "tab\there\r\n",
        "ünïcødé ✓ \u202e",
        "a=b c=d",
        "'",
        '"',
        "\\",
        "x" * 4000,
    ]


# ------------------------------------------------------------- a local "sshd" for paramiko ----
class _Channel:
    """The part of paramiko.Channel that SSHExecutor._exec uses; the command runs locally."""

    def __init__(self, shell: str, log: list[str]) -> None:
        self.shell, self.log = shell, log
        self.out = self.err = b""
        self.code: int | None = None
        self.eof_received = False

    def exec_command(self, command: str) -> None:
        self.log.append(command)
        proc = subprocess.run([self.shell, "-c", command], stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=60)
        self.out, self.err, self.code = proc.stdout, proc.stderr, proc.returncode
        self.eof_received = True

    def shutdown_write(self) -> None:
        pass

    def recv_ready(self) -> bool:
        return bool(self.out)

    def recv(self, n: int) -> bytes:
        chunk, self.out = self.out[:n], self.out[n:]
        return chunk

    def recv_stderr_ready(self) -> bool:
        return bool(self.err)

    def recv_stderr(self, n: int) -> bytes:
        chunk, self.err = self.err[:n], self.err[n:]
        return chunk

    def exit_status_ready(self) -> bool:
        return self.code is not None

    def recv_exit_status(self) -> int:
        assert self.code is not None
        return self.code

    def close(self) -> None:
        pass


class _Transport:
    def __init__(self, shell: str, log: list[str]) -> None:
        self.shell, self.log = shell, log

    def is_active(self) -> bool:
        return True

    def open_session(self, timeout: float | None = None) -> _Channel:
        return _Channel(self.shell, self.log)


class _Client:
    def __init__(self, shell: str, log: list[str]) -> None:
        self.transport = _Transport(shell, log)

    def get_transport(self) -> _Transport:
        return self.transport

    def close(self) -> None:
        pass


def fake_ssh(shell: str) -> tuple[SSHExecutor, list[str]]:
    """An SSHExecutor (real command building and result handling) whose remote end is
    ``<shell> -c`` on this machine; also returns the list of command strings it sent."""
    log: list[str] = []
    ex = SSHExecutor.__new__(SSHExecutor)
    ex.name, ex.target = "fake", SSHTarget(host="node.invalid")
    ex._jump, ex._sftp = None, None
    ex._client = _Client(shell, log)  # type: ignore[assignment]
    return ex, log


EXECUTORS = ["ssh-bash", "ssh-sh", "local"]


def executor(kind: str) -> tuple[Executor, list[str]]:
    if kind == "local":
        return LocalExecutor("local"), []
    return fake_ssh("bash" if kind == "ssh-bash" else "sh")


def canaries(trap: Path) -> list[Path]:
    return sorted(trap.glob(CANARY + "*"))


# A script that writes the contract variables, its argv and its working directory, each into
# its own file under $LOGS, with printf '%s' (no interpretation of the value).
DUMP = r"""#!/bin/sh
set -eu
for v in PARAM_LABEL LOGS CERTS SETUP_DIR ROLE; do
  eval "printf '%s' \"\${$v-UNSET}\"" >"$LOGS/$(basename "$0").$v"
done
pwd -P >"$LOGS/$(basename "$0").pwd"
printf '%s\n' "$#" >"$LOGS/$(basename "$0").argc"
if [ "$(basename "$0")" = run-client ]; then printf x >"$DOWNLOADS/f"; fi
"""


def meta_with_str_param(path: Path) -> ImplementationMeta:
    """An implementation declaring a free string parameter `label` (none of ours does)."""
    path.mkdir(parents=True, exist_ok=True)
    for script in ("pre", "run-client", "run-server"):
        (path / script).write_text(DUMP)
        (path / script).chmod(0o755)
    return ImplementationMeta(name="evil", version="1", roles=["server", "client"],
                              alpns=["h3"], ready="udp",
                              parameters={"label": ParameterSpec(type="str")}, path=path)


def make_node(base: Path, role: str, ex: Executor, dirname: str) -> Node:
    """A node whose workdir and tmpdir names are full of shell metacharacters."""
    cfg = NodeConfig(role=role, ssh={"host": "node.invalid"}, interface="lo",  # type: ignore
                     ip="127.0.0.1", workdir=str(base / role / "work" / dirname),
                     tmpdir=str(base / role / "tmp" / dirname))
    return Node(role, cfg, ex, "evil_20260101T000000Z", command_timeout=60)


def plan(meta: ImplementationMeta, params: dict[str, Any]) -> AttemptPlan:
    return AttemptPlan(
        campaign_id="evil_20260101T000000Z", testbed="t", testcase="goodput", repetition=1,
        attempt=1, server=SidePlan("server", meta, "1", params=params),
        client=SidePlan("client", meta, "1", params=params), alpn="h3", port=4433, file_name="f",
        file_size=1, file_digest=hashlib.sha256(b"x").hexdigest(), hash_algorithm="sha256",
        client_timeout=60,
        server_ready_timeout=5)


# ---------------------------------------------------------------------------------- tests ----
def test_free_string_parameter_renders_unchanged(tmp_path: Path) -> None:
    meta = meta_with_str_param(tmp_path / "impl")
    for value in hostile_values(tmp_path):
        assert meta.param_env({"label": value}) == {"PARAM_LABEL": value}


@pytest.mark.parametrize("kind", EXECUTORS)
def test_argv_and_env_arrive_literally(kind: str, tmp_path: Path) -> None:
    """Every hostile value as an argument and as an environment value, in one command each."""
    ex, sent = executor(kind)
    trap = tmp_path / "trap"
    trap.mkdir()
    values = hostile_values(trap)
    for value in values:
        res = ex.run(["sh", "-c", 'printf "%s|" "$1"; printf "%s" "$X"', "sh", value],
                     env={"X": value}, timeout=30)
        assert res.ok and res.stdout == f"{value}|{value}", (value, res)
    assert canaries(trap) == []
    if kind != "local":
        assert len(sent) == len(values)  # one SSH exec request per command, no extra ones


@pytest.mark.parametrize("kind", EXECUTORS)
def test_orchestrator_scripts_get_literal_values(kind: str, tmp_path: Path) -> None:
    """Attempt.side_env / run_script / _run_client with a hostile parameter and hostile
    directories."""
    ex, sent = executor(kind)
    trap = tmp_path / "trap"
    trap.mkdir()
    dirname = f"d;touch {trap}/{CANARY}d $(touch {trap}/{CANARY}e) `x` 'q\" *"
    meta = meta_with_str_param(tmp_path / "impl")
    label = hostile_values(trap)[5] + hostile_values(trap)[1] + hostile_values(trap)[3]
    server = make_node(tmp_path / "nodes", "server", ex, dirname)
    client = make_node(tmp_path / "nodes", "client", ex, dirname)
    for node in (server, client):  # what Node.upload does over SFTP
        ex.run(["mkdir", "-p", node.impl_dir("evil"), node.certs, node.setup_dir], timeout=30)
        for script in ("pre", "run-client", "run-server"):
            ex.run(["cp", str(meta.path / script), f"{node.impl_dir('evil')}/{script}"],
                   timeout=30)
    attempt = Attempt(plan(meta, {"label": label}), server, client, tmp_path / "out")
    senv = attempt.side_env(server, attempt.server_logs, attempt.plan.server)
    cenv = attempt.side_env(client, attempt.client_logs, attempt.plan.client)
    assert senv["PARAM_LABEL"] == cenv["PARAM_LABEL"] == label
    for node, logs in ((server, attempt.server_logs), (client, attempt.client_logs)):
        node.run(["mkdir", "-p", logs])
        assert Path(logs).is_dir() and dirname in logs
    client.run(["mkdir", "-p", client.downloads])
    assert attempt.run_script(server, meta, "pre", senv) and attempt.run_script(client, meta, "pre",
                                                                          cenv)
    attempt._run_client(cenv)  # timed run, then size and SHA-256 of $DOWNLOADS/f
    rec = attempt.record
    assert (rec.status, rec.reason, rec.client.exit_code) == ("ok", None, 0)
    assert rec.bytes_received == 1 and rec.hash_ok is True
    assert Path(client.downloads, "f").read_text() == "x"

    for node, logs, env in ((server, attempt.server_logs, senv),
                            (client, attempt.client_logs, cenv)):
        scripts = ["pre"] + (["run-client"] if node is client else [])
        for script in scripts:
            out = Path(logs)
            assert (out / f"{script}.PARAM_LABEL").read_text() == label
            assert (out / f"{script}.LOGS").read_text() == logs
            assert (out / f"{script}.CERTS").read_text() == node.certs
            assert (out / f"{script}.SETUP_DIR").read_text() == node.setup_dir
            assert (out / f"{script}.ROLE").read_text() == node.cfg.role
            assert (out / f"{script}.pwd").read_text() == \
                str(Path(node.impl_dir("evil")).resolve()) + "\n"
            assert (out / f"{script}.argc").read_text() == "0\n"
        assert env["LOGS"] == logs
    assert canaries(trap) == []
    if kind != "local":
        assert any(CANARY in c for c in sent)  # the hostile text really went over "SSH"


@pytest.mark.parametrize("kind", EXECUTORS)
def test_background_start_gets_literal_values(kind: str, tmp_path: Path) -> None:
    """Executor.start (how the server starts): argv, env, cwd and output paths."""
    ex, _ = executor(kind)
    trap = tmp_path / "trap"
    trap.mkdir()
    odd = tmp_path / f"o;touch {trap}/{CANARY}o $(touch {trap}/{CANARY}p)"
    odd.mkdir(parents=True)  # (the "name" holds slashes: nested directories)
    for value in hostile_values(trap)[:12]:
        proc = ex.start(["sh", "-c", 'printf "%s|%s|" "$1" "$X"; pwd -P', "sh", value],
                        stdout=f"{odd}/out.log", stderr=f"{odd}/err.log", env={"X": value},
                        cwd=str(odd))
        assert ex.wait(proc, timeout=30) == 0
        assert (odd / "out.log").read_text() == f"{value}|{value}|{odd.resolve()}\n"
        assert (odd / "err.log").read_text() == ""
    assert canaries(trap) == []


def test_ssh_command_string_is_shlex_join(tmp_path: Path) -> None:
    """What goes over the wire: one shlex.join'ed string, parsed back to the same argv."""
    ex, sent = fake_ssh("bash")
    value = hostile_values(tmp_path)[1]
    ex.run(["printf", "%s", value], env={"PARAM_LABEL": value}, cwd="/", timeout=30)
    (command,) = sent
    words = shlex.split(command)
    assert words[:2] == ["sh", "-c"] and words[3] == "qir"
    assert words[4:] == ["env", "-C", "/", f"PARAM_LABEL={value}", "printf", "%s", value]


@pytest.mark.parametrize("name", [
    "../../etc", "..", ".", ".hidden", "a/b", "/abs", "a b", "-rf", "x;rm", "$(id)", "`id`",
    "a\nb", "a\0b", "", "ü", "x" * 65, "a'b", 'a"b', "~root",
])
def test_unsafe_campaign_names_are_refused(name: str) -> None:
    with pytest.raises(ValidationError) as info:
        CampaignConfig.model_validate({"name": name, "testbed": "t.yml", "servers": ["quic-go"],
                                       "clients": ["quic-go"]})
    (err,) = info.value.errors()
    assert err["loc"] == ("name",)


@pytest.mark.parametrize("name", ["a", "a..b", "x-1.2_3", "Z" * 64])
def test_safe_campaign_names_stay_inside_results(name: str, tmp_path: Path) -> None:
    cfg = CampaignConfig.model_validate({"name": name, "testbed": "t.yml",
                                         "servers": ["quic-go"], "clients": ["quic-go"]})
    root = tmp_path / "results"
    made = new_campaign_dir(root, cfg.name)
    assert made.parent == root and made.name.startswith(f"{name}_")
    assert [p.name for p in tmp_path.iterdir()] == ["results"]


@pytest.mark.parametrize("path", ["/var/tmp/../../etc", "/var/tmp/qir/..", "/a/../b/c"])
def test_node_directories_with_dotdot_are_refused(path: str) -> None:
    with pytest.raises(ValidationError, match="must not contain '..'"):
        NodeConfig(role="server", ssh={"host": "h"}, interface="lo", ip="127.0.0.1",  # type: ignore
                   workdir=path)


@pytest.mark.parametrize("kind", EXECUTORS)
def test_monitor_options_reach_tcpdump_and_perf_as_argv(kind: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """monitor_options.tcpdump.filter (split like a shell would, never run by one) and
    monitor_options.perf.event (one argument) reach the tools as argv words."""
    from interop_runner.config.campaign import MonitorOptions
    from interop_runner.measure.monitor_session import NodeMonitors

    trap = tmp_path / "trap"
    trap.mkdir()
    fakebin = tmp_path / "bin"
    fakebin.mkdir()
    for tool in ("tcpdump", "perf"):  # record argv NUL-separated; tcpdump announces itself
        (fakebin / tool).write_text(
            "#!/bin/sh\nprintf '%s\\0' \"$@\" >\"$QIR_ARGV_DIR/$(basename \"$0\")\"\n"
            "echo 'listening on lo' >&2\n")
        (fakebin / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{fakebin}:{__import__('os').environ['PATH']}")
    monkeypatch.setenv("QIR_ARGV_DIR", str(tmp_path))
    ex, _ = executor(kind)
    t = shlex.quote(str(trap / CANARY))
    bpf = f"udp port 4433 and not host 10.0.0.9 '; touch {t}1' \"$(touch {t}2)\" `touch {t}3`"
    event = f"cycles;touch {t}4 $(touch {t}5)"
    options = MonitorOptions.model_validate({"tcpdump": {"filter": bpf},
                                             "perf": {"event": event}})
    mon = NodeMonitors(ex, "node", "lo", ["tcpdump", "perf"], options=options)
    mon.status = {"tcpdump": "ok", "perf": "ok"}
    mon.perf_event = options.perf.event
    logs = tmp_path / "logs"
    logs.mkdir()
    for proc in mon.start_series(str(logs)):
        assert ex.wait(proc, timeout=30) == 0
    tcpdump = (tmp_path / "tcpdump").read_text().split("\0")[:-1]
    perf = (tmp_path / "perf").read_text().split("\0")[:-1]
    assert tcpdump[-len(shlex.split(bpf)):] == shlex.split(bpf)
    c = trap / CANARY
    assert shlex.split(bpf) == ["udp", "port", "4433", "and", "not", "host", "10.0.0.9",
                                f"; touch {c}1", f"$(touch {c}2)", "`touch", f"{c}3`"]
    assert tcpdump[tcpdump.index("-w") + 1] == f"{logs}/capture.pcap"
    assert perf[perf.index("-e") + 1] == event
    assert canaries(trap) == []
