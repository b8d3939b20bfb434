"""The compiled part of the package (the metadata is in pyproject.toml)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("interop_runner.parsers._speedups",
                             ["interop_runner/parsers/_speedups.c"],
                             extra_compile_args=["-Wall", "-Wextra"])])
