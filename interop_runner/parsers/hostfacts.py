"""Host facts: the sections the facts script prints (``=== <name> ===``) and their summary.

Pure functions over that text; the script itself is in :mod:`interop_runner.testbed.hostfacts`.
"""

from __future__ import annotations

import re
from typing import Any

_MARK = re.compile(r"^=== (.+) ===$", re.MULTILINE)
_CPULIST = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")


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


def _cycle_counter(line: str) -> bool | None:
    """Whether ``perf stat -x , -e cycles`` counted (True), could not (False: ``<not
    supported>`` / ``<not counted>``), or did not run (None)."""
    fields = line.strip().split(",")
    # the event as perf names it: cycles, cycles:u (not root), cpu_core/cycles/ (hybrid)
    if len(fields) < 3 or "cycles" not in fields[2]:
        return None
    return fields[0].isdecimal()


def _online_cpus(lscpu: dict[str, str], nproc: int | None) -> str | None:
    """The online CPUs as a CPU list (``0-3,8``): lscpu's ``On-line CPU(s) list``, else
    ``0-<n - 1>`` from the nproc section (the host's online CPUs: getconf _NPROCESSORS_ONLN)."""
    listed = lscpu.get("On-line CPU(s) list", "").replace(" ", "")
    if _CPULIST.match(listed):
        return listed
    if nproc is not None and nproc > 0:
        return "0" if nproc == 1 else f"0-{nproc - 1}"
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
    cores = _int(sections.get("nproc", "").strip())
    return {
        "hostname": uname[1] if len(uname) > 1 else None,
        "kernel": uname[2] if len(uname) > 2 else None,
        "cores": cores,
        "online_cpus": _online_cpus(lscpu, cores),
        "cpu_model": lscpu.get("Model name"),
        "cpu_max_mhz": _float(lscpu.get("CPU max MHz")),
        "cpu_mhz": _float(sections.get("cpu-mhz", "").strip()),  # /proc/cpuinfo, the highest
        "cycle_counter": _cycle_counter(sections.get("perf-cycles", "")),
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
