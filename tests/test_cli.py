"""The command line's wiring: every command is reachable under its name, errors become one
``error:`` line and the documented exit code, and ``python -m interop_runner`` is the same
program as ``run.py``. Nothing here reaches a node."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from interop_runner import errors
from interop_runner.cli import main
from interop_runner.cli import run as cli_run
from interop_runner.cli.main import COMMANDS, EPILOG, build_parser
from interop_runner.cli.main import main as module_main
from interop_runner.errors import (
    ConfigError,
    ExecutorError,
    KnobError,
    PreflightError,
    RegistryError,
    StoreError,
    UserError,
)
from interop_runner.exit_codes import ExitCode

ROOT = Path(__file__).resolve().parent.parent
GOOD = ROOT / "tests" / "data" / "bad_input" / "good.yml"  # valid, on an unreachable testbed
ORDER = ["run", "validate", "testbed", "list", "parse", "matrix", "summary", "report", "compare",
         "sources", "history", "notebooks", "path"]
SAMPLE = ROOT / "tests" / "data" / "results-sample"


def subcommands(parser: argparse.ArgumentParser) -> list[str]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(action.choices)


def test_every_command_is_registered_and_dispatched() -> None:
    assert subcommands(build_parser()) == ORDER
    assert list(COMMANDS) == ORDER
    assert module_main is main  # what `from interop_runner.cli import main` gives


@pytest.mark.parametrize("command", ["", *ORDER])
def test_help_of_every_command(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main([command, "--help"] if command else ["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: run.py {command}".rstrip())


def test_exit_codes_keep_their_documented_values() -> None:
    """CI jobs gate on these numbers, and ``run.py --help`` names each one."""
    assert {c.name: c.value for c in ExitCode} == {
        "OK": 0, "RUNTIME_ERROR": 1, "USAGE": 2, "TESTBED_UNHEALTHY": 3, "NO_OK_ATTEMPT": 4,
        "SLOWER_OR_REGRESSION": 5, "INTERRUPTED": 130}
    for code in ExitCode:
        assert f"{code.value} " in EPILOG, code


@pytest.mark.parametrize("exc,code", [
    (ConfigError(["c.yml: pairs[0].server: unknown implementation 'x'"]), 2),
    (errors.TestbedUnreachable("testbed t: server: connection refused"), 2),
    (UserError("x: not a campaign directory"), 1),
    (ExecutorError("server: ssh dropped"), 1),
    (PreflightError("server: missing tools: ss"), 1),
    (StoreError("x/run.json: broken"), 1),
    (RegistryError("meta.yml: invalid"), 1),
    (KnobError("rmem: cannot set"), 1),
    (OSError("[Errno 21] Is a directory: 'out'"), 1),
])
def test_errors_are_one_line_and_an_exit_code(exc: Exception, code: int,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    def fail(args: argparse.Namespace) -> int:
        raise exc

    monkeypatch.setitem(COMMANDS, "list", fail)
    assert main(["list"]) == code
    out, err = capsys.readouterr()
    expected = exc.lines if isinstance(exc, ConfigError) else [str(exc)]
    assert out == "" and err.splitlines() == [f"error: {line}" for line in expected]


def dry_run_lines(capsys: pytest.CaptureFixture[str], *extra: str) -> list[str]:
    """The output of ``run good.yml --dry-run`` (run from the repository root)."""
    assert main(["run", str(GOOD.relative_to(ROOT)), "--dry-run", *extra]) == 0
    return capsys.readouterr().out.splitlines()


def test_dry_run_prints_the_plan(capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    out = dry_run_lines(capsys)
    assert out[0].split() == ["quic-go", "->", "quic-go", "rep", "1", "alpn=h3"]
    assert out[1] == ("1 run(s) (1 variant(s) x 1 pair(s) x 1 repetition(s), order "
                      "sequential), 1 to run; file 1.00 MiB, testbed unreachable")
    assert out[2] == ("estimated 1 s (a guess: no earlier results of testbed 'unreachable' in "
                      "results/; 1 Gbit/s or the path's rate and 1 s overhead per run "
                      "assumed)")


def test_dry_run_estimates_from_earlier_results(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from .test_estimate import Att, store_campaign

    monkeypatch.chdir(ROOT)
    for day, mbps in (("01", 4.0), ("02", 8.0)):
        store_campaign(tmp_path, f"202611{day}T000000Z",
                       [Att("quic-go", "quic-go", mbps, 2, 0.5),
                        Att("quic-go", "quic-go", mbps, 3, 0.5)],
                       testbed="unreachable", wall_s=5.0)
    store_campaign(tmp_path, "20261103T000000Z", [Att("quic-go", "quic-go", 1.0)])  # "local"
    out = dry_run_lines(capsys, "--results-dir", str(tmp_path))
    # 1 MiB at the median 6 Mbit/s: 1.4 s; overhead 0.5 s; setup 5 s - 1.5 s span
    assert out[2] == ("estimated 5 s: transfers from this testbed's recent goodput of 1 pair, "
                      "overhead 0.5 s per run and 3.5 s setup measured over 2 campaigns")


def shuffled_config(path: Path, repetitions: int = 3) -> Path:
    """A campaign file on the unreachable testbed whose runs are shuffled."""
    path.write_text(f"name: bad\ntestbed: {GOOD.parent / 'testbeds' / 'base.yml'}\n"
                    f"file_size: 1MiB\nrepetitions: {repetitions}\n"
                    "pairs: [{server: quic-go, client: quic-go}]\n"
                    "sweep: {order: shuffled, axes: [{path: knobs.rmem, values: [1x, 2x]}]}\n")
    return path


def stored_campaign(directory: Path, config: Path, seed: int) -> Path:
    """A campaign directory as a campaign of ``config`` begins it: its campaign.json, built
    by the storage layer's builder; nothing ran."""
    from interop_runner.config.loader import load_campaign_testbeds
    from interop_runner.storage.campaign_record import PlanInfo, new_campaign_record, write_campaign

    cfg, _ = load_campaign_testbeds(config)
    directory.mkdir()
    record = new_campaign_record(directory.name, cfg.model_dump(), {}, 6,
                                 PlanInfo(order="shuffled", seed=seed, variants=["a", "b"]))
    write_campaign(directory / "campaign.json", record)
    return directory


def test_dry_run_of_a_resume_uses_the_stored_seed(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    cfg = shuffled_config(tmp_path / "shuffled.yml")
    stored = stored_campaign(tmp_path / "bad_20260101T000000Z", cfg, seed=1234)
    code = main(["run", str(cfg), "--dry-run", "--resume", str(stored)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "order shuffled, seed 1234)" in out


def test_a_changed_config_is_refused_on_resume_also_in_a_dry_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``run --dry-run --resume`` builds the plan a real resume builds, so it refuses a config
    that differs from the stored one with the same line and exit code (and connects to
    nothing: the testbed is unreachable)."""
    monkeypatch.chdir(ROOT)
    cfg = shuffled_config(tmp_path / "shuffled.yml")
    stored = stored_campaign(tmp_path / "bad_20260101T000000Z", cfg, seed=1234)
    before = (stored / "campaign.json").read_bytes()
    shuffled_config(cfg, repetitions=4)
    outcomes = []
    for dry in (["--dry-run"], []):
        code = main(["run", str(cfg), *dry, "--resume", str(stored),
                     "--results-dir", str(tmp_path / "results"), "--no-progress"])
        outcomes.append((code, *capsys.readouterr()))
    refused = f"error: {stored}: cannot resume: the config differs from the stored one in " \
              "repetitions\n"
    assert outcomes == [(1, "", refused), (1, "", refused)]
    assert (stored / "campaign.json").read_bytes() == before


@pytest.mark.parametrize("argv,message", [
    (["run", "{good}", "--resume", "{tmp}"], "{tmp}: not a campaign directory (no campaign.json)"),
    (["run", "{good}", "--results-dir", "{file}"],
     "{file}: the results directory is not a directory"),
    (["run", "{good}", "--results-dir", "{file}/below"],
     "{file}/below: cannot create the results directory below the file {file}"),
    (["parse", "{tmp}", "-o", "{tmp}/out.txt"],
     "{tmp}/out.txt: output must end in .parquet or .csv"),
    (["matrix", "{tmp}"], "no attempts found below {tmp}"),
])
def test_user_errors_before_anything_runs(argv: list[str], message: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    names = {"good": str(GOOD), "tmp": str(tmp_path), "file": str(tmp_path / "a-file")}
    (tmp_path / "a-file").write_text("")
    assert main([a.format(**names) for a in argv]) == 1
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"error: {message.format(**names)}\n")


def test_no_progress_shows_no_bar() -> None:
    args = argparse.Namespace(no_progress=True)
    assert cli_run._progress(args, None) is None  # type: ignore[arg-type]


def test_python_dash_m_is_run_py(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    outputs = []
    for argv in ([sys.executable, "-m", "interop_runner", "--help"],
                 [sys.executable, str(ROOT / "run.py"), "--help"]):
        proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        outputs.append(proc.stdout)
    assert outputs[0] == outputs[1] and outputs[0].startswith("usage: run.py ")


def test_list_says_how_each_implementation_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert " native " in rows["lsquic"] and " 4.9.3 " in rows["lsquic"]
    assert " native " in rows["picoquic"] and "d199d45b (2026-08-16)" in rows["picoquic"]
    assert " image (debian-trixie) " in rows["nginx-h3"]
    # the columns line up whatever the longest version is
    starts = {line.index("roles=") for line in rows.values()}
    assert len(starts) == 1, starts


def test_summary_prints_the_table_that_ended_the_run(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """`run.py summary DIR...` of stored campaigns: per campaign a line naming it, then the
    very table `run.py run` printed at the end of its run."""
    import shutil

    from interop_runner.measure.outcome import CampaignResult

    copies = [Path(shutil.copytree(SAMPLE, tmp_path / n / SAMPLE.name)) for n in ("a", "b")]
    assert cli_run._print_result(CampaignResult(copies[0], wall_s=1.0)) == ExitCode.OK
    ran = capsys.readouterr().out.splitlines()
    assert ran[-2:] == ["", f"results: {copies[0]}  (1 attempt(s), 1.0 s wall time; goodput in "
                            "Mbit/s; CPU cost in CPU-s/GiB: user + system seconds of each "
                            "side's processes per GiB delivered)"]
    assert main(["summary", str(copies[0])]) == ExitCode.OK
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"sample_20261121T121934Z: 1 attempt(s) ({copies[0]})", *ran[:-2]]
    assert lines[2].split() == ["quic-go", "quic-go", "1", "1", "0", "0", "0", "905.9",
                                "905.9", "905.9", "6.4", "7.0", "undetermined", "(1/1)"]
    assert main(["summary", *map(str, copies)]) == ExitCode.OK  # one block per campaign
    both = capsys.readouterr().out.split("\n\n")
    assert [b.splitlines()[0] for b in both] == [
        f"sample_20261121T121934Z: 1 attempt(s) ({c})" for c in copies]


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "missing", "{d}/missing: no such directory"),
    (lambda d: d / "a-file", "{d}/a-file: not a directory"),
    (lambda d: d, "{d}: not a results directory (no campaign.json in it or in its "
                  "subdirectories, and no predecessor result.json)"),
])
def test_summary_of_a_missing_or_unusable_directory_is_one_line_exit_2(
        make: Callable[[Path], Path], message: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a-file").write_text("")
    assert main(["summary", str(make(tmp_path))]) == ExitCode.USAGE
    assert capsys.readouterr() == ("", f"error: {message.format(d=tmp_path)}\n")


def test_summary_of_an_unreadable_directory_is_one_line_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """(As root no permission bit keeps a directory from being listed: the listing fails
    here as it does for another user.)"""
    def refused(self: Path) -> Any:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "iterdir", refused)
    assert main(["summary", str(tmp_path)]) == ExitCode.USAGE
    assert capsys.readouterr() == ("", f"error: {tmp_path}: cannot read: Permission denied\n")


def test_summary_of_a_damaged_campaign_is_one_line_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "campaign.json").write_text("{not json")
    assert main(["summary", str(tmp_path)]) == ExitCode.USAGE
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"error: {tmp_path / 'campaign.json'}: ")
    assert err.count("\n") == 1
