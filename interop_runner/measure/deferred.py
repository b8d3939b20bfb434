"""Management-side work of finished attempts, done while the next attempt gets ready.

After an attempt's logs are fetched and its nodes cleaned, what is left needs only the
management node: post-processing the fetched files, storing the record, parsing it into the
campaign's cache. One worker thread does that, in order, while the campaign starts the next
attempt (knobs, pre scripts, the server and its readiness wait). Where the management node
shares CPUs with the nodes (the local testbed) the next transfer waits until the work is
done, so it never competes with a measurement; elsewhere it runs alongside.
"""

from __future__ import annotations

import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable


class DeferredWork:
    """One worker thread for finished attempts' management work, in submission order."""

    def __init__(self, exclusive: bool) -> None:
        """``exclusive``: the work must be done before a transfer starts (the management
        node's CPUs are the nodes')."""
        self.exclusive = exclusive
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="qir-deferred")
        self._pending: list[Future[None]] = []
        self._lock = threading.Lock()

    def submit(self, work: Callable[[], None]) -> None:
        """Queue ``work`` behind what is queued already."""
        with self._lock:
            self._pending.append(self._pool.submit(work))

    def before_transfer(self) -> None:
        """Called before a transfer starts: wait for the queued work when it must not overlap
        a measurement."""
        if self.exclusive:
            self.wait()

    def wait(self) -> None:
        """Wait until every queued piece of work is done; re-raise the first error."""
        with self._lock:
            pending, self._pending = self._pending, []
        errors = [f.exception() for f in pending]
        first = next((e for e in errors if e is not None), None)
        if first is not None:
            raise first

    def close(self) -> None:
        """Finish the queued work (an error is reported on stderr, not raised: the caller
        is already ending) and stop the thread."""
        try:
            self.wait()
        except Exception as exc:  # noqa: BLE001 - reported, the campaign's end goes on
            print(f"warning: storing an attempt failed: {exc}", file=sys.stderr)
        finally:
            self._pool.shutdown(wait=True)
