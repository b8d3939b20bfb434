"""The check of each landed file (measure/transfers.py): pure parts."""

from __future__ import annotations

from interop_runner.config.workload import Transfer, Workload
from interop_runner.measure.transfers import Files, check, failure, receiver, sender

SIZE = 1000


def files(workload: Workload) -> Files:
    return Files(workload, "d.bin", "u.bin", SIZE, "/s/www", "/c/www", "/c/dl", "/s/up")


def test_sources_and_landing_places_follow_the_direction():
    f = files(Workload(kind="bidirectional", streams=2))
    down, up = f.of("download"), f.of("upload")
    assert f.source("download") == "/s/www/d.bin" and f.source("upload") == "/c/www/u.bin"
    assert [f.landed(t) for t in down] == ["/c/dl/d-1of2.bin", "/c/dl/d-2of2.bin"]
    assert [f.landed(t) for t in up] == ["/s/up/u-1of2.bin", "/s/up/u-2of2.bin"]
    assert f.links("upload") == ["u-1of2.bin", "u-2of2.bin"]
    assert files(Workload()).links("download") == []
    assert (sender("upload"), receiver("upload")) == ("client", "server")


def test_a_transfer_is_verified_only_with_its_size_and_digest():
    t = Transfer("upload", 0, 0, "u.bin")
    ok = check(t, (SIZE, "ab"), SIZE, "ab", "blake3")
    assert (ok.verified, ok.node, ok.reason) == ("hash", "server", None)
    short = check(t, (10, "cd"), SIZE, "ab", "blake3")
    assert short.verified is None and short.reason == "size mismatch: expected 1000 bytes, got 10"
    wrong = check(t, (SIZE, "cd"), SIZE, "ab", "sha256")
    assert wrong.reason == "sha256 mismatch: expected ab, got cd"
    gone = check(t, None, SIZE, "ab", "blake3")
    assert gone.reason == "client exited 0 but u.bin is missing on the server node"
    assert check(Transfer("download", 0, 0, "d.bin"), None, SIZE, "ab", "blake3").reason == \
        "client exited 0 but d.bin is missing"


def test_failure_names_the_first_failed_of_several():
    good = check(Transfer("download", 0, 0, "a"), (SIZE, "x"), SIZE, "x", "blake3")
    bad = check(Transfer("download", 1, 0, "b"), (1, "x"), SIZE, "x", "blake3")
    assert failure([good]) is None
    assert failure([bad]) == "size mismatch: expected 1000 bytes, got 1"
    assert failure([good, bad]) == ("1 of 2 transfers failed; first download b (connection 1, "
                                    "stream 0): size mismatch: expected 1000 bytes, got 1")
