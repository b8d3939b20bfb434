"""The management host as the local testbed uses it: its tools and the commands it runs.

:class:`Host` is the testbed's one piece of mutable state: the paths of the tools found so far
and the sshd version, learnt once per :class:`~interop_runner.testbed.local.LocalTestbed`.
All commands run through :class:`~interop_runner.remote.executor.LocalExecutor` as argv lists.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Sequence

from interop_runner.errors import ExecutorError, TestbedError
from interop_runner.remote.executor import LocalExecutor, Result

CMD_TIMEOUT_S = 15.0

# Tools the testbed needs, with the Debian package that provides each.
REQUIRED_TOOLS: tuple[tuple[str, str], ...] = (
    ("sshd", "openssh-server"), ("ip", "iproute2"), ("ssh-keygen", "openssh-client"),
    ("sysctl", "procps"), ("ethtool", "ethtool"),  # the router's forwarding and offloads
)
# Tools a node's Docker Engine needs; without them the testbed runs without engines.
ENGINE_TOOLS: tuple[tuple[str, str], ...] = (
    ("dockerd", "docker.io"), ("docker", "docker.io"), ("containerd", "containerd"),
    ("runc", "runc"), ("nsenter", "util-linux"), ("setsid", "util-linux"),
    ("mount", "mount"), ("umount", "mount"),
)
SBIN_DIRS: tuple[str, ...] = ("/usr/sbin", "/sbin", "/usr/local/sbin")
ENGINE_SBIN_DIRS: tuple[str, ...] = ("/usr/local/sbin", "/usr/sbin", "/sbin")


def find_tool(name: str) -> str | None:
    """Absolute path of a tool: ``$PATH`` first, then the sbin directories (or None)."""
    found = shutil.which(name)
    if found:
        return os.path.abspath(found)
    for directory in SBIN_DIRS:
        path = os.path.join(directory, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def missing_tool(name: str, tools: Sequence[tuple[str, str]]) -> TestbedError:
    """The error for a tool that is not installed, naming its package."""
    package = dict(tools).get(name, name)
    return TestbedError(f"local testbed: missing tool {name!r} "
                        f"(install {package}, see pos_scripts/install.sh)")


class Host:
    """Runs the testbed's commands on this machine and remembers what it found out."""

    def __init__(self, executor: LocalExecutor | None = None) -> None:
        self.executor = executor or LocalExecutor("testbed")
        self.tool_paths: dict[str, str] = {}  # tool name -> absolute path (REQUIRED_TOOLS)
        self.sshd_version: tuple[int, int] | None = None  # (major, minor); (0, 0): unknown

    def run(self, argv: Sequence[str], *, check: bool = True, timeout: float = CMD_TIMEOUT_S,
            env: dict[str, str] | None = None) -> Result:
        """Run a command; its failure (with ``check``) or timeout is a :class:`TestbedError`."""
        try:
            return self.executor.run(list(argv), timeout=timeout, check=check, env=env)
        except ExecutorError as exc:
            raise TestbedError(f"local testbed: {exc}") from None

    def ip(self, *args: str, ns: str | None = None, check: bool = True) -> Result:
        """``ip [-n ns] args...``."""
        return self.run([self.tool("ip"), *(["-n", ns] if ns else []), *args], check=check)

    def tool(self, name: str) -> str:
        """Path of a testbed tool, found once (:class:`TestbedError` when missing)."""
        if name not in self.tool_paths:
            path = find_tool(name)
            if path is None:
                raise missing_tool(name, REQUIRED_TOOLS)
            self.tool_paths[name] = path
        return self.tool_paths[name]

    def check_tools(self) -> None:
        """Look every required tool up again (one may have been removed since)."""
        for name, _package in REQUIRED_TOOLS:
            self.tool_paths.pop(name, None)
            self.tool(name)

    def find_engine_tool(self, name: str) -> str | None:
        """Path of an engine tool (``$PATH``, then the sbin directories), looked up at each
        call: whether the engines are available is decided anew by every ``up`` and
        ``status``."""
        path = os.pathsep.join([os.environ.get("PATH", ""), *ENGINE_SBIN_DIRS])
        found = shutil.which(name, path=path)
        return os.path.abspath(found) if found else None

    def engine_tool(self, name: str) -> str:
        """Path of an engine tool (:class:`TestbedError` when missing)."""
        path = self.find_engine_tool(name)
        if path is None:
            raise missing_tool(name, ENGINE_TOOLS)
        return path

    def engines_unavailable(self) -> str | None:
        """Why this machine cannot run the engines (missing tools and their packages), or
        None."""
        missing = [(name, pkg) for name, pkg in ENGINE_TOOLS
                   if self.find_engine_tool(name) is None]
        if not missing:
            return None
        packages = sorted({pkg for _, pkg in missing})
        return (f"{', '.join(name for name, _ in missing)} not installed (install "
                f"{' '.join(packages)}, see pos_scripts/install.sh)")


def write_if_changed(path: Path, text: str, mode: int = 0o600) -> bool:
    """Atomically write ``text`` unless the file already holds it; return True if written."""
    try:
        if path.read_text() == text:
            if path.stat().st_mode & 0o777 != mode:
                os.chmod(path, mode)
            return False
    except OSError:
        pass
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)
    return True


def ensure_dir(path: Path, mode: int) -> None:
    """Create a directory (and its parents) and give it ``mode``."""
    path.mkdir(mode=mode, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o777 != mode:
        os.chmod(path, mode)
