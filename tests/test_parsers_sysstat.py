"""pidstat (two layouts) and mpstat JSON parsers."""

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from interop_runner.parsers import (
    ParseError,
    PidstatSample,
    mean_cpu_pct,
    parse_mpstat_json,
    parse_pidstat,
    pidstat_cpu_summary,
)

from .test_parsers_fuzz import FUZZ, damaged, texts

DATA = Path(__file__).parent / "data" / "parsers"


def read(name: str) -> str:
    return (DATA / name).read_text()


# --- pidstat, default layout (the 10G fixtures: 12-hour clock, Average rows) ---

def test_qir10g_server_pidstat():
    s = parse_pidstat(read("qir10g-lsquic-server-pidstat.txt"))
    assert len(s) == 23
    first = s[0]
    assert first.timestamp is None and first.time_of_day == "18:56:26"
    assert first.date == "2023-01-22"
    assert (first.uid, first.pid, first.tid, first.command) == (0, 6886, None, "http_server")
    assert (first.usr_pct, first.system_pct, first.cpu_pct, first.cpu) == (2.0, 3.0, 5.0, 16)
    assert first.rss_kib is None and first.cswch_s is None
    assert s[-1].time_of_day == "18:56:48"
    # awk '$NF=="http_server" && $1!="Average:" {s+=$9; n++}' -> 91.9130434783 over 23 rows
    assert mean_cpu_pct(s) == pytest.approx(91.9130434783)


def test_qir10g_client_pidstat_and_am():
    s = parse_pidstat(read("qir10g-lsquic-client-pidstat.txt"))
    assert len(s) == 21 and {x.command for x in s} == {"http_client"}
    assert mean_cpu_pct(s) == pytest.approx(91.2380952381)
    tcp = parse_pidstat(read("qir10g-tcp-client-pidstat.txt"))
    assert tcp[0].time_of_day == "10:49:55" and tcp[0].command == "wget"
    assert mean_cpu_pct(tcp) == pytest.approx(98.75)


def test_header_only_is_empty_not_error():
    text = read("qir10g-lsquic-server-pidstat.txt")
    headers_only = text[: text.index("06:56:26 PM     0")]
    assert headers_only.count("Command") == 14
    assert parse_pidstat(headers_only) == []
    assert parse_pidstat(read("pidstat-h-nopid.txt")) == []
    assert parse_pidstat("Linux 6.18 (vm) \t11/21/26 \t_x86_64_\t(2 CPU)\n\n") == []
    assert mean_cpu_pct([]) is None


def test_qir10g_two_processes():
    s = parse_pidstat(read("qir10g-tcp-server-pidstat.txt"))
    assert len(s) == 11 and {x.pid for x in s} == {20074, 20075}
    assert s[0].command == "nginx-server" and s[0].date == "2023-01-26"
    assert mean_cpu_pct(s) == pytest.approx(550 / 11)
    assert mean_cpu_pct(s, pid=20075) == pytest.approx(549 / 10)


def test_default_layout_24h():
    s = parse_pidstat(read("pidstat-G-24h.txt"))
    assert [(x.time_of_day, x.cpu_pct) for x in s] == [("12:00:47", 90.10), ("12:00:48", 84.16)]


# --- pidstat -h -H -u -r -w -t (the runner's layout) ---

def test_runner_layout_yes():
    s = parse_pidstat(read("pidstat-h-yes.txt"))
    assert len(s) == 6
    proc, thread = s[0], s[1]
    assert proc == PidstatSample(
        timestamp=1795262437.0, time_of_day=None, date="2026-11-21", uid=0, pid=18501,
        tid=None, command="yes", usr_pct=21.0, system_pct=74.0, guest_pct=0.0, wait_pct=5.0,
        cpu_pct=95.0, cpu=1, minflt_s=0.0, majflt_s=0.0, vsz_kib=2920, rss_kib=1528,
        mem_pct=0.01, cswch_s=0.0, nvcswch_s=185.0)
    assert (thread.pid, thread.tid, thread.command) == (18501, 18501, "yes")
    assert s[4].nvcswch_s == 288.46
    assert mean_cpu_pct(s) == pytest.approx((95.0 + 96.0 + 89.42) / 3)
    assert mean_cpu_pct(s, 1795262438, 1795262439) == pytest.approx((96.0 + 89.42) / 2)
    assert mean_cpu_pct(s, start_s=1795262439.5) is None


def test_runner_layout_threads():
    s = parse_pidstat(read("pidstat-h-threads.txt"))
    threads = [x for x in s if x.tid is not None]
    assert [x.tid for x in threads] == [19183, 19247, 19248] * 2
    assert all(x.pid == 19183 and x.command == "python3" for x in s)
    assert threads[1].cpu_pct == 45.54 and threads[1].wait_pct == 23.76
    assert mean_cpu_pct(s) == pytest.approx((93.07 + 89.00) / 2)


def test_clock_layout_has_no_epoch():
    s = parse_pidstat(read("pidstat-h-iso-clock.txt"))
    assert [(x.timestamp, x.time_of_day, x.date) for x in s] == [
        (None, "12:02:29", "2026-11-21"), (None, "12:02:30", "2026-11-21")]
    assert mean_cpu_pct(s) == 0.5
    assert mean_cpu_pct(s, start_s=0) is None


def test_several_processes_add_up_per_interval():
    text = ("# Time UID PID %usr %system %guest %wait %CPU CPU Command\n"
            "100 0 1 10.00 0.00 0.00 0.00 10.00 0 a\n"
            "100 0 2 30.00 0.00 0.00 0.00 30.00 1 b\n"
            "101 0 1 20.00 0.00 0.00 0.00 20.00 0 a\n")
    s = parse_pidstat(text)
    assert mean_cpu_pct(s) == pytest.approx((40.0 + 20.0) / 2)
    assert mean_cpu_pct(s, pid=2) == 30.0


def test_truncated_last_row_dropped():
    text = read("pidstat-h-yes.txt").rstrip("\n")
    cut = text[: text.rindex("0.00")]
    assert len(parse_pidstat(cut)) == 5


@pytest.mark.parametrize("text", [
    "",
    "hello\nworld\n",
    "# Time UID PID %usr %system %guest %wait %CPU CPU Command\n"
    "100 0 x 10.00 0.00 0.00 0.00 10.00 0 a\n100 0 1 10.00 0.00 0.00 0.00 10.00 0 a\n",
])
def test_pidstat_errors(text):
    with pytest.raises(ParseError):
        parse_pidstat(text)


# --- mpstat -o JSON ---

def test_mpstat_complete():
    s = parse_mpstat_json(read("mpstat-json.txt"))
    assert len(s) == 6
    first = s[0]
    assert first.cpu == "all" and first.time_of_day == "12:00:52"
    assert first.timestamp == datetime(2026, 11, 21, 12, 0, 52, tzinfo=timezone.utc).timestamp()
    assert (first.usr, first.sys, first.idle, first.gnice) == (1.52, 7.61, 90.86, 0.0)
    assert [x.cpu for x in s[:3]] == ["all", 0, 1]
    assert s[5].cpu == 1 and s[5].timestamp == first.timestamp + 1


def test_mpstat_regex_and_json_readings_agree():
    for name in ("mpstat-json.txt", "mpstat-json-iso.txt", "mpstat-json-sigint.txt"):
        text = read(name)
        reformatted = json.dumps(json.loads(text), indent=1)  # not sysstat's layout
        assert parse_mpstat_json(text) == parse_mpstat_json(reformatted)


def test_mpstat_iso_date():
    s = parse_mpstat_json(read("mpstat-json-iso.txt"))
    assert s[0].timestamp == datetime(2026, 11, 21, 12, 0, 54, tzinfo=timezone.utc).timestamp()
    assert s[2].iowait == 1.03


def test_mpstat_truncated_by_sigterm():
    text = read("mpstat-json-sigterm.txt")
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    s = parse_mpstat_json(text)
    assert len(s) == 6 and s[-1].time_of_day == "12:01:03" and s[-1].usr == 33.0
    cut = text[: text.index('{"cpu": "1", "usr": 33.00')]
    assert [x.time_of_day for x in parse_mpstat_json(cut)] == ["12:01:02"] * 3
    with pytest.raises(ParseError):
        parse_mpstat_json(text[: text.index('{"cpu": "0", "usr": 33.67')])


def test_mpstat_sigint_closes_document():
    s = parse_mpstat_json(read("mpstat-json-sigint.txt"))
    assert len(s) == 6 and s[-1].time_of_day == "12:01:06"


def test_mpstat_options():
    text = read("mpstat-json.txt")
    only_all = parse_mpstat_json(text, cpus={"all"})
    assert [x.cpu for x in only_all] == ["all", "all"]
    cet = parse_mpstat_json(text, tz=timezone(timedelta(hours=1)))
    assert cet[0].timestamp == parse_mpstat_json(text)[0].timestamp - 3600


def test_mpstat_12h_clock_and_missing_date():
    doc = {"sysstat": {"hosts": [{"statistics": [{"timestamp": "06:56:26 PM", "cpu-load": [
        {"cpu": "all", "usr": 1.0, "idle": 99.0}]}]}]}}
    (s,) = parse_mpstat_json(json.dumps(doc))
    assert s.time_of_day == "18:56:26" and s.timestamp is None and s.sys is None


@pytest.mark.parametrize("text", [
    "",
    "not json at all",
    '{"sysstat": {"hosts": [{"date": "11/21/26", "statistics": []}]}}',
    '{"sysstat": {"hosts": [{"date": "11/21/26", "statistics": [',
    '{"other": 1}',
])
def test_mpstat_errors(text):
    with pytest.raises(ParseError):
        parse_mpstat_json(text)


# --- the runner's summaries (monitors/samplers.py) ---

def _summary_rules(text: str, lo: float, hi: float) -> tuple[float | None, float | None]:
    """pidstat_cpu_summary's fast path as its docstring states it: every line of at least
    as many tokens as the "# Time" header names, not a "#" or "L" line, whose time and %CPU
    are numbers and whose time is not outside [lo, hi + 1]; process rows (TID "-") add up
    per time, thread rows average per TID."""
    lines = text.split("\n")
    header = next(ln.split()[1:] for ln in lines if ln.startswith("# Time"))
    rows = [ln.split() for ln in lines if ln[:1] not in ("", "#", "L")]
    per_time: dict[str, float] = {}
    per_tid: dict[str, list[float]] = {}
    for row in rows:
        if len(row) < len(header):
            continue
        try:
            time, share = float(row[0]), float(row[header.index("%CPU")])
        except ValueError:
            continue
        if time < lo or time > hi + 1:
            continue
        tid = row[header.index("TID")]
        if tid == "-":
            per_time[row[0]] = per_time.get(row[0], 0.0) + share
        else:
            per_tid.setdefault(tid, []).append(share)
    mean = sum(per_time.values()) / len(per_time) if per_time else None
    return mean, max((sum(v) / len(v) for v in per_tid.values()), default=None)


RUNNER_PIDSTAT = tuple(t for t in texts("pidstat-h-*.txt") if "TGID" in t and "# Time" in t)


def _runner_layout(text: str) -> bool:
    """The first "# Time" header names TGID, TID and %CPU: the summary's own rules apply
    (other layouts go through parse_pidstat)."""
    header = next((ln.split() for ln in text.split("\n") if ln.startswith("# Time")), [])
    return {"TGID", "TID", "%CPU"} <= set(header)


@FUZZ
@given(damaged(RUNNER_PIDSTAT).filter(_runner_layout),
       st.sampled_from([(float("-inf"), float("inf")), (1.7e9, 1.8e9), (0.0, 1.0)]))
def test_pidstat_summary_follows_its_rules(text: str, window: tuple[float, float]) -> None:
    got = pidstat_cpu_summary(text, *window)
    want = _summary_rules(text, *window)
    assert [repr(v) for v in got] == [repr(v) for v in want]  # NaN equals NaN here


def test_pidstat_summary_keeps_a_row_whose_time_is_nan() -> None:
    """float("nan") is a number that no window excludes (the comparisons are false)."""
    text = read("pidstat-h-threads.txt")
    row = next(ln for ln in text.split("\n") if ln[:1].isdigit() and " - " in ln)
    nan_row = text.replace(row, "nan" + row[row.index(" "):], 1)
    assert pidstat_cpu_summary(text, 0.0, 1.0) == (None, None)  # a window before it all
    got = pidstat_cpu_summary(nan_row, 0.0, 1.0)
    assert got == _summary_rules(nan_row, 0.0, 1.0) and got != (None, None)
