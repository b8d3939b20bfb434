"""Host knobs: config values, ethtool parsing, CPU lists, qdisc choice and the restore journal."""

from pathlib import Path

import pytest
from pydantic import ValidationError

from interop_runner.config.knobs import DEFAULT_SOCKET_BUFFER, Knobs, format_cpulist, parse_cpulist
from interop_runner.parsers.ethtool import parse_ethtool_features
from interop_runner.remote.executor import LocalExecutor
from interop_runner.testbed.knobs import Journal, NodeKnobs

DATA = Path(__file__).parent / "data"


def test_buffer_sizes_as_bytes_or_multiples_of_the_default():
    assert Knobs(rmem="4x").rmem == 4 * DEFAULT_SOCKET_BUFFER == 851968
    assert Knobs(rmem="0.5x").rmem == 106496
    assert Knobs(wmem="8MiB").wmem == 8 * 2**20
    assert Knobs(rmem=425984).rmem == 425984
    for bad in ("0x", "-2x", "lots", 0):
        with pytest.raises(ValidationError):
            Knobs(rmem=bad)


def test_formats_are_checked():
    assert Knobs(rate="500mbit", delay="10ms", pin="0-3,8").active() == {
        "rate": "500mbit", "delay": "10ms", "pin": "0-3,8"}
    for kwargs in ({"rate": "fast"}, {"rate": "1 gbit"}, {"delay": "10"}, {"pin": "a-b"},
                   {"loss": 1.5}, {"mtu": 100}, {"offload": "some"}, {"unknown": 1}):
        with pytest.raises(ValidationError):
            Knobs(**kwargs)


def test_a_rate_or_delay_is_read_by_the_units_module_and_reaches_tc_as_written():
    """The bounds and units of every other rate and time (interop_runner.units): no rate
    below 8 kbit/s or above 1.6 Tbit/s, no negative or unknown unit; the string is kept."""
    assert Knobs(rate="1.5Gbit", delay="250us").active() == {"rate": "1.5Gbit",
                                                             "delay": "250us"}
    for kwargs, message in (({"rate": "1bit"}, "below 8 kbit/s"),
                            ({"rate": "2tbit"}, "above 1.6 Tbit/s"),
                            ({"rate": "20mbps"}, "cannot parse rate"),
                            ({"delay": "3min"}, "cannot parse time"),
                            ({"rate": "1000"}, "a number and its unit")):
        with pytest.raises(ValidationError, match=message):
            Knobs(**kwargs)


def test_merge_and_default_offload():
    both = Knobs(rmem="2x", offload="off")
    side = Knobs(offload="default", mtu=9000)
    merged = both.merged(side)
    assert merged.rmem == 2 * DEFAULT_SOCKET_BUFFER and merged.mtu == 9000
    assert merged.offload == "default" and "offload" not in merged.active()


def test_parse_ethtool_features_from_a_real_veth():
    feats = parse_ethtool_features(
        (DATA / "results-sample" / "hosts" / "server" / "ethtool-k.txt").read_text())
    assert feats["generic-segmentation-offload"] == (True, False)
    assert feats["generic-receive-offload"] == (False, False)
    assert feats["large-receive-offload"] == (False, True)
    assert feats["tx-checksum-ipv4"] == (False, True)
    assert "Features for data0" not in feats


def test_cpulists_round_trip():
    assert parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert format_cpulist([11, 0, 1, 2, 3, 8, 10]) == "0-3,8,10-11"
    assert format_cpulist([5]) == "5" and parse_cpulist("") == []


def test_qdisc_choice():
    q = NodeKnobs._qdisc
    assert q({"rate": "1gbit"})[:3] == ["tbf", "rate", "1gbit"]
    assert q({"delay": "5ms", "reorder": 0.1, "rate": "1gbit"}) == [
        "netem", "delay", "5ms", "reorder", "10%", "rate", "1gbit"]
    assert q({"mtu": 9000}) == []


def test_journal_undoes_newest_first_and_reports_failures(tmp_path):
    ex = LocalExecutor("t")
    log = tmp_path / "log"
    journal = Journal(ex, str(tmp_path / "sub" / "restore.sh"))
    assert not journal.pending()
    journal.add(["sh", "-c", f"echo first >>{log}"])
    journal.add(["false"])
    journal.add(["sh", "-c", f"echo 'second; quoted' >>{log}"])
    assert journal.pending()
    assert journal.replay() == ["false"]
    assert log.read_text().splitlines() == ["second; quoted", "first"]
    assert not journal.pending() and not Path(journal.path).exists()
    assert journal.replay() == []
