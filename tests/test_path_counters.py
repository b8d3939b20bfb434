"""What the path counted during one attempt (testbed/path/counters.py, pure), from real
``tc -s -j qdisc show``, ``iptables -L qir-path -n -v -x`` and delay line stats taken before
and after a TCP flow over a real path (tests/data/path/README.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from interop_runner.testbed.path.counters import (
    LINE_COUNTERS,
    attempt_counters,
    bottleneck_qdisc,
    loss_rule_drops,
)

DATA = Path(__file__).parent / "data" / "path"


def read(name: str) -> str:
    return (DATA / name).read_text()


def snapshot(moment: str, lines: tuple[str, ...] = ("reverse",)) -> dict[str, Any]:
    """The counters as ``PathNode.counters`` returns them, from the captured files."""
    return {"qdisc": json.loads(read(f"tc-tbf-{moment}.json")),
            "iptables": read(f"iptables-{moment}.txt"),
            "delay_lines": {d: json.loads(read(f"delayline-{d}-{moment}.json")) for d in lines}}


def test_bottleneck_qdisc() -> None:
    qdiscs = json.loads(read("tc-tbf-after.json"))
    tbf = bottleneck_qdisc(qdiscs, "1:")
    assert tbf is not None
    assert (tbf["kind"], tbf["options"]["rate"], tbf["bytes"], tbf["drops"]) == (
        "tbf", 2_500_000, 12_893_966, 87)  # 20 Mbit/s: tc -j gives bytes/s
    assert bottleneck_qdisc(qdiscs, "2:") is None
    assert bottleneck_qdisc([], "1:") is None


def test_bottleneck_qdisc_netem_child() -> None:
    """netem's bottleneck is its tbf child "2:" (hand-written: this kernel has no netem)."""
    qdiscs = [{"kind": "netem", "handle": "1:", "root": True, "bytes": 10, "drops": 3},
              {"kind": "tbf", "handle": "2:", "parent": "1:1", "bytes": 9, "drops": 1}]
    assert bottleneck_qdisc(qdiscs, "2:") == qdiscs[1]
    counters = attempt_counters({"qdisc": []}, {"qdisc": qdiscs}, "eth1 2:")
    assert counters["bottleneck"]["drops"] == 1


def test_loss_rule_drops() -> None:
    assert loss_rule_drops(read("iptables-before.txt")) == 22  # the 22 pings of ping-loss.txt
    assert loss_rule_drops(read("iptables-after.txt")) == 100
    # a chain without a loss rule (its NFQUEUE line only), or no chain at all
    without = "\n".join(line for line in read("iptables-after.txt").splitlines()
                        if "DROP" not in line)
    assert "NFQUEUE" in without and loss_rule_drops(without) is None
    assert loss_rule_drops("") is None


def test_attempt_counters_from_a_real_flow() -> None:
    before, after = snapshot("before"), snapshot("after")
    counters = attempt_counters(before, after, "rc 1:")
    assert counters["bottleneck"] == {
        "sent_bytes": 12_893_966 - 196_278, "sent_packets": 10_406 - 2005, "drops": 87,
        "overlimits": 25_154, "backlog_end_bytes": 0}
    assert counters["loss_rule_drops"] == 100 - 22
    reverse = counters["delay_lines"]["reverse"]
    assert {k: reverse[k] for k in ("received", "delivered", "dropped_loss", "dropped_buffer",
                                    "reordered", "bytes_received")} == {
        "received": 6447 - 2020, "delivered": 6442 - 2020, "dropped_loss": 0,
        "dropped_buffer": 0, "reordered": 0, "bytes_received": 416_076 - 169_680}
    assert set(LINE_COUNTERS) <= set(reverse)
    assert reverse["held_max"] == 22  # the peak since the line started, not a difference
    assert reverse["cpu_s"] == pytest.approx((0.049176 + 0.275152) - (0.025211 + 0.119905))
    # per link over the attempt too (the line counts since it started)
    assert reverse["links"] == [{"packets": 6447 - 2020, "bytes": 416_076 - 169_680,
                                 "dropped_loss": 0, "dropped_buffer": 0}]
    # the delay line's counts match the iptables rule that queues packets to it
    assert "6447   416076 NFQUEUE" in read("iptables-after.txt")


def test_attempt_counters_data_line_drops_the_loss() -> None:
    """Server's egress: the 5 % loss dropped by the data delay line, no iptables rule."""
    counters = attempt_counters(
        {"qdisc": [], "iptables": "", "delay_lines": {
            "data": json.loads(read("delayline-data-before.json"))}},
        {"qdisc": [], "iptables": "", "delay_lines": {
            "data": json.loads(read("delayline-data-after.json"))}}, None)
    assert "bottleneck" not in counters and counters["loss_rule_drops"] is None
    data = counters["delay_lines"]["data"]
    assert (data["received"], data["delivered"], data["dropped_loss"]) == (2637, 2501, 136)
    assert data["received"] == data["delivered"] + data["dropped_loss"]
    assert 0.03 < data["dropped_loss"] / data["received"] < 0.07


def test_attempt_counters_without_a_before() -> None:
    """A counter with nothing before (or an unreadable before) counts from zero; a delay line
    whose stats could not be read is left out; a qdisc gone after the attempt is None."""
    after = snapshot("after")
    counters = attempt_counters({"delay_lines": {"reverse": None}}, after, "rc 1:")
    assert counters["bottleneck"]["sent_packets"] == 10_406
    assert counters["loss_rule_drops"] == 100
    assert counters["delay_lines"]["reverse"]["received"] == 6447
    gone = attempt_counters(snapshot("before"), {"qdisc": [], "delay_lines": {"reverse": None}},
                            "rc 1:")
    assert gone["bottleneck"] == {"sent_bytes": None, "sent_packets": None, "drops": None,
                                  "overlimits": None, "backlog_end_bytes": None}
    assert gone["delay_lines"] == {} and gone["loss_rule_drops"] is None
