"""Monitors: one registered object each, saying how it starts on a node, which files it
leaves and which columns it yields (see :mod:`.base`, :mod:`.registry`)."""

from interop_runner.monitors.base import (
                                          ROLES,
                                          SYSSTAT_ENV,
                                          Column,
                                          Monitor,
                                          NoValue,
                                          SeriesCommand,
                                          SideFiles,
                                          SideInput,
                                          SnapshotCommand,
                                          StartContext,
                                          ValueBlock,
)
from interop_runner.monitors.registry import (
                                          ALWAYS,
                                          LIGHT_SET,
                                          MONITORS,
                                          all_columns,
                                          declared_columns,
                                          extracting,
)

__all__ = ["ALWAYS", "LIGHT_SET", "MONITORS", "ROLES", "SYSSTAT_ENV", "Column", "Monitor",
           "NoValue", "SeriesCommand", "SideFiles", "SideInput", "SnapshotCommand",
           "StartContext", "ValueBlock", "all_columns", "declared_columns", "extracting"]
