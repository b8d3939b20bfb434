"""Each node's scratch directory (its ``tmpdir``): a tmpfs of its own on the management host,
seen by the node's sshd and everything it starts."""

from __future__ import annotations

import shutil
from pathlib import Path

from interop_runner.errors import TestbedError
from interop_runner.testbed.local.host import Host
from interop_runner.testbed.local.layout import NodeSpec

# The size is a limit, not a reservation: an 8 GiB file on the server plus its 8 GiB
# download on the client fit.
SCRATCH_OPTIONS = "mode=0755,size=75%"
SCRATCH_HUGE = "huge=always"


def tmpfs_at(path: str, mounts: str) -> str | None:
    """The options of the tmpfs mounted at ``path`` in a mount table (None: none is)."""
    for entry in mounts.splitlines():
        fields = entry.split()
        if len(fields) >= 4 and fields[1] == path and fields[2] == "tmpfs":
            return fields[3]
    return None


def scratch_visible(node: NodeSpec, pid: int | None = None) -> bool:
    """Whether the node's scratch tmpfs is mounted here (or in process ``pid``'s mounts)."""
    table = Path(f"/proc/{pid}/mounts" if pid else "/proc/self/mounts")
    try:
        return tmpfs_at(node.tmpdir, table.read_text()) is not None
    except OSError:
        return False


def ensure_scratch(host: Host, node: NodeSpec) -> None:
    """Give the node's tmpdir its own tmpfs with transparent huge pages where the kernel has
    them: hashing and removing an 8 GiB download then costs ~1 s instead of ~3 s (2 M
    fewer pages to fault in and free). ``huge=always``: a download written by appending
    (curl) gets huge pages too, not only one whose size is set first. Mounted before the
    node's sshd starts, so the node's mount namespace holds the same file system; it stays
    until ``down --purge``."""
    options = tmpfs_at(node.tmpdir, Path("/proc/self/mounts").read_text())
    if options is not None:
        if SCRATCH_HUGE not in options.split(","):  # mounted by an earlier version
            host.run(["mount", "-o", f"remount,{SCRATCH_HUGE}", node.tmpdir], check=False)
        return
    Path(node.tmpdir).mkdir(parents=True, exist_ok=True)
    for options in (f"{SCRATCH_OPTIONS},{SCRATCH_HUGE}", SCRATCH_OPTIONS):
        if host.run(["mount", "-t", "tmpfs", "-o", options, f"qir-{node.name}", node.tmpdir],
                    check=False).ok:
            return
    raise TestbedError(f"local testbed: cannot mount a tmpfs on {node.tmpdir}")


def remove_node_dirs(host: Host, node: NodeSpec) -> None:
    """Unmount the node's scratch tmpfs (the cached served file goes with it) and remove its
    scratch and work directories."""
    if scratch_visible(node):
        host.run(["umount", node.tmpdir], check=False)
    for path in (node.workdir, node.tmpdir):
        shutil.rmtree(path, ignore_errors=True)
