"""Network namespaces and the veth pairs between them, with their addresses.

Every function works from the layout's list of links (:attr:`Layout.links`): which pairs
exist, which end belongs to which node, which address each end carries. Links are read with
``ip -j -d addr show`` once per namespace, so a check of the whole testbed costs one ``ip``
call per namespace (plus the root namespace).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from interop_runner.errors import TestbedError
from interop_runner.testbed.local.host import Host
from interop_runner.testbed.local.layout import Layout, NodeSpec, VethLink

Link = dict[str, Any]  # one object of `ip -j -d addr show`


def ns_exists(layout: Layout, ns: str) -> bool:
    """A named namespace exists when its bind mount under /run/netns is in place."""
    return os.path.ismount(layout.netns_path(ns))


def list_links(host: Host, layout: Layout, ns: str | None) -> dict[str, Link]:
    """All links of a namespace (None: the root namespace) by name."""
    res = host.ip("-j", "-d", "addr", "show", ns=ns, check=False)
    if not res.ok:
        if ns is not None and not ns_exists(layout, ns):
            return {}
        # Never mistake a failing `ip` for "no links": up() would then re-create existing ones.
        tail = (res.stderr.strip().splitlines() or ["?"])[-1]
        raise TestbedError(f"local testbed: cannot list the links of "
                           f"{ns or 'the root namespace'}: {tail}")
    if not res.stdout.strip():
        return {}
    return {link["ifname"]: link for link in json.loads(res.stdout)}


def v4_addresses(link: Link) -> set[str]:
    """The IPv4 addresses of a link, with prefix."""
    return {f"{a['local']}/{a['prefixlen']}" for a in link.get("addr_info", [])
            if a.get("family") == "inet"}


def _is_veth(link: Link | None) -> bool:
    return link is not None and link.get("linkinfo", {}).get("info_kind") == "veth"


def _is_up(link: Link | None) -> bool:
    flags = (link or {}).get("flags", [])
    return "UP" in flags and "LOWER_UP" in flags


def paired(a: Link | None, b: Link | None) -> bool:
    """Two veth ends (in different namespaces) point at each other."""
    return (_is_veth(a) and _is_veth(b) and a is not None and b is not None
            and a.get("link_index") == b.get("ifindex")
            and b.get("link_index") == a.get("ifindex"))


def addressed(link: Link | None, cidr: str) -> bool:
    """The link is up (and has carrier) with exactly this IPv4 address."""
    return link is not None and _is_up(link) and v4_addresses(link) == {cidr}


@dataclass(frozen=True)
class SeenLinks:
    """The links of the root namespace (key None) and of each node's namespace."""

    by_ns: dict[str | None, dict[str, Link]]

    def get(self, ns: str | None, ifname: str) -> Link | None:
        """One link (None: not there)."""
        return self.by_ns.get(ns, {}).get(ifname)

    def link_ok(self, link: VethLink, node: str) -> bool:
        """The pair exists, and the ends of ``node`` are up with their addresses."""
        a, b = (self.get(e.netns, e.ifname) for e in link.ends)
        return paired(a, b) and all(addressed(self.get(e.netns, e.ifname), e.cidr)
                                    for e in link.ends if e.owner == node)

    def links_ok(self, layout: Layout, node: str, purpose: str) -> bool:
        """Every link for ``purpose`` with an end of ``node`` is :meth:`link_ok`."""
        return all(self.link_ok(link, node) for link in layout.links_of(node, purpose))

    def lo_up(self, node: NodeSpec) -> bool:
        """The node's loopback is up."""
        lo = self.get(node.namespace, "lo")
        return lo is not None and "UP" in lo.get("flags", [])


def observe(host: Host, layout: Layout, present: dict[str, bool] | None = None) -> SeenLinks:
    """The links of the root namespace and of every node's namespace; with ``present`` (node
    name -> whether its namespace exists) missing namespaces are not asked."""
    by_ns: dict[str | None, dict[str, Link]] = {None: list_links(host, layout, None)}
    for node in layout.nodes:
        wanted = present is None or present[node.name]
        by_ns[node.namespace] = list_links(host, layout, node.namespace) if wanted else {}
    return SeenLinks(by_ns)


def ensure_namespaces(host: Host, layout: Layout) -> None:
    """Create the nodes' namespaces that are missing."""
    for ns in layout.namespaces:
        if ns_exists(layout, ns):
            continue
        if layout.netns_path(ns).exists():  # stale entry without a namespace mounted on it
            host.ip("netns", "delete", ns, check=False)
        host.ip("netns", "add", ns)


def _ensure_pairs(host: Host, layout: Layout, seen: SeenLinks) -> bool:
    """Re-create every veth pair whose ends do not point at each other; True if any was."""
    created = False
    for link in layout.links:
        ends = [(e, seen.get(e.netns, e.ifname)) for e in link.ends]
        if paired(ends[0][1], ends[1][1]):
            continue
        for end, found in ends:
            if found is not None:
                host.ip("link", "delete", end.ifname, ns=end.netns, check=False)
        host.ip(*link.add_args())
        created = True
    return created


def ensure_links(host: Host, layout: Layout) -> None:
    """Create missing or broken veth pairs, then fix addresses and link state."""
    seen = observe(host, layout)
    if _ensure_pairs(host, layout, seen):
        seen = observe(host, layout)
    for node in layout.nodes:
        for ns, ifname, cidr in layout.interfaces(node):
            link = seen.get(ns, ifname)
            if link is None:
                raise TestbedError(f"local testbed: link {ifname} missing in "
                                   f"{ns or 'root namespace'} after creating it")
            if cidr is not None and v4_addresses(link) != {cidr}:
                if v4_addresses(link):
                    host.ip("-4", "addr", "flush", "dev", ifname, ns=ns)
                host.ip("addr", "add", cidr, "dev", ifname, ns=ns)
            if "UP" not in link.get("flags", []):
                host.ip("link", "set", "dev", ifname, "up", ns=ns)


def delete_namespace(host: Host, layout: Layout, ns: str) -> None:
    """Delete a node's namespace (its veth ends go with it); stop its processes first."""
    if layout.netns_path(ns).exists():
        host.ip("netns", "delete", ns, check=False)


def delete_root_links(host: Host, layout: Layout) -> None:
    """Delete the veth ends left in the root namespace."""
    root = list_links(host, layout, None)
    for name in layout.root_links:
        if name in root:
            host.ip("link", "delete", name, check=False)
