"""The host-load parser and the busy rule (interop_runner.parsers.hostload), on samples that
HOST_LOAD_SCRIPT printed on this project's VM (tests/data/hostload/README.md)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from interop_runner.parsers.common import ParseError
from interop_runner.parsers.hostload import (
    BUSY_STEAL_SHARE,
    HOST_LOAD_SCRIPT,
    busy_reasons,
    host_load,
    parse_load_sample,
)

DATA = Path(__file__).parent / "data" / "hostload"


def sample(name: str) -> str:
    return (DATA / name).read_text()


def test_a_sample_is_read_field_by_field() -> None:
    s = parse_load_sample(sample("busy-before.txt"))
    assert s.time_s == pytest.approx(1796306885.441699)
    assert s.loadavg == (2.70, 3.60, 2.42)
    assert s.cpu_ticks == {"user": 173561, "nice": 101, "system": 16272, "idle": 63485,
                           "iowait": 1016, "irq": 0, "softirq": 2697, "steal": 166}
    assert s.cores == 2 and s.running == [6, 4, 4, 6, 5]
    assert s.psi_some_us == 351388775 and s.notes == []
    assert s.boot_id is None  # the script printed no boot id then
    assert s.runnable_other == 4.0  # the median read (5) less the reading shell


def test_two_busy_samples_make_a_busy_host() -> None:
    load = host_load(parse_load_sample(sample("busy-before.txt")),
                     parse_load_sample(sample("busy-after.txt")))
    total = (174510 - 173561) + (16323 - 16272) + (2714 - 2697) + (167 - 166)
    assert load["interval_s"] == pytest.approx(5.087)
    assert load["cores"] == 2 and load["load1_after"] == 2.72
    assert load["runnable_other_before"] == 4.0 and load["runnable_other_after"] == 5.0
    assert load["cpu_busy_share"] == 1.0  # no idle tick in 5 s: both cores busy
    assert load["steal_share"] == round(1 / total, 4)
    assert load["iowait_share"] == 0.0
    assert load["cpu_pressure_share"] == round((352848587 - 351388775) / 5.087e6, 4)
    assert load["busy"] is True
    assert load["busy_reasons"] == ["4 other tasks runnable before the attempt on 2 cores",
                                    "5 other tasks runnable after the attempt on 2 cores"]


def test_below_one_other_task_per_core_is_not_busy() -> None:
    assert busy_reasons({"cores": 2, "runnable_other_before": 1.0,
                         "runnable_other_after": 1.5, "steal_share": 0.0}) == []
    assert busy_reasons({"cores": 2, "runnable_other_before": 2.0,
                         "runnable_other_after": 0.0}) == \
        ["2 other tasks runnable before the attempt on 2 cores"]


def test_steal_alone_makes_a_host_busy() -> None:
    reasons = busy_reasons({"cores": 2, "runnable_other_before": 0.0,
                            "runnable_other_after": 0.0, "steal_share": BUSY_STEAL_SHARE})
    assert reasons == ["steal 5.0% of the CPU time (>= 5%)"]


def test_a_kernel_without_psi_is_na_with_its_reason() -> None:
    def no_psi(name: str) -> str:  # the same sample as a kernel without PSI prints it
        return "".join(line for line in sample(name).splitlines(keepends=True)
                       if not line.startswith("psi "))

    load = host_load(parse_load_sample(no_psi("busy-before.txt")),
                     parse_load_sample(no_psi("busy-after.txt")))
    assert load["cpu_pressure_share"] is None
    assert load["notes"] == ["/proc/pressure/cpu: not readable (a kernel without PSI)"]
    assert load["busy"] is True  # decided on what was read


def test_nothing_to_decide_on_is_unknown_not_idle() -> None:
    bare = parse_load_sample("time 10.0\n")
    load = host_load(bare, parse_load_sample("time 12.5\n"))
    assert load["busy"] is None and load["cpu_busy_share"] is None
    assert load["runnable_other_before"] is None and load["steal_share"] is None
    assert "/proc/stat: no CPU time passed between the samples" in load["notes"]
    assert "/proc/loadavg: not read" in load["notes"]


@pytest.mark.parametrize("text", ["", "loadavg 1 2 3\n", "time 1.0\nrunning many\n",
                                  "time 1.0\npsi some avg10=1.0\n"])
def test_a_damaged_sample_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError, match="host load"):
        parse_load_sample(text)


def test_the_script_runs_here_and_parses() -> None:
    """The script as the nodes run it (bash), on this host."""
    out = subprocess.run(["bash", "-c", HOST_LOAD_SCRIPT], capture_output=True, text=True,
                         check=True).stdout
    s = parse_load_sample(out)
    assert s.cores is not None and s.cores >= 1 and len(s.running) == 5
    assert min(s.running) >= 1  # the reading shell is runnable itself
    assert "steal" in s.cpu_ticks and s.loadavg is not None
    assert s.boot_id == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
