"""The exceptions that cross layers, in one place (the model is invoke's ``exceptions``).

Every layer may raise and catch these without importing the layer that defines the work:
the CLI turns a :class:`UserError` (and the other one-line errors below) into one line on
stderr and a non-zero exit, never a traceback. Exceptions private to one module stay there.
"""

from __future__ import annotations


class QirError(Exception):
    """Base of the runner's own exceptions."""


class UserError(QirError):
    """An error to show as one line, without a traceback."""


class ConfigError(QirError):
    """A configuration file is invalid; ``lines`` holds one message per problem."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        super().__init__("\n".join(lines))


class RegistryError(QirError):
    """An implementation folder is broken (bad or missing meta.yml)."""


class StoreError(QirError):
    """A result file or directory cannot be written or read as expected."""


class SchemaError(StoreError):
    """A stored document has a schema version this runner cannot read (newer, or unknown)."""


class DamagedResults(StoreError):
    """Stored results hold files that cannot be read (a torn, empty or foreign ``run.json`` or
    ``campaign.json``): ``lines`` names each file and what is wrong with it. No verdict and no
    pass comes of them: the commands that read results exit 2 (``ExitCode.USAGE``)."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        super().__init__("\n".join(lines))


class ExecutorError(QirError):
    """A command could not be run or did not succeed."""


class ConnectError(ExecutorError):
    """A node could not be reached or authenticated."""


class ConnectionLost(ExecutorError):
    """The SSH connection dropped while a command ran and was re-established; the command's
    outcome is unknown (its process group, if known, was killed after reconnecting)."""


class HostKeyError(ConnectError):
    """A node offered a host key that differs from the one in known_hosts (always refused)."""


class TestbedUnreachable(QirError):
    """A node of the testbed file cannot be reached or authenticated before anything ran
    (the command line's exit code 2, like an invalid configuration)."""

    __test__ = False  # not a test class for pytest, whatever its name


class NodeBusy(ExecutorError):
    """Another runner holds the node's lease."""


class EngineError(ExecutorError):
    """A node's Docker Engine is unreachable or refused a request (names node and request)."""


class KnobError(QirError):
    """A knob cannot be applied on a node (the message names node and knob)."""


class PathError(QirError):
    """An emulated path cannot be built, calibrated or kept up (the message names the node,
    the parameter and, for calibration, configured against measured)."""


class PreflightError(QirError):
    """A node is not fit for the campaign (missing tool, not enough space, ...)."""


class SetupError(PreflightError):
    """An implementation's ``setup`` (build/install) failed; ``tail`` holds its last lines."""

    def __init__(self, message: str, tail: str) -> None:
        super().__init__(message)
        self.tail = tail


class TestbedError(QirError):
    """The local testbed cannot be brought up, inspected or torn down (one-line message)."""

    __test__ = False  # not a pytest test class despite the name


class ReportError(QirError, ValueError):
    """The report cannot be built from the given input (one-line message)."""
