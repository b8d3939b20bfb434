"""The nodes' static routes and the router's forwarding: what carries traffic between server
and client through the router.

The layout says what should be (:attr:`~.layout.Layout.routes`,
:attr:`~.layout.Layout.forwarding`); :func:`observe` reads what is (one ``ip -j route show``
per namespace with routes, one ``ip -j netconf show`` and one ``ethtool -k`` per forwarding
node), :func:`problems` compares the two for one node, and :func:`ensure` applies what is
missing (``ip route replace``, ``sysctl -w net.ipv4.ip_forward=1`` and ``ethtool -K`` inside
the namespace; each only when needed). Everything here lives in the nodes' namespaces and
goes with them in ``down``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from interop_runner.config.knobs import OFFLOAD_FEATURES
from interop_runner.errors import TestbedError
from interop_runner.parsers.ethtool import parse_ethtool_features
from interop_runner.testbed.local.host import Host
from interop_runner.testbed.local.layout import Forwarding, Layout, NodeSpec, Route

FORWARDING_SYSCTL = "net.ipv4.ip_forward"
_FEATURES_HEADER = "Features for "  # the first line of each interface's `ethtool -k`


@dataclass(frozen=True)
class SeenRouting:
    """What the namespaces hold: their routes, and for forwarding nodes whether IPv4 is
    forwarded and which offloads are on."""

    routes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # `ip -j route`
    forwarding: dict[str, bool] = field(default_factory=dict)  # net.ipv4 "all" forwarding
    offloads_on: dict[str, dict[str, set[str]]] = field(default_factory=dict)  # if -> on

    def has_route(self, namespace: str, route: Route) -> bool:
        """The namespace has the route (destination, gateway and device)."""
        return any(r.get("dst") == route.dest and r.get("gateway") == route.via
                   and r.get("dev") == route.dev for r in self.routes.get(namespace, []))


def _json(host: Host, what: str, ns: str, *args: str) -> list[dict[str, Any]]:
    res = host.ip("-j", *args, ns=ns, check=False)
    if not res.ok:
        tail = (res.stderr.strip().splitlines() or ["?"])[-1]
        raise TestbedError(f"local testbed: cannot read the {what} of {ns}: {tail}")
    data = json.loads(res.stdout or "[]")
    return data if isinstance(data, list) else []


def _forwarding(host: Host, ns: str) -> bool:
    """Whether the namespace forwards IPv4 (netconf of "all", what ip_forward sets)."""
    return any(c.get("interface") == "all" and c.get("forwarding") is True
               for c in _json(host, "IPv4 settings", ns, "-4", "netconf", "show"))


def _offloads_on(host: Host, ns: str, fwd: Forwarding) -> dict[str, set[str]]:
    """Interface -> the offloads of ``fwd`` (ethtool -K names) that are on."""
    res = host.run([host.tool("ip"), "netns", "exec", ns, "sh", "-c",
                    'for i; do "$0" -k "$i" || exit; done', host.tool("ethtool"),
                    *fwd.interfaces], check=False)
    if not res.ok:
        tail = (res.stderr.strip().splitlines() or ["?"])[-1]
        raise TestbedError(f"local testbed: cannot read the offloads of {ns}: {tail}")
    out: dict[str, set[str]] = {}
    for block in res.stdout.split(_FEATURES_HEADER)[1:]:
        name, _, text = block.partition(":\n")
        features = parse_ethtool_features(text)
        out[name] = {k for k in fwd.offloads if features.get(OFFLOAD_FEATURES[k], (False,))[0]}
    return out


def observe(host: Host, layout: Layout, present: dict[str, bool]) -> SeenRouting:
    """The routes and forwarding of every node whose namespace exists (``present``: node
    name -> whether it does); a missing namespace has none."""
    seen = SeenRouting()
    for node in layout.nodes:
        if not present[node.name]:
            continue
        if layout.routes_of(node.name):
            seen.routes[node.namespace] = _json(host, "routes", node.namespace, "route", "show")
        fwd = layout.forwarding_of(node.name)
        if fwd is not None:
            if fwd.forward:
                seen.forwarding[node.namespace] = _forwarding(host, node.namespace)
            try:
                seen.offloads_on[node.namespace] = _offloads_on(host, node.namespace, fwd)
            except TestbedError:  # an interface is missing: its link check says so
                seen.offloads_on[node.namespace] = {i: set(fwd.offloads)
                                                     for i in fwd.interfaces}
    return seen


def _offloads_left(seen: SeenRouting, node: NodeSpec, fwd: Forwarding,
                   ifname: str) -> list[str]:
    """The offloads of ``fwd`` still on at the node's ``ifname`` (all when unknown)."""
    on = seen.offloads_on.get(node.namespace, {}).get(ifname, set(fwd.offloads))
    return [k for k in fwd.offloads if k in on]


def problems(layout: Layout, seen: SeenRouting, node: NodeSpec) -> list[str]:
    """What is wrong with the node's routes and forwarding (empty: nothing)."""
    out = [f"route {route} missing" for route in layout.routes_of(node.name)
           if not seen.has_route(node.namespace, route)]
    fwd = layout.forwarding_of(node.name)
    if fwd is not None:
        if fwd.forward and not seen.forwarding.get(node.namespace, False):
            out.append(f"IPv4 forwarding off ({FORWARDING_SYSCTL})")
        for ifname in fwd.interfaces:
            left = _offloads_left(seen, node, fwd, ifname)
            if left:
                out.append(f"offloads on at {ifname} ({' '.join(left)})")
    return out


def ensure(host: Host, layout: Layout) -> None:
    """Set every route, forwarding and offload the layout names that is not as it should be
    (after the links exist: a route needs its device and gateway subnet)."""
    present = {n.name: True for n in layout.nodes}
    seen = observe(host, layout, present)
    for node in layout.nodes:
        for route in layout.routes_of(node.name):
            if not seen.has_route(node.namespace, route):
                host.ip(*route.replace_args(), ns=node.namespace)
        fwd = layout.forwarding_of(node.name)
        if fwd is None:
            continue
        if fwd.forward and not seen.forwarding.get(node.namespace, False):
            host.run([host.tool("ip"), "netns", "exec", node.namespace, host.tool("sysctl"),
                      "-qw", f"{FORWARDING_SYSCTL}=1"])
        for ifname in fwd.interfaces:
            left = _offloads_left(seen, node, fwd, ifname)
            if left:
                host.run([host.tool("ip"), "netns", "exec", node.namespace,
                          host.tool("ethtool"), "-K", ifname,
                          *(word for k in left for word in (k, "off"))])
