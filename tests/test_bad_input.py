"""Bad input: every broken campaign or testbed file in tests/data/bad_input/ is refused with one
`error:` line naming the key, host or file to fix, exit status 2, no traceback, nothing written.

The files carry what their error line must contain in their first line (``# expect: ...``);
see tests/data/bad_input/README.md. Every file goes through ``cli.main`` for ``validate``,
``run --dry-run`` and ``run`` (in-process, fast); one file of each kind also through ``run.py``
in a subprocess for all three (each subprocess costs 1-3 s of imports, so not all ~95 files).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from interop_runner.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
BAD = ROOT / "tests" / "data" / "bad_input"
CASES = sorted(p for p in BAD.glob("*.yml") if p.name != "good.yml")
# one of each kind, for the (slower) subprocess runs of run.py
SAMPLE = ["yaml-syntax.yml", "binary.yml", "unknown-key-perf.yml", "size-parsecs.yml",
          "undeclared-param.yml", "name-traversal.yml", "tb-duplicate-roles.yml",
          "tb-missing-key-file.yml"]
UNREACHABLE = "198.18.255.254"


def expectation(path: Path) -> str:
    first = path.read_bytes().split(b"\n", 1)[0].decode()
    assert first.startswith("# expect: "), f"{path.name}: first line must be '# expect: ...'"
    return first.removeprefix("# expect: ").strip()


def command(kind: str, path: Path, results: Path) -> list[str]:
    rel = str(path.relative_to(ROOT))
    if kind == "validate":
        return ["validate", rel]
    if kind == "dry-run":
        return ["run", rel, "--dry-run"]
    return ["run", rel, "--results-dir", str(results), "--no-progress"]


def run_py(args: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def check_refused(path: Path, code: int, out: str, err: str, results: Path) -> None:
    expected = expectation(path)
    assert "Traceback" not in out + err, err
    assert code == 2, (code, err)
    lines = err.splitlines()
    assert len(lines) == 1, lines  # one problem per file: exactly one line
    line = lines[0]
    assert line.startswith("error: ") and line.strip() != "error:", line
    assert expected in line, (expected, line)
    # the line names the file the user has to edit (the campaign, or its testbed)
    named = line.removeprefix("error: ").split(":", 1)[0]
    assert named.endswith(".yml") and (ROOT / named).is_file(), line
    assert out == ""
    assert not results.exists()  # nothing written


def test_corpus_is_complete() -> None:
    names = {p.stem for p in CASES}
    for must in ("yaml-syntax", "unknown-key-top", "unknown-key-perf", "type-repetitions",
                 "size-zero", "size-negative", "size-parsecs", "size-huge", "unknown-impl-server",
                 "undeclared-param", "testbed-missing", "tb-missing-key-file",
                 "tb-duplicate-roles", "name-traversal", "duplicate-key", "tb-duplicate-node",
                 "binary", "tb-dotdot-workdir", "param-nul", "tb-two-routers",
                 "tb-router-no-server-iface", "tb-server-iface-on-server",
                 "tb-via-router-on-router", "tb-via-router-one-endpoint",
                 "tb-via-router-no-router", "path-buffer-below-mtu", "path-bdp-without-rtt",
                 "path-links-one", "path-trace-missing", "path-trace-unparsable",
                 "path-reorder-without-links", "path-backend-unknown", "path-rate-inf"):
        assert must in names
    # issue 35's classes, each with cases of its own (the prefix names the class)
    classes = {"yaml11": 3, "bare": 13, "dead": 8, "bound": 6, "early": 4, "label": 3,
               "sweep": 2, "vague": 2}
    for prefix, count in classes.items():
        assert sum(n.split("-", 1)[0] == prefix for n in names) >= count, prefix
    # a path's trace files sit in traces/ (only the one that must be missing is not there)
    assert (BAD / "traces" / "bad.trace").is_file()
    assert not (BAD / "traces" / "missing.trace").exists()
    assert all(p.name in {c.name for c in CASES} for p in (BAD / s for s in SAMPLE))
    # every broken testbed is used by a tb-<name>.yml campaign
    testbeds = sorted((BAD / "testbeds").glob("*.yml"))
    assert {"base.yml", "duplicate-roles.yml", "missing-key-file.yml"} <= \
        {tb.name for tb in testbeds}  # the loop below runs over the corpus, not over nothing
    for tb in testbeds:
        if tb.name != "base.yml":
            assert (BAD / f"tb-{tb.name}").is_file(), tb
            assert expectation(BAD / f"tb-{tb.name}") == expectation(tb)


@pytest.mark.parametrize("kind", ["validate", "dry-run", "run"])
@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_refused_in_process(path: Path, kind: str, tmp_path: Path,
                            capfd: pytest.CaptureFixture[str],
                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # key paths in testbeds/base.yml are relative to the repository
    before = listing(BAD)
    results = tmp_path / "results"
    code = main(command(kind, path, results))
    out, err = capfd.readouterr()
    check_refused(path, code, out, err, results)
    assert listing(BAD) == before


@pytest.fixture(scope="module")
def subprocess_results(tmp_path_factory: pytest.TempPathFactory) -> dict[
        tuple[str, str], tuple[subprocess.CompletedProcess[str], Path]]:
    """run.py validate, run --dry-run and run on the sample, two at a time."""
    base = tmp_path_factory.mktemp("bad_input")
    jobs = [(kind, BAD / name) for name in SAMPLE for kind in ("validate", "dry-run", "run")]

    def one(job: tuple[str, Path]) -> tuple[tuple[str, str], tuple[
            subprocess.CompletedProcess[str], Path]]:
        kind, path = job
        results = base / f"{kind}-{path.stem}" / "results"
        return (kind, path.name), (run_py(command(kind, path, results)), results)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(one, jobs))


@pytest.mark.parametrize("kind", ["validate", "dry-run", "run"])
@pytest.mark.parametrize("name", SAMPLE)
def test_refused_by_run_py(name: str, kind: str, subprocess_results: dict[
        tuple[str, str], tuple[subprocess.CompletedProcess[str], Path]]) -> None:
    proc, results = subprocess_results[(kind, name)]
    check_refused(BAD / name, proc.returncode, proc.stdout, proc.stderr, results)


def test_unknown_key_hint_replaces_missing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """A misspelt required key is one problem: no extra 'required key is missing' line."""
    monkeypatch.chdir(ROOT)
    lines = [config_error_line(BAD / name) for name in
             ("unknown-key-pair.yml", "unknown-key-sweep-axis.yml", "tb-unknown-key.yml")]
    assert lines == [
        f"error: {BAD.relative_to(ROOT)}/unknown-key-pair.yml: pairs[0].clinet: unknown key "
        "'clinet' (did you mean 'client'?)",
        f"error: {BAD.relative_to(ROOT)}/unknown-key-sweep-axis.yml: sweep.axes[0].valuse: "
        "unknown key 'valuse' (did you mean 'values'?)",
        f"error: {BAD.relative_to(ROOT)}/testbeds/unknown-key.yml: nodes.server.interfce: "
        "unknown key 'interfce' (did you mean 'interface'?)",
    ]


def config_error_line(path: Path) -> str:
    from interop_runner.config.loader import check_ssh_files, load_campaign_testbeds
    from interop_runner.errors import ConfigError

    rel = path.relative_to(ROOT)
    try:
        cfg, testbeds = load_campaign_testbeds(rel)
        check_ssh_files(rel, cfg, testbeds)
    except ConfigError as exc:
        (line,) = exc.lines
        return f"error: {line}"
    raise AssertionError(f"{path} was accepted")


def test_several_problems_one_line_each(tmp_path: Path) -> None:
    """The CLI lists every problem it finds, one `error:` line each, in file order."""
    text = (BAD / "good.yml").read_text().replace("testbeds/base.yml", str(BAD / "testbeds"
                                                                           / "base.yml"))
    bad = tmp_path / "many.yml"
    bad.write_text(text.replace("repetitions: 1", "repetitions: 0")
                   .replace("file_size: 1MiB", "file_size: 12 parsecs") + "keylog: maybe\n")
    proc = run_py(["validate", str(bad)])
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        f"error: {bad}: file_size: cannot parse size '12 parsecs' (use e.g. 8GiB, 50MiB, 10MB "
        "or bytes)",
        f"error: {bad}: repetitions: Input should be greater than or equal to 1 (got 0)",
        f"error: {bad}: keylog: Input should be a valid boolean, unable to interpret input "
        "(got 'maybe')",
    ]


def test_missing_campaign_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yml"
    for args in (["validate", str(missing)], ["run", str(missing), "--dry-run"],
                 ["run", str(missing), "--results-dir", str(tmp_path / "r")]):
        proc = run_py(args)
        assert proc.returncode == 2
        assert proc.stderr.splitlines() == [f"error: {missing}: file not found"]
        assert not (tmp_path / "r").exists()


def test_unreachable_host_fails_fast_with_one_line(tmp_path: Path) -> None:
    """good.yml is valid; its hosts never answer: validate and the dry run pass, `run` stops
    within seconds (connect_timeout: 1) with exit status 1 naming the host, no traceback
    (paramiko's own thread logs one unless told not to), and no attempt is recorded; the
    campaign directory keeps campaign.json with the reason."""
    good = BAD / "good.yml"
    rel = str(good.relative_to(ROOT))
    proc = run_py(["validate", rel])
    assert (proc.returncode, proc.stderr) == (0, "")
    assert "1 pair(s) x 1 repetition(s), file 1.00 MiB, testbed unreachable" in proc.stdout
    proc = run_py(["run", rel, "--dry-run"])
    assert (proc.returncode, proc.stderr) == (0, "")
    assert "1 run(s)" in proc.stdout and "quic-go -> quic-go" in proc.stdout
    results = tmp_path / "results"
    t0 = time.monotonic()
    proc = run_py(["run", rel, "--results-dir", str(results), "--no-progress"], timeout=60)
    elapsed = time.monotonic() - t0
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 2, proc.stderr  # the testbed file names a host that is wrong
    (line,) = proc.stderr.splitlines()
    assert line.startswith("error: testbed ") and ": server: " in line and UNREACHABLE in line
    assert elapsed < 30, elapsed
    assert not results.exists() or not list(results.iterdir())  # nothing written


@pytest.mark.parametrize("case", ["results-dir-is-a-file", "results-dir-below-a-file",
                                  "resume-not-a-campaign", "resume-corrupt-dry-run",
                                  "resume-corrupt"])
def test_bad_run_options_are_one_line(case: str, tmp_path: Path) -> None:
    """Bad command-line paths of a valid campaign: exit status 1 (not a config error), one
    `error:` line naming the path, no traceback, no campaign directory and no SSH attempt."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    corrupt = tmp_path / "camp"
    corrupt.mkdir()
    (corrupt / "campaign.json").write_text("{not json")
    rel = str((BAD / "good.yml").relative_to(ROOT))
    args, named = {
        "results-dir-is-a-file": (["--results-dir", str(afile)], str(afile)),
        "results-dir-below-a-file": (["--results-dir", str(afile / "sub")], str(afile / "sub")),
        "resume-not-a-campaign": (["--resume", str(tmp_path), "--dry-run"], str(tmp_path)),
        "resume-corrupt-dry-run": (["--resume", str(corrupt), "--dry-run"],
                                   f"{corrupt}/campaign.json: cannot resume"),
        "resume-corrupt": (["--resume", str(corrupt), "--results-dir", str(tmp_path / "r")],
                           f"{corrupt}/campaign.json: cannot resume"),
    }[case]
    before = listing(tmp_path)
    t0 = time.monotonic()
    proc = run_py(["run", rel, "--no-progress", *args])
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 1, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("error: ") and named in line, line
    assert UNREACHABLE not in line  # refused before connecting
    assert time.monotonic() - t0 < 30
    assert listing(tmp_path) == before
