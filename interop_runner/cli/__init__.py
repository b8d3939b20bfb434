"""The ``run.py`` / ``qir`` command line: :func:`main` parses the arguments, runs one command
and returns its exit code."""

from interop_runner.cli.main import main

__all__ = ["main"]
