"""Parameter sweeps: axes over campaign settings, their cross product, and the run order.

A campaign's ``sweep.axes`` each name a setting by its dotted path in the campaign file
(``params.congestion_control``, ``client_params.quic-go.force_buffers``, ``file_size``) and the
values to try. Every combination is a *variant*: the campaign config with those settings
replaced, validated like the file itself. The plan is variants x pairs x repetitions, by default
interleaved per repetition and shuffled with a recorded seed, so slow drift of the machine
cannot masquerade as an effect of a setting.
"""

from __future__ import annotations

import itertools
import random
import re
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# Settings that may differ between the runs of one campaign (the file, monitors and nodes are
# prepared once per campaign, so file_size and monitors are not among them).
SWEEPABLE_ROOTS = ("params", "knobs", "server_knobs", "client_knobs", "server_params",
                   "client_params", "keylog", "qlog", "impl", "path", "flows", "duration",
                   "workload")
_SLUG_BAD = re.compile(r"[^A-Za-z0-9._+-]+")


class Axis(BaseModel):
    """One swept setting."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    path: str
    values: list[Any] = Field(min_length=1)
    name: str | None = None  # short name in variant ids and DataFrame columns

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        parts = value.split(".")
        if parts[0] not in SWEEPABLE_ROOTS or any(not p for p in parts):
            raise ValueError(f"cannot sweep {value!r}: the path must start with one of "
                             f"{', '.join(SWEEPABLE_ROOTS)}")
        if value == "workload.size":  # the file is prepared once per campaign
            raise ValueError("cannot sweep 'workload.size': the file is prepared once per "
                             "campaign (one campaign per size)")
        return value

    @property
    def label(self) -> str:
        """The name used in variant ids: ``name`` or the last path component."""
        return self.name or self.path.rsplit(".", 1)[-1]


class Adaptive(BaseModel):
    """Add repetition rounds to the cells whose A/B verdict is still undecided, up to a cap."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    max_repetitions: int = Field(ge=2, le=1000)
    min_effect: float = Field(0.02, gt=0, lt=1)  # relative goodput change that matters


class Sweep(BaseModel):
    """The ``sweep:`` block of a campaign."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    axes: list[Axis] = []
    # paired: per pair and repetition all variants back to back in a random order (with two
    # variants: A/B runs alternate, each pair's order drawn from the seed)
    order: Literal["shuffled", "sequential", "paired"] = "shuffled"
    seed: int | None = None  # None: drawn at run time and recorded in campaign.json
    adaptive: Adaptive | None = None

    @model_validator(mode="after")
    def _adaptive_needs_ab(self) -> "Sweep":
        if self.adaptive is not None:
            two = [a for a in self.axes if len(a.values) == 2]
            if self.order != "paired" or len(two) != 1 or len(self.axes) != 1:
                raise ValueError("adaptive needs order: paired and exactly one axis with two "
                                 "values (the A/B axis)")
        return self


@dataclass(frozen=True)
class Variant:
    """One combination of axis values."""

    id: str  # "" when the campaign has no axes
    values: tuple[tuple[str, Any], ...]  # (axis label, value) in axis order

    def as_dict(self) -> dict[str, Any]:
        """Axis label -> value."""
        return dict(self.values)


def slug(value: Any) -> str:
    """A value as it appears in a directory name (a list's items joined by ``+``, a
    mapping's values by ``-``: a set of flows reads ``quiche-quiche-cubic+cubic``)."""
    if isinstance(value, list):
        return "+".join(slug(v) for v in value) or "x"
    if isinstance(value, dict):
        return "-".join(slug(v) for v in value.values()) or "x"
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return _SLUG_BAD.sub("-", text).strip("-") or "x"


def variants(sweep: Sweep) -> list[Variant]:
    """The cross product of the axes, in axis order (one empty variant without axes)."""
    if not sweep.axes:
        return [Variant("", ())]
    out = []
    for combo in itertools.product(*(axis.values for axis in sweep.axes)):
        values = tuple((axis.label, value) for axis, value in zip(sweep.axes, combo))
        out.append(Variant(",".join(f"{k}={slug(v)}" for k, v in values), values))
    return out


def apply(data: dict[str, Any], sweep: Sweep, variant: Variant) -> dict[str, Any]:
    """A copy of the campaign data with the variant's values set at their paths
    (ValueError: a path indexes a list past its end)."""
    out = dict(data)
    for axis, (_, value) in zip(sweep.axes, variant.values):
        set_at(out, axis.path.split("."), value)
    out.pop("sweep", None)
    return out


def set_at(data: dict[str, Any], parts: list[str], value: Any) -> None:
    """Set ``value`` at the key path ``parts`` below ``data``, copying every container on the
    way (whatever else refers to them stays as it was); a number indexes a list
    (``flows.1.start``). What ``--set`` and a sweep axis both do. ValueError: no such item."""
    node: Any = data
    for i, part in enumerate(parts):
        key: Any = part
        if isinstance(node, list):
            if not part.isdecimal() or int(part) >= len(node):
                raise ValueError(f"{'.'.join(parts[:i])} has {len(node)} items: no item "
                                 f"{part!r}")
            key = int(part)
        if i == len(parts) - 1:
            node[key] = value
            return
        child = node[key] if isinstance(node, list) else node.get(key)
        if not isinstance(child, (dict, list)) and parts[i + 1].isdecimal():
            raise ValueError(f"{'.'.join(parts[:i + 1])} is not a list: no item "
                             f"{parts[i + 1]!r}")
        child = dict(child) if isinstance(child, dict) else list(child) \
            if isinstance(child, list) else {}
        node[key] = child
        node = child


T = TypeVar("T")


def order_runs(units: list[T], repetitions: int, order: str, seed: int,
               group: Callable[[T], Hashable] | None = None) -> list[tuple[int, T]]:
    """(repetition, unit) in run order; a unit is one (variant, pair) combination.

    ``shuffled``: repetition 1 of every unit in a shuffled order, then repetition 2 in another
    shuffled order, ... (the seed fixes all of it). ``sequential``: unit by unit, repetitions
    back to back. ``paired``: per repetition the groups (``group(unit)``, e.g. the pair) in a
    shuffled order, and within a group its units (the variants) back to back in an order
    drawn anew each time: with two variants ABBA-style alternation, so drift of the host hits
    both alike.
    """
    if order == "sequential":
        return [(rep, unit) for unit in units for rep in range(1, repetitions + 1)]
    rng = random.Random(seed)
    out: list[tuple[int, T]] = []
    for rep in range(1, repetitions + 1):
        if order == "paired" and group is not None:
            groups: dict[Hashable, list[T]] = {}
            for unit in units:
                groups.setdefault(group(unit), []).append(unit)
            blocks = list(groups.values())
            rng.shuffle(blocks)
            for block in blocks:
                block = list(block)
                rng.shuffle(block)
                out += [(rep, unit) for unit in block]
            continue
        batch = list(units)
        rng.shuffle(batch)
        out += [(rep, unit) for unit in batch]
    return out
