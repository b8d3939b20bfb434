"""Damaged results never pass silently (issue 35, section 3), and caches survive a copy.

Every command that reads stored results (``compare``, ``report``, ``parse``, ``matrix``) is run
in-process (``cli.main.main``) on a copy of a real stored sample (tests/data) whose
``run.json`` or ``campaign.json`` is damaged in one of five ways: cut short, empty, ``null``,
``[]``, random bytes. Each one names the damaged file and what is wrong with it on one
``error:`` line, without a traceback, and exits 2: ``compare`` gives no verdict (5 would say
a cell got worse, 0 would pass a CI gate), ``parse`` and ``matrix`` write what they could read
but fail, ``report`` lists the attempt under Failures (never "Every attempt succeeded") and
refuses a damaged campaign.json.

The caches are keyed by the content they were made from, not by file times: a ``cp -r`` of
the shipped conformance sample (every ``flows.parquet`` older than its ``run.json``) gives the
same series and conformance as the original, and a reason for a missing series says what is
really missing.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from pathlib import Path
from typing import Callable

import pandas as pd
import pytest

from interop_runner.analysis.frames import results as results_module
from interop_runner.analysis.frames.flow_series import SERIES_FILE
from interop_runner.analysis.frames.flows import load_flow_results, load_flows
from interop_runner.analysis.frames.results import load_results
from interop_runner.analysis.theories.flow_conformance import conformance_table
from interop_runner.cli.main import main

DATA = Path(__file__).parent / "data"
SAMPLE = DATA / "results-sample"  # one real attempt of quic-go (run.py run, 905.9 Mbit/s)
GOODPUT = "905.9"  # its cell in the goodput matrix
AB = next((DATA / "conformance-variants" / "ab").iterdir())  # 25 attempts, 4 builds
FLOWS = DATA / "flows-sample"  # one attempt without captures (record_packets false)
RANDOM = random.Random(35).randbytes(256)

#: damage kind -> (what it does to the file's bytes, what the error line says about it)
DAMAGE: dict[str, tuple[Callable[[bytes], bytes], str]] = {
    "truncated": (lambda data: data[:len(data) // 2], "cut short after"),
    "empty": (lambda data: b"", "empty file"),
    "null": (lambda data: b"null", "not a JSON object but null"),
    "array": (lambda data: b"[]", "not a JSON object but an array"),
    "random": (lambda data: RANDOM, "not text: byte"),
}
FILES = ["run.json", "campaign.json"]
COMMANDS = ["compare", "report", "parse", "matrix"]


def test_the_random_bytes_are_not_text() -> None:
    """The random damage is no UTF-8 (else it would test "not valid JSON" instead)."""
    with pytest.raises(UnicodeDecodeError):
        RANDOM.decode("utf-8")


def copy_of(source: Path, target: Path) -> Path:
    """A copy as ``cp -r`` makes it: the files' bytes, new times."""
    return Path(shutil.copytree(source, target, copy_function=shutil.copy))


def damage(campaign: Path, file: str, kind: str) -> Path:
    """Damage the campaign's campaign.json, or its first run.json; the damaged file."""
    path = campaign / "campaign.json" if file == "campaign.json" else \
        sorted(campaign.rglob("run.json"))[0]
    change, _ = DAMAGE[kind]
    path.write_bytes(change(path.read_bytes()))
    return path


def argv(command: str, good: Path, bad: Path, out: Path) -> list[str]:
    """The command line of ``command`` on the damaged campaign ``bad`` (compare: B against
    the intact ``good`` as A)."""
    return {"compare": ["compare", str(good), str(bad), "--n-boot", "200",
                        "--min-samples", "2"],
            "report": ["report", str(bad), "-o", str(out / "report")],
            "parse": ["parse", str(bad), "-o", str(out / "attempts.csv")],
            "matrix": ["matrix", str(bad)]}[command]


def failures_section(html: str) -> str:
    """The report's Failures section (its heading to the next heading)."""
    match = re.search(r"<h3>Failures \((\d+)\)</h3>(.*?)(?=<h3>|$)", html, re.S)
    assert match, "no Failures section"
    return match.group(0)


@pytest.mark.parametrize("kind", sorted(DAMAGE))
@pytest.mark.parametrize("file", FILES)
@pytest.mark.parametrize("command", COMMANDS)
def test_a_damaged_file_is_named_and_fails(command: str, file: str, kind: str,
                                           tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    good = copy_of(SAMPLE, tmp_path / "a" / SAMPLE.name)
    bad = copy_of(SAMPLE, tmp_path / "b" / SAMPLE.name)
    damaged = damage(bad, file, kind)
    code = main(argv(command, good, bad, tmp_path))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert code == 2, (code, out, err)  # no verdict, no pass, not "a cell got worse" (5)
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {damaged}: "), err  # one line
    assert DAMAGE[kind][1] in errors[0], errors[0]  # and what is wrong with it
    CHECKS[command](file, kind, out, tmp_path)


def _compare(file: str, kind: str, out: str, tmp_path: Path) -> None:
    assert out == ""  # no table: nothing a reader could take for a verdict


def _report(file: str, kind: str, out: str, tmp_path: Path) -> None:
    page = tmp_path / "report" / "report.html"
    if file == "campaign.json":  # the page is built around it: refused, nothing written
        assert not page.exists() and out == ""
        return
    html = page.read_text()
    assert "Every attempt succeeded" not in html
    failures = failures_section(html)
    assert failures.startswith("<h3>Failures (1)</h3>")
    assert "damaged" in failures and "unreadable run.json: " in failures
    assert DAMAGE[kind][1] in failures
    assert "quic-go_quic-go/goodput/1/attempt-1" in failures  # the record it is
    assert f"report: {page}" in out


def _parse(file: str, kind: str, out: str, tmp_path: Path) -> None:
    table = pd.read_csv(tmp_path / "attempts.csv")
    assert out.startswith(f"{tmp_path / 'attempts.csv'}: {len(table)} attempt(s)")
    damaged = table[table["reason"].fillna("").str.startswith(f"unreadable {file}: ")]
    assert len(damaged) == 1 and damaged["status"].isna().all()
    assert DAMAGE[kind][1] in damaged["reason"].iloc[0]
    readable = table[table["status"].notna()]
    # a damaged campaign.json: the attempt is still there (without host facts); a damaged
    # run.json is no attempt, and nothing is "ok"
    assert list(readable["status"]) == (["ok"] if file == "campaign.json" else [])


def _matrix(file: str, kind: str, out: str, tmp_path: Path) -> None:
    # the readable attempts only: the damaged record adds no cell and no value
    assert (GOODPUT in out) == (file == "campaign.json"), out


CHECKS = {"compare": _compare, "report": _report, "parse": _parse, "matrix": _matrix}


def test_every_damage_is_counted() -> None:
    """4 commands x 2 files x 5 kinds."""
    assert len(COMMANDS) * len(FILES) * len(DAMAGE) == 40


# ------------------------------------------------------- a conformance campaign, damaged

@pytest.fixture(scope="module")
def ab_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the conformance A/B campaign (``cp -r``: new file times)."""
    return copy_of(AB, tmp_path_factory.mktemp("ab") / AB.name)


def test_one_damaged_attempt_among_a_conformance_campaign(
        ab_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: an unnamed failed attempt, then a traceback in the conformance table. Now:
    two campaigns and the variants of one both refuse with the damaged file named."""
    bad = copy_of(ab_copy, tmp_path / AB.name)
    damaged = damage(bad, "run.json", "truncated")
    for args in (["compare", str(ab_copy), str(bad)],
                 ["compare", str(bad), "--column", "axis_build", "--variants",
                  "picoquic@base", "picoquic@pr"]):
        code = main([*args, "--n-boot", "200"])
        out, err = capsys.readouterr()
        assert code == 2 and out == "" and "Traceback" not in err
        assert err.splitlines() == [f"error: {damaged}: cut short after 3701 characters "
                                    f"(truncated JSON; Expecting ',' delimiter: line 147 "
                                    f"column 19)"]


def test_many_damaged_files_are_named_then_counted(
        ab_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    bad = copy_of(ab_copy, tmp_path / AB.name)
    records = sorted(bad.rglob("run.json"))[:3]
    for record in records:
        record.write_bytes(b"")
    monkeypatch.setattr(results_module, "DAMAGED_SHOWN", 2)
    assert main(["matrix", str(bad)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"error: {records[0]}: empty file", f"error: {records[1]}: empty file",
                   "error: and 1 more damaged file(s)"]


def test_an_na_cell_is_shown_not_a_traceback(ab_copy: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """B's builds of the pull request without their series (no captures, no flows.parquet):
    their conformance cell is NA, shown as n/a; the reason says the captures are not in
    the copy, not that they were never recorded."""
    bad = copy_of(ab_copy, tmp_path / AB.name)
    for cache in bad.glob(f"*/goodput/build=picoquic-pr/*/attempt-*/{SERIES_FILE}"):
        cache.unlink()
    code = main(["compare", str(ab_copy), str(bad), "--n-boot", "200"])
    out, err = capsys.readouterr()
    assert code == 0 and "Traceback" not in err, err
    (line,) = [x for x in out.splitlines() if x.lstrip().startswith("picoquic/cubic")
               and " picoquic@pr " in x]
    assert " n/a " in line
    missing = load_flows(bad).query("variant == 'build=picoquic-pr'")["series_missing"]
    assert set(missing) == {"bottleneck captures not in this copy of the results "
                            "(path.record_packets was on) and no flows.parquet"}


# ------------------------------------------------------- caches keyed by content

def shuffled_times(campaign: Path, cache_first: bool = True) -> None:
    """File times as a copy may leave them: each series cache older than its record (which
    voided every cache keyed by times), or (``cache_first=False``) newer, as when written."""
    for cache in campaign.rglob(SERIES_FILE):
        record = (cache.parent / "run.json").stat().st_mtime_ns
        shift = -10**10 if cache_first else 10**10
        os.utime(cache, ns=(record + shift, record + shift))
        os.utime(cache.parent / "run.json", ns=(record - shift, record - shift))


@pytest.fixture(scope="module")
def as_written(ab_copy: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The conformance campaign with each series cache newer than its record: the times
    it was written with, what the old rule needed."""
    copied = copy_of(ab_copy, tmp_path_factory.mktemp("written") / AB.name)
    shuffled_times(copied, cache_first=False)
    return copied


FALSE_REASONS = ("record_packets", "captures", SERIES_FILE)  # what a lost cache would say


def test_a_copy_keeps_its_series_and_conformance(as_written: Path, tmp_path: Path) -> None:
    copied = copy_of(as_written, tmp_path / AB.name)
    shuffled_times(copied)
    flows, results = load_flows(copied), load_flow_results(copied)
    assert len(flows) == 14485 and flows["series_missing"].isna().all()
    assert results["series_missing"].isna().all()
    assert (results["share_basis"] == "series").all()  # from the series, not the goodput
    first = results.iloc[0]
    assert (first["variant"], first["repetition"], first["label"]) == \
        ("build=picoquic", 1, "picoquic/cubic")
    assert round(float(first["mean_throughput_mbps"]), 6) == 16.616486
    # the same frames as the copy whose caches are newer than their records
    pd.testing.assert_frame_equal(flows.drop(columns="path"),
                                  load_flows(as_written).drop(columns="path"))
    pd.testing.assert_frame_equal(results.drop(columns="path"),
                                  load_flow_results(as_written).drop(columns="path"))
    table = conformance_table(flows, results)
    pd.testing.assert_frame_equal(
        table, conformance_table(load_flows(as_written), load_flow_results(as_written)))
    reasons = " ".join(table["conformance_missing"].dropna())
    assert not any(word in reasons for word in FALSE_REASONS), reasons
    frame = load_results(copied)
    fairness = [c for c in frame.columns if c.startswith(("jain_index", "fairness_"))]
    done = frame[frame["status"] == "ok"]  # all but the interrupted attempt
    assert len(done) == 24 and set(done["fairness_basis"]) == {"series"}
    assert done["jain_index_sliding_min"].notna().all()
    pd.testing.assert_frame_equal(frame[fairness], load_results(as_written)[fairness])


def test_a_copy_gives_the_same_verdict(as_written: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """``compare --variants`` on a copy with shuffled times: the same conformance cells as
    on the campaign with its caches' times as written."""
    copied = copy_of(as_written, tmp_path / AB.name)
    shuffled_times(copied)
    cells = []
    for campaign in (copied, as_written):
        code = main(["compare", str(campaign), "--column", "axis_build", "--variants",
                     "picoquic@base", "picoquic@pr", "--format", "json"])
        (cell,) = json.loads(capsys.readouterr().out)["conformance"]["cells"]
        cells.append((code, cell))
    assert cells[0] == cells[1]
    (code, cell), _ = cells
    assert cell["n_pairs"] == 6 and code in (0, 5)
    missing = f"{cell['conformance_missing_a']} {cell['conformance_missing_b']}"
    assert not any(word in missing for word in FALSE_REASONS), missing


def test_the_results_cache_of_a_copy_is_the_copys(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The results cache is kept by a copy (campaign.json's bytes are its key) and names
    the copy's attempts; other bytes of campaign.json void it."""
    original = copy_of(SAMPLE, tmp_path / "original")
    first = load_results(original)
    assert (original / ".cache" / "attempts.parquet").is_file()
    copied = copy_of(original, tmp_path / "copy")
    os.utime(copied / "campaign.json", ns=(10**18, 10**18))

    def no_parse(*args: object) -> None:
        raise AssertionError("parsed again: the cache was not used")

    monkeypatch.setattr(results_module, "_parse", no_parse)
    cached = load_results(copied)
    assert list(cached["path"]) == [str(copied / "quic-go_quic-go/goodput/1/attempt-1")]
    pd.testing.assert_frame_equal(cached.drop(columns="path"), first.drop(columns="path"))
    with (copied / "campaign.json").open("ab") as fh:
        fh.write(b"\n")  # other bytes, the same document
    with pytest.raises(AssertionError, match="parsed again"):
        load_results(copied)


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_a_record_damaged_after_caching_is_not_hidden(kind: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    """The results cache is keyed by every record it was made from: one damaged later (or
    in a copy that kept the cache) voids it, and the damage is reported, not the old row."""
    campaign = copy_of(SAMPLE, tmp_path / SAMPLE.name)
    assert list(load_results(campaign)["status"]) == ["ok"]  # parsed, and cached
    assert (campaign / ".cache" / "attempts.json").is_file()
    damaged = damage(campaign, "run.json", kind)
    assert main(["matrix", str(campaign)]) == 2
    out, err = capsys.readouterr()
    assert GOODPUT not in out and err.startswith(f"error: {damaged}: {DAMAGE[kind][1]}")


def test_a_missing_series_says_what_is_missing(tmp_path: Path) -> None:
    """No captures because none were recorded (``record_packets: false``), against captures
    recorded but not in this copy (left out) with no cache to stand in."""
    copied = copy_of(FLOWS, tmp_path / FLOWS.name)
    for capture in copied.glob("*/goodput/rate=10mbit/1/attempt-1/path/*.pcap.gz"):
        capture.unlink()
    missing = load_flows(copied).groupby("path")["series_missing"].first()
    reasons = {Path(p).relative_to(copied).parts[2:4]: r for p, r in missing.items()}
    assert reasons[("rate=20mbit", "3")] == "no bottleneck captures (path.record_packets off)"
    assert reasons[("rate=10mbit", "1")] == ("bottleneck captures not in this copy of the "
                                             "results (path.record_packets was on) and no "
                                             "flows.parquet")
    assert all(pd.isna(reasons[key]) for key in reasons
               if key not in {("rate=20mbit", "3"), ("rate=10mbit", "1")})
