"""Preflight of the knobs against the nodes: settings a node cannot have are refused before
anything runs, as one line per problem naming the node and the key.

:func:`probe_nodes` connects to every node for its host facts before a campaign directory
exists; the rest are pure functions over the campaign config and a node's host-facts summary
(:func:`interop_runner.parsers.hostfacts.summarize_facts`). Checked today: the CPUs of a
``pin`` (every variant of the sweep) against the node's online CPUs. ``nic-local`` and
``nic-remote`` are resolved on the node later and are not checked here. The MTU is not
checked: the facts hold the interface's current MTU, not the NIC's limits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping

from interop_runner.config.campaign import CampaignConfig, variant_configs
from interop_runner.config.knobs import cpu_ranges, format_cpu_ranges, format_cpulist, parse_cpulist
from interop_runner.config.path import PathConfig
from interop_runner.config.sweep import Variant
from interop_runner.config.testbed import NodeConfig, TestbedConfig
from interop_runner.errors import ConnectError, NodeBusy, PreflightError, TestbedUnreachable

if TYPE_CHECKING:
    from interop_runner.testbed.knobs import NodeKnobs

NIC_PINS = ("nic-local", "nic-remote")


def online_cpus(facts: dict[str, Any]) -> list[int] | None:
    """The node's online CPUs from its facts (``online_cpus``, else ``cores`` as 0..n-1);
    ``None`` when the facts tell neither."""
    text = facts.get("online_cpus")
    if isinstance(text, str) and text.strip():
        try:
            return parse_cpulist(text)
        except ValueError:
            pass
    cores = facts.get("cores")
    if isinstance(cores, int) and not isinstance(cores, bool) and cores > 0:
        return list(range(cores))
    return None


def pin_problem(cpulist: str, online: list[int]) -> str | None:
    """Why ``cpulist`` (a taskset CPU list) cannot be used on a node with ``online`` CPUs;
    ``None`` when every CPU in it is online."""
    available = sorted(set(online))
    missing: list[tuple[int, int]] = []
    for lo, hi in cpu_ranges(cpulist):
        if hi < lo:
            return f"CPU range {lo}-{hi} is empty (write it as {hi}-{lo})"
        cur = lo
        for cpu in (c for c in available if lo <= c <= hi):
            if cpu > cur:
                missing.append((cur, cpu - 1))
            cur = cpu + 1
        if cur <= hi:
            missing.append((cur, hi))
    if not missing:
        return None
    count = sum(hi - lo + 1 for lo, hi in missing)
    which = f"CPU {format_cpu_ranges(missing)} does" if count == 1 else \
        f"CPUs {format_cpu_ranges(missing)} do"
    return f"{which} not exist on this node (online CPUs {format_cpulist(available)})"


def _pin_source(vcfg: CampaignConfig, role: str) -> tuple[str, str | None]:
    """The key that sets ``role``'s pin in a (variant) config, and its value."""
    side = f"{role}_knobs"
    own = getattr(vcfg, side).pin
    if own is not None:
        return f"{side}.pin", own
    return "knobs.pin", vcfg.knobs.pin


def _where(cfg: CampaignConfig, variant: Variant, key: str) -> str:
    """``key``, or the sweep axis value that set it in this variant (the way config errors
    name an axis value: ``sweep.axes[0].values[2] (knobs.pin='5')``)."""
    for i, (axis, (_, value)) in enumerate(zip(cfg.sweep.axes, variant.values)):
        if axis.path == key or key.startswith(axis.path + "."):
            j = axis.values.index(value)
            return f"sweep.axes[{i}].values[{j}] ({axis.path}={value!r})"
    return key


def knob_problems(cfg: CampaignConfig, node_name: str, role: str,
                  facts: dict[str, Any]) -> list[str]:
    """Knob settings of ``role`` (in any variant of the sweep) that the node ``node_name``
    cannot have according to its host ``facts``; one line each, naming node and key, e.g.
    ``server: knobs.pin: CPU 5 does not exist on this node (online CPUs 0-1)``."""
    online = online_cpus(facts)
    problems: list[str] = []
    if online is None:  # the facts do not tell: nothing to check against
        return problems
    for variant, vcfg in variant_configs(cfg):
        key, pin = _pin_source(vcfg, role)
        if pin is None or pin in NIC_PINS:
            continue
        problem = pin_problem(pin, online)
        if problem is not None:
            line = f"{node_name}: {_where(cfg, variant, key)}: {problem}"
            if line not in problems:
                problems.append(line)
    return problems


def check_knobs_on_nodes(cfg: CampaignConfig,
                         nodes: Iterable[tuple[str, str, dict[str, Any]]]) -> None:
    """Raise :class:`PreflightError` with every problem of every ``(name, role, facts)`` node,
    joined into one line with ``; ``."""
    problems = [line for name, role, facts in nodes
                for line in knob_problems(cfg, name, role, facts)]
    if problems:
        raise PreflightError("; ".join(problems))


def check_knobs_on_testbed(cfg: CampaignConfig, local: bool,
                           knobs: Mapping[str, NodeKnobs]) -> None:
    """Refuse knob settings the testbed cannot have, before any run: on the ``local``
    (namespace) testbed socket buffers that differ between the sides, and delay or reorder
    where a node (``knobs``: its handler per role) has no netem."""
    configs = [vcfg for _, vcfg in variant_configs(cfg)]
    if local:
        for vcfg in configs:
            s, c = vcfg.side_knobs("server"), vcfg.side_knobs("client")
            for name in ("rmem", "wmem"):
                if getattr(s, name) != getattr(c, name) and None not in \
                        (getattr(s, name), getattr(c, name)):
                    raise PreflightError(
                        f"{name}: the local testbed's namespaces share the host's "
                        f"net.core sysctls, so server and client cannot differ "
                        f"({getattr(s, name)} vs {getattr(c, name)})")
    for role, nk in knobs.items():
        if any(vcfg.side_knobs(role).delay or vcfg.side_knobs(role).reorder
               for vcfg in configs):
            nk.check_netem()


def probe_nodes(testbeds: list[TestbedConfig], cfg: CampaignConfig, timeout: float
                ) -> dict[str, list[dict[str, str]]]:
    """Connect to every node a campaign measures on (server and client, and the router of a
    campaign with an emulated path) before a campaign directory exists, so an unreachable
    host, a wrong host key, a node another runner is using (its lease) or a knob the node
    cannot have (CPUs it lacks, from its host facts) is a one-line error that leaves nothing
    behind. Returns the host keys accepted on first use, per testbed, for campaign.json."""
    trusted: dict[str, list[dict[str, str]]] = {}
    facts: list[tuple[str, str, dict[str, Any]]] = []
    paths = [v.path for _, v in variant_configs(cfg) if v.path is not None]
    for testbed in testbeds:
        router = testbed.router() if paths else None
        host = router[0] if router else testbed.node("server")[0]
        for name, node_cfg in [*testbed.endpoint_nodes(), *([router] if router else [])]:
            keys, node_facts = _probe_node(testbed, name, node_cfg, timeout,
                                           paths if name == host else None)
            trusted.setdefault(testbed.name, []).extend(keys)
            if node_cfg.role != "router":
                facts.append((name, node_cfg.role, node_facts))
    check_knobs_on_nodes(cfg, facts)
    return trusted


def _probe_node(testbed: TestbedConfig, name: str, node_cfg: NodeConfig, timeout: float,
                paths: list[PathConfig] | None = None
                ) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """(host keys trusted on first use, host facts) of one node; NodeBusy when another
    runner holds its lease; with ``paths`` (the node builds them): PathError when it lacks
    a backend one of them asks for."""
    from interop_runner.testbed.node import Node
    from interop_runner.testbed.path.node import probe_backend

    try:
        node = Node.connect(name, node_cfg, "probe", timeout)
    except ConnectError as exc:
        raise TestbedUnreachable(f"testbed {testbed.name}: {exc}") from None
    try:
        busy = node.lease_holder()
        if busy:
            raise NodeBusy(f"testbed {testbed.name}: {name}: {node_cfg.workdir} is in use by "
                           f"{busy}; wait for it to finish or stop it first")
        for path in paths or []:
            probe_backend(node, path.backend, path.resolved().data_delay_line)
        return list(node.trusted_host_keys), node.collect_facts()
    finally:
        node.close()
