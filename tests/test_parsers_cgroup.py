"""Where a container's CPU is accounted, and reading it (parsers/cgroup.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from interop_runner.parsers.cgroup import accounting_dir, cgroup_cpu_seconds
from interop_runner.parsers.common import ParseError

DATA = Path(__file__).parent / "data" / "cgroup"


def test_v1_container_is_accounted_in_its_cpuacct_cgroup() -> None:
    text = (DATA / "proc-cgroup-container-v1.txt").read_text()
    path = accounting_dir(text)
    assert path.startswith("/sys/fs/cgroup/cpuacct/qir/")
    assert path.rsplit("/", 1)[1] == (DATA / "container-id.txt").read_text().strip()


def test_v1_host_process_is_at_the_root() -> None:
    assert accounting_dir((DATA / "proc-cgroup-v1-hybrid.txt").read_text()) == \
        "/sys/fs/cgroup/cpuacct"


def test_v2_only_uses_the_unified_line() -> None:
    # the layout of /proc/<pid>/cgroup on a cgroup v2 host (one line)
    assert accounting_dir("0::/qir/server/t1/abc\n") == "/sys/fs/cgroup/qir/server/t1/abc"


def test_no_usable_line_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        accounting_dir("4:memory:/x\n")


def test_cpuacct_stat_is_in_clock_ticks() -> None:
    assert cgroup_cpu_seconds("user 250\nsystem 50\n", 100) == (2.5, 0.5)


def test_real_cpuacct_stat_parses() -> None:
    user, system = cgroup_cpu_seconds((DATA / "cpuacct.stat").read_text(), 100)
    assert user > 0 and system > 0


def test_cpu_stat_v2_is_in_microseconds() -> None:
    text = "usage_usec 3000000\nuser_usec 2000000\nsystem_usec 1000000\nnr_periods 0\n"
    assert cgroup_cpu_seconds(text, 100) == (2.0, 1.0)


@pytest.mark.parametrize("text", ["", "usage_usec 5\n", "user x\nsystem 1\n"])
def test_unreadable_stat_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        cgroup_cpu_seconds(text, 100)
