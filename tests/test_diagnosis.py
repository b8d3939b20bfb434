"""The bottleneck rules on constructed rows (the integration test checks real runs)."""

import pandas as pd
import pytest

from interop_runner.analysis.theories.diagnosis import add_bottleneck, diagnose

BASE = {"status": "ok", "goodput_mbps": 1000.0, "link_rate_mbps": 10000.0,
        "server_cpu_pct": 40.0, "client_cpu_pct": 50.0}


@pytest.mark.parametrize("change,label", [
    ({"goodput_mbps": 95.0, "link_rate_mbps": 100.0}, "link_rate"),
    ({"goodput_mbps": 80.0, "link_rate_mbps": 100.0}, "undetermined"),
    ({"client_udp_rcvbuf_errors": 5000, "client_udp_in_datagrams": 100000}, "receive_buffer_drops"),
    ({"server_udp_rcvbuf_errors": 50, "server_udp_in_datagrams": 1000}, "receive_buffer_drops"),
    ({"client_udp_rcvbuf_errors": 5, "client_udp_in_datagrams": 100000}, "undetermined"),
    ({"client_udp_rcvbuf_errors": 50, "client_udp_in_datagrams": 10_000_000}, "undetermined"),
    ({"server_cpu_pct": 99.0}, "server_cpu"),
    ({"client_cpu_pct": 130.0, "server_cpu_pct": 95.0}, "client_cpu"),
    ({"client_max_core_busy_pct": 97.0}, "client_cpu"),
    ({"server_max_core_busy_pct": 95.0, "server_cpu_pct": 60.0}, "server_cpu"),
    ({"client_cores_busy_pct": 87.0}, "client_cpu"),
    ({"client_cores_busy_pct": 80.0, "client_max_core_busy_pct": 85.0}, "undetermined"),
    ({"server_cpu_pct": None, "client_cpu_pct": None}, "undetermined"),
    ({"link_rate_mbps": None, "server_cpu_pct": 99.0}, "server_cpu"),
])
def test_rules(change, label):
    assert diagnose({**BASE, **change})[0] == label


def test_order_link_before_drops_and_cpu():
    row = {**BASE, "goodput_mbps": 98.0, "link_rate_mbps": 100.0, "server_cpu_pct": 100.0,
           "client_udp_rcvbuf_errors": 1000, "client_udp_in_datagrams": 1000}
    assert diagnose(row)[0] == "link_rate"


def test_failed_attempts_have_no_label():
    frame = add_bottleneck(pd.DataFrame([{**BASE, "status": "failed"}, BASE,
                                         {**BASE, "server_cpu_pct": pd.NA}]))
    assert pd.isna(frame.loc[0, "bottleneck"])
    assert frame.loc[1, "bottleneck"] == "undetermined"
    assert "no rule fired" in frame.loc[1, "bottleneck_reason"]


PATH = {**BASE, "goodput_mbps": 18.0, "path_rate_mbps": 20.0, "duration_s": 10.0,
        "delayline_cpu_s": 1.0}


@pytest.mark.parametrize("change, label, reason", [
    ({}, "path_rate", "goodput 18.0 Mbit/s >= 85% of the path's 20 Mbit/s bottleneck"),
    ({"goodput_mbps": 12.0}, "undetermined", "below the path's rate with no host limit seen"),
    # a loaded host: CPU, not the path, held the flows back, and it is named
    ({"goodput_mbps": 12.0, "client_max_core_busy_pct": 97.0}, "client_cpu", "a core was 97 %"),
    ({"goodput_mbps": 12.0, "delayline_cpu_s": 9.5}, "delay_line_cpu", "used 95 % of a core"),
    # kernel TCP flows only: no process CPU, yet a saturated core is named
    ({"goodput_mbps": 12.0, "server_cpu_pct": None, "client_cpu_pct": None,
      "client_max_core_busy_pct": 100.0}, "client_cpu", "the client node's"),
    ({"goodput_mbps": 12.0, "server_cpu_pct": None, "client_cpu_pct": None,
      "server_cores_busy_pct": 90.0}, "server_cpu", "all cores 90 % busy"),
    # the path's rate reached: the path was the bottleneck, whatever else was busy
    ({"server_cpu_pct": 99.0, "delayline_cpu_s": 9.5}, "path_rate", "path's 20 Mbit/s"),
])
def test_rules_over_a_path(change, label, reason):
    got, why = diagnose({**PATH, **change})
    assert got == label and reason in why, why


@pytest.mark.parametrize("flag, label", [(True, "above_ceiling"), (False, "path_rate"),
                                         (pd.NA, "path_rate"), (None, "path_rate")])
def test_above_a_ceiling_comes_first(flag, label):
    # a goodput the path cannot carry (analysis/theories/ceilings.py) is no limit: a
    # measurement error
    row = {**PATH, "server_cpu_pct": 99.0, "ceiling_exceeded": flag,
           "ceiling_exceeded_by": "goodput 25.00 Mbit/s > link ceiling 19.00 Mbit/s + 2.0%"}
    got, why = diagnose(row)
    assert got == label
    assert (why == row["ceiling_exceeded_by"]) == (label == "above_ceiling")
    assert diagnose({**row, "status": "failed"}) == (None, None)
