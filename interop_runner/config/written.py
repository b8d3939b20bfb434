"""What a user writes must carry its unit: a time, rate or size in a campaign or testbed file
(or a ``--set`` value, or a sweep value) given as a bare number is refused with its key and the
units it takes. ``rtt: 0.05`` would be 0.05 ms and ``rate: 20000`` 20 kbit/s, and a bare number
meant milliseconds in ``path`` but seconds in ``flows``: a user cannot tell which.

Stored documents (campaign.json, run.json) hold the typed values the models made, as numbers in
the model's unit; they are validated without :data:`WRITTEN`, so they read as they were stored.
Byte counts whose key defines them as bytes (``mtu``, ``snaplen``) and tolerances whose key names
the unit (``rtt_ms``) stay plain numbers.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import ValidationInfo

from interop_runner.units import parse_seconds

__all__ = ["MAX_SECONDS", "RATE_UNITS", "SECONDS_UNITS", "SIZE_UNITS", "TIME_UNITS", "WRITTEN",
           "bare_message", "is_bare", "parse_duration", "refuse_bare", "written"]

# the validation context of text a user wrote (model_validate(data, context=WRITTEN))
WRITTEN: dict[str, Any] = {"written_by_user": True}
TIME_UNITS = "us, ms or s, e.g. 50ms"
SECONDS_UNITS = "ms, s or min, e.g. 60s"
RATE_UNITS = "bit, kbit, mbit or gbit, e.g. 20mbit"
SIZE_UNITS = "B, KiB, MiB, GiB, kB, MB, GB, e.g. 64KiB"
MAX_SECONDS = 86400.0  # the longest duration, start offset or timeout a config may give


def written(info: ValidationInfo) -> bool:
    """Whether the data being validated is what a user wrote (context :data:`WRITTEN`)."""
    return isinstance(info.context, dict) and bool(info.context.get("written_by_user"))


def is_bare(value: Any) -> bool:
    """Whether ``value`` is a number without a unit (YAML's int or float, not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def bare_message(value: Any, units: str) -> str:
    """What is wrong with a bare number: the units its key takes."""
    if not math.isfinite(value):  # YAML's .inf/.nan: say what was written
        return f"{'.nan' if math.isnan(value) else '.inf'} is not a finite value ({units})"
    return f"{value!r} has no unit: give one ({units})"


def refuse_bare(value: Any, info: ValidationInfo, units: str) -> None:
    """ValueError when a user wrote ``value`` as a bare number (``info.context`` is
    :data:`WRITTEN`): it must carry one of ``units``."""
    if is_bare(value) and written(info):
        raise ValueError(bare_message(value, units))


def parse_duration(value: Any) -> float | None:
    """A positive duration in seconds of at most a day (:func:`parse_seconds`), None for
    None."""
    if value is None:
        return None
    seconds = parse_seconds(value)
    if seconds <= 0:
        raise ValueError("a duration must be positive")
    if seconds > MAX_SECONDS:
        raise ValueError(f"{value!r} is more than a day ({MAX_SECONDS:.0f} s)")
    return seconds
