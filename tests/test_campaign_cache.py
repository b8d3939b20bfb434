"""CampaignCache: a campaign's Parquet cache built attempt by attempt while it runs is the
frame a cold load_results makes, and the next load_results reads it."""

from __future__ import annotations

import json
import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest

from interop_runner.analysis import load_results
from interop_runner.analysis.frames import frame, results
from interop_runner.analysis.running.campaign_cache import CampaignCache

SAMPLE = Path(__file__).parent / "data" / "results-sample"
FIRST = Path("quic-go_quic-go") / "goodput" / "1" / "attempt-1"


def _bump_counters(path: Path, by: int) -> None:
    """Later snapshot values, as a later attempt of the campaign has them."""
    text = path.read_text()
    path.write_text(re.sub(r"(?m)(?<=: )\d+$", lambda m: str(int(m[0]) + by), text))


def _attempt(camp: Path, rep: int) -> Path:
    """Repetition ``rep`` of the sample's attempt: other goodput, time and counters."""
    target = camp / FIRST.parent.parent / str(rep) / "attempt-1"
    shutil.copytree(camp / FIRST, target)
    run = json.loads((target / "run.json").read_text())
    shift = rep * 10**10
    run.update(repetition=rep, goodput_mbps=900.0 + rep, start_ns=run["start_ns"] + shift,
               end_ns=run["end_ns"] + shift)
    (target / "run.json").write_text(json.dumps(run))
    for role in ("server", "client"):
        _bump_counters(target / role / "ethtool-after.txt", rep * 7)
    return target / "run.json"


def make_campaign(tmp_path: Path, repetitions: int = 5) -> tuple[Path, bytes]:
    """A campaign as it looks while running (campaign.json says so): the sample's attempt
    in several repetitions, a failed attempt without monitor files and a record cut short.
    Returns its directory and the final campaign.json."""
    camp = tmp_path / "campaign"
    shutil.copytree(SAMPLE, camp, ignore=shutil.ignore_patterns(".cache"))
    for rep in range(2, repetitions + 1):
        _attempt(camp, rep)
    failed = camp / FIRST.parent.parent / str(repetitions + 1) / "attempt-1"
    failed.mkdir(parents=True)
    run = json.loads((camp / FIRST / "run.json").read_text())
    run.update(repetition=repetitions + 1, status="failed", reason="server never listened",
               start_ns=None, end_ns=None, goodput_mbps=None, duration_s=None)
    (failed / "run.json").write_text(json.dumps(run))
    cut = camp / FIRST.parent.parent / str(repetitions + 2) / "attempt-1"
    cut.mkdir(parents=True)
    (cut / "run.json").write_text('{"campaign": "x", "status": "ok", ')
    meta = camp / "campaign.json"
    final = meta.read_bytes()
    meta.write_text(json.dumps({**json.loads(final), "status": "running"}))
    return camp, final


def run_files(camp: Path) -> list[Path]:
    return sorted(camp.rglob("run.json"))


def cached_load(camp: Path, monkeypatch: pytest.MonkeyPatch) -> pd.DataFrame:
    """load_results(camp), failing if it parses anything instead of reading the cache."""
    with monkeypatch.context() as patch:
        patch.setattr(results, "_parse", lambda *a: pytest.fail("parsed, not cached"))
        return load_results(camp)


def test_cache_built_while_running_is_the_cold_frame(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    camp, final = make_campaign(tmp_path)
    cache = CampaignCache(camp)
    with ThreadPoolExecutor(3) as pool:  # the runner adds from worker threads
        list(pool.map(cache.add, run_files(camp)))
    assert len(cache) == 7
    (camp / "campaign.json").write_bytes(final)
    assert cache.finish()
    assert (camp / ".cache" / "attempts.parquet").is_file()
    got = cached_load(camp, monkeypatch)
    pd.testing.assert_frame_equal(got, load_results(camp, cache=False), check_exact=True)
    assert list(got["repetition"]) == [1, 2, 3, 4, 5, 6, 7]
    assert list(got["goodput_mbps"][1:5]) == [902.0, 903.0, 904.0, 905.0]
    assert list(got["status"][5:7].astype(object).fillna("-")) == ["failed", "-"]
    assert got["reason"].iloc[6].startswith("unreadable run.json: ")
    # the bumped NIC counters (a per-queue one, summed): 7 per repetition
    assert list(got["server_nic_rx_xdp_packets"][:5]) == [0.0, 14.0, 21.0, 28.0, 35.0]


def test_finish_writes_nothing_while_the_campaign_runs(tmp_path: Path) -> None:
    camp, _ = make_campaign(tmp_path, repetitions=2)
    cache = CampaignCache(camp)
    for path in run_files(camp):
        cache.add(path)
    assert not cache.finish()
    assert not (camp / ".cache").exists()


def test_records_not_added_are_parsed_when_it_finishes(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    """A resumed campaign: the earlier session's records were never added."""
    camp, final = make_campaign(tmp_path)
    cache = CampaignCache(camp)
    for path in run_files(camp)[::2]:
        cache.add(path)
    (camp / "campaign.json").write_bytes(final)
    assert cache.finish()
    pd.testing.assert_frame_equal(cached_load(camp, monkeypatch),
                                  load_results(camp, cache=False), check_exact=True)


def test_a_campaign_parsed_in_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Above the pool threshold the cold load splits the attempts among processes (the
    columns' order follows the parts): the cache splits its attempts alike."""
    monkeypatch.setattr(frame, "PARALLEL_MIN", 3)
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    camp, final = make_campaign(tmp_path, repetitions=6)
    cache = CampaignCache(camp)
    for path in reversed(run_files(camp)):  # any order
        cache.add(path)
    (camp / "campaign.json").write_bytes(final)
    assert cache.finish()
    cold = load_results(camp, cache=False)
    pd.testing.assert_frame_equal(cached_load(camp, monkeypatch), cold, check_exact=True)
    assert len(cold) == 8


def test_paths_spelled_otherwise_are_the_listed_records(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """Records added by relative paths, or through a symbolic link (parsed again at the
    end): the frame has the listing's paths."""
    camp, final = make_campaign(tmp_path, repetitions=2)
    link = tmp_path / "link"
    link.symlink_to(camp)
    cache = CampaignCache(camp)
    monkeypatch.chdir(tmp_path)
    files = run_files(camp)
    cache.add(Path("link") / files[0].relative_to(camp))
    for path in files[1:]:
        cache.add(Path("campaign") / path.relative_to(camp))
    (camp / "campaign.json").write_bytes(final)
    assert cache.finish()
    got = cached_load(camp, monkeypatch)
    assert got["path"].iloc[0] == str(camp / FIRST)
    pd.testing.assert_frame_equal(got, load_results(camp, cache=False), check_exact=True)


@pytest.mark.parametrize("keep", ["nothing", "unreadable"])
def test_a_campaign_without_monitor_values_is_cached_too(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         keep: str) -> None:
    """Only an unreadable record (no float64 column): the cache gives the cold frame. No
    record at all: nothing is cached (there is nothing to parse)."""
    camp, final = make_campaign(tmp_path, repetitions=1)
    for path in run_files(camp):
        if keep == "nothing" or not path.read_text().startswith('{"campaign": "x"'):
            shutil.rmtree(path.parent)
    (camp / "campaign.json").write_bytes(final)
    cold = load_results(camp, cache=False)
    assert CampaignCache(camp).finish() == (keep != "nothing")
    assert len(cold) == (0 if keep == "nothing" else 1)
    got = cached_load(camp, monkeypatch) if keep != "nothing" else load_results(camp)
    pd.testing.assert_frame_equal(got, cold, check_exact=True)
