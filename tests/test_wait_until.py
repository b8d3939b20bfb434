"""The shared polling helper of the tests (conftest.wait_until): it returns as soon as the
condition holds and fails, naming what it waited for, when it never does."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from .conftest import wait_until


def test_returns_the_value_once_the_condition_holds(tmp_path: Path) -> None:
    path = tmp_path / "late"
    timer = threading.Timer(0.2, path.write_text, args=("ready",))
    timer.start()
    try:
        # the file does not exist at first: FileNotFoundError counts as "not yet"
        assert wait_until(lambda: path.read_text() == "ready", timeout=30,
                          what="the file") is True
        assert wait_until(lambda: path.read_text(), timeout=1) == "ready"
    finally:
        timer.join()


def test_fails_naming_what_it_waited_for() -> None:
    t0 = time.monotonic()
    with pytest.raises(pytest.fail.Exception,
                       match=r"timed out after 0.2 s waiting for the moon"):
        wait_until(lambda: False, timeout=0.2, interval=0.01, what="the moon")
    assert time.monotonic() - t0 >= 0.2


def test_names_the_last_error_and_lets_others_through(tmp_path: Path) -> None:
    with pytest.raises(pytest.fail.Exception, match="FileNotFoundError"):
        wait_until(lambda: (tmp_path / "never").read_text(), timeout=0.1, interval=0.01)

    def broken() -> bool:
        raise TypeError("a bug in the predicate")
    with pytest.raises(TypeError):  # not retried until the deadline
        wait_until(broken, timeout=30)
