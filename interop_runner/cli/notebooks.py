"""``run.py notebooks [RESULTS...]``: the analysis notebooks (notebooks/) in JupyterLab.

JupyterLab is started on 127.0.0.1 only, with a fresh random token, its root in notebooks/ and
``QIR_RESULTS`` set to the given campaign or results directories (made absolute, so the
notebooks' kernels find them from notebooks/), which every notebook's parameter cell reads.
The URL with the token is printed once the server answers. Ctrl-C (or SIGTERM) stops the
server, which shuts its kernels down; whatever is still running after a grace period is killed,
so nothing is left behind.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from interop_runner.errors import UserError
from interop_runner.exit_codes import ExitCode
from interop_runner.paths import PROJECT_ROOT

INSTALL_HINT = ("pos_scripts/install.sh --notebook (as root), or pip install -e '.[notebook]' "
                "in your environment")
DEFAULT_PORT = 8888
START_TIMEOUT_S = 120.0  # a cold JupyterLab start on a busy 2-core machine
STOP_GRACE_S = 20.0
SESSION_VAR = "QIR_NOTEBOOKS_SESSION"  # marks the server's processes and its kernels


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Add ``notebooks``."""
    p = sub.add_parser(
        "notebooks", help="open the analysis notebooks in JupyterLab (127.0.0.1, with a token)",
        description="Start JupyterLab on 127.0.0.1 in notebooks/ with QIR_RESULTS set to the "
                    "given campaign or results directories (default: the notebooks' own "
                    "RESULTS, ../results) and print its URL with the token. Ctrl-C stops it "
                    "and its kernels.")
    p.add_argument("results", nargs="*", type=Path, metavar="RESULTS",
                   help="campaign directories (results/<name>_<time>) or results directories")
    p.add_argument("--port", type=int, default=None,
                   help=f"the port (default: the first free one from {DEFAULT_PORT})")
    p.add_argument("--browser", action=argparse.BooleanOptionalAction, default=None,
                   help="open a web browser (default: only with a display and not as root)")


def jupyter_lab() -> Path:
    """The ``jupyter-lab`` of this Python environment (else on PATH), or a UserError."""
    beside = Path(sys.executable).parent / "jupyter-lab"
    if beside.is_file():
        return beside
    found = shutil.which("jupyter-lab")
    if found is None:
        raise UserError(f"JupyterLab is not installed: run {INSTALL_HINT}")
    return Path(found)


def results_env(results: list[Path]) -> dict[str, str]:
    """``QIR_RESULTS`` for the given directories (absolute), after checking they exist."""
    for path in results:
        if not path.is_dir():
            raise UserError(f"{path}: no such results directory (give campaign directories "
                            "such as results/local_<time>, or a results directory)")
    if not results:
        return {}
    return {"QIR_RESULTS": ":".join(str(p.resolve()) for p in results)}


def free_port(start: int = DEFAULT_PORT, tries: int = 50) -> int:
    """The first port from ``start`` nothing listens on at 127.0.0.1."""
    for port in range(start, start + tries):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise UserError(f"no free port in {start}..{start + tries - 1}: give one with --port")


def lab_argv(lab: Path, port: int, token: str, browser: bool) -> list[str]:
    """The JupyterLab command line: localhost only, this token, notebooks/ as its root."""
    argv = [str(lab), "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={PROJECT_ROOT / 'notebooks'}",
            f"--ServerApp.open_browser={browser}", "--ServerApp.log_level=WARN",
            "--LabApp.log_level=WARN"]
    if os.geteuid() == 0:
        argv.append("--ServerApp.allow_root=True")
    return argv


def wait_ready(proc: "subprocess.Popen[bytes]", url: str, timeout: float) -> None:
    """Poll the server's status API until it answers; a UserError when it exits or hangs."""
    deadline = time.monotonic() + timeout
    while True:
        code = proc.poll()
        if code is not None:
            raise UserError(f"JupyterLab exited with status {code} before it answered (its "
                            "messages are above)")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() >= deadline:
            raise UserError(f"JupyterLab did not answer at {url} within {timeout:g} s")
        time.sleep(0.2)


def processes_with_env(var: str, value: str) -> list[int]:
    """The processes whose environment has ``var=value``; for ``QIR_NOTEBOOKS_SESSION``, the
    server and everything it started (kernels run in sessions of their own, so no process
    group has them all)."""
    mark = f"{var}={value}".encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if mark in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:  # gone, or not ours to read
            continue
    return found


def stop(proc: "subprocess.Popen[bytes]", session: str) -> None:
    """SIGTERM to the server, which shuts its kernels down; after the grace period SIGKILL to
    whatever of the session is left."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    deadline = time.monotonic() + STOP_GRACE_S
    while processes_with_env(SESSION_VAR, session) and time.monotonic() < deadline:
        time.sleep(0.2)  # kernels notice their server is gone and exit
    for pid in processes_with_env(SESSION_VAR, session):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def cmd_notebooks(args: argparse.Namespace) -> int:
    """Start JupyterLab, print its URL, wait until Ctrl-C or SIGTERM; exit 0 then."""
    lab = jupyter_lab()
    session = secrets.token_hex(8)
    env = {**os.environ, **results_env(args.results), SESSION_VAR: session}
    port = args.port if args.port is not None else free_port()
    token = secrets.token_hex(24)
    headless = not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    browser = args.browser if args.browser is not None else not (headless or os.geteuid() == 0)
    base = f"http://127.0.0.1:{port}"
    # SIGTERM as Ctrl-C before the server exists, so no signal finds it without its stop
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    proc: subprocess.Popen[bytes] | None = None
    try:
        # its own session: Ctrl-C reaches this process only, which stops the server in order
        proc = subprocess.Popen(lab_argv(lab, port, token, browser), env=env,
                                cwd=PROJECT_ROOT / "notebooks", start_new_session=True)
        wait_ready(proc, f"{base}/api/status?token={token}", START_TIMEOUT_S)
        where = env.get("QIR_RESULTS", "the notebooks' RESULTS (../results)")
        print(f"JupyterLab: {base}/lab?token={token}\nresults: {where}\n"
              "Ctrl-C stops it", flush=True)
        code = proc.wait()
        return ExitCode.OK if code == 0 else ExitCode.RUNTIME_ERROR
    except KeyboardInterrupt:
        print("stopping JupyterLab", file=sys.stderr)
        return ExitCode.OK
    finally:
        if proc is not None:
            stop(proc, session)
        signal.signal(signal.SIGTERM, previous)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
