"""Host facts: the shell script a node runs once per campaign (raw text kept, summary parsed
by :mod:`interop_runner.parsers.hostfacts`).

It prints every section between ``=== <name> ===`` markers.
"""

from __future__ import annotations

# $1 = data-plane interface. Each section may be empty where a tool or file is missing.
FACTS_SCRIPT = r'''
ifc=$1
sec() { printf '=== %s ===\n' "$1"; }
sec uname; uname -snrmv
sec nproc; getconf _NPROCESSORS_ONLN  # online CPUs of the host, whatever the affinity of this shell
sec lscpu; LC_ALL=C lscpu 2>&1
sec cpu-mhz; awk -F: '/^cpu MHz/ { print $2 }' /proc/cpuinfo 2>/dev/null | sort -n | tail -n 1
# Whether a hardware cycle counter exists (VMs often have none): perf stat's one CSV line.
sec perf-cycles; (command -v perf >/dev/null && perf stat -x , -e cycles -- true 2>&1 | tail -n 1) || true
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
'''  # noqa: E501 - shell script the nodes run verbatim (sh -c): its text is kept as is
