"""``--set KEY.PATH=VALUE``: a campaign's data with values set by the command line (each
VALUE read as YAML 1.2), before it is validated."""

from __future__ import annotations

from typing import Any

import yaml

from interop_runner.config.sweep import set_at
from interop_runner.config.yaml12 import load_yaml12
from interop_runner.errors import ConfigError


def apply_overrides(data: dict[str, Any], overrides: list[str], source: str
                    ) -> dict[str, Any]:
    """The campaign data with each ``KEY.PATH=VALUE`` (VALUE in YAML) set, e.g.
    ``duration=120s`` or ``path.buffer=5bdp`` (ConfigError naming the bad one)."""
    out = dict(data)
    for item in overrides:
        key, sep, text = item.partition("=")
        parts = key.strip().split(".")
        if not sep or not all(parts):
            raise ConfigError([f"{source}: --set {item!r}: expected KEY=VALUE, e.g. "
                               "duration=120s"])
        try:
            value = load_yaml12(text)
        except yaml.YAMLError as exc:
            raise ConfigError([f"{source}: --set {key}: not a YAML value: "
                               f"{str(exc).splitlines()[0]}"]) from None
        _set_path(out, parts, value, f"{source}: --set {key}")
    return out


def _set_path(data: dict[str, Any], parts: list[str], value: Any, where: str) -> None:
    try:
        set_at(data, parts, value)
    except ValueError as exc:
        raise ConfigError([f"{where}: {exc}"]) from None

