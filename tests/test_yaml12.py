"""YAML 1.2 readings of what users write (interop_runner/config/yaml12.py): YAML 1.1's
base-60 integers, yes/no/on/off booleans, octal and dates are what they look like."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from interop_runner.config.params import StandardParams
from interop_runner.config.path import SplitConfig
from interop_runner.config.yaml12 import load_yaml12, read_config_yaml
from interop_runner.errors import ConfigError


@pytest.mark.parametrize("text, value", [
    ("1:10", "1:10"), ("1:1", "1:1"), ("on", "on"), ("yes", "yes"), ("off", "off"),
    ("No", "No"), ("y", "y"), ("017", 17), ("0o17", 15), ("0x1F", 31), ("1_000", "1_000"),
    ("2024-01-01", "2024-01-01"), ("true", True), ("FALSE", False), ("-3", -3),
    ("1e3", 1000.0), ("0.05", 0.05), ("~", None), ("null", None), ("", None),
    ("20mbit", "20mbit"), ("12:30:00", "12:30:00"),
])
def test_scalars_read_as_yaml_1_2(text: str, value: object) -> None:
    assert load_yaml12(f"k: {text}") == {"k": value}
    # (what YAML 1.1 made of some of them, which this loader must not)
    if text in ("1:10", "on", "017"):
        assert yaml.safe_load(f"k: {text}")["k"] in (70, True, 15)


def test_infinities_and_quoted_values() -> None:
    data = load_yaml12("a: .inf\nb: -.Inf\nc: '1:10'\nd: \"on\"")
    assert math.isinf(data["a"]) and data["b"] < 0 and (data["c"], data["d"]) == ("1:10", "on")
    assert math.isnan(load_yaml12("n: .nan")["n"])


def test_what_was_misread_now_means_what_it_says() -> None:
    """The issue's cases: an ACK ratio 1:10 is 10 (the papers' notation), not 70; a split
    ratio 1:1 is 1:1, not the integer 61."""
    params = StandardParams.model_validate(load_yaml12("ack_ratio: 1:10"))
    assert params.ack_ratio == 10
    assert SplitConfig.model_validate(load_yaml12("ratio: 1:1")).ratio == "1:1"


def test_a_repeated_key_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "c.yml"
    file.write_text("name: a\nname: b\n")
    with pytest.raises(ConfigError) as info:
        read_config_yaml(file)
    assert info.value.lines == [f"{file}:2:1: YAML syntax error: duplicate key 'name'"]
