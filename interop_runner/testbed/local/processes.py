"""Processes of the local testbed, found through /proc and stopped by PID only.

Nothing here matches a process by name alone: callers recognise their daemons by pid file,
command line and network namespace, so other sshd or engines on the machine stay untouched.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Callable, Sequence

from interop_runner.testbed.local.host import Host

STOP_GRACE_S = 2.0  # TERM -> KILL grace when stopping processes
KILL_WAIT_S = 2.0  # how long to wait for processes to go after SIGKILL
NetnsIdent = tuple[int, int]  # (device, inode) of a network namespace


def pid_alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def argv_of(pid: int) -> list[str]:
    """The process's command line as a list ([] when it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0")[:-1]]


def comm_of(pid: int) -> str:
    """The process's name (``comm``; "" when it is gone)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def flag_value(argv: Sequence[str], name: str) -> str | None:
    """The value of ``name VALUE`` or ``name=VALUE`` in an argv (None if absent)."""
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg[len(name) + 1:]
    return None


def netns_ident(path: Path | str) -> NetnsIdent | None:
    """Identity of the network namespace at ``path`` (a /run/netns entry or
    /proc/<pid>/ns/net), None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def pid_netns_ident(pid: int) -> NetnsIdent | None:
    """Identity of the network namespace of a process (None: it is gone)."""
    return netns_ident(f"/proc/{pid}/ns/net")


def pidfile_pid(path: Path) -> int | None:
    """The PID a pid file names (None: no file, or not a number)."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def scan(match: Callable[[int], bool]) -> list[int]:
    """PIDs of every process but this one that ``match`` accepts."""
    me = os.getpid()
    return [int(e) for e in os.listdir("/proc")
            if e.isdigit() and int(e) != me and match(int(e))]


def netns_members(ident: NetnsIdent) -> list[int]:
    """PIDs of all live processes in the network namespace ``ident`` (device, inode)."""
    return [int(e) for e in os.listdir("/proc")
            if e.isdigit() and pid_netns_ident(int(e)) == ident and pid_alive(int(e))]


def terminate(pids: Sequence[int], grace: float, kill_wait: float) -> list[int]:
    """Stop processes by PID: SIGTERM, then SIGKILL for those still alive after ``grace``;
    the PIDs still alive ``kill_wait`` seconds after SIGKILL (none, normally)."""
    pending = [p for p in set(pids) if p > 1 and p != os.getpid()]
    for sig, wait_s in ((signal.SIGTERM, grace), (signal.SIGKILL, kill_wait)):
        for pid in pending:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait_s
        while pending and time.monotonic() < deadline:
            pending = [p for p in pending if pid_alive(p)]
            if pending:
                time.sleep(0.01)
        pending = [p for p in pending if pid_alive(p)]
        if not pending:
            break
    return pending


def namespace_pids(host: Host, ns: str) -> list[int]:
    """The processes in a named network namespace (``ip netns pids``)."""
    res = host.ip("netns", "pids", ns, check=False)
    return [int(tok) for tok in res.stdout.split() if tok.isdigit()] if res.ok else []


def stop_namespace(host: Host, ns: str, grace: float = STOP_GRACE_S) -> None:
    """Stop every process in a named namespace (everything in our namespaces is ours: sshd
    sessions, implementations); up to three rounds for processes started meanwhile."""
    for _ in range(3):
        pids = namespace_pids(host, ns)
        if not pids:
            break
        terminate(pids, grace, KILL_WAIT_S)
