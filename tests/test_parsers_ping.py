"""``ping -n`` (iputils 20221126) parser, on real output (tests/data/path/README.md)."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from interop_runner.parsers.common import ParseError
from interop_runner.parsers.ping import PingResult, parse_ping

DATA = Path(__file__).parent / "data" / "path"


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_loopback() -> None:
    assert parse_ping(read("ping-lo.txt")) == PingResult(
        rtt_ms=(0.023, 0.039, 0.032, 0.037, 0.040), seqs=(1, 2, 3, 4, 5), transmitted=5,
        received=5)
    assert parse_ping(read("ping-lo.txt")).lost == 0


def test_over_a_path() -> None:
    """20 pings over a 10 ms path: ping prints one decimal above 10 ms."""
    res = parse_ping(read("ping-path.txt"))
    assert (res.transmitted, res.received, res.lost) == (20, 20, 0)
    assert res.seqs == tuple(range(1, 21))
    assert statistics.median(res.rtt_ms) == 10.2
    assert min(res.rtt_ms) >= 10.0  # never below the configured delay
    assert res.rtt_ms[0] == 10.2 and max(res.rtt_ms) == 13.3


def test_with_loss() -> None:
    """2000 pings, 22 replies dropped by the path's 1 % loss rule (the rule counted 22)."""
    res = parse_ping(read("ping-loss.txt"))
    assert (res.transmitted, res.received, res.lost) == (2000, 1978, 22)
    assert len(res.rtt_ms) == len(res.seqs) == 1978
    missing = set(range(1, 2001)) - set(res.seqs)
    assert len(missing) == 22  # the lost ones are the sequence numbers without a reply
    assert res.rtt_ms[:2] == (10.3, 10.4)


def test_summary_only() -> None:
    """``ping -q`` prints only the summary: counts, no replies."""
    text = "".join(read("ping-loss.txt").splitlines(keepends=True)[-4:])
    assert "icmp_seq" not in text
    assert parse_ping(text) == PingResult((), (), 2000, 1978)


def test_all_lost() -> None:
    text = ("PING 10.77.1.1 (10.77.1.1) 56(84) bytes of data.\n\n"
            "--- 10.77.1.1 ping statistics ---\n"
            "3 packets transmitted, 0 received, 100% packet loss, time 2034ms\n\n")
    res = parse_ping(text)
    assert (res.rtt_ms, res.transmitted, res.received, res.lost) == ((), 3, 0, 3)


@pytest.mark.parametrize("text", [read("ping-unreachable.txt"), "", "PING x\n"])
def test_no_summary(text: str) -> None:
    with pytest.raises(ParseError, match="ping: no summary line") as info:
        parse_ping(text)
    if "unreachable" in text:
        assert "Network is unreachable" in info.value.reason
