"""LiveCache: wired as a campaign's on_stored hook it parses each stored record into the
campaign's Parquet cache, and finish writes the cache the next load reads (or says why it
could not). Records come from the sample campaign of test_campaign_cache."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from interop_runner.analysis import load_results
from interop_runner.analysis.running.campaign_cache import CampaignCache
from interop_runner.analysis.running.live_cache import LiveCache

from .test_campaign_cache import cached_load, make_campaign, run_files


def assert_finished_cache(camp: Path, final: bytes, live: LiveCache,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The campaign ends: finish writes the cache, and the next load reads from it what a
    cold parse gives."""
    (camp / "campaign.json").write_bytes(final)
    assert live.finish(camp) is None
    pd.testing.assert_frame_equal(cached_load(camp, monkeypatch),
                                  load_results(camp, cache=False), check_exact=True)


def test_records_handed_on_while_running_become_the_cache(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    camp, final = make_campaign(tmp_path)
    live = LiveCache()
    assert live.on_stored is not None
    for path in run_files(camp):
        live.on_stored(camp, path)
    assert_finished_cache(camp, final, live, monkeypatch)


def test_several_testbeds_are_parsed_when_it_finishes(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Their records are stored by forked workers: no hook, every record parsed at the end."""
    camp, final = make_campaign(tmp_path)
    live = LiveCache(testbeds=2)
    assert live.on_stored is None
    assert_finished_cache(camp, final, live, monkeypatch)


def test_a_failed_parse_costs_only_the_cache(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    def full(self: CampaignCache, path: Path) -> None:
        raise OSError("No space left on device")

    camp, final = make_campaign(tmp_path)
    first, *rest = run_files(camp)
    live = LiveCache()
    monkeypatch.setattr(CampaignCache, "add", full)
    live.add(camp, first)
    monkeypatch.undo()
    for path in rest:  # not parsed once the cache failed
        live.add(camp, path)
    (camp / "campaign.json").write_bytes(final)
    assert live.finish(camp) == (f"warning: no results cache written ({first}: "
                                 "OSError('No space left on device'))")
    assert not (camp / ".cache").exists()
    assert len(load_results(camp)) == len(rest) + 1  # the records stay
