"""Host facts parsing, on output captured from a local-testbed node (veth on a KVM guest)."""

from pathlib import Path

from interop_runner.parsers.hostfacts import split_sections, summarize_facts

DATA = Path(__file__).parent / "data" / "hostfacts"


def test_summary_of_captured_node():
    sections = split_sections((DATA / "veth-kvm-2core.txt").read_text())
    assert {"uname", "lscpu", "ethtool-i", "ethtool-k", "sysctl", "qdisc"} <= set(sections)
    facts = summarize_facts(sections)
    assert facts["cores"] == 2 and facts["sockets"] == 1 and facts["threads_per_core"] == 1
    assert facts["online_cpus"] == "0,1"  # lscpu's On-line CPU(s) list
    assert facts["cpu_model"] == "AMD EPYC"
    assert facts["numa_nodes"] == 1 and facts["numa_cpus"] == {"node0": "0,1"}
    assert facts["nic_driver"] == "veth" and facts["nic_speed_mbps"] == 10000
    assert facts["offloads"]["generic-segmentation-offload"] is True
    assert facts["offloads"]["generic-receive-offload"] is False
    assert facts["sysctl"]["net.core.rmem_default"].isdigit()
    # not measurable on this VM/veth: recorded as missing, not as 0
    assert facts["cpu_max_mhz"] is None and facts["governor"] is None
    assert facts["nic_numa_node"] is None and facts["rings"] == {}


def test_bare_metal_style_sections():
    text = "\n".join([
        "=== lscpu ===", "Model name:  AMD EPYC 7543 32-Core Processor", "CPU max MHz: 3737.8899",
        "NUMA node(s): 4", "NUMA node0 CPU(s): 0-7,32-39", "NUMA node2 CPU(s): 16-23,48-55",
        "=== ethtool-g ===", "Ring parameters for enp65s0f0np0:", "Pre-set maximums:",
        "RX:\t\t2047", "TX:\t\t2047", "Current hardware settings:", "RX:\t\t511", "TX:\t\t511",
        "=== nic-numa-node ===", "2", "=== irq-affinity ===", "120 16", "121 17",
        "=== governor ===", "     64 performance", "=== speed ===", "10000", ""])
    facts = summarize_facts(split_sections(text))
    assert facts["cpu_max_mhz"] == 3737.8899 and facts["numa_nodes"] == 4
    assert facts["numa_cpus"]["node2"] == "16-23,48-55"
    assert facts["rings"] == {"max_rx": 2047, "max_tx": 2047, "current_rx": 511,
                              "current_tx": 511}
    assert facts["nic_numa_node"] == 2 and facts["irq_affinity"] == {"120": "16", "121": "17"}
    assert facts["governor"] == "performance" and facts["nic_speed_mbps"] == 10000


def test_online_cpus_from_lscpu_else_nproc():
    def online(*lines: str) -> str | None:
        return summarize_facts(split_sections("\n".join([*lines, ""])))["online_cpus"]

    assert online("=== nproc ===", "64", "=== lscpu ===",
                  "On-line CPU(s) list:   0-31,64-95") == "0-31,64-95"
    # no lscpu (or no list in it, or one that is not a CPU list): nproc's count
    assert online("=== nproc ===", "4", "=== lscpu ===", "lscpu: command not found") == "0-3"
    assert online("=== nproc ===", "1", "=== lscpu ===", "On-line CPU(s) list: ?") == "0"
    assert online("=== uname ===", "Linux vm 6.1") is None  # neither: not known, never "0"
