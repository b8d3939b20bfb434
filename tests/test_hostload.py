"""How busy the hosts were (interop_runner.testbed.hostload): real samples through a real
executor, and a host that cannot be read is NA with its reason, never idle."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from interop_runner.remote.executor import CommandTimeout, LocalExecutor
from interop_runner.testbed.hostload import MANAGEMENT, HostLoad, entry, sample


class NoBash(LocalExecutor):
    """A host whose shell cannot run the script (exit 127, as a missing bash gives)."""

    def _exec(self, argv: Sequence[str], timeout: float) -> tuple[int, str, str, float]:
        return 127, "", "bash: not found", 0.0


class Hangs(LocalExecutor):
    def _exec(self, argv: Sequence[str], timeout: float) -> tuple[int, str, str, float]:
        raise CommandTimeout(self.name, argv, timeout)


def test_each_host_and_the_management_host_are_read() -> None:
    hosts = [("server", LocalExecutor("server")), ("client", LocalExecutor("client"))]
    first, _ = HostLoad(hosts).finish()  # its "before" samples say which kernel each runs
    # the first round's "before" is each host's own: no host has both samples of another
    assert [first["nodes"][n]["notes"] for n in ("server", "client")] == [[], []]
    load = HostLoad(hosts)
    hog = subprocess.Popen(["python3", "-c", "import time\nt=time.time()+1\n"
                            "while time.time() < t: pass"])
    hog.wait()
    doc, busy = load.finish()
    assert set(doc["nodes"]) == {"server", "client", MANAGEMENT}
    assert doc["thresholds"] == {"runnable_other_per_core": 1.0, "steal_share": 0.05}
    server = doc["nodes"]["server"]
    assert server["interval_s"] >= 1.0 and server["cores"] >= 1
    assert 0.0 < server["cpu_busy_share"] <= 1.0  # the hog ran a core for 1 s
    assert busy is any(n["busy"] for n in doc["nodes"].values())
    # one kernel (this host's): sampled once per round, each host says whose sample it has
    assert server["notes"] == doc["nodes"]["client"]["notes"] == \
        ["the kernel of management: its sample"]
    assert server["cpu_busy_share"] == doc["nodes"][MANAGEMENT]["cpu_busy_share"]


def test_a_host_that_cannot_be_read_is_na_with_its_reason() -> None:
    assert sample(NoBash("router")) == "not read: bash exited 127: bash: not found"
    assert str(sample(Hangs("router"))).startswith("not read: ")
    load = HostLoad([("router", NoBash("router"))])
    doc, busy = load.finish()
    router = doc["nodes"]["router"]
    assert router == {"busy": None, "busy_reasons": [],
                      "notes": ["before: not read: bash exited 127: bash: not found",
                                "after: not read: bash exited 127: bash: not found"]}
    # the management host was read: the verdict is its own
    assert busy is doc["nodes"][MANAGEMENT]["busy"]


def test_no_host_read_is_unknown() -> None:
    assert entry("not read: gone", "not read: gone")["busy"] is None
