"""Shared parser helpers: counter deltas, dates and clocks."""

from datetime import date, datetime, timedelta, timezone

from interop_runner.parsers.common import (
    ClockToEpoch,
    ParseError,
    clock_24h,
    counter_delta,
    parse_tool_date,
)


def test_counter_delta_rules():
    before = {"a": 10, "b": 5, "gone": 1, "reset": 100}
    after = {"a": 15, "b": 5, "new": 3, "reset": 7}
    assert counter_delta(before, after) == {"a": 5, "b": 0}


def test_parse_error_reason():
    err = ParseError("empty output")
    assert err.reason == "empty output" and str(err) == "empty output"
    assert isinstance(err, ValueError)


def test_tool_dates():
    assert parse_tool_date("Linux 6.18 (vm) \t11/21/26 \t_x86_64_\t(2 CPU)") == date(2026, 11, 21)
    assert parse_tool_date("Linux 5.10.0-8-amd64 (goracle) \t01/22/2023 \t_x86_64_") == \
        date(2023, 1, 22)
    assert parse_tool_date("Linux 6.18 (vm) \t2026-11-21 \t_x86_64_") == date(2026, 11, 21)
    assert parse_tool_date("22/01/2023") == date(2023, 1, 22)
    assert parse_tool_date("no date") is None
    assert parse_tool_date("13/13/2023") is None


def test_clocks():
    assert clock_24h("06:56:26", "PM") == "18:56:26"
    assert clock_24h("12:00:01", "AM") == "00:00:01"
    assert clock_24h("12:00:01", "PM") == "12:00:01"
    assert clock_24h("23:59:59") == "23:59:59"
    assert clock_24h("Average:") is None


def test_clock_to_epoch_crosses_midnight():
    to_epoch = ClockToEpoch(date(2026, 11, 21), timezone.utc)
    t1 = to_epoch("23:59:59")
    t2 = to_epoch("00:00:00")
    assert t1 == datetime(2026, 11, 21, 23, 59, 59, tzinfo=timezone.utc).timestamp()
    assert t2 - t1 == 1.0
    cet = ClockToEpoch(date(2023, 1, 22), timezone(timedelta(hours=1)))
    assert cet("18:56:26") == 1674410186.0
