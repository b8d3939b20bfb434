"""Units (interop_runner/units.py): sizes, rates and times as written, and their formats."""

from __future__ import annotations

import pytest

from interop_runner.units import (
    format_iec,
    goodput_mbps,
    parse_ms,
    parse_rate,
    parse_seconds,
    parse_size,
)


@pytest.mark.parametrize("text,expected", [
    (1234, 1234), ("8GiB", 8 * 2**30), ("8 GiB", 8 * 2**30), ("50MiB", 50 * 2**20),
    ("10MB", 10_000_000), ("1kB", 1000), ("1KiB", 1024), ("512", 512), ("1.5KiB", 1536),
])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["8 gigs", "-1", "", "1.3B", True, -5, 3.5])
def test_parse_size_rejects(bad):
    with pytest.raises(ValueError):
        parse_size(bad)


def test_format_iec():
    assert format_iec(8 * 2**30) == "8.00 GiB"
    assert format_iec(1536) == "1.50 KiB"
    assert format_iec(12) == "12 B"
    assert format_iec(None) == "n/a"


def test_goodput_is_si_megabits():
    # 1 GiB in 8 s: 8 * 2^30 / 8 / 1e6 = 1073.741824 Mbit/s
    assert goodput_mbps(2**30, 8.0) == pytest.approx(1073.741824)
    with pytest.raises(ValueError):
        goodput_mbps(10, 0)


# -- rates and times ---------------------------------------------------------------------------
@pytest.mark.parametrize("text, bits", [
    ("20mbit", 20_000_000), ("1.5gbit", 1_500_000_000), ("100kbit", 100_000), ("8000bit", 8000),
    ("20 Mbit", 20_000_000), ("1GBIT", 10**9), (20_000_000, 20_000_000), (2.5e6, 2_500_000),
    ("64000", 64_000),
])
def test_parse_rate(text: object, bits: int) -> None:
    assert parse_rate(text) == bits


@pytest.mark.parametrize("text, message", [
    ("20mbps", "cannot parse rate"), ("fast", "cannot parse rate"), ("-5mbit", "cannot parse"),
    ("1e3mbit", "cannot parse"), (7999, "below 8 kbit/s"), ("0.5kbit", "below 8 kbit/s"),
    (0, "below 8 kbit/s"), (True, "a rate is a number"), (float("inf"), "not a finite number"),
    (float("nan"), "not a finite number"),
])
def test_parse_rate_refuses(text: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_rate(text)


@pytest.mark.parametrize("text, ms", [
    ("50ms", 50.0), ("1s", 1000.0), ("1.5s", 1500.0), ("250us", 0.25), ("0.5 MS", 0.5),
    (20, 20.0), (0, 0.0), (12.5, 12.5), ("7", 7.0),
])
def test_parse_ms(text: object, ms: float) -> None:
    assert parse_ms(text) == pytest.approx(ms)


@pytest.mark.parametrize("text, message", [
    ("-1ms", "cannot parse time"), ("5min", "cannot parse time"), (-1, "cannot be negative"),
    (True, "a time is a number"), (float("inf"), "not a finite number"),
])
def test_parse_ms_refuses(text: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_ms(text)


@pytest.mark.parametrize("text, seconds", [
    ("60s", 60.0), ("2min", 120.0), ("500ms", 0.5), (90, 90.0), (1.5, 1.5), ("3 s", 3.0)])
def test_parse_seconds(text: object, seconds: float) -> None:
    assert parse_seconds(text) == seconds
