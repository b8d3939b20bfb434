"""Calibration's pure part (testbed/path/calibrate.py): ``evaluate`` against a path's
configuration, the loss rate's Clopper-Pearson interval, and the one line a check prints.

The measurements come from a real path (tests/data/path: 20 Mbit/s, 10 ms, 1 BDP, 1 % loss on
a router namespace) reduced the way the Calibrator reduces them."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from scipy.stats import beta, binom

from interop_runner.config.path import PathConfig, PathTolerance, ResolvedPath
from interop_runner.parsers.iperf3 import parse_iperf3
from interop_runner.parsers.ping import parse_ping
from interop_runner.testbed.path.calibrate import (
    TCP_WIRE_OVERHEAD,
    UDP_PAYLOAD,
    UDP_WIRE_OVERHEAD,
    Calibrator,
    Check,
    Measured,
    evaluate,
    jitter_sd_ms,
    loss_interval,
    median_standard_error,
)

DATA = Path(__file__).parent / "data" / "path"
TOL = PathTolerance()


def resolved(**kwargs: object) -> ResolvedPath:
    return PathConfig.model_validate(kwargs).resolved()


def real_measurement() -> Measured:
    """What the Calibrator makes of the captured pings and iperf3 flows."""
    base = parse_ping((DATA / "ping-path.txt").read_text())
    loaded = parse_ping((DATA / "ping-loaded.txt").read_text())
    tcp = parse_iperf3((DATA / "iperf3-tcp-reverse.json").read_text())
    loss = parse_ping((DATA / "ping-loss.txt").read_text())
    measured = Measured(rtt_ms=statistics.median(base.rtt_ms))
    assert tcp.mss is not None
    measured.rate_wire_bps = tcp.received_bps * (tcp.mss + TCP_WIRE_OVERHEAD) / tcp.mss
    measured.queue_ms = statistics.median(loaded.rtt_ms) - measured.rtt_ms
    measured.loss, measured.loss_sent = loss.lost / loss.transmitted, loss.transmitted
    measured.loss_ci = loss_interval(loss.lost, loss.transmitted, TOL.loss_confidence)
    return measured


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.parameter: c for c in checks}


def test_a_real_path_passes_its_calibration() -> None:
    path = resolved(rate="20mbit", rtt="10ms", buffer="1bdp", loss=0.01)
    measured = real_measurement()
    assert measured.rtt_ms == 10.2
    assert measured.rate_wire_bps == pytest.approx(20.0e6, rel=0.002)
    assert measured.queue_ms == pytest.approx(9.0)  # 19.2 ms loaded - 10.2 ms idle
    assert (measured.loss, measured.loss_sent) == (22 / 2000, 2000)
    checks = by_name(evaluate(path, measured, TOL))
    assert list(checks) == ["rtt", "rate", "queue", "loss"]
    assert all(c.ok for c in checks.values()), [c.line() for c in checks.values()]
    assert (checks["rtt"].configured, checks["rtt"].tolerance) == (10.0, 0.5)  # max(0.5, 2 %)
    assert (checks["rate"].configured, checks["rate"].tolerance) == (20.0, pytest.approx(0.6))
    assert checks["rate"].unit == "Mbit/s"
    # the queue: 10 ms configured (25000 bytes at 2.5 MB/s); allowed two packets at the rate
    assert checks["queue"].configured == pytest.approx(10.0)
    assert checks["queue"].tolerance == pytest.approx(2 * 1514 * 8 / 20e6 * 1e3)  # 1.21 ms
    assert checks["loss"].tolerance is None and checks["loss"].measured == 0.011


def test_the_real_udp_flow_measures_the_rate() -> None:
    """Two links and traces are measured with a UDP overload: its wire rate is the tbf's."""
    udp = parse_iperf3((DATA / "iperf3-udp-reverse.json").read_text())
    wire = udp.received_bps * (UDP_PAYLOAD + UDP_WIRE_OVERHEAD) / UDP_PAYLOAD
    checks = evaluate(resolved(rate="20mbit", rtt="10ms"), Measured(rate_wire_bps=wire), TOL)
    assert [c.parameter for c in checks] == ["rate"] and checks[0].ok
    assert checks[0].measured == pytest.approx(20.0, rel=0.003)


def test_queue_check_tolerates_float_error() -> None:
    """19.2 - 10.2 is 8.999999999999998: at 100 Mbit/s the allowance is 1 ms exactly."""
    path = resolved(rate="100mbit", rtt="10ms")
    (check,) = evaluate(path, Measured(queue_ms=19.2 - 10.2), TOL)
    assert check.tolerance == 1.0 and check.ok
    (check,) = evaluate(path, Measured(queue_ms=8.9), TOL)
    assert not check.ok


@pytest.mark.parametrize("kwargs, measured, ok, allowed", [
    # rtt: within max(0.5 ms, 2 %)
    ({"rate": "20mbit", "rtt": "50ms"}, Measured(rtt_ms=50.9), True, 1.0),
    ({"rate": "20mbit", "rtt": "50ms"}, Measured(rtt_ms=51.2), False, 1.0),
    ({"rate": "20mbit", "rtt": "10ms"}, Measured(rtt_ms=10.45), True, 0.5),
    ({"rate": "20mbit", "rtt": "10ms"}, Measured(rtt_ms=9.4), False, 0.5),
    # rate: within 3 %
    ({"rate": "100mbit", "rtt": "10ms"}, Measured(rate_wire_bps=97.2e6), True, 3.0),
    ({"rate": "100mbit", "rtt": "10ms"}, Measured(rate_wire_bps=96.9e6), False, 3.0),
    # queue: within max(1 ms, two packets at the rate, 10 %)
    ({"rate": "100mbit", "rtt": "50ms"}, Measured(queue_ms=45.5), True, 5.0),
    ({"rate": "100mbit", "rtt": "50ms"}, Measured(queue_ms=44.9), False, 5.0),
    ({"rate": "20mbit", "rtt": "10ms", "buffer": "0.5bdp"}, Measured(queue_ms=3.9), True,
     1.2112),
    ({"rate": "20mbit", "rtt": "10ms", "buffer": "0.5bdp"}, Measured(queue_ms=3.7), False,
     1.2112),
    ({"rate": "1gbit", "rtt": "1ms", "buffer": "10p"}, Measured(queue_ms=1.1), True, 1.0),
])
def test_evaluate_tolerances(kwargs: dict[str, object], measured: Measured, ok: bool,
                             allowed: float) -> None:
    (check,) = evaluate(resolved(**kwargs), measured, TOL)
    assert check.ok is ok, check.line()
    assert check.tolerance == pytest.approx(allowed, abs=1e-4)


def test_evaluate_own_tolerances() -> None:
    tol = PathTolerance(rtt_ms=0.1, rtt_rel=0.0, rate_rel=0.01, queue_ms=0, queue_rel=0)
    path = resolved(rate="100mbit", rtt="20ms")
    checks = by_name(evaluate(path, Measured(rtt_ms=20.2, rate_wire_bps=98.5e6, queue_ms=19.8),
                              tol))
    assert [checks[n].ok for n in ("rtt", "rate", "queue")] == [False, False, True]
    assert checks["queue"].tolerance == pytest.approx(0.24224)  # two packets at 100 Mbit/s


def test_evaluate_loss() -> None:
    path = resolved(rate="20mbit", rtt="10ms", loss=0.01)
    low, high = loss_interval(30, 3000, 0.99)
    (check,) = evaluate(path, Measured(loss=0.01, loss_ci=(low, high), loss_sent=3000), TOL)
    assert check.ok and check.detail == f"99% interval [{low:.4g}, {high:.4g}] of 3000 pings"
    none_lost = loss_interval(0, 3000, 0.99)
    (check,) = evaluate(path, Measured(loss=0.0, loss_ci=none_lost, loss_sent=3000), TOL)
    assert not check.ok  # 1 % loss would lose about 30 of 3000: none lost is a broken path
    # measured, but without its interval: no verdict
    assert evaluate(path, Measured(loss=0.01), TOL) == []


def test_evaluate_two_links_either_rtt() -> None:
    path = resolved(links=[{"rate": "20mbit", "delay": 10}, {"rate": "20mbit", "delay": 30}])
    assert (path.rtt_ms, path.full_queue_ms) == (20.0, None)
    checks = evaluate(path, Measured(rtt_ms=40.3, queue_ms=5.0), TOL)  # the slower link
    assert [(c.parameter, c.ok) for c in checks] == [("rtt", True)]  # no queue check
    assert not evaluate(path, Measured(rtt_ms=30.0), TOL)[0].ok  # neither link's


def test_a_jittered_path_allows_three_standard_errors_of_its_median() -> None:
    # 25 ms one way with a CV of 0.4: sd 10 ms; the median of 50 pings: SE 1.77 ms
    path = resolved(rate="20mbit", rtt="50ms", jitter=0.4)
    assert jitter_sd_ms(path) == pytest.approx(10.0)
    assert median_standard_error(10.0, 50) == pytest.approx(1.7724, abs=1e-3)
    samples = [50.0] * 50
    (check,) = evaluate(path, Measured(rtt_ms=54.0, rtt_samples=samples), TOL)
    assert check.ok and check.tolerance == pytest.approx(3 * 1.7724, abs=1e-3)
    assert not evaluate(path, Measured(rtt_ms=56.0, rtt_samples=samples), TOL)[0].ok
    # without jitter the configured tolerance alone (0.5 ms or 2 %: 1 ms at 50 ms)
    (plain,) = evaluate(resolved(rate="20mbit", rtt="50ms"),
                        Measured(rtt_ms=51.5, rtt_samples=samples), TOL)
    assert not plain.ok and plain.tolerance == pytest.approx(1.0)


def test_evaluate_nothing_measured() -> None:
    assert evaluate(resolved(rate="20mbit", rtt="10ms", loss=0.01), Measured(), TOL) == []


def test_loss_interval() -> None:
    low, high = loss_interval(0, 3000, 0.99)
    assert low == 0.0 and high == pytest.approx(1 - 0.005 ** (1 / 3000))  # 0.00176
    assert loss_interval(3000, 3000, 0.99)[1] == 1.0
    for lost, sent in ((30, 3000), (22, 2000), (1, 100)):
        low, high = loss_interval(lost, sent, 0.99)
        assert low == pytest.approx(beta.ppf(0.005, lost, sent - lost + 1))
        assert high == pytest.approx(beta.ppf(0.995, lost + 1, sent - lost))
        assert low < lost / sent < high
    assert loss_interval(30, 3000, 0.99) == pytest.approx((0.005934, 0.015691), abs=1e-6)
    assert loss_interval(30, 3000, 0.95)[1] < loss_interval(30, 3000, 0.99)[1]


@pytest.mark.parametrize("rate", [0.001, 0.01, 0.05])
def test_a_right_path_fails_at_most_one_time_in_a_hundred(rate: float) -> None:
    """The check's false alarm rate: over all outcomes of 3000 pings of a path that really
    loses ``rate``, the ones whose 99 % interval misses ``rate`` weigh at most 1 %."""
    sent = 3000
    lost = range(int(binom.ppf(1e-9, sent, rate)), int(binom.isf(1e-9, sent, rate)) + 1)
    missed = sum(binom.pmf(k, sent, rate) for k in lost
                 if not loss_interval(k, sent, 0.99)[0] <= rate <= loss_interval(k, sent,
                                                                                0.99)[1])
    assert 0 < missed <= 0.01


def test_check_lines() -> None:
    assert Check("rtt", "ms", 50.0, 51.2, 1.0, False).line() == (
        "rtt: configured 50 ms, measured 51.2 ms (allowed ±1 ms)")
    # the sample campaign's (tests/data/path/sample-run.json) rate check
    assert Check("rate", "Mbit/s", 20.0, 19.80091144984366, 0.6, True,
                 "at the wire; one TCP flow (bbr, MSS 1448)").line() == (
        "rate: configured 20 Mbit/s, measured 19.8 Mbit/s (allowed ±0.6 Mbit/s); at the wire; "
        "one TCP flow (bbr, MSS 1448)")
    assert Check("queue", "ms", 20.0, 18.599999999999998, 2.0, True,
                 "queueing delay of a full buffer (buffer / rate)").line() == (
        "queue: configured 20 ms, measured 18.6 ms (allowed ±2 ms); queueing delay of a full "
        "buffer (buffer / rate)")
    # loss is a fraction without a unit and without an absolute tolerance
    assert Check("loss", "", 0.01, 0.0, None, False,
                 "99% interval [0, 0.001765] of 3000 pings").line() == (
        "loss: configured 0.01, measured 0; 99% interval [0, 0.001765] of 3000 pings")
    assert Check("queue", "ms", 10.0, None, 1.0, False).line() == (
        "queue: configured 10 ms, not measured (allowed ±1 ms)")


def test_failed_calibration_line_names_the_parameter() -> None:
    """The line a strict calibration stops the campaign with: parameter, configured,
    measured (what path_session puts after 'calibration failed: ')."""
    checks = evaluate(resolved(rate="20mbit", rtt="50ms"),
                      Measured(rtt_ms=50.2, rate_wire_bps=17.1e6,
                               rate_method="one TCP flow (cubic, MSS 1448)"), TOL)
    (failed,) = [c for c in checks if not c.ok]
    assert failed.line() == ("rate: configured 20 Mbit/s, measured 17.1 Mbit/s (allowed ±0.6 "
                             "Mbit/s); at the wire; one TCP flow (cubic, MSS 1448)")


class _Rates(Calibrator):
    """A Calibrator whose rate measurements are the given wire rates, in turn (the logic of
    retrying is under test, not iperf3)."""

    def __init__(self, rates: list[float]) -> None:  # no nodes: only _best_rate is called
        self.rates, self.calls = list(rates), 0

    def _rate(self, path: ResolvedPath, measured: Measured) -> None:
        self.calls += 1
        measured.rate_wire_bps = self.rates.pop(0)
        measured.goodput_bps = measured.rate_wire_bps * 0.95
        measured.rate_method = "one TCP flow (bbr, MSS 1448)"


@pytest.mark.parametrize("rates, calls, best, method", [
    ([19.9e6], 1, 19.9e6, "one TCP flow (bbr, MSS 1448)"),
    ([19.0e6, 19.95e6], 2, 19.95e6, "one TCP flow (bbr, MSS 1448), the highest of 2 tries"),
    ([19.0e6, 18.0e6, 19.2e6], 3, 19.2e6, "the highest of 3 tries"),  # stops at 3: fails
    ([19.0e6, 18.0e6, 17.0e6], 3, 19.0e6, "the highest of 3 tries"),
])
def test_a_short_rate_is_measured_again_and_the_highest_kept(
        rates: list[float], calls: int, best: float, method: str) -> None:
    calibrator, measured = _Rates(rates), Measured()
    calibrator._best_rate(resolved(rate="20mbit", rtt="50ms"), measured, PathTolerance())
    assert calibrator.calls == calls
    assert measured.rate_wire_bps == best and measured.goodput_bps == best * 0.95
    assert measured.rate_method is not None and measured.rate_method.endswith(method)
