"""Testbeds the runner can drive; :mod:`interop_runner.testbeds.local` builds one on this machine."""
