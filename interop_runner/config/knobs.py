"""Host knobs as configured: which node settings a campaign changes for its runs (socket
buffer sysctls, offloads, MTU, rate limit, loss, delay/reordering, core pinning).

How they are applied, journaled and restored on a node: :mod:`interop_runner.testbed.knobs`.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from interop_runner.config.written import SIZE_UNITS, refuse_bare
from interop_runner.units import parse_ms, parse_rate, positive_size

DEFAULT_SOCKET_BUFFER = 212992  # Linux's net.core.rmem_default/wmem_default (208 KiB)
OFFLOAD_FEATURES = {  # ethtool -K name -> ethtool -k name
    "gso": "generic-segmentation-offload", "gro": "generic-receive-offload",
    "tso": "tcp-segmentation-offload", "lro": "large-receive-offload",
    "tx-udp-segmentation": "tx-udp-segmentation",
    "rx-udp-gro-forwarding": "rx-udp-gro-forwarding",
}
OFFLOAD_PRESETS: dict[str, dict[str, bool]] = {
    "off": {k: False for k in OFFLOAD_FEATURES},
    "all-on": {k: True for k in OFFLOAD_FEATURES},
    # UDP segmentation/GRO on (what QUIC stacks use), TCP-only offloads off
    "udp-only": {"gso": True, "gro": True, "tx-udp-segmentation": True,
                 "rx-udp-gro-forwarding": True, "tso": False, "lro": False},
}
# a value handed to tc as written: a number and its unit, nothing between (tc reads a bare
# number of a rate as bytes/s and of a delay as µs, so a unit is required)
_TC_WORD = re.compile(r"^\d+(\.\d+)?[A-Za-z]+$")
_CPUS_RE = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")


class Knobs(BaseModel):
    """``knobs:`` (both nodes), ``server_knobs:``/``client_knobs:`` (one node) of a campaign."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    # net.core.rmem_default and rmem_max (wmem: the w* pair): bytes ("4MiB") or a multiple of
    # the 208 KiB Linux default ("4x")
    rmem: int | None = None
    wmem: int | None = None
    offload: Literal["default", "off", "udp-only", "all-on"] | None = None
    mtu: int | None = Field(None, ge=576, le=65535)
    rate: str | None = None  # tbf on egress, tc syntax: "1gbit", "500mbit"
    loss: float | None = Field(None, gt=0, lt=1)  # drop probability of received UDP packets
    delay: str | None = None  # netem delay on egress, e.g. "10ms"
    reorder: float | None = Field(None, gt=0, lt=1)  # netem reorder probability (needs delay)
    pin: str | None = None  # taskset CPU list ("2", "0-3,8") or "nic-local" / "nic-remote"

    @field_validator("rmem", "wmem", mode="before")
    @classmethod
    def _buffer(cls, value: Any, info: ValidationInfo) -> int | None:
        refuse_bare(value, info, f"a multiple of the default like 4x, or {SIZE_UNITS}")
        if value is None:
            return None
        if isinstance(value, str) and value.strip().lower().endswith("x"):
            factor = float(value.strip()[:-1])
            if factor <= 0:
                raise ValueError("the multiple must be larger than 0")
            return int(factor * DEFAULT_SOCKET_BUFFER)
        return positive_size(value)

    @field_validator("rate")
    @classmethod
    def _rate(cls, value: str | None) -> str | None:
        return None if value is None else _tc_value(value, parse_rate, "a tc rate like 1gbit")

    @field_validator("delay")
    @classmethod
    def _delay(cls, value: str | None) -> str | None:
        return None if value is None else _tc_value(value, parse_ms, "a time like 10ms")

    @field_validator("pin")
    @classmethod
    def _pin(cls, value: str | None) -> str | None:
        if value is not None and value not in ("nic-local", "nic-remote") and \
                not _CPUS_RE.match(value):
            raise ValueError(f"expected a CPU list like 2 or 0-3,8, or nic-local/nic-remote, "
                             f"got {value!r}")
        return value

    def merged(self, other: "Knobs") -> "Knobs":
        """These knobs with every value set in ``other`` taking precedence."""
        return self.model_copy(update=other.model_dump(exclude_none=True))

    def active(self) -> dict[str, Any]:
        """The knobs that are set (``offload: default`` changes nothing and is left out)."""
        out = self.model_dump(exclude_none=True)
        if out.get("offload") == "default":
            del out["offload"]
        return out


def cpu_ranges(text: str) -> list[tuple[int, int]]:
    """``0-3,8`` -> [(0, 3), (8, 8)], without expanding the ranges (``0-4294967295`` is a
    valid CPU list too)."""
    out = []
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            out.append((int(lo), int(hi or lo)))
    return out


def format_cpu_ranges(ranges: list[tuple[int, int]]) -> str:
    """[(0, 1), (2, 3), (8, 8)] -> ``0-3,8`` (overlapping and adjacent ranges merged)."""
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return ",".join(f"{lo}-{hi}" if hi > lo else str(lo) for lo, hi in merged)


def parse_cpulist(text: str) -> list[int]:
    """``0-3,8`` -> [0, 1, 2, 3, 8]."""
    return [cpu for lo, hi in cpu_ranges(text) for cpu in range(lo, hi + 1)]


def format_cpulist(cpus: list[int]) -> str:
    """[0, 1, 2, 3, 8] -> ``0-3,8``."""
    return format_cpu_ranges([(cpu, cpu) for cpu in cpus])


def _tc_value(value: str, parse: Callable[[str], object], example: str) -> str:
    """``value`` unchanged (it reaches tc as written) once the units module has read it."""
    if not _TC_WORD.match(value):
        raise ValueError(f"expected {example} (a number and its unit, no space), got {value!r}")
    parse(value)
    return value
