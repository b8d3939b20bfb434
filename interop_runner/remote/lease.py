"""The node lease: one runner at a time per node directory.

A campaign (and ``run.py testbed restore``) holds ``<workdir>/lease`` on each node with
``flock`` for as long as its SSH connection lives: the lock is kept by a ``cat`` reading the
channel, so it ends by itself when the runner closes the connection, exits or is killed
(``cat`` then reads end of file). No timer and no stale-lock guessing is involved.

Without it a second campaign on the same node directory would take the first one's
processes for leftovers of a killed runner and kill them, and replay its knob journal while
it measures. ``<workdir>/lease.owner`` says who holds the lease (campaign, runner PID, host,
since when) for the error message of whoever has to wait.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from interop_runner.errors import ExecutorError, NodeBusy
from interop_runner.remote.executor import Executor, Held
from interop_runner.storage.layout import utc_now

READY = "QIR-LEASED"
BUSY_EXIT = 75  # EX_TEMPFAIL
# $0 lock file, $1 owner file, $2 who we are, $3 seconds to wait for the lock
_TAKE = (
    'umask 077; lock=$0; owner=$1; me=$2; wait=$3; mkdir -p -- "${lock%/*}" || exit 1; '
    'exec 9>>"$lock" || exit 1; '
    'if flock -w "$wait" 9; then '
    '  printf "%s\\n" "$me" >"$owner.tmp" && mv -f -- "$owner.tmp" "$owner"; '
    '  echo ' + READY + '; exec cat >/dev/null; '  # fd 9 (the lock) lives as long as cat
    'fi; '
    'cat -- "$owner" 2>/dev/null; exit ' + str(BUSY_EXIT)
)
# $0 lock file, $1 owner file, $2 seconds: prints the owner when the lease is held, nothing
# when free (waiting a little lets a runner that was just killed drop it)
_PEEK = (
    'lock=$0; owner=$1; [ -e "$lock" ] || exit 0; exec 9>>"$lock" || exit 0; '
    'flock -w "$2" 9 && exit 0; cat -- "$owner" 2>/dev/null || echo "unknown runner"'
)


def owner_line(campaign_id: str) -> str:
    """Who takes a lease: campaign, runner PID, management host and time (for messages)."""
    return (f"campaign {campaign_id} (runner pid {os.getpid()} on {socket.gethostname()}, "
            f"since {utc_now()})")


def lease_paths(workdir: str) -> tuple[str, str]:
    """The lock file and the owner file of a node directory."""
    return f"{workdir}/lease", f"{workdir}/lease.owner"


def holder(executor: Executor, workdir: str, timeout: float = 30.0,
           wait: float = 3.0) -> str | None:
    """Who holds the lease of ``workdir`` on the node (after waiting up to ``wait`` seconds
    for it to end), or None when it is free."""
    lock, owner = lease_paths(workdir)
    res = executor.run(["sh", "-c", _PEEK, lock, owner, str(int(wait))],
                       timeout=timeout + wait, check=False)
    return res.stdout.strip() or None


@dataclass
class Lease:
    """A held node lease; :meth:`release` (or the end of the connection) gives it up."""

    executor: Executor
    workdir: str
    me: str
    _held: Held | None = None

    def take(self, wait: float = 10.0) -> None:
        """Take the lease, waiting up to ``wait`` seconds for an ending holder (a runner that
        just exited); NodeBusy naming the holder when another runner keeps it."""
        lock, owner = lease_paths(self.workdir)
        held, code, out = self.executor.hold(
            ["sh", "-c", _TAKE, lock, owner, self.me, str(int(wait))], READY, wait + 30)
        if held is not None:
            self._held = held
            return
        if code == BUSY_EXIT:
            who = out.strip() or "another runner"
            if who == self.me:  # our own session from before a reconnect still holds it
                return
            raise NodeBusy(f"{self.executor.name}: {self.workdir} is in use by {who}; "
                           "wait for it to finish or stop it first")
        raise ExecutorError(f"{self.executor.name}: cannot take the lease {lock} (exit "
                            f"{code}{': ' + out.strip()[-200:] if out.strip() else ''}); "
                            "is flock (util-linux) installed?")

    def retake(self) -> None:
        """After a reconnect: the old channel (and lock) may be gone; take it again."""
        if self._held is not None and self._held.alive():
            return
        self.take(wait=0)

    @property
    def held(self) -> bool:
        """True while this lease's channel is open."""
        return self._held is not None and self._held.alive()

    def release(self) -> None:
        """Give the lease up (the remote ``cat`` ends, and with it the lock)."""
        if self._held is not None:
            self._held.close()
            self._held = None
