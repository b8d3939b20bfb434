"""LocalExecutor: same interface as the SSH executor (the SSH one is covered by the
integration tests on the namespace testbed)."""

import time

import pytest

from interop_runner.remote.executor import CommandFailed, CommandTimeout, LocalExecutor

from .conftest import wait_until


@pytest.fixture
def ex():
    """A LocalExecutor that kills every process group a test started, even if it failed."""
    executor = LocalExecutor("t")
    started = []
    real_start = executor.start

    def start(*args, **kwargs):
        proc = real_start(*args, **kwargs)
        started.append(proc)
        return proc

    executor.start = start  # type: ignore[method-assign]
    yield executor
    for proc in started:
        executor.kill_group(proc.pgid, grace=0)


def test_run_argv_is_not_shell_interpreted(ex, tmp_path):
    res = ex.run(["echo", "$HOME; rm -rf /", "a b"], timeout=5)
    assert res.ok and res.stdout == "$HOME; rm -rf / a b\n"
    assert res.stderr == ""  # the process-group marker is stripped


def test_env_and_cwd(ex, tmp_path):
    res = ex.run(["sh", "-c", 'echo "$FOO $(pwd)"'], timeout=5, env={"FOO": "x y"},
                 cwd=str(tmp_path))
    assert res.stdout.strip() == f"x y {tmp_path}"


def test_exit_code_and_check(ex):
    res = ex.run(["sh", "-c", "echo oops >&2; exit 3"], timeout=5, check=False)
    assert res.exit_code == 3 and res.stderr.strip() == "oops"
    with pytest.raises(CommandFailed, match="exited 3: oops"):
        ex.run(["sh", "-c", "echo oops >&2; exit 3"], timeout=5)


def test_timeout_kills_process_group(ex, tmp_path):
    pidfile = tmp_path / "child.pid"
    t0 = time.monotonic()
    with pytest.raises(CommandTimeout):  # `sleep 30`: a child that outlives the timeout
        ex.run(["sh", "-c", f'sleep 30 & echo $! > {pidfile}; wait'], timeout=0.5)
    assert time.monotonic() - t0 < 5
    child = int(pidfile.read_text())

    def gone() -> bool:  # reaped, or a zombie waiting for its parent
        try:
            return open(f"/proc/{child}/stat").read().split()[2] == "Z"
        except FileNotFoundError:
            return True
    wait_until(gone, timeout=10, what=f"the backgrounded child {child} to be killed")


def test_background_start_wait_stop(ex, tmp_path):
    out, err = str(tmp_path / "o"), str(tmp_path / "e")
    proc = ex.start(["sh", "-c", "echo hi; echo ho >&2; exit 5"], stdout=out, stderr=err)
    assert proc.pgid > 1
    assert ex.wait(proc, timeout=5) == 5
    assert open(out).read() == "hi\n" and open(err).read() == "ho\n"
    assert ex.poll(proc) == 5

    # the scenario: a group (shell and a grandchild) that runs until it is stopped
    proc = ex.start(["sh", "-c", "sleep 60 & sleep 60"], stdout=out, stderr=err)
    assert ex.poll(proc) is None and ex.alive(proc)
    with pytest.raises(CommandTimeout):
        ex.wait(proc, timeout=0.3)
    ex.stop(proc, grace=2)
    assert not ex.alive(proc)  # the whole group, including the grandchild, is gone


def test_stop_escalates_to_kill(ex, tmp_path):
    out = str(tmp_path / "o")
    # the scenario: a group that ignores TERM and runs until it is killed
    proc = ex.start(["sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.1; done"],
                    stdout=out, stderr=out + ".err")
    wait_until(lambda: open(out).read() == "ready\n", timeout=20, interval=0.01,
               what="the TERM trap to be installed ('ready' printed)")
    t0 = time.monotonic()
    ex.stop(proc, grace=1)
    assert not ex.alive(proc)
    assert 0.9 < time.monotonic() - t0 < 5


def test_files(ex, tmp_path):
    ex.write_text(str(tmp_path / "f"), "hello", mode=0o600)
    assert ex.read_text(str(tmp_path / "f")) == "hello"
    assert (tmp_path / "f").stat().st_mode & 0o777 == 0o600
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "x.sh").write_text("#!/bin/sh\n")
    (src / "sub" / "x.sh").chmod(0o755)
    ex.put_dir(src, str(tmp_path / "dst"))
    assert (tmp_path / "dst" / "sub" / "x.sh").stat().st_mode & 0o111


def test_bad_env_name(ex):
    with pytest.raises(ValueError):
        ex.run(["true"], timeout=5, env={"A=B": "x"})


def test_stop_many_with_sigint(ex, tmp_path):
    # Like sysstat tools, the program installs its own SIGINT handler (background jobs start
    # with SIGINT ignored, so a plain sh trap could not catch it).
    prog = ("import signal, sys, time\n"
            "signal.signal(signal.SIGINT, lambda *a: (print('got-int', flush=True), sys.exit(7)))\n"
            "print('ready', flush=True)\n"
            "time.sleep(60)\n")  # runs until stopped: the scenario, not a wait
    procs = [ex.start(["python3", "-c", prog], stdout=str(tmp_path / f"o{i}"),
                      stderr=str(tmp_path / f"e{i}")) for i in range(2)]
    done = ex.start(["true"], stdout=str(tmp_path / "d"), stderr=str(tmp_path / "de"))
    ex.wait(done, timeout=5)
    wait_until(lambda: all((tmp_path / f"o{i}").read_text() == "ready\n" for i in range(2)),
               timeout=20, interval=0.01, what="both SIGINT handlers to be installed")
    codes = ex.stop_many([*procs, done], grace=3, sig="INT")
    assert codes == [7, 7, 0]
    assert all(not ex.alive(p) for p in procs)
    assert (tmp_path / "o0").read_text() == "ready\ngot-int\n"


def test_missing_tools(ex):
    assert ex.missing_tools(["sh", "qir-no-such-tool", "ls"]) == ["qir-no-such-tool"]
    assert ex.missing_tools([]) == []
