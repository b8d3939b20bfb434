"""The calibration loop of measure/path_session.py: a calibration that fails on a busy host is
repeated (up to BUSY_RECALIBRATIONS times), every one of them kept; on an idle host a failure
is final at once. The Calibrator and the host-load sampler are replaced by scripted ones (the
loop's logic only; tests/test_path_local.py calibrates real paths)."""
from __future__ import annotations

from typing import Any

import pytest

from interop_runner.measure import path_session
from interop_runner.measure.path_session import BUSY_RECALIBRATIONS, PathSession


class _Calibration:
    def __init__(self, ok: bool, number: int) -> None:
        self.ok, self.number = ok, number

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "number": self.number, "checks": []}


def _session(monkeypatch: pytest.MonkeyPatch, outcomes: list[tuple[bool, bool | None]]
             ) -> tuple[PathSession, list[int]]:
    """A session whose calibrations give ``outcomes`` in turn: (ok, host busy)."""
    calls: list[int] = []
    script = iter(outcomes)
    current: dict[str, Any] = {}

    class Calibrator:
        def __init__(self, *args: Any) -> None:
            pass

        def calibrate(self, *args: Any) -> _Calibration:
            ok, busy = next(script)
            current["busy"] = busy
            calls.append(len(calls) + 1)
            return _Calibration(ok, len(calls))

    class HostLoad:
        def __init__(self, hosts: Any) -> None:
            pass

        def finish(self) -> tuple[dict[str, Any], bool | None]:
            return {"server": {"busy": current["busy"]}}, current["busy"]

    monkeypatch.setattr(path_session, "Calibrator", Calibrator)
    monkeypatch.setattr(path_session, "HostLoad", HostLoad)
    session = object.__new__(PathSession)
    session.server = session.client = type("N", (), {"cfg": type("C", (), {"ip": "x"})()})()
    session.save = lambda: None
    session.direction = "download"
    monkeypatch.setattr(PathSession, "load_hosts", lambda self: [])
    return session, calls


def _calibrate(session: PathSession) -> tuple[Any, dict[str, Any]]:
    entry: dict[str, Any] = {}
    path = type("P", (), {"tolerance": None})()
    result = session._calibrate(entry, None, path, 4433)  # type: ignore[arg-type]
    return result, entry["calibration"]


def test_a_failure_on_an_idle_host_is_final_at_once(monkeypatch):
    session, calls = _session(monkeypatch, [(False, False), (True, False)])
    result, stored = _calibrate(session)
    assert calls == [1] and not result.ok
    assert stored["ok"] is False and stored["earlier"] == [] and stored["host_busy"] is False


def test_a_failure_on_a_busy_host_is_repeated_and_kept(monkeypatch):
    session, calls = _session(monkeypatch, [(False, True), (True, True)])
    result, stored = _calibrate(session)
    assert calls == [1, 2] and result.ok
    assert stored["ok"] is True and stored["number"] == 2
    (first,) = stored["earlier"]
    assert first["ok"] is False and first["number"] == 1 and first["host_busy"] is True


def test_an_unknown_load_is_not_busy(monkeypatch):
    session, calls = _session(monkeypatch, [(False, None), (True, None)])
    result, stored = _calibrate(session)
    assert calls == [1] and not result.ok and stored["earlier"] == []


def test_repeats_stop_after_the_limit(monkeypatch):
    session, calls = _session(monkeypatch, [(False, True)] * (BUSY_RECALIBRATIONS + 2))
    result, stored = _calibrate(session)
    assert len(calls) == BUSY_RECALIBRATIONS + 1 and not result.ok
    assert [e["number"] for e in stored["earlier"]] == list(range(1, BUSY_RECALIBRATIONS + 1))
    assert all("earlier" not in e for e in stored["earlier"])  # flat: each one once
