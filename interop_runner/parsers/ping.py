"""``ping -n`` (iputils): round-trip times of the replies and the loss summary."""

from __future__ import annotations

import re
from dataclasses import dataclass

from interop_runner.parsers.common import ParseError, excerpt

__all__ = ["PingResult", "parse_ping"]

_REPLY = re.compile(r"icmp_seq=(\d+) .*time=(\d+(?:\.\d+)?) ms")
_SUMMARY = re.compile(r"(\d+) packets transmitted, (\d+) received")


@dataclass(frozen=True)
class PingResult:
    """Replies' RTTs in ms (in arrival order) with their sequence numbers, and the counts."""

    rtt_ms: tuple[float, ...]
    seqs: tuple[int, ...]
    transmitted: int
    received: int

    @property
    def lost(self) -> int:
        """Requests without a reply."""
        return self.transmitted - self.received


def parse_ping(text: str) -> PingResult:
    """Parse ping's output (per-reply lines optional: ``-q`` prints only the summary)."""
    summary = _SUMMARY.search(text)
    if summary is None:
        raise ParseError(f"ping: no summary line in {excerpt(text)}")
    replies = [(int(m.group(1)), float(m.group(2))) for m in _REPLY.finditer(text)]
    return PingResult(rtt_ms=tuple(r for _, r in replies), seqs=tuple(s for s, _ in replies),
                      transmitted=int(summary.group(1)), received=int(summary.group(2)))
