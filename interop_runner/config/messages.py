"""One line per problem of a validated file: ``<file>: <key.path>: <message>``, with a
did-you-mean for a misspelt key (pydantic's errors turned into what a user can act on)."""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import (
    BaseModel,
    ValidationError,
)

from interop_runner.config.yaml12 import key_path


def format_errors(source: str, exc: ValidationError, model: type[BaseModel]) -> list[str]:
    lines = []
    errors = [(err, tuple(p for p in err["loc"]
                          if not (isinstance(p, str) and p.startswith("function-"))))
              for err in exc.errors()]
    # a misspelt required key is one problem: "unknown key 'x' (did you mean 'y'?)" says it all,
    # so "y: required key is missing" is left out
    typos = {loc[:-1] + (hint,) for err, loc in errors if err["type"] == "extra_forbidden"
             for hint in difflib.get_close_matches(str(loc[-1]), _known_keys(model, loc[:-1]),
                                                   n=1)}
    for err, loc in errors:
        if err["type"] == "missing" and loc in typos:
            continue
        key = key_path(loc)
        if err["type"] == "extra_forbidden":
            known = _known_keys(model, loc[:-1])
            hint = difflib.get_close_matches(str(loc[-1]), known, n=1)
            msg = (f"unknown key {str(loc[-1])!r}"
                   + (f" (did you mean {hint[0]!r}?)" if hint else ""))
        elif err["type"] == "missing":
            msg = "required key is missing"
        else:
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] not in ("value_error", "assertion_error") and "input" in err:
                msg += f" (got {err['input']!r})"
        lines.append(f"{source}: {key}: {msg}")
    return lines


def _known_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Field names of the (sub)model at ``loc``, for 'did you mean' hints."""
    current: Any = model
    skip_next = False  # the next loc part is a dict key or list index, not a field
    for part in loc:
        if skip_next or isinstance(part, int):
            skip_next = False
            continue
        fields = getattr(current, "model_fields", {})
        if part not in fields:
            return []
        annotation = fields[part].annotation
        current, skip_next = _model_in(annotation)
    return list(getattr(current, "model_fields", {}).keys()) if current else []


def _model_in(annotation: Any) -> tuple[Any, bool]:
    """The pydantic model inside an annotation and whether it sits in a dict/list."""
    args = getattr(annotation, "__args__", ())
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    origin = getattr(annotation, "__origin__", None)
    for arg in args:
        model, _ = _model_in(arg)
        if model is not None:
            return model, origin in (dict, list) or _model_in(arg)[1]
    return None, False

