"""Versioned documents: every stored JSON document carries ``schema_version``.

The model is Flent's result format: the loader reads the version first, brings an older
document up to the current version through explicit upgrade steps, one per version
(``upgrade_<n>_to_<n+1>``, pure functions on the parsed dict, listed in one table per
document), and refuses a version newer than it knows with one line. The typed models
(:mod:`.run_record`, :mod:`.campaign_record`) then describe the current version only.

Changing a document: bump its ``*_SCHEMA_VERSION``, add the upgrade step from the previous
version to the table, and freeze a file of the new version under ``tests/data/schema/``
(``tests/test_storage_schema.py`` fails until every version has one).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from pydantic import ValidationError

from interop_runner.errors import SchemaError

Upgrade = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class DocumentSchema:
    """How one kind of document is versioned.

    ``upgrades[n]`` turns a version ``n`` document into version ``n + 1``; a document without
    ``schema_version`` is version ``unversioned`` (1: every writer so far wrote the field, so
    only a hand-made or foreign file lacks it).
    """

    kind: str  # "run.json", "campaign.json": how the messages name the document
    current: int
    upgrades: Mapping[int, Upgrade]
    unversioned: int = 1

    def __post_init__(self) -> None:
        missing = [n for n in range(1, self.current) if n not in self.upgrades]
        if missing or any(n >= self.current or n < 1 for n in self.upgrades):
            raise AssertionError(f"{self.kind}: upgrade steps must be exactly 1..{self.current - 1}"
                                 f" (missing {missing})")

    def version_of(self, data: Mapping[str, Any], source: Path | str) -> int:
        """The stored version of ``data``; SchemaError when it is not one this runner reads."""
        version = data.get("schema_version", self.unversioned)
        if type(version) is not int or version < 1:
            raise SchemaError(f"{source}: {self.kind} schema version {version!r} is not a "
                              f"version number (this runner reads 1 to {self.current})")
        if version > self.current:
            raise SchemaError(f"{source}: {self.kind} schema version {version} is newer than "
                              f"this runner reads ({self.current}); update the runner")
        return version

    def upgrade(self, data: dict[str, Any], source: Path | str) -> dict[str, Any]:
        """``data`` brought to the current version (a new dict when anything changed)."""
        version = self.version_of(data, source)
        while version < self.current:
            data = self.upgrades[version](dict(data))
            version += 1
            data["schema_version"] = version
        return data


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object stored in ``path``: OSError when unreadable, ValueError when it is not
    JSON or not an object; the message names the file and what is wrong with it (empty, not
    text, cut short, not JSON, another JSON value), so that a damaged record can be reported
    in one line."""
    raw = path.read_bytes()
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not text: byte {exc.start} of {len(raw)} is not UTF-8 "
                         f"(binary data, not a JSON document)") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: {_json_damage(exc)}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object but {_json_kind(data)}")
    return data


_TOKEN_BREAK = re.compile(r"[\s,:\[\]{}]")


def _json_damage(exc: json.JSONDecodeError) -> str:
    """What is wrong with a text that is not JSON: empty, cut short (the error is at its end,
    or in a string that never ends: a torn write), or another error and where."""
    text = exc.doc
    if not text.strip():
        return "empty file" if not text else "empty file (only white space)"
    error = f"{exc.msg}: line {exc.lineno} column {exc.colno}"
    # torn: nothing but (part of) one token after the error, or a string that never ends
    # (not "Extra data": a whole document with more after it)
    torn = exc.msg.startswith("Unterminated string") or not (
        exc.msg.startswith("Extra data") or _TOKEN_BREAK.search(text[exc.pos:].rstrip()))
    if torn:
        return f"cut short after {len(text)} characters (truncated JSON; {error})"
    return f"not valid JSON ({error})"


def _json_kind(value: Any) -> str:
    """A JSON value that is not an object, named for a message: ``null``, ``an array``..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    kinds = {list: "an array", str: "a string", int: "a number", float: "a number"}
    return kinds.get(type(value), type(value).__name__)


def read_document(path: Path, schema: DocumentSchema) -> dict[str, Any]:
    """A stored document as a plain dict of the current version (upgraded as needed).

    Raises OSError (unreadable), ValueError (not a JSON object) or
    :class:`~interop_runner.errors.SchemaError` (a version this runner cannot read).
    """
    return schema.upgrade(read_json_object(path), path)


def read_document_versioned(path: Path, schema: DocumentSchema) -> tuple[dict[str, Any], int]:
    """As :func:`read_document`, with the version the document was stored in."""
    data = read_json_object(path)
    stored = schema.version_of(data, path)
    return schema.upgrade(data, path), stored


def first_error(exc: ValidationError) -> str:
    """A model validation error as one short line: where, what, and how many more."""
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "(top)"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {err['msg']}{more}"
