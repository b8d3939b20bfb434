"""DeferredWork: a finished attempt's management work runs in order on one thread, before
the next transfer where the management node shares the nodes' CPUs, alongside it elsewhere."""

from __future__ import annotations

import threading

import pytest

from interop_runner.measure.deferred import DeferredWork


def test_work_runs_in_submission_order_on_one_thread() -> None:
    work = DeferredWork(exclusive=True)
    done: list[tuple[int, str]] = []
    for i in range(20):
        work.submit(lambda i=i: done.append((i, threading.current_thread().name)))
    work.wait()
    assert [i for i, _ in done] == list(range(20))
    assert len({name for _, name in done}) == 1 and done[0][1] != threading.current_thread().name
    work.close()


def test_exclusive_work_is_done_before_a_transfer() -> None:
    work = DeferredWork(exclusive=True)
    go, done = threading.Event(), threading.Event()
    work.submit(lambda: (go.wait(30), done.set()) and None)
    waiter = threading.Thread(target=work.before_transfer)
    waiter.start()
    waiter.join(timeout=0.3)
    assert waiter.is_alive() and not done.is_set()  # the transfer waits for the work
    go.set()
    waiter.join(timeout=30)
    assert not waiter.is_alive() and done.is_set()
    work.close()


def test_work_overlaps_the_transfer_on_separate_hardware() -> None:
    work = DeferredWork(exclusive=False)
    go, done = threading.Event(), threading.Event()
    work.submit(lambda: (go.wait(30), done.set()) and None)
    work.before_transfer()  # returns at once: the work is still blocked on `go`
    assert not done.is_set()
    go.set()
    work.wait()
    assert done.is_set()
    work.close()


def test_wait_reraises_the_first_error_and_later_work_still_runs() -> None:
    work = DeferredWork(exclusive=True)
    ran: list[int] = []

    def fail(n: int) -> None:
        ran.append(n)
        raise OSError(f"disk full {n}")

    work.submit(lambda: fail(1))
    work.submit(lambda: fail(2))
    work.submit(lambda: ran.append(3))
    with pytest.raises(OSError, match="disk full 1"):
        work.wait()
    assert ran == [1, 2, 3]
    work.wait()  # nothing pending any more
    work.close()


def test_close_reports_an_error_instead_of_raising(capsys: pytest.CaptureFixture[str]) -> None:
    work = DeferredWork(exclusive=False)
    work.submit(lambda: (_ for _ in ()).throw(OSError("no space left")))
    work.close()
    assert capsys.readouterr().err == "warning: storing an attempt failed: no space left\n"
