"""The only place where commands run: locally or on a node over SSH.

Both executors share one interface (modelled on invoke's Runner/Result/UnexpectedExit):

* ``run(argv, timeout=...)`` runs a command in the foreground and returns a :class:`Result`;
  a timeout kills the command's whole process group on the node and raises
  :class:`CommandTimeout`; a non-zero exit raises :class:`CommandFailed` when ``check`` is set.
* ``start(argv, stdout=..., stderr=...)`` starts a command in its own session (process group)
  on the node and returns a :class:`Background` handle; ``wait``/``poll``/``stop`` act on it by
  its process group id, never by name.
* ``put``/``get``/``put_dir``/``write_text``/``read_text`` move files.

Commands are argv lists. On SSH they are quoted with :func:`shlex.join`, so no config value is
ever interpreted by a shell.

This module holds the interface, the shell snippets both transports run on the node, the
errors and :class:`LocalExecutor`; :mod:`interop_runner.remote.ssh` holds
:class:`~interop_runner.remote.ssh.SSHExecutor`. Host keys are checked against the target's
``known_hosts`` file: an unknown key is refused (:class:`ConnectError`) unless the target
trusts on first use, which appends the key to that file and records it in
``SSHExecutor.trusted_host_keys``; a key that differs from the known one is always refused
(:class:`HostKeyError`). Files fetched with ``get`` are private (0600).
"""

from __future__ import annotations

import os
import select
import shlex
import shutil
import subprocess
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from interop_runner.errors import ExecutorError
from interop_runner.remote.protocol import output_before_ready, split_pgid_marker, wrapped_argv
from interop_runner.storage.layout import PRIVATE_FILE_MODE

# Background launcher: `setsid` in a non-leader child makes pid == pgid == sid; the inner shell
# records the exit code atomically once the command ends.
_BG_LAUNCH = 'rm -f "$1"; setsid sh -c "$0" "$@" </dev/null >/dev/null 2>&1 & echo $!'
_BG_BODY = (
    'rc=$0; out=$1; err=$2; shift 2; "$@" </dev/null >"$out" 2>"$err"; '
    'echo $? >"$rc.tmp" && mv "$rc.tmp" "$rc"'
)
# Is any non-zombie process left in process group $pg? (Zombies count as gone: where PID 1
# reaps orphans late, `kill -0` would still see them.)
_GROUP_ALIVE = (
    'alive() { ps -A -o pgid=,stat= | { while read -r g st; do '
    '[ "$g" = "$pg" ] && [ "${st#Z}" = "$st" ] && exit 0; done; exit 1; }; }; '
)
# Stop process groups: signal $0 (TERM or INT) to every group, wait up to $1 seconds, then
# KILL and wait until none is left. Then print each group's exit file ("-" when it has none).
_STOP = _GROUP_ALIVE + (
    'sig=$0; grace=$1; shift; n=$(( $# / 2 )); i=0; '
    'for a in "$@"; do i=$((i + 1)); [ $i -le $n ] && kill "-$sig" "-$a" 2>/dev/null; done; '
    'end=$(( $(date +%s%N) + grace * 1000000000 )); killed=no; '
    'while :; do '
    '  left=no; i=0; '
    '  for pg in "$@"; do i=$((i + 1)); [ $i -gt $n ] && break; alive && left=yes; done; '
    '  [ $left = no ] && break; '
    '  if [ $killed = no ] && [ "$(date +%s%N)" -gt "$end" ]; then '
    '    i=0; for a in "$@"; do i=$((i + 1)); [ $i -le $n ] && kill -KILL "-$a" 2>/dev/null; '
    '    done; killed=yes; fi; '
    '  sleep 0.005; '
    'done; '
    'i=0; for f in "$@"; do i=$((i + 1)); [ $i -le $n ] && continue; '
    '  rm -f "$f.tmp"; cat "$f" 2>/dev/null || echo -; done'
)
_ALIVE = _GROUP_ALIVE + 'pg=$0; alive'
# Process journal (``Executor.proc_journal``): one line "<pgid> <start time> <tag> <token>" per
# process group the runner starts and has not stopped yet, so a later session can kill what a
# killed runner left behind, and only that: the group leader's start time (field 22 of
# /proc/<pid>/stat) must still match, else the number belongs to another process now.
_STARTTIME = ('st() { s=$(cat "/proc/$1/stat" 2>/dev/null) || return 0; s=${s##*) }; '
              'set -- $s; echo "${20}"; }; ')
_BG_LAUNCH_JOURNAL = _STARTTIME + (
    'j=$1; t=$2; shift 2; rm -f "$1"; mkdir -p "${j%/*}"; '
    'setsid sh -c "$0" "$@" </dev/null >/dev/null 2>&1 & p=$!; '
    'echo "$p $(st $p) $t bg" >>"$j"; echo $p'
)
_TRACK = _STARTTIME + (
    'j=$0; t=$1; k=$2; shift 2; read -r _ _ _ _ pg _ </proc/$$/stat; mkdir -p "${j%/*}"; '
    'echo "$pg $(st "$pg") $t $k" >>"$j"; exec "$@"'
)
_FORGET = ('j=$0; [ -f "$j" ] || exit 0; grep -v "$@" "$j" >"$j.tmp"; '
           'if [ -s "$j.tmp" ]; then mv "$j.tmp" "$j"; else rm -f "$j.tmp" "$j"; fi')
_REAP = _GROUP_ALIVE + _STARTTIME + (
    'j=$0; [ -s "$j" ] || { rm -f "$j"; exit 0; }; '
    'while read -r pg s t k; do '
    '  [ -n "$pg" ] || continue; cur=$(st "$pg"); '
    '  if [ -n "$cur" ] && [ "$cur" != "$s" ]; then continue; fi; '
    '  alive || continue; kill -KILL "-$pg" 2>/dev/null; n=0; '
    '  while alive && [ $n -lt 500 ]; do sleep 0.01; n=$((n + 1)); done; echo "$pg $t"; '
    'done <"$j"; rm -f "$j"'
)
_WAIT = 'while [ ! -e "$0" ]; do sleep 0.01; done; cat "$0"'


@dataclass(frozen=True)
class Result:
    """Outcome of one foreground command."""

    node: str
    argv: tuple[str, ...]
    exit_code: int
    stdout: str
    stderr: str
    duration_s: float

    @property
    def ok(self) -> bool:
        """True when the command exited with status 0."""
        return self.exit_code == 0


class CommandFailed(ExecutorError):
    """A command exited non-zero (raised only with ``check=True``)."""

    def __init__(self, result: Result) -> None:
        self.result = result
        tail = (result.stderr.strip().splitlines() or [""])[-1][:300]
        super().__init__(
            f"{result.node}: {shlex.join(result.argv)} exited {result.exit_code}"
            + (f": {tail}" if tail else "")
        )


class CommandTimeout(ExecutorError):
    """A command ran longer than its timeout; its process group was killed."""

    def __init__(self, node: str, argv: Sequence[str], timeout: float) -> None:
        self.node, self.argv, self.timeout = node, tuple(argv), timeout
        super().__init__(f"{node}: {shlex.join(argv)} timed out after {timeout:g} s")


@dataclass
class Background:
    """A process started with :meth:`Executor.start`, identified by its process group."""

    node: str
    argv: tuple[str, ...]
    pgid: int
    stdout: str
    stderr: str
    exit_file: str
    exit_code: int | None = field(default=None)


class Held(ABC):
    """A command kept running by :meth:`Executor.hold` while its channel is open."""

    @abstractmethod
    def close(self) -> None:
        """Close its stdin (and channel): the command sees end of file and ends."""

    @abstractmethod
    def alive(self) -> bool:
        """True while the command runs and its channel is open."""


class _LocalHeld(Held):
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()

    def alive(self) -> bool:
        return self.proc.poll() is None


def _full_argv(argv: Sequence[str], env: Mapping[str, str] | None, cwd: str | None) -> list[str]:
    if not argv:
        raise ValueError("empty argv")
    prefix: list[str] = []
    if env or cwd:
        prefix = ["env"]
        if cwd:
            prefix += ["-C", cwd]
        for key, value in (env or {}).items():
            if not key or "=" in key:
                raise ValueError(f"invalid environment variable name {key!r}")
            prefix.append(f"{key}={value}")
    return prefix + [str(a) for a in argv]


class Executor(ABC):
    """Runs commands and moves files on one node."""

    name: str
    # the node's process journal (see _TRACK) and the tag its lines carry (the campaign id);
    # None: nothing is journaled
    proc_journal: str | None = None
    proc_tag: str = "-"

    # -- primitives implemented per transport -------------------------------------------------
    @abstractmethod
    def _exec(self, argv: Sequence[str], timeout: float) -> tuple[int, str, str, float]:
        """Run argv under ``protocol.RUN_WRAPPER``; return (exit, stdout, stderr without the
        marker line, seconds)."""

    @abstractmethod
    def put(self, local: Path | str, remote: str) -> None:
        """Copy a local file to the node (mode preserved)."""

    @abstractmethod
    def get(self, remote: str, local: Path | str) -> None:
        """Copy a file from the node to a local path, readable by this user only (0600)."""

    @abstractmethod
    def write_bytes(self, remote: str, data: bytes, mode: int = 0o644) -> None:
        """Write bytes to a file on the node (atomically: temp file + rename)."""

    @abstractmethod
    def read_bytes(self, remote: str) -> bytes:
        """Read a whole (small) file from the node."""

    @abstractmethod
    def close(self) -> None:
        """Release the connection."""

    @abstractmethod
    def hold(self, argv: Sequence[str], ready: str, timeout: float
             ) -> tuple["Held | None", int, str]:
        """Run ``argv`` until it prints the line ``ready``, then keep it running, attached to
        this connection, until the returned handle is closed or the connection ends (its stdin
        then reaches end of file). Returns (handle, 0, output before ``ready``); when the
        command exits first: (None, its exit status, its output)."""

    # -- shared behaviour ---------------------------------------------------------------------
    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        check: bool = True,
    ) -> Result:
        """Run ``argv`` in the foreground with a timeout (seconds)."""
        full = _full_argv(argv, env, cwd)
        code, out, err, dur = self._exec(full, timeout)
        result = Result(self.name, tuple(str(a) for a in argv), code, out, err, dur)
        if check and code != 0:
            raise CommandFailed(result)
        return result

    def run_tracked(self, argv: Sequence[str], *, timeout: float,
                    env: Mapping[str, str] | None = None, cwd: str | None = None,
                    check: bool = True) -> Result:
        """``run``, with the command's process group in the process journal while it runs.

        For long commands (the timed client): if this runner dies meanwhile, a later session
        finds the group in the journal and kills it (:meth:`reap_journal`).
        """
        if not self.proc_journal:
            return self.run(argv, timeout=timeout, env=env, cwd=cwd, check=check)
        token = os.urandom(6).hex()
        try:
            res = self.run(["sh", "-c", _TRACK, self.proc_journal, self.proc_tag, token,
                            *_full_argv(argv, env, cwd)], timeout=timeout, check=False)
        finally:
            self._forget([f" {token}$"])
        result = Result(res.node, tuple(str(a) for a in argv), res.exit_code, res.stdout,
                        res.stderr, res.duration_s)
        if check and not result.ok:
            raise CommandFailed(result)
        return result

    def start(
        self,
        argv: Sequence[str],
        *,
        stdout: str,
        stderr: str,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float = 30.0,
    ) -> Background:
        """Start ``argv`` in a new session on the node; its output goes to the given files."""
        full = _full_argv(argv, env, cwd)
        exit_file = stdout + ".exit"
        journal = [self.proc_journal, self.proc_tag] if self.proc_journal else []
        res = self.run(
            ["sh", "-c", _BG_LAUNCH_JOURNAL if journal else _BG_LAUNCH, _BG_BODY, *journal,
             exit_file, stdout, stderr, *full],
            timeout=timeout,
        )
        try:
            pgid = int(res.stdout.strip())
        except ValueError as exc:
            raise ExecutorError(f"{self.name}: could not start {shlex.join(argv)}") from exc
        return Background(self.name, tuple(str(a) for a in argv), pgid, stdout, stderr, exit_file)

    def poll(self, proc: Background) -> int | None:
        """Return the exit code of a background process, or None while it runs."""
        if proc.exit_code is None:
            res = self.run(["cat", proc.exit_file], timeout=10, check=False)
            if res.ok and res.stdout.strip():
                proc.exit_code = int(res.stdout.strip())
        return proc.exit_code

    def wait(self, proc: Background, timeout: float) -> int:
        """Block until the background process exits; raise CommandTimeout after ``timeout``."""
        if proc.exit_code is None:
            res = self.run(["sh", "-c", _WAIT, proc.exit_file], timeout=timeout)
            proc.exit_code = int(res.stdout.strip())
        return proc.exit_code

    def alive(self, proc: Background) -> bool:
        """True while any process of the background process group exists."""
        return self.run(["sh", "-c", _ALIVE, str(proc.pgid)], timeout=10, check=False).ok

    def stop(self, proc: Background, grace: float = 5.0, sig: str = "TERM") -> int | None:
        """Stop the whole process group (``sig``, then KILL after ``grace`` s); return exit code."""
        return self.stop_many([proc], grace, sig)[0]

    def stop_many(self, procs: Sequence[Background], grace: float = 5.0,
                  sig: str = "TERM") -> list[int | None]:
        """Stop several background process groups in one round trip; return their exit codes."""
        if not procs:
            return []
        if sig not in ("TERM", "INT", "KILL"):
            raise ValueError(f"unsupported signal {sig}")
        res = self.run(["sh", "-c", _STOP, sig, str(int(max(grace, 0))),
                        *[str(p.pgid) for p in procs], *[p.exit_file for p in procs]],
                       timeout=grace + 15)
        codes = res.stdout.split()
        for proc, code in zip(procs, codes):
            if proc.exit_code is None and code.lstrip("-").isdigit():
                proc.exit_code = int(code)
        self._forget([f"^{p.pgid} " for p in procs])
        return [p.exit_code for p in procs]

    def _forget(self, patterns: Sequence[str]) -> None:
        """Drop the process journal lines matching any of ``patterns`` (best effort)."""
        if not self.proc_journal or not patterns:
            return
        args = [a for pat in patterns for a in ("-e", pat)]
        try:
            self._exec(["sh", "-c", _FORGET, self.proc_journal, *args], 30)
        except ExecutorError:
            pass

    def reap_journal(self, timeout: float = 60.0) -> list[tuple[int, str]]:
        """Kill the process groups an earlier session journaled and never stopped.

        Only groups still provably the same (leader's start time unchanged, or the leader gone
        while members live on, which keeps the number from being reused) are killed; the
        journal is removed. Returns (pgid, tag) of each group killed.
        """
        if not self.proc_journal:
            return []
        res = self.run(["sh", "-c", _REAP, self.proc_journal], timeout=timeout)
        out = []
        for line in res.stdout.splitlines():
            pg, _, tag = line.partition(" ")
            if pg.isdigit():
                out.append((int(pg), tag.strip()))
        return out

    def kill_group(self, pgid: int, grace: float = 2.0) -> None:
        """Stop a process group by id (used after timeouts and interrupts)."""
        try:
            self._exec(["sh", "-c", _STOP, "TERM", str(int(grace)), str(pgid), "/nonexistent"],
                       grace + 15)
        except ExecutorError:
            pass

    def missing_tools(self, tools: Sequence[str], timeout: float = 30.0) -> list[str]:
        """The commands of ``tools`` that are not on the node's PATH (one round trip)."""
        if not tools:
            return []
        res = self.run(["sh", "-c", 'for t in "$@"; do command -v "$t" >/dev/null || '
                        'echo "$t"; done', "check", *tools], timeout=timeout)
        return res.stdout.split()

    def make_private_dir(self, path: str, timeout: float = 30.0) -> None:
        """Create ``path`` (with parents) if missing and make it 0700."""
        self.run(["sh", "-c", 'mkdir -p -- "$0" && chmod 700 -- "$0"', path], timeout=timeout)

    def write_text(self, remote: str, text: str, mode: int = 0o644) -> None:
        """Write text (UTF-8) to a file on the node."""
        self.write_bytes(remote, text.encode(), mode)

    def read_text(self, remote: str) -> str:
        """Read a small text file from the node."""
        return self.read_bytes(remote).decode(errors="replace")

    def put_dir(self, local: Path | str, remote: str) -> None:
        """Copy a local directory tree to the node (files replaced, modes preserved)."""
        local = Path(local)
        dirs = [remote] + [f"{remote}/{p.relative_to(local).as_posix()}"
                           for p in sorted(local.rglob("*")) if p.is_dir()]
        self.run(["mkdir", "-p", *dirs], timeout=30)
        for path in sorted(local.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                self.put(path, f"{remote}/{path.relative_to(local).as_posix()}")

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PrivateFilesExecutor(Executor):
    """Another executor whose commands run with ``umask 077``: what they create is 0600/0700.

    For the knob journals (they hold the commands that undo host changes). It only wraps: the
    connection stays the other executor's, and ``close`` leaves it open.
    """

    _UMASK = 'umask 077 && exec "$@"'

    def __init__(self, inner: Executor) -> None:
        self.inner = inner
        self.name = inner.name

    def _exec(self, argv: Sequence[str], timeout: float) -> tuple[int, str, str, float]:
        return self.inner._exec(["sh", "-c", self._UMASK, "sh", *argv], timeout)

    def put(self, local: Path | str, remote: str) -> None:
        self.inner.put(local, remote)

    def get(self, remote: str, local: Path | str) -> None:
        self.inner.get(remote, local)

    def write_bytes(self, remote: str, data: bytes, mode: int = 0o600) -> None:
        self.inner.write_bytes(remote, data, mode)

    def read_bytes(self, remote: str) -> bytes:
        return self.inner.read_bytes(remote)

    def hold(self, argv: Sequence[str], ready: str, timeout: float
             ) -> tuple[Held | None, int, str]:
        return self.inner.hold(["sh", "-c", self._UMASK, "sh", *argv], ready, timeout)

    def close(self) -> None:
        pass


class LocalExecutor(Executor):
    """Runs commands on this machine (unit tests, the management node's own facts)."""

    def __init__(self, name: str = "local") -> None:
        self.name = name

    def _exec(self, argv: Sequence[str], timeout: float) -> tuple[int, str, str, float]:
        t0 = time.monotonic()
        proc = subprocess.Popen(
            wrapped_argv(argv),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._killpg(proc)
            raise CommandTimeout(self.name, argv, timeout) from None
        except BaseException:
            self._killpg(proc)
            raise
        _, err_s = split_pgid_marker(err.decode(errors="replace"))
        return proc.returncode, out.decode(errors="replace"), err_s, time.monotonic() - t0

    @staticmethod
    def _killpg(proc: subprocess.Popen[bytes]) -> None:
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass
        proc.communicate()

    def put(self, local: Path | str, remote: str) -> None:
        shutil.copy2(local, remote)

    def get(self, remote: str, local: Path | str) -> None:
        shutil.copyfile(remote, local)
        os.chmod(local, PRIVATE_FILE_MODE)

    def write_bytes(self, remote: str, data: bytes, mode: int = 0o644) -> None:
        tmp = f"{remote}.tmp{os.getpid()}"
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, remote)

    def read_bytes(self, remote: str) -> bytes:
        return Path(remote).read_bytes()

    def hold(self, argv: Sequence[str], ready: str, timeout: float
             ) -> tuple[Held | None, int, str]:
        proc = subprocess.Popen([str(a) for a in argv], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        assert proc.stdout is not None
        buf, deadline = b"", time.monotonic() + timeout
        while True:
            if (before := output_before_ready(buf, ready)) is not None:
                return _LocalHeld(proc), 0, before
            left = deadline - time.monotonic()
            if left <= 0:
                _LocalHeld(proc).close()
                raise CommandTimeout(self.name, argv, timeout)
            if select.select([proc.stdout], [], [], min(left, 0.1))[0]:
                chunk = os.read(proc.stdout.fileno(), 4096)
                if not chunk:
                    if proc.stdin is not None:
                        proc.stdin.close()
                    return None, proc.wait(), buf.decode(errors="replace")
                buf += chunk

    def close(self) -> None:
        pass
