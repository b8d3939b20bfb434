import pytest

from interop_runner.units import format_iec, goodput_mbps, parse_size


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
