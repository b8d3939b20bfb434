"""Host knobs on a node: settings changed for one run and always restored afterwards.

Before a knob changes anything, the command that undoes it is appended to a journal on the
node (``<workdir>/restore.sh``, one shell command per line). Restoring runs the journal
backwards and deletes it. So a runner that is killed, or loses its connection, leaves a journal
behind that ``run.py testbed restore`` or the next campaign's start replays; a person can also
run it by hand (``tac restore.sh | sh``).

Knobs: socket buffer sysctls, segmentation offloads (ethtool), MTU, a rate limit (tbf), random
loss (iptables statistic), delay/reordering (netem, where the kernel has it). Core pinning is
no state change: it prefixes the implementation's command with ``taskset``.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from interop_runner.config.knobs import (
    OFFLOAD_FEATURES,
    OFFLOAD_PRESETS,
    Knobs,
    format_cpulist,
    parse_cpulist,
)
from interop_runner.errors import ExecutorError, KnobError
from interop_runner.parsers.ethtool import parse_ethtool_features
from interop_runner.remote.executor import Executor

__all__ = ["Journal", "KnobError", "KnobState", "NodeKnobs"]


@dataclass
class Journal:
    """The restore journal of one executor (a node, or the management host)."""

    executor: Executor
    path: str
    timeout: float = 60.0

    def add(self, undo: list[str]) -> None:
        """Append the command that undoes the next change (before making the change)."""
        self.executor.run(["sh", "-c", 'mkdir -p "$(dirname "$0")" && printf "%s\\n" "$1" >>"$0"',
                           self.path, shlex.join(undo)], timeout=self.timeout)

    def replay(self) -> list[str]:
        """Undo everything journaled, newest first; return the lines that failed."""
        res = self.executor.run(
            ["sh", "-c", '[ -f "$0" ] || exit 0; tac "$0" | while IFS= read -r l; do '
             'sh -c "$l" >/dev/null 2>&1 || echo "$l"; done; rm -f "$0"', self.path],
            timeout=self.timeout, check=False)
        return [ln for ln in res.stdout.splitlines() if ln.strip()]

    def pending(self) -> bool:
        """True when a journal is left over (a run did not finish its restore)."""
        return self.executor.run(["test", "-s", self.path], timeout=self.timeout,
                                 check=False).ok


@dataclass
class KnobState:
    """What a knob found, set and left behind on one node for one run."""

    before: dict[str, Any] = field(default_factory=dict)
    applied: dict[str, Any] = field(default_factory=dict)
    after: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class NodeKnobs:
    """Applies one node's knobs around a run and restores them.

    ``sysctl`` is the executor for the global ``net.core`` sysctls: the node's own, or the
    management host's for the local testbed, whose namespaces share the host's values.
    """

    def __init__(self, node: str, executor: Executor, iface: str, journal: Journal,
                 sysctl: Journal | None = None, timeout: float = 60.0,
                 shared_sysctls: bool = False) -> None:
        self.node, self.ex, self.iface, self.journal = node, executor, iface, journal
        self.sysctl = sysctl or journal
        self.timeout = timeout
        # the other node of a local testbed sets the (shared, host-wide) net.core sysctls
        self.skip = {"rmem", "wmem"} if shared_sysctls else set()

    def _run(self, argv: list[str], ex: Executor | None = None) -> str:
        try:
            return (ex or self.ex).run(argv, timeout=self.timeout).stdout
        except ExecutorError as exc:
            raise KnobError(f"{self.node}: {exc}") from None

    # -- reading -------------------------------------------------------------------------------
    def read(self, names: list[str]) -> dict[str, Any]:
        """The current state of the given knobs."""
        out: dict[str, Any] = {}
        for name in names:
            if name in ("rmem", "wmem"):
                keys = [f"net.core.{name}_default", f"net.core.{name}_max"]
                values = self._run(["sysctl", "-n", *keys], self.sysctl.executor).split()
                out[name] = dict(zip(keys, map(int, values)))
            elif name == "offload":
                feats = parse_ethtool_features(self._run(["ethtool", "-k", self.iface]))
                out[name] = {k: feats[v][0] for k, v in OFFLOAD_FEATURES.items() if v in feats}
            elif name == "mtu":
                out[name] = int(self._run(["cat", f"/sys/class/net/{self.iface}/mtu"]))
            elif name in ("rate", "delay", "reorder"):
                out[name] = self._run(["tc", "qdisc", "show", "dev", self.iface,
                                       "root"]).strip()
            elif name == "loss":
                out[name] = self._run(["sh", "-c", "iptables -S INPUT | grep -c statistic || "
                                       "true"]).strip()
        return out

    # -- applying ------------------------------------------------------------------------------
    def apply(self, knobs: Knobs) -> KnobState:
        """Apply every set knob (journaling its undo first); return the before/applied state."""
        active = {k: v for k, v in knobs.active().items() if k not in self.skip | {"pin"}}
        state = KnobState(before=self.read(list(active)))
        for name in sorted(self.skip & set(knobs.active())):
            state.notes.append(f"{name}: host-wide on this testbed, set and recorded by the "
                               "server node")
        for name in ("rmem", "wmem"):
            if name in active:
                value = active[name]
                keys = [f"net.core.{name}_max", f"net.core.{name}_default"]
                old = state.before[name]
                self.sysctl.add(["sysctl", "-q", "-w"] + [f"{k}={old[k]}" for k in keys])
                self._run(["sysctl", "-q", "-w"] + [f"{k}={value}" for k in keys],
                          self.sysctl.executor)
                state.applied[name] = value
        if "offload" in active:
            self._offload(OFFLOAD_PRESETS[active["offload"]], state)
        if "mtu" in active:
            self.journal.add(["ip", "link", "set", "dev", self.iface, "mtu",
                              str(state.before["mtu"])])
            self._run(["ip", "link", "set", "dev", self.iface, "mtu", str(active["mtu"])])
            state.applied["mtu"] = active["mtu"]
        qdisc = self._qdisc(active)
        if qdisc:
            self.journal.add(["tc", "qdisc", "del", "dev", self.iface, "root"])
            try:
                self.ex.run(["tc", "qdisc", "replace", "dev", self.iface, "root", *qdisc],
                            timeout=self.timeout)
            except ExecutorError as exc:
                if qdisc[0] == "netem":
                    raise KnobError(f"{self.node}: netem is not available in this kernel, so "
                                    f"delay/reorder cannot be set ({_last_line(exc)})") from None
                raise KnobError(f"{self.node}: tc: {_last_line(exc)}") from None
            state.applied["qdisc"] = " ".join(qdisc)
        if "loss" in active:
            rule = ["INPUT", "-i", self.iface, "-p", "udp", "-m", "statistic", "--mode",
                    "random", "--probability", f"{active['loss']:.6f}", "-j", "DROP"]
            self.journal.add(["iptables", "-D", *rule])
            self._run(["iptables", "-I", *rule])
            state.applied["loss"] = active["loss"]
        return state

    def _offload(self, want: dict[str, bool], state: KnobState) -> None:
        feats = parse_ethtool_features(self._run(["ethtool", "-k", self.iface]))
        change, undo = [], []
        for short, value in want.items():
            long = OFFLOAD_FEATURES[short]
            if long not in feats:
                state.notes.append(f"offload {short}: not offered by {self.iface}")
                continue
            on, fixed = feats[long]
            if fixed:
                if on != value:
                    state.notes.append(f"offload {short}: fixed {'on' if on else 'off'}")
                continue
            if on != value:
                change += [short, "on" if value else "off"]
                undo += [short, "on" if on else "off"]
        if change:
            self.journal.add(["ethtool", "-K", self.iface, *undo])
            self._run(["ethtool", "-K", self.iface, *change])
        state.applied["offload"] = {k: v for k, v in zip(change[::2],
                                                         (c == "on" for c in change[1::2]))}

    @staticmethod
    def _qdisc(active: dict[str, Any]) -> list[str]:
        if "delay" in active or "reorder" in active:
            args = ["netem", "delay", active.get("delay", "0ms")]
            if "reorder" in active:
                args += ["reorder", f"{active['reorder'] * 100:g}%"]
            if "rate" in active:
                args += ["rate", active["rate"]]
            return args
        if "rate" in active:
            # burst: at least 10 ms worth of the rate, and a 64 KiB GSO batch
            return ["tbf", "rate", active["rate"], "burst", "1mb", "latency", "50ms"]
        return []

    def restore(self, state: KnobState | None, names: list[str]) -> list[str]:
        """Replay the journals; record the state afterwards; return lines that failed."""
        failed = self.journal.replay()
        if self.sysctl is not self.journal:
            failed += self.sysctl.replay()
        names = [n for n in names if n not in self.skip]
        if state is not None and names:
            try:
                state.after = self.read(names)
            except KnobError as exc:
                state.notes.append(f"state after restore unreadable: {exc}")
        return failed

    def check_netem(self) -> None:
        """Fail clearly when the node's kernel has no netem (delay/reorder need it)."""
        try:
            # on lo of a private, throw-away network namespace: nothing real is touched
            self.ex.run(["unshare", "-n", "tc", "qdisc", "add", "dev", "lo", "root", "netem",
                         "delay", "1ms"], timeout=self.timeout)
        except ExecutorError as exc:
            raise KnobError(f"{self.node}: delay/reorder need netem, which this kernel does "
                            f"not have ({_last_line(exc)}); use rate (tbf) and loss "
                            "(iptables) only") from None

    # -- pinning -------------------------------------------------------------------------------
    def cpus(self, pin: str) -> str:
        """The CPU list for a ``pin`` value (presets use the NIC's NUMA node)."""
        if pin not in ("nic-local", "nic-remote"):
            return pin
        out = self._run(["sh", "-c", 'cat "/sys/class/net/$0/device/numa_node" 2>/dev/null || '
                         'echo -1; for n in /sys/devices/system/node/node[0-9]*; do '
                         'echo "${n##*node} $(cat "$n/cpulist")"; done', self.iface])
        lines = out.strip().splitlines()
        nic_node = int(lines[0])
        nodes = {int(a): parse_cpulist(b) for a, b in (ln.split() for ln in lines[1:])}
        if nic_node < 0 or nic_node not in nodes:
            if pin == "nic-remote":
                raise KnobError(f"{self.node}: {self.iface} has no NUMA node, so 'nic-remote' "
                                "has no meaning here")
            return format_cpulist([c for cpus in nodes.values() for c in cpus])
        if pin == "nic-local":
            return format_cpulist(nodes[nic_node])
        remote = [c for n, cpus in nodes.items() if n != nic_node for c in cpus]
        if not remote:
            raise KnobError(f"{self.node}: only one NUMA node, 'nic-remote' is impossible")
        return format_cpulist(remote)


def _last_line(exc: ExecutorError) -> str:
    text = str(exc).strip().splitlines()
    return text[-1] if text else "failed"
