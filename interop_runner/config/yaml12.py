"""Reading a user's YAML (campaign and testbed files, ``--set`` values) as YAML 1.2 reads it.

PyYAML implements YAML 1.1, whose implicit types misread what users write: ``1:10`` is the
base-60 integer 70 (an ACK ratio of 70, a split ratio ``1:1`` of 61), ``on``/``yes``/``off``/
``no`` are booleans, ``017`` is octal 15, ``1_000`` is 1000 and ``2026-12-02`` a date. YAML 1.2's
core schema (https://yaml.org/spec/1.2.2/#103-core-schema) knows only ``true``/``false``,
decimal, ``0o`` and ``0x`` integers, floats and ``null``; everything else is a string, which the
config models then read as what it looks like (``"1:10"``) or refuse with the key. A key given
twice in one mapping is refused too (YAML keeps the last silently).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from interop_runner.errors import ConfigError

__all__ = ["Yaml12Loader", "load_yaml12", "read_config_yaml"]

_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT = re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")


class Yaml12Loader(yaml.SafeLoader):
    """A SafeLoader with YAML 1.2's core schema and no repeated keys."""

    yaml_implicit_resolvers: dict[str, list[tuple[str, re.Pattern[str]]]] = {}

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """The mapping, refusing a key given twice (``<<: *anchor`` merges may repeat)."""
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # unhashable: SafeLoader itself reports it
                continue
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark)
        return super().construct_mapping(node, deep)


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    if text.startswith(("0o", "0x")):
        return int(text[2:], 8 if text[1] == "o" else 16)
    return int(text, 10)  # "017" is 17 in YAML 1.2, not octal


def _construct_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float:
    text = str(loader.construct_scalar(node)).lower()
    return float(text.replace(".inf", "inf").replace(".nan", "nan"))


for _tag, _pattern, _first in (("bool", _BOOL, "tTfF"), ("int", _INT, "-+0123456789"),
                               ("float", _FLOAT, "-+.0123456789"), ("null", _NULL, "~nN"),
                               ("merge", re.compile(r"^<<$"), "<")):
    Yaml12Loader.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", _pattern, list(_first))
Yaml12Loader.add_implicit_resolver("tag:yaml.org,2002:null", _NULL, [""])
Yaml12Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
Yaml12Loader.add_constructor("tag:yaml.org,2002:float", _construct_float)


def load_yaml12(text: str) -> Any:
    """``text`` read with :class:`Yaml12Loader` (yaml.YAMLError when it does not parse)."""
    return yaml.load(text, Loader=Yaml12Loader)


def read_config_yaml(path: Path) -> dict[str, Any]:
    """A campaign or testbed file's top-level mapping (ConfigError naming the file, and the
    line and column of a syntax error)."""
    if not path.is_file():
        raise ConfigError([f"{path}: file not found"])
    try:
        data = load_yaml12(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        reason = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else \
            (exc.strerror or str(exc)).lower()
        raise ConfigError([f"{path}: cannot read: {reason}"]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError([f"{path}{where}: YAML syntax error: {problem}"]) from None
    if not isinstance(data, dict):
        raise ConfigError([f"{path}: (top level): expected a mapping of keys"])
    nul = _nul_key(data, (), set())
    if nul is not None:  # ("\0" in YAML): argv and the SSH command line end at a NUL
        raise ConfigError([f"{path}: {key_path(nul)}: contains a NUL character"])
    return data


def key_path(loc: tuple[Any, ...]) -> str:
    """A location as a user writes it: ``path.links[0].rate`` (``(top level)`` for none)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def _nul_key(data: Any, loc: tuple[Any, ...], seen: set[int]) -> tuple[Any, ...] | None:
    """Location of the first string (key or value) holding a NUL character, else None."""
    if isinstance(data, str):
        return loc if "\0" in data else None
    if id(data) in seen or not isinstance(data, (dict, list)):
        return None  # (YAML anchors can make a list contain itself)
    seen.add(id(data))
    items = data.items() if isinstance(data, dict) else enumerate(data)
    for key, value in items:
        if isinstance(key, str) and "\0" in key:
            return loc + (key,)
        found = _nul_key(value, loc + (key,), seen)
        if found is not None:
            return found
    return None
