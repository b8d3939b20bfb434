"""Each node's sshd: its configuration, start in the node's namespace, health and stop.

Each namespace runs its own sshd (started with ``ip netns exec``), so the runner reaches the
nodes exactly as it reaches real ones: over SSH with the management key and a strict
known_hosts file (``keys.py``). A running sshd is ours when its pid file, ``comm`` and command
line (this node's config file) say so; it is stopped by PID only.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import re
import shlex
import socket
import time
from pathlib import Path

from interop_runner.errors import TestbedError
from interop_runner.testbed.local import processes
from interop_runner.testbed.local.host import Host, write_if_changed
from interop_runner.testbed.local.layout import SSH_PORT, SSH_USER, Layout, NodeSpec
from interop_runner.testbed.local.scratch import scratch_visible

NODE_SHELL_RC = ("# ~/.bashrc of a local-testbed node: intentionally empty "
                 "(see interop_runner/testbed/local/sshd.py)\n")
SSH_WAIT_S = 10.0  # how long up() waits for every sshd to answer
_MOUNT_FLAGS = frozenset({"rw", "ro", "relatime", "noatime", "nosuid", "nodev", "noexec",
                          "seclabel"})


# --------------------------------------------------------------------------------------------
# Which sshd is ours
# --------------------------------------------------------------------------------------------
def is_our_sshd(pid: int, node: NodeSpec) -> bool:
    """The process is an sshd listener started with this node's config file."""
    if not processes.pid_alive(pid):
        return False
    return (processes.comm_of(pid) == "sshd"
            and str(node.sshd_config) in " ".join(processes.argv_of(pid)))


def listener_pid(node: NodeSpec) -> int | None:
    """PID of this node's sshd listener according to its pid file (None if not alive/ours)."""
    pid = processes.pidfile_pid(node.pid_file)
    return pid if pid is not None and is_our_sshd(pid, node) else None


def running_in_node(layout: Layout, node: NodeSpec, pid: int | None) -> bool:
    """The sshd ``pid`` lives in the node's (named) namespace."""
    ns_id = processes.netns_ident(layout.netns_path(node.namespace))
    return pid is not None and ns_id is not None and processes.pid_netns_ident(pid) == ns_id


def stop_sshd(layout: Layout, node: NodeSpec) -> None:
    """Stop every sshd listener started with this node's config, by PID.

    A listener living in a namespace that is no longer named (``ip netns delete`` while it
    ran) keeps that namespace alive; everything in such an orphaned namespace was started
    there by us, so its remaining processes (sessions, children) are stopped as well.
    """
    from_file = listener_pid(node)
    found = processes.scan(lambda pid: is_our_sshd(pid, node))
    pids = sorted(set(found + ([from_file] if from_file is not None else [])))
    named = {processes.netns_ident(layout.netns_path(ns)) for ns in layout.namespaces}
    named.add(processes.pid_netns_ident(os.getpid()))
    for pid in list(pids):
        ident = processes.pid_netns_ident(pid)
        if ident is not None and ident not in named:
            pids += processes.netns_members(ident)
    processes.terminate(pids, processes.STOP_GRACE_S, processes.KILL_WAIT_S)


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------
def sshd_major_minor(host: Host) -> tuple[int, int]:
    """OpenSSH's version (``sshd -V``), asked once per host; (0, 0) when unknown."""
    if host.sshd_version is None:
        res = host.run([host.tool("sshd"), "-V"], check=False)
        match = re.search(r"OpenSSH_(\d+)\.(\d+)", res.stdout + res.stderr)
        host.sshd_version = (int(match.group(1)), int(match.group(2))) if match else (0, 0)
    return host.sshd_version


def sshd_config_text(host: Host, layout: Layout, node: NodeSpec) -> str:
    """The sshd configuration of one node."""
    lines = [
        f"# qir local testbed: node {node.name} (netns {node.namespace}); written by up()",
        f"ListenAddress {node.mgmt_ip}",
        f"Port {SSH_PORT}",
        "AddressFamily inet",
        f"HostKey {node.host_key}",
        f"PidFile {node.pid_file}",
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        f"AuthorizedKeysFile {layout.authorized_keys}",
        "StrictModes yes",
        "UseDNS no",
        "MaxSessions 64",
        "MaxStartups 64:30:128",
        "LoginGraceTime 30",
        "X11Forwarding no",
        "PrintMotd no",
        "PrintLastLog no",
        "PermitUserEnvironment no",
        "LogLevel INFO",
        "Subsystem sftp internal-sftp",
    ]
    if sshd_major_minor(host) >= (9, 8):
        # Newer sshd penalise sources that connect without authenticating (our port probes).
        lines.append("PerSourcePenalties no")
    return "\n".join(lines) + "\n"


def _stamp(node: NodeSpec, config: str) -> str:
    digest = hashlib.sha256(config.encode() + node.host_pubkey.read_bytes()).hexdigest()
    return digest + "\n"


def stamp_current(host: Host, layout: Layout, node: NodeSpec) -> bool:
    """The running sshd was started with the configuration and host key up() writes now."""
    try:
        config = node.sshd_config.read_text()
        return (config == sshd_config_text(host, layout, node)
                and node.stamp_file.read_text() == _stamp(node, config))
    except OSError:
        return False


def sshd_current(host: Host, layout: Layout) -> bool:
    """Every node's sshd runs with the current configuration and sees its scratch tmpfs."""
    return (all(stamp_current(host, layout, n) for n in layout.nodes)
            and all(scratch_visible(n, listener_pid(n)) for n in layout.nodes))


def cgroup_mount_script(mounts: str | None = None) -> str:
    """Shell lines that mount, in a node's mount namespace, the cgroup file systems this
    host mounts below /sys/fs/cgroup (the same hierarchies: a v1 hierarchy mounted again with
    its controllers is the same hierarchy)."""
    text = Path("/proc/self/mounts").read_text() if mounts is None else mounts
    lines = []
    for entry in text.splitlines():
        fields = entry.split()
        if len(fields) < 4 or not fields[1].startswith("/sys/fs/cgroup"):
            continue
        _, point, fstype, opts = fields[:4]
        if fstype not in ("tmpfs", "cgroup", "cgroup2"):
            continue
        keep = ",".join(o for o in opts.split(",") if o not in _MOUNT_FLAGS and "=" not in o
                        or o.startswith("name="))
        if fstype == "tmpfs":
            keep = "mode=755"
        opt = ["-o", keep] if keep else []
        lines.append(shlex.join(["mkdir", "-p", point]) + "; " +
                     shlex.join(["mount", "-t", fstype, *opt, fstype, point]) + "; ")
    return "".join(lines)


# --------------------------------------------------------------------------------------------
# Start
# --------------------------------------------------------------------------------------------
def log_tail(node: NodeSpec) -> str:
    """The last line of the node's sshd log (at most 200 characters; "" when none)."""
    try:
        lines = node.log_file.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1][:200] if lines else ""


def ensure_sshd(host: Host, layout: Layout, node: NodeSpec) -> None:
    """Start (or restart) the node's sshd unless the right one already runs in its namespace
    (and sees the node's scratch file system)."""
    config = sshd_config_text(host, layout, node)
    write_if_changed(node.sshd_config, config, 0o600)
    pid = listener_pid(node)
    if (running_in_node(layout, node, pid) and stamp_current(host, layout, node)
            and scratch_visible(node, pid)):
        return
    # Stop every listener started with this node's config (pid file, orphaned namespace, ...).
    stop_sshd(layout, node)
    node.pid_file.unlink(missing_ok=True)
    check = host.run([host.tool("sshd"), "-t", "-f", str(node.sshd_config)], check=False)
    if not check.ok:
        tail = (check.stderr.strip().splitlines() or ["?"])[-1]
        raise TestbedError(f"local testbed: sshd config of {node.name} rejected: {tail}")
    res = host.run([host.tool("ip"), "netns", "exec", node.namespace, *_launch_argv(host, node)],
                   check=False)
    if not res.ok:
        raise TestbedError(f"local testbed: sshd of {node.name} failed to start "
                           f"(exit {res.exit_code}): {log_tail(node) or res.stderr.strip()}")
    write_if_changed(node.stamp_file, _stamp(node, config), 0o600)


def _launch_argv(host: Host, node: NodeSpec) -> list[str]:
    """How the node's sshd starts inside ``ip netns exec``, with the node's own mounts."""
    # A node is a separate host: it must not run the management host's ~/.bashrc (here it
    # starts pyenv and costs ~80 ms per SSH command). `ip netns exec` gives sshd a private
    # mount namespace, so a bind mount of the node's own rc file stays inside the node.
    write_if_changed(node.shell_rc, NODE_SHELL_RC, 0o644)
    home_rc = Path(pwd.getpwnam(SSH_USER).pw_dir) / ".bashrc"
    launch = [host.tool("sshd"), "-f", str(node.sshd_config), "-E", str(node.log_file)]
    # `ip netns exec` also gives the node a fresh /sys without the cgroup mounts; a real host
    # has them, and the runner reads a container's CPU time there.
    launch = ["sh", "-c", cgroup_mount_script() + 'exec "$@"', "sshd", *launch]
    if home_rc.is_file():
        launch = ["sh", "-c", 'mount --bind "$0" "$1" && shift && exec "$@"', str(node.shell_rc),
                  str(home_rc), *launch]
    return launch


def probe_ssh(ip: str, timeout: float = 1.0) -> bool:
    """True when ``ip:22`` accepts a TCP connection and sends an SSH banner."""
    try:
        with socket.create_connection((ip, SSH_PORT), timeout=timeout) as sock:
            return sock.recv(64).startswith(b"SSH-")
    except OSError:
        return False


def wait_for_ssh(layout: Layout, timeout: float = SSH_WAIT_S) -> None:
    """Poll until every node's sshd answers on its management address (bounded)."""
    pending = list(layout.nodes)
    deadline = time.monotonic() + timeout
    while pending:
        pending = [n for n in pending if not probe_ssh(n.mgmt_ip, timeout=0.5)]
        if not pending:
            return
        if time.monotonic() > deadline:
            node = pending[0]
            tail = log_tail(node)
            raise TestbedError(
                f"local testbed: sshd of {node.name} did not answer on {node.mgmt_ip}:{SSH_PORT} "
                f"within {timeout:g} s" + (f" ({node.log_file}: {tail})" if tail else ""))
        time.sleep(0.01)


def check_root_account() -> None:
    """With ``UsePAM no`` sshd refuses a locked root account ('!' password), even for keys."""
    try:
        for line in Path("/etc/shadow").read_text().splitlines():
            fields = line.split(":")
            if fields[0] == SSH_USER and len(fields) > 1 and fields[1].startswith("!"):
                raise TestbedError(
                    "local testbed: root account is locked ('!' in /etc/shadow), sshd with "
                    "UsePAM no refuses it; unlock for key-only login with: usermod -p '*' root")
    except OSError:
        pass
