"""Starting a node's Docker Engine: its containerd, then its dockerd, both detached in the
node's network namespace (``nsenter --net``), and waiting until the API answers."""

from __future__ import annotations

import os
import shutil
import socket
import time
from pathlib import Path
from typing import Sequence

from interop_runner.errors import TestbedError
from interop_runner.testbed.local import engine_stop, engines, processes
from interop_runner.testbed.local.engines import ENGINE_CMD_TIMEOUT_S, log_tail
from interop_runner.testbed.local.host import Host
from interop_runner.testbed.local.layout import EngineLayout

WAIT_S = 60.0  # how long up() waits for an engine to answer (a fresh data root takes longest)
# dockerd finds runc, the shims and docker-init through PATH, whatever the caller's PATH is.
ENGINE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _overlay_works(host: Host, directory: Path) -> bool:
    """Whether the kernel mounts an overlay whose upper layer is on ``directory``'s file system."""
    probe = directory / ".overlay-probe"
    shutil.rmtree(probe, ignore_errors=True)
    dirs = {name: probe / name for name in ("lower", "upper", "work", "merged")}
    for path in dirs.values():
        path.mkdir(parents=True)
    options = (f"lowerdir={dirs['lower']},upperdir={dirs['upper']},"
               f"workdir={dirs['work']}")
    res = host.run([host.engine_tool("mount"), "-t", "overlay", "overlay", "-o", options,
                    str(dirs["merged"])], check=False, timeout=ENGINE_CMD_TIMEOUT_S)
    if res.ok:
        host.run([host.engine_tool("umount"), str(dirs["merged"])],
                 timeout=ENGINE_CMD_TIMEOUT_S)
    shutil.rmtree(probe)
    return res.ok


def storage_driver(host: Host, engine: EngineLayout) -> str:
    """overlay2 where the data root's file system can hold an overlay's upper layer, else vfs.

    overlay2 works on this project's hosts (ext4 under /var/lib, checked). It does not where
    /var/lib is itself an overlay (a container) or a file system without d_type/xattrs: there
    vfs (a full copy per layer: slow and large, but it works everywhere) is the fallback. A
    data root keeps the driver it was created with, else its cached images would vanish.
    """
    existing = engines.existing_driver(engine.data_root)
    if existing is not None:
        return existing
    return "overlay2" if _overlay_works(host, engine.data_root) else "vfs"


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def _launch(host: Host, engine: EngineLayout, argv: Sequence[str], log: Path,
            pidfile: Path | None) -> None:
    """Start ``argv`` detached (own session) inside the node's network namespace only."""
    # setsid -f returns at once; the daemon's output goes to its log, never to our pipes.
    body = ('p=$0; l=$1; shift; [ "$p" = - ] || echo $$ >"$p" || exit 1; '
            'exec "$@" </dev/null >>"$l" 2>&1')
    host.run([host.engine_tool("setsid"), "-f", "sh", "-c", body, str(pidfile or "-"), str(log),
              host.engine_tool("nsenter"), f"--net={engine.netns}", "--", *argv],
             env={"PATH": ENGINE_PATH}, timeout=ENGINE_CMD_TIMEOUT_S)


def _socket_accepts(path: Path) -> bool:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(0.5)
            sock.connect(str(path))
        return True
    except OSError:
        return False


def _still_starting(engine: EngineLayout) -> bool:
    """containerd's launch is still alive: the PID its launcher wrote (the shell that execs
    nsenter, then containerd, keeping its PID), or, before that file exists, a process of the
    launch found by its arguments. The pid file first: while a process execs, its
    /proc/<pid>/cmdline can read empty for a moment, and one such scan ended a good start."""
    pid = processes.pidfile_pid(engine.containerd_pidfile)
    return (pid is not None and processes.pid_alive(pid)) or bool(engines.launching_pids(engine))


def _start_containerd(host: Host, engine: EngineLayout) -> None:
    _write(engine.containerd_config, engines.containerd_config_text(engine))
    engine.containerd_pidfile.unlink(missing_ok=True)  # a stale PID must not look alive
    _launch(host, engine, engines.containerd_argv(host, engine), engine.containerd_log,
            engine.containerd_pidfile)
    deadline = time.monotonic() + WAIT_S
    while not _socket_accepts(engine.containerd_socket):
        if not _still_starting(engine) or time.monotonic() > deadline:
            raise TestbedError(f"local testbed: containerd of {engine.node} did not start "
                               f"({engine.containerd_log}: {log_tail(engine.containerd_log)})")
        time.sleep(0.02)


def start(host: Host, engine: EngineLayout) -> None:
    """Start the node's containerd, then its dockerd (not waiting for the API: see
    :func:`wait_ready`). The engine must be stopped (``engine_stop.stop``)."""
    for directory in (engine.run_dir, engine.exec_root):
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    engine.data_root.mkdir(mode=0o710, parents=True, exist_ok=True)
    _write(engine.daemon_config, "{}\n")
    driver = storage_driver(host, engine)
    engine.pidfile.unlink(missing_ok=True)  # dockerd refuses a pid file naming a live PID
    _start_containerd(host, engine)
    _launch(host, engine, engines.dockerd_argv(host, engine, driver), engine.log_file, None)


def ensure(host: Host, engine: EngineLayout) -> bool:
    """Start (or restart) the engine unless the right one already runs in the node.

    Returns True when it (re)started it; then :func:`wait_ready` must follow.
    """
    if engines.status(host, engine).running and engines.is_current(host, engine):
        return False
    engine_stop.stop(host, engine)
    start(host, engine)
    return True


def wait_ready(engines_started: Sequence[EngineLayout], timeout: float = WAIT_S) -> None:
    """Poll until every engine answers ``_ping`` (bounded); fail at once if one exited."""
    pending = list(engines_started)
    deadline = time.monotonic() + timeout
    while pending:
        pending = [e for e in pending if not engines.ping(e, timeout=0.5)]
        if not pending:
            return
        for engine in pending:
            if not engines.launching_pids(engine):
                raise TestbedError(f"local testbed: dockerd of {engine.node} exited at start "
                                   f"({engine.log_file}: {log_tail(engine.log_file)})")
        if time.monotonic() > deadline:
            engine = pending[0]
            raise TestbedError(
                f"local testbed: dockerd of {engine.node} did not answer on {engine.socket} "
                f"within {timeout:g} s ({engine.log_file}: {log_tail(engine.log_file)})")
        time.sleep(0.05)
