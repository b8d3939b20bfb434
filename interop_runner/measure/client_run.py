"""The one wrapper every client runs in, on the client node: it waits until its start time
(a flow's place in the schedule), starts the client, stops it at a duration, and times it.

The start and end timestamps are taken on the client node by bash (``$EPOCHREALTIME``, no
fork), so SSH latency never enters the goodput. The client runs as a child so that pidstat
(same flags as :func:`~interop_runner.monitors.samplers.pidstat_argv`) can follow its PID;
with a duration ``timeout -s INT`` is its parent (what the client received or stored by then
counts and is verified as a prefix), and pidstat follows the client below it. The wrapper
prints one JSON line, then bash's ``times`` (its second line: user and system CPU time of the
waited-for children, i.e. the client and its descendants; pidstat is reaped only afterwards).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

# $0 stdout file, $1 stderr file, $2 pidstat output file ("" = none), $3 the start time in
# epoch µs on this node's clock (0: now), $4 the duration in s (0: until the client ends),
# $5 how long a client stopped at its duration has to end before it is killed (s), the rest
# the command.
WRAPPER = (
    'o=$0; e=$1; ps=$2; at=$3; d=$4; k=$5; shift 5; '
    'if [ "$at" != 0 ]; then now=${EPOCHREALTIME/[.,]/}; w=$((at - now)); '
    '  if [ "$w" -gt 0 ]; then sleep "$((w / 1000000)).$(printf %06d $((w % 1000000)))"; fi; '
    'fi; s=$EPOCHREALTIME; '
    'if [ "$d" != 0 ]; then timeout -s INT -k "$k" "$d" "$@" </dev/null >"$o" 2>"$e" & c=$!; '
    'else "$@" </dev/null >"$o" 2>"$e" & c=$!; fi; p=$c; '
    'if [ -n "$ps" ]; then '
    '  if [ "$d" != 0 ]; then i=0; while [ $i -lt 400 ]; do '
    '    p=$(pgrep -P "$c" | head -n 1); [ -n "$p" ] && break; p=$c; i=$((i + 1)); sleep 0.005; '
    '  done; fi; '
    '  S_TIME_FORMAT=ISO LC_ALL=C TZ=UTC pidstat -h -H -u -r -w -t -p "$p" 1 >"$ps" 2>&1 & m=$!; '
    'fi; '
    'wait "$c"; rc=$?; f=$EPOCHREALTIME; '
    'printf \'{"start_us": "%s", "end_us": "%s", "exit_code": %d, "pid": %d}\\n\' '
    '"$s" "$f" "$rc" "$p"; times; '
    'if [ -n "$ps" ]; then kill -INT "$m" 2>/dev/null; wait "$m"; fi; exit 0'
)
# timeout(1)'s status when it stopped the command at the duration (137: it had to kill it)
STOPPED = (124, 137)
# A client stopped at its duration writes out what it holds (quic-go: its buffer) within
# this; a container's attached command is killed sooner (the container is then stopped at
# once), so one that ignores SIGINT as PID 1 overruns its duration by little.
KILL_AFTER_S = {"process": 5, "container": 2}


def wrapped(stdout: str, stderr: str, command: list[str], *, pidstat: str = "",
            start_us: int = 0, duration_s: float | None = None,
            kill_after_s: float = KILL_AFTER_S["process"]) -> list[str]:
    """The argv that runs ``command`` in :data:`WRAPPER` on the client node."""
    duration = f"{duration_s:g}" if duration_s else "0"
    return ["bash", "-c", WRAPPER, stdout, stderr, pidstat, str(start_us), duration,
            f"{kill_after_s:g}", *command]


@dataclass(frozen=True)
class ClientRun:
    """What the wrapper printed: the client's span on the client node's clock, its exit
    status, its PID, and its CPU time."""

    start_ns: int
    end_ns: int
    exit_code: int
    pid: int
    cpu_user_s: float
    cpu_system_s: float

    @property
    def duration_s(self) -> float:
        """The client's run time."""
        return (self.end_ns - self.start_ns) / 1e9

    def stopped(self, duration_s: float | None) -> bool:
        """Whether the wrapper stopped the client at its duration."""
        return duration_s is not None and self.exit_code in STOPPED


def parse_client_run(stdout: str) -> ClientRun | None:
    """The wrapper's output read (None: it printed no outcome)."""
    out = stdout.strip().splitlines()
    if len(out) < 3:
        return None
    timing = json.loads(out[-3])
    user, _, system = out[-1].partition(" ")
    return ClientRun(epoch_ns(timing["start_us"]), epoch_ns(timing["end_us"]),
                     int(timing["exit_code"]), int(timing["pid"]), times_seconds(user),
                     times_seconds(system))


def epoch_ns(epoch_us: str) -> int:
    """Nanoseconds since the epoch of bash's ``$EPOCHREALTIME`` (``1.5``, or ``1,5`` in a
    locale with a decimal comma; always six digits of microseconds)."""
    return int(epoch_us.replace(".", "").replace(",", "")) * 1000


def times_seconds(times: str) -> float:
    """'1m2.500s' (bash `times`) -> 62.5."""
    minutes, _, rest = times.partition("m")
    return int(minutes) * 60 + float(rest.rstrip("s"))
