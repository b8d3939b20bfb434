"""Host facts: collected once per campaign and node, raw text kept, a summary parsed.

The node runs one shell script that prints every section between ``=== <name> ===`` markers;
``split_sections`` and ``summarize_facts`` are pure functions over that text.
"""

from __future__ import annotations

import re
from typing import Any

# $1 = data-plane interface. Each section may be empty where a tool or file is missing.
FACTS_SCRIPT = r'''
ifc=$1
sec() { printf '=== %s ===\n' "$1"; }
sec uname; uname -snrmv
sec nproc; nproc
sec lscpu; LC_ALL=C lscpu 2>&1
sec governor; cat /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor 2>/dev/null | sort | uniq -c
sec topology; (lstopo-no-graphics --of console --no-io 2>/dev/null || true)
sec ethtool; ethtool "$ifc" 2>&1
sec ethtool-i; ethtool -i "$ifc" 2>&1
sec ethtool-k; ethtool -k "$ifc" 2>&1
sec ethtool-g; ethtool -g "$ifc" 2>&1
sec speed; cat "/sys/class/net/$ifc/speed" 2>/dev/null
sec mtu; cat "/sys/class/net/$ifc/mtu" 2>/dev/null
sec nic-numa-node; cat "/sys/class/net/$ifc/device/numa_node" 2>/dev/null
sec irq-affinity
for irq in $(grep -E "[[:space:]]$ifc(-|$|[[:space:]])" /proc/interrupts 2>/dev/null | cut -d: -f1); do
  echo "$irq $(cat "/proc/irq/$irq/smp_affinity_list" 2>/dev/null)"
done
sec sysctl
sysctl net.core.rmem_default net.core.rmem_max net.core.wmem_default net.core.wmem_max \
  net.ipv4.udp_mem net.ipv4.udp_rmem_min net.ipv4.udp_wmem_min net.core.netdev_max_backlog \
  net.ipv4.tcp_rmem net.ipv4.tcp_wmem net.ipv4.tcp_congestion_control 2>/dev/null
sec qdisc; tc qdisc show dev "$ifc" 2>&1
exit 0
'''

_MARK = re.compile(r"^=== (.+) ===$", re.MULTILINE)


def split_sections(text: str) -> dict[str, str]:
    """Split the facts script output into ``{section: text}``."""
    parts = _MARK.split(text)
    return {parts[i]: parts[i + 1].strip("\n") for i in range(1, len(parts) - 1, 2)}


def _colon_pairs(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value else None
    except ValueError:
        return None


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


def summarize_facts(sections: dict[str, str]) -> dict[str, Any]:
    """The summary stored in campaign.json; anything not found is None (never 0)."""
    lscpu = _colon_pairs(sections.get("lscpu", ""))
    uname = sections.get("uname", "").split()
    numa = {k.removeprefix("NUMA ").removesuffix(" CPU(s)"): v for k, v in lscpu.items()
            if k.startswith("NUMA node") and k.endswith("CPU(s)")}
    ethi = _colon_pairs(sections.get("ethtool-i", ""))
    offloads = {}
    for line in sections.get("ethtool-k", "").splitlines()[1:]:
        key, sep, value = line.partition(":")
        if sep and value.strip():
            offloads[key.strip()] = value.split()[0] == "on"
    rings: dict[str, int] = {}
    current = None
    for line in sections.get("ethtool-g", "").splitlines():
        low = line.lower()
        if low.startswith("pre-set maximums"):
            current = "max"
        elif low.startswith("current hardware settings"):
            current = "current"
        elif current and ":" in line:
            key, _, value = line.partition(":")
            number = _int(value.strip())
            if number is not None:
                rings[f"{current}_{key.strip().lower().replace(' ', '_')}"] = number
    sysctl = {}
    for line in sections.get("sysctl", "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            sysctl[key.strip()] = value.strip()
    governors = [line.split()[-1] for line in sections.get("governor", "").splitlines() if line]
    irqs = {}
    for line in sections.get("irq-affinity", "").splitlines():
        irq, _, cpus = line.partition(" ")
        irqs[irq] = cpus
    speed = _int(sections.get("speed", "").strip())
    return {
        "hostname": uname[1] if len(uname) > 1 else None,
        "kernel": uname[2] if len(uname) > 2 else None,
        "cores": _int(sections.get("nproc", "").strip()),
        "cpu_model": lscpu.get("Model name"),
        "cpu_max_mhz": _float(lscpu.get("CPU max MHz")),
        "threads_per_core": _int(lscpu.get("Thread(s) per core")),
        "cores_per_socket": _int(lscpu.get("Core(s) per socket")),
        "sockets": _int(lscpu.get("Socket(s)")),
        "numa_nodes": _int(lscpu.get("NUMA node(s)")),
        "numa_cpus": numa,
        "governor": ",".join(governors) or None,
        "nic_driver": ethi.get("driver") or None,
        "nic_driver_version": ethi.get("version") or None,
        "nic_firmware": ethi.get("firmware-version") or None,
        "nic_bus": ethi.get("bus-info") or None,
        "nic_speed_mbps": speed if speed and speed > 0 else None,
        "mtu": _int(sections.get("mtu", "").strip()),
        "nic_numa_node": _int(sections.get("nic-numa-node", "").strip()),
        "irq_affinity": irqs,
        "offloads": offloads,
        "rings": rings,
        "sysctl": sysctl,
    }
