"""A campaign's Parquet cache built while the campaign runs, complete when it ends.

:func:`~interop_runner.analysis.frames.results.load_results` caches a finished campaign's frame in
``<campaign>/.cache/`` (``attempts.parquet`` and the signature ``attempts.json``: the
SHA-256 of campaign.json and of every run.json, the code's version), but only
when it first loads it, which is then a cold parse of every attempt. A
:class:`CampaignCache` parses each attempt as soon as its record is stored, while the next
transfer runs, and writes the cache when the campaign ends, so the first load after a
campaign reads the cache. A row depends only on its ``run.json``, the attempt's files and the
campaign's context (host facts, requested monitors); the context is read from the final
``campaign.json`` when the cache is written, so the frame is the one a cold load makes.
Parsing an attempt of competing flows with bottleneck captures also writes its per-flow
series, ``flows.parquet`` in the attempt directory
(:mod:`~interop_runner.analysis.frames.flow_series`).
"""

from __future__ import annotations

import os
import threading
from dataclasses import replace
from pathlib import Path

import numpy as np

from interop_runner.analysis.frames import frame
from interop_runner.analysis.frames.frame import Segment, chunked, merge_chunks
from interop_runner.analysis.frames.results import (
    ParsedAttempt,
    campaign_context,
    campaign_run_files,
    campaign_signature,
    chunk_of_attempts,
    load_results,
    parse_attempt,
    record_names,
    results_frame,
    write_cache,
)

__all__ = ["CampaignCache"]


class CampaignCache:
    """Builds a campaign's Parquet cache while it runs: one attempt at a time, finished at
    its end.

    :meth:`add` may be called from any thread, also from several at once (each call parses
    outside the lock and only stores the result under it); :meth:`finish` once, after
    ``campaign.json`` has its final contents. Nothing is written before :meth:`finish`.
    """

    def __init__(self, campaign_dir: Path | str) -> None:
        self.campaign_dir = Path(campaign_dir)
        self._root = os.path.abspath(self.campaign_dir)
        self._parsed: dict[str, ParsedAttempt] = {}
        self._lock = threading.Lock()

    def _key(self, run_json: Path | str) -> str:
        """The record's place in the campaign, relative or absolute (a record added by
        another name, through a symbolic link, is parsed again when the cache is written)."""
        return os.path.relpath(os.path.abspath(run_json), self._root)

    def add(self, run_json: Path | str) -> None:
        """Parse this attempt now: its ``run.json`` and monitor files must be complete
        (the record is stored last). Thread-safe; adding a record again replaces it."""
        parsed = _compact(parse_attempt(Path(run_json)))
        with self._lock:
            self._parsed[self._key(run_json)] = parsed

    def __len__(self) -> int:
        """How many attempts were added."""
        with self._lock:
            return len(self._parsed)

    def finish(self) -> bool:
        """Write the cache from the added attempts, plus every ``run.json`` below the
        campaign that was not added (an earlier session's, before a resume), so that the
        next ``load_results(campaign_dir)`` reads it. Returns whether it wrote it: not when
        ``campaign.json`` is unreadable or still says ``running``, or the tree is read-only.
        """
        files = campaign_run_files(self.campaign_dir)
        signature = campaign_signature(self.campaign_dir, record_names(self.campaign_dir, files))
        if signature is None:
            return False
        with self._lock:
            parsed = dict(self._parsed)
        missing = sum(self._key(f) not in parsed for f in files)
        if missing >= frame.PARALLEL_MIN:  # many unparsed records: the pooled cold parse
            results = load_results(self.campaign_dir, cache=False)
        else:
            attempts = [self._attempt(f, parsed) for f in files]
            ctx = campaign_context(self.campaign_dir)
            results = results_frame(*merge_chunks(
                [chunk_of_attempts(part, ctx) for part in chunked(attempts)]))
        return write_cache(self.campaign_dir, results, signature)

    def _attempt(self, run_json: Path, parsed: dict[str, ParsedAttempt]) -> ParsedAttempt:
        """The added attempt of a listed record (its path as the listing spells it), or the
        record parsed now."""
        attempt = parsed.get(self._key(run_json))
        if attempt is None:
            return parse_attempt(run_json)
        if attempt.base.get("path") != str(run_json.parent):
            attempt = replace(attempt, base={**attempt.base, "path": str(run_json.parent)})
        return attempt


def _compact(attempt: ParsedAttempt) -> ParsedAttempt:
    """The attempt with its complete segments' values as float64 arrays (8 bytes a value
    instead of a list of Python numbers: a long campaign keeps every attempt until its
    end). The frame gets the same float64 values either way."""
    if attempt.segments is None:
        return attempt
    segments = [Segment(s.names, np.asarray(s.values, dtype=np.float64), True)
                if s.complete else s for s in attempt.segments]
    return replace(attempt, segments=segments)
