"""The results cache filled while a campaign runs: each record the campaign stores is parsed
into the campaign's Parquet cache (:class:`~.campaign_cache.CampaignCache`) on the campaign's
deferred-work thread, while the next attempt gets ready, so the cache is complete when the
campaign ends and the first load reads it."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from interop_runner.analysis.running.campaign_cache import CampaignCache


class LiveCache:
    """Wired as the campaign's ``on_stored`` hook (:attr:`on_stored`); :meth:`finish` writes
    the cache after the campaign."""

    def __init__(self, testbeds: int = 1) -> None:
        """``testbeds``: how many testbeds the campaign runs on."""
        self._cache: "CampaignCache | None" = None
        self._failed: str | None = None
        # pandas and the parsers load during the campaign's set-up, not before a transfer
        self._import = threading.Thread(target=_import_cache_module, daemon=True)
        # the hook to hand the campaign (None: every record is parsed by finish)
        self.on_stored: Callable[[Path, Path], None] | None = None
        if testbeds > 1:
            # several testbeds run in forked workers: no thread may hold the import lock
            # when they fork, and their records are parsed at the end (finish)
            return
        self._import.start()
        self.on_stored = self.add

    def add(self, directory: Path, run_json: Path) -> None:
        """Parse one record stored in the campaign ``directory`` (a failure only costs the
        cache: the records stay)."""
        if self._import.is_alive():
            self._import.join()
        if self._failed is not None:
            return
        try:
            from interop_runner.analysis.running.campaign_cache import CampaignCache

            if self._cache is None:
                self._cache = CampaignCache(directory)
            self._cache.add(run_json)
        except Exception as exc:  # noqa: BLE001 - load_results parses cold instead
            self._failed = f"{run_json}: {exc!r}"

    def finish(self, directory: Path) -> str | None:
        """Write the cache (every record parsed now that was not added: several testbeds);
        the warning to show when it could not be written."""
        if self._import.is_alive():
            self._import.join()
        if self._failed is not None:
            return f"warning: no results cache written ({self._failed})"
        from interop_runner.analysis.running.campaign_cache import CampaignCache

        (self._cache or CampaignCache(directory)).finish()
        return None


def _import_cache_module() -> None:
    try:
        import interop_runner.analysis.running.campaign_cache  # noqa: F401
    except Exception:  # noqa: BLE001 - LiveCache.add meets the same error and reports it
        pass
