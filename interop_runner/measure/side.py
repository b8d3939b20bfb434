"""One side of a flow: an implementation in the server or the client role, as it was
installed on its node and as an attempt runs it.

A flow is a server side and a client side (today an attempt is one flow). Preparation results
are keyed per implementation and role by :class:`ImplKey`; campaign.json names them by its
:attr:`~ImplKey.label` (``server:quic-go``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from interop_runner.config.implementations import ImplementationMeta
from interop_runner.config.knobs import Knobs
from interop_runner.config.params import Resolved, StandardParams, Supports, resolve
from interop_runner.storage.run_record import Side
from interop_runner.testbed.node import Node

Role = Literal["server", "client"]
ROLES: tuple[Role, Role] = ("server", "client")


class ImplKey(NamedTuple):
    """An implementation (or variant) in one role."""

    role: Role
    name: str

    @property
    def label(self) -> str:
        """``<role>:<implementation>``, the key of campaign.json's ``implementations``."""
        return f"{self.role}:{self.name}"


@dataclass(frozen=True)
class SidePlan:
    """What one side of a flow runs: the implementation as installed (its version, the hash
    of the source tree that was built, the image on its node) with its parameters and the
    host knobs of its node."""

    role: Role
    meta: ImplementationMeta
    version: str | None = None
    source_hash: str | None = None  # of the tree installed, taken when it was installed
    params: dict[str, Any] = field(default_factory=dict)
    image: str | None = None  # the image it runs from (None: native scripts)
    knobs: Knobs = field(default_factory=Knobs)

    @property
    def key(self) -> ImplKey:
        """This side's implementation and role."""
        return ImplKey(self.role, self.meta.name)

    def resolve(self, std: StandardParams, *, keylog: bool, qlog: bool,
                peer: Supports | None = None) -> Resolved:
        """The standard parameters as this implementation runs them in its role (environment,
        effective values, requests it cannot honour), ``peer`` what the other side supports."""
        return resolve(std, self.meta.supports, self.meta.name, keylog=keylog, qlog=qlog,
                       role=self.role, peer=peer)

    def record(self, node: Node, std: StandardParams, *, keylog: bool, qlog: bool,
               peer: Supports | None = None) -> Side:
        """The side's part of run.json before it runs."""
        res = self.resolve(std, keylog=keylog, qlog=qlog, peer=peer)
        return Side(implementation=self.meta.name, version=self.version,
                    source_hash=self.source_hash, node=node.name, params=dict(self.params),
                    effective=res.effective, unhonoured=res.unhonoured)
