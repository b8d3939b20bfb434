"""Stopping a node's Docker Engine: its containers, dockerd, containerd and the shims, the
mounts they leave and their exec-root; the image cache stays unless purged.

Everything is found by pid file and command line (and cgroup for container processes), so
other engines on this machine are never touched.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from interop_runner.errors import TestbedError
from interop_runner.testbed.local import engines, processes
from interop_runner.testbed.local.engines import ENGINE_CMD_TIMEOUT_S
from interop_runner.testbed.local.host import Host
from interop_runner.testbed.local.layout import EngineLayout

DOCKERD_GRACE_S = 15.0  # TERM -> KILL for dockerd (it stops its containers first)
STOP_GRACE_S = 2.0  # TERM -> KILL for containerd, shims and container processes
KILL_WAIT_S = 5.0  # how long their processes may take to go after SIGKILL
RM_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class _Mount:
    mount_id: int
    parent_id: int
    device: str  # major:minor
    point: str


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _mounts() -> list[_Mount]:
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        f = line.split()
        out.append(_Mount(int(f[0]), int(f[1]), f[2], _unescape(f[4])))
    return out


def leftover_mounts(roots: Sequence[Path]) -> list[str]:
    """Mount points below the roots, deepest first; a root itself only when it is the bind
    mount of itself dockerd makes on its data root (same device as the mount under it)."""
    mounts = _mounts()
    by_id = {m.mount_id: m for m in mounts}
    found = []
    for m in mounts:
        for root in map(str, roots):
            if m.point.startswith(root + "/"):
                found.append(m.point)
            elif m.point == root and m.parent_id in by_id \
                    and by_id[m.parent_id].device == m.device:
                found.append(m.point)
    return sorted(found, key=lambda p: p.count("/"), reverse=True)


def _unmount_all(host: Host, roots: Sequence[Path]) -> None:
    """Unmount what the engine left below its roots (overlays, shm, its netns bind mount)."""
    umount = host.engine_tool("umount")
    for point in leftover_mounts(roots):
        if not host.run([umount, point], check=False, timeout=ENGINE_CMD_TIMEOUT_S).ok:
            host.run([umount, "-l", point], check=False, timeout=ENGINE_CMD_TIMEOUT_S)
    left = leftover_mounts(roots)
    if left:
        raise TestbedError(f"local testbed: cannot unmount {', '.join(left)}")


def _remove_containers(host: Host, engine: EngineLayout) -> None:
    """``docker rm -f`` of every container of a live engine (best effort: kills follow)."""
    docker = host.find_engine_tool("docker")
    if docker is None or not engines.ping(engine):
        return
    res = host.run([docker, "-H", engine.host, "ps", "-aq", "--no-trunc"], check=False,
                   timeout=ENGINE_CMD_TIMEOUT_S)
    ids = res.stdout.split() if res.ok else []
    if ids:
        host.run([docker, "-H", engine.host, "rm", "-f", *ids], check=False,
                 timeout=RM_TIMEOUT_S)


def _remove_cgroups(engine: EngineLayout) -> None:
    for cgroup in reversed(engines.cgroup_dirs(engine)):
        try:
            cgroup.rmdir()
        except OSError:
            pass


def _rmdir_empty(*paths: Path) -> None:
    for path in paths:
        try:
            path.rmdir()
        except OSError:
            pass


def _terminate(pids: Sequence[int], grace: float) -> None:
    """SIGTERM, then SIGKILL for those still alive after ``grace``; wait until all are gone."""
    left = processes.terminate(pids, grace, KILL_WAIT_S)
    if left:
        raise TestbedError(f"local testbed: processes {sorted(left)} survived SIGKILL")


def _data_roots(engine: EngineLayout) -> set[Path]:
    """The engine's exec-root and data root, and the data root each running dockerd has
    (should the layout's have changed since it started)."""
    roots = {engine.exec_root, engine.data_root}
    for pid in [engines.dockerd_pid(engine), *engines.dockerd_pids(engine)]:
        data_root = processes.flag_value(processes.argv_of(pid), "--data-root") if pid else None
        if data_root:
            roots.add(Path(data_root))
    return roots


def stop(host: Host, engine: EngineLayout, purge: bool = False) -> None:
    """Remove every container, stop dockerd, containerd and the shims, unmount what they
    left and remove the exec-root; ``purge`` also removes the data root (the image cache).
    Idempotent."""
    _remove_containers(host, engine)
    roots = _data_roots(engine)
    _terminate(engines.dockerd_pids(engine), DOCKERD_GRACE_S)
    _terminate(engines.launching_pids(engine) + engines.shim_pids(engine)
               + engines.cgroup_pids(engine), STOP_GRACE_S)
    _unmount_all(host, sorted(roots))
    _remove_cgroups(engine)
    shutil.rmtree(engine.run_dir, ignore_errors=True)
    engine.socket.unlink(missing_ok=True)
    _rmdir_empty(engine.run_root, engine.run_root.parent)
    if purge:
        shutil.rmtree(engine.data_root, ignore_errors=True)
        _rmdir_empty(engine.data_roots, engine.data_roots.parent)
