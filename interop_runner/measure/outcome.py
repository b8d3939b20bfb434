"""How a campaign session ends: SIGTERM taken as Ctrl-C, the status an exception leaves in
campaign.json, the combined status over several testbeds, and what the caller gets back."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from interop_runner.errors import ExecutorError
from interop_runner.storage.run_record import RunRecord


@dataclass
class CampaignResult:
    """What a finished (or interrupted) campaign produced."""

    directory: Path
    records: list[RunRecord] = field(default_factory=list)
    wall_s: float = 0.0
    interrupted: bool = False


class CampaignStopped(ExecutorError):
    """``on_error: stop``: an attempt failed or timed out, so the campaign stopped after
    recording it (``run.py run --resume`` runs it again and continues)."""


class TermAsInterrupt:
    """Turn SIGTERM into KeyboardInterrupt so cleanup runs the same way as for Ctrl-C."""

    def __enter__(self) -> "TermAsInterrupt":
        self._old = signal.getsignal(signal.SIGTERM)

        def handler(signum: int, frame: FrameType | None) -> None:
            raise KeyboardInterrupt(f"signal {signum}")

        signal.signal(signal.SIGTERM, handler)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGTERM, self._old)


def ended_status(exc: BaseException, current: str) -> str:
    """The campaign status after ``exc`` ended a session (``current`` when it says nothing)."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, CampaignStopped):
        return f"stopped: {exc}"
    if isinstance(exc, Exception):
        return f"aborted: {str(exc) or type(exc).__name__}"  # EOFError() says nothing
    return current


def combined_status(statuses: list[str | None], names: list[str], interrupted: bool) -> str:
    """The status of a campaign over several testbeds from each testbed's own status."""
    if interrupted or "interrupted" in statuses:
        return "interrupted"
    if all(s == "finished" for s in statuses):
        return "finished"
    return "; ".join(f"{n}: {s}" for n, s in zip(names, statuses))
