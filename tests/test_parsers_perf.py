"""perf script parsing, category rules and flame graphs (interop_runner.parsers.perf, .flamegraph).

Inputs in tests/data/perf/ (see the README there): 2,000-sample slices of the real fixture
(lsquic server, quiche client on 10G hosts, `perf record -a -g -F 1997`, cycles) and captures
from this VM (cpu-clock; frame pointers, DWARF, no call chain). Expected counts were taken
with grep/awk, not with the parser.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import yaml

from interop_runner.measure import flamegraph
from interop_runner.measure.flamegraph import FlamegraphToolMissing, write_flamegraph
from interop_runner.parsers import ParseError, perf
from interop_runner.parsers.folded import read_folded, write_folded
from interop_runner.parsers.perf import (
    CATEGORIES,
    RulesError,
    categorize,
    category_counts,
    comm_totals,
    filter_comm,
    load_rules,
    open_perf_script,
    parse_perf_script,
    parse_rules,
)

DATA = Path(__file__).resolve().parent / "data" / "perf"
SERVER_SLICE = DATA / "fixture-lsquic-server-70001-72000.perf.zst"
CLIENT_SLICE = DATA / "fixture-quiche-client-70001-72000.perf.zst"
LOCAL_FP = DATA / "local-fp.perf.zst"
LOCAL_DWARF = DATA / "local-dwarf.perf.zst"
LOCAL_NOCALLCHAIN = DATA / "local-nocallchain.perf"

needs_zstd = pytest.mark.skipif(shutil.which("zstd") is None,
                                reason="the zstd program is needed for the .zst test inputs")


def unzstd(path: Path) -> list[str]:
    """Decompress with the zstd CLI (independent of open_perf_script) into lines."""
    out = subprocess.run(["zstd", "-dc", str(path)], capture_output=True, check=True,
                         timeout=30).stdout.decode("utf-8", "replace")
    return out.splitlines(keepends=True)


_cache: dict[Path, list[str]] = {}


def lines_of(path: Path) -> list[str]:
    if path not in _cache:
        _cache[path] = unzstd(path)
    return _cache[path]


@pytest.fixture(scope="module")
def rules() -> perf.Rules:
    return load_rules()


# ------------------------------------------------------------------ parsing: real inputs


@needs_zstd
def test_fixture_slices_sample_and_comm_counts() -> None:
    # grep -c '^[^[:space:]]' → 2000 headers in each slice; per comm: grep | awk '{print $1}'
    server = parse_perf_script(lines_of(SERVER_SLICE))
    assert sum(server.values()) == 2000
    totals = comm_totals(server)
    assert totals["http_server"] == 1301
    assert totals["swapper"] == 656
    assert totals["pidstat"] == 39
    client = parse_perf_script(lines_of(CLIENT_SLICE))
    assert sum(client.values()) == 2000
    totals = comm_totals(client)
    assert totals["quiche-client"] == 1163
    assert totals["ksoftirqd/5"] == 210


@needs_zstd
def test_fixture_known_folded_stacks() -> None:
    server = parse_perf_script(lines_of(SERVER_SLICE))
    # counted with an independent awk folding of the slice
    key = ("http_server;event_process_active_single_queue;read_handler;prog_process_conns;"
           "lsquic_engine_process_conns;process_connections;send_packets_out;send_batch;"
           "sport_packets_out;__libc_sendmsg;memset")
    assert server[key] == 56
    assert server["swapper;__slab_free"] == 68
    # offsets are gone everywhere, unknown symbols of a known dso became [basename]
    assert not any("+0x" in k for k in server)
    client = parse_perf_script(lines_of(CLIENT_SLICE))
    assert client["quiche-client;[libc-2.31.so]"] == 60
    assert client["quiche-client;_aesni_ctr32_ghash_6x"] == 72


@needs_zstd
def test_fixture_comm_and_pid_filters() -> None:
    lines = lines_of(SERVER_SLICE)
    only = parse_perf_script(lines, comm_filter=lambda c: c == "http_server")
    assert sum(only.values()) == 1301
    assert all(k.startswith("http_server;") for k in only)
    assert only == filter_comm(parse_perf_script(lines), lambda c: c == "http_server")
    # the fixture's headers carry one number (the tid); count one thread with grep-like logic
    tids = Counter(line.split()[1] for line in lines if line.startswith("http_server "))
    tid, n = tids.most_common(1)[0]
    by_pid = parse_perf_script(lines, pid_filter={int(tid)})
    assert sum(by_pid.values()) == n
    assert parse_perf_script(lines, pid_filter={999_999_999}) == Counter()


@needs_zstd
def test_local_frame_pointer_capture() -> None:
    lines = lines_of(LOCAL_FP)
    stacks = parse_perf_script(lines)
    assert sum(stacks.values()) == 992
    assert comm_totals(stacks) == Counter(
        {"openssl": 388, "python3": 362, "dd": 209, "rm": 32, "workload.sh": 1})
    # headers are "comm pid/tid time: period cpu-clock:" (perf script -F +pid, no -a: no cpu)
    dd_pids = {int(m.group(1)) for line in lines if (m := re.match(r"dd +(\d+)/\d+ ", line))}
    assert len(dd_pids) == 1
    dd = parse_perf_script(lines, pid_filter=dd_pids)
    assert comm_totals(dd) == Counter({"dd": 209})
    key = ("dd;__GI___libc_write;entry_SYSCALL_64_after_hwframe;do_syscall_64;ksys_write;"
           "vfs_write;shmem_file_write_iter;generic_perform_write;copy_folio_from_iter_atomic")
    assert stacks[key] == 136
    assert stacks["openssl;[libcrypto.so.3]"] == 203  # stripped libcrypto: dso basename


@needs_zstd
def test_local_dwarf_capture_has_full_user_stacks() -> None:
    stacks = parse_perf_script(lines_of(LOCAL_DWARF))
    assert sum(stacks.values()) == 1100
    assert comm_totals(stacks)["python3"] == 469
    dd_write = [k for k in stacks if k.startswith("dd;") and "__GI___libc_write" in k]
    # DWARF unwinding reaches the program's entry, frame pointers (test above) do not
    assert dd_write and all("__libc_start_call_main" in k for k in dd_write)


def test_local_capture_without_call_chains() -> None:
    # perf record without -g: right-aligned comm, the one frame on the header line
    with open_perf_script(LOCAL_NOCALLCHAIN) as lines:
        stacks = parse_perf_script(lines)
    assert sum(stacks.values()) == 16
    assert stacks["yes;[yes]"] == 5  # 5 lines with "(/usr/bin/yes)", all "[unknown]"
    assert stacks["yes;do_syscall_64"] == 3
    assert all(k.count(";") == 1 for k in stacks)
    by_period = parse_perf_script(LOCAL_NOCALLCHAIN.read_text().splitlines(), weight="period")
    assert sum(by_period.values()) == 16 * 10101010


@needs_zstd
def test_open_perf_script_streams_zst(tmp_path: Path) -> None:
    with open_perf_script(SERVER_SLICE) as lines:
        streamed = parse_perf_script(lines)
    assert streamed == parse_perf_script(lines_of(SERVER_SLICE))
    plain = tmp_path / "out.perf"
    plain.write_text("".join(lines_of(CLIENT_SLICE)))
    assert perf.read_perf_script(plain) == parse_perf_script(lines_of(CLIENT_SLICE))
    broken = tmp_path / "broken.perf.zst"
    broken.write_bytes(b"not zstd")
    with pytest.raises(OSError, match="zstd -dc failed"):
        perf.read_perf_script(broken)


# ------------------------------------------------------------------ parsing: formats


# perf script ends a sample header with a space (`cycles: `): kept, written as \x20
SYNTHETIC = """\
# ========
# captured on: test
# ========
#
http_server 325091 [020] 112608.950812:     895980   cycles:\x20
\t    562722c80d57 _aesni_ctr32_ghash_6x+0x257 (/root/lsquic/http_server)
\t    562722c49d15 EVP_AEAD_CTX_seal+0xa9 (/root/lsquic/http_server)

app 10/11 [001] 1.5: 7 cycles:ppp:\x20
\t7f00 [unknown] (/usr/lib/libfoo.so.1 (deleted))
\t7f01 Foo<a; b>::bar+0x10 (/usr/bin/app)
\t7f02 [unknown] ([unknown])

rs:main Q:Reg   873 [005] 112578.944439:     635398   cycles:\x20
\tffffffff81000000 native_write_msr+0x4 ([kernel.kallsyms])

:-1    -1 [008] 112625.427451:     326321   cycles:\x20
\t0 [unknown] ([unknown])

app 10/12 2.0: cpu-clock:u:\x20
\t7f03 main+0x1 (/usr/bin/app)
app 10/12 2.5: 3 cpu-clock:\x20
\t7f04 std::vector<int, std::allocator<int> >::push_back+0x2 (/usr/bin/app)
\t7f05 main (/usr/bin/app)
"""


def test_header_and_frame_variants() -> None:
    stacks = parse_perf_script(SYNTHETIC.splitlines(keepends=True))
    assert stacks == Counter({
        "http_server;EVP_AEAD_CTX_seal;_aesni_ctr32_ghash_6x": 1,
        "app;[unknown];Foo<a: b>::bar;[libfoo.so.1]": 1,
        "rs:main Q:Reg;native_write_msr": 1,
        ":-1;[unknown]": 1,
        "app;main": 1,  # no blank line before the next header: still a sample of its own
        "app;main;std::vector<int, std::allocator<int> >::push_back": 1,
    })
    by_period = parse_perf_script(SYNTHETIC.splitlines(), weight="period")
    assert by_period["http_server;EVP_AEAD_CTX_seal;_aesni_ctr32_ghash_6x"] == 895980
    assert by_period["app;main"] == 1  # no period printed: counts 1
    assert by_period["app;main;std::vector<int, std::allocator<int> >::push_back"] == 3
    assert parse_perf_script(SYNTHETIC.splitlines(), pid_filter={10}) == Counter({
        "app;[unknown];Foo<a: b>::bar;[libfoo.so.1]": 1, "app;main": 1,
        "app;main;std::vector<int, std::allocator<int> >::push_back": 1})
    assert parse_perf_script(SYNTHETIC.splitlines(), pid_filter={873},
                             comm_filter=lambda c: c.startswith("rs:")) == Counter(
        {"rs:main Q:Reg;native_write_msr": 1})
    assert parse_perf_script([]) == Counter()
    with pytest.raises(ValueError, match="weight"):
        parse_perf_script([], weight="cycles")  # type: ignore[arg-type]


# ------------------------------------------------------------------ rules


def test_default_rules_load(rules: perf.Rules) -> None:
    assert rules.version == 1
    assert {"lsquic", "quiche", "quic-go", "msquic"} <= set(rules.implementations)
    used = {r.category for r in rules.generic}
    assert used == {"Packet I/O", "Crypto", "I/O"}
    m = rules.matcher("lsquic")
    assert m("udp_sendmsg") == "Packet I/O"
    assert m("__sys_sendmmsg") == "Packet I/O"
    assert m("__libc_recvfrom") == "Packet I/O"
    assert m("_aesni_ctr32_ghash_6x") == "Crypto"
    assert m("[libcrypto.so.3]") == "Crypto"
    assert m("vfs_read") == "I/O"
    assert m("lsquic_send_ctl_got_ack") == "Connection Management"
    assert m("iquic_esf_encrypt_packet") == "Crypto"
    assert m("cpuidle_enter_state") == perf.IDLE
    assert m("copy_user_generic_string") is None  # helpers are transparent
    assert m("memset") is None
    q = rules.matcher("quiche")
    assert q("quiche::Connection::recv_single") == "Connection Management"
    assert q("quiche::crypto::Open::open_with_u64_counter") == "Crypto"
    g = rules.matcher("quic-go")
    assert g("github.com/quic-go/quic-go/internal/ackhandler.(*sentPacketHandler).ReceivedAck") \
        == "Connection Management"
    assert g("crypto/aes.gcmAesEnc") == "Crypto"
    assert rules.matcher(None)("lsquic_send_ctl_got_ack") is None  # not generic
    assert rules.matcher("no-such-impl")("udp_sendmsg") == "Packet I/O"


def _rules(doc: str) -> perf.Rules:
    return parse_rules(yaml.safe_load(doc), "r.yml")


def test_rules_validation_errors() -> None:
    with pytest.raises(RulesError) as exc:
        _rules("version: 1\nimplementations:\n  lsquic:\n    Conection Management: "
               "[lsquic_send_ctl*]\n")
    msg = str(exc.value)
    assert "r.yml: implementations.lsquic: unknown category 'Conection Management'" in msg
    assert "(rule 'lsquic_send_ctl*')" in msg
    assert "did you mean 'Connection Management'" in msg
    with pytest.raises(RulesError, match="version: expected 1, got 2"):
        _rules("version: 2\n")
    with pytest.raises(RulesError, match="version: expected 1, got None"):
        _rules("generic: {}\n")
    with pytest.raises(RulesError, match=r"generic.Crypto\[1\]: bad pattern 're:\(aes'"):
        _rules("version: 1\ngeneric:\n  Crypto: [ok, 're:(aes']\n")
    with pytest.raises(RulesError, match=r"generic.Crypto\[0\]: a pattern must be a non-empty"):
        _rules("version: 1\ngeneric:\n  Crypto: ['']\n")
    with pytest.raises(RulesError, match="generic.Crypto: expected a list"):
        _rules("version: 1\ngeneric:\n  Crypto: aes*\n")
    with pytest.raises(RulesError, match="unknown key 'implementation'.*did you mean"):
        _rules("version: 1\nimplementation: {}\n")
    with pytest.raises(RulesError, match="'Idle' rules belong in the top-level 'idle' list"):
        _rules("version: 1\ngeneric:\n  Idle: [do_idle]\n")


def test_load_rules_from_file(tmp_path: Path) -> None:
    path = tmp_path / "rules.yml"
    path.write_text("version: 1\ngeneric:\n  Crypto: ['aes*']\n  Bogus: [x]\n")
    with pytest.raises(RulesError, match=rf"{re.escape(str(path))}: generic: unknown category "
                                         r"'Bogus' \(rule 'x'\)"):
        load_rules(path)
    path.write_text("version: 1\ngeneric: [\n")
    with pytest.raises(RulesError, match="not valid YAML"):
        load_rules(path)


def test_categorize_leaf_first_precedence_idle() -> None:
    r = _rules("""
version: 1
idle: [do_idle]
generic:
  Packet I/O: [sendmsg, 'net_*']
  Crypto: ['aes_*', 're:gcm_(enc|dec)']
  I/O: ['read']
implementations:
  x:
    Connection Management: [send_loop, 'aes_fake']
""")
    stacks = Counter({
        "p;main;send_loop;sendmsg;memcpy": 4,      # leaf memcpy unmatched → sendmsg
        "p;main;send_loop;aes_encrypt": 3,          # leaf first: Crypto, not the caller's rule
        "p;main;send_loop;helper": 2,               # x: send_loop; generic: Uncategorized
        "p;main;read;memcpy": 1,
        "p;main;aes_fake": 1,                       # x's own rule beats the generic aes_*
        "swapper;do_idle;net_rx_action": 5,          # interrupt on the idle stack: Packet I/O
        "swapper;do_idle": 10,                       # idle: excluded
        "p;main;gcm_enc": 1,
        "p;main;gcm_encX": 1,                        # regex is a full match: no
    })
    assert category_counts(stacks, r, "x") == {
        "Packet I/O": 9, "Crypto": 4, "Connection Management": 3, "I/O": 1,
        "Uncategorized": 1, "Idle": 10}
    shares = categorize(stacks, r, "x")
    assert list(shares) == list(CATEGORIES)
    assert math.isclose(sum(shares.values()), 1.0)
    assert math.isclose(shares["Packet I/O"], 9 / 18)
    generic = categorize(stacks, r, None)
    assert math.isclose(generic["Uncategorized"], 3 / 18)  # helper (2) + gcm_encX (1)
    assert math.isclose(generic["Crypto"], 5 / 18)  # aes_fake falls to the generic aes_*
    assert categorize(Counter(), r, "x") == {}
    assert categorize(Counter({"swapper;do_idle": 3}), r, None) == {}
    assert math.isclose(categorize(Counter({"p": 2}), r, None)["Uncategorized"], 1.0)


def test_globs_are_case_sensitive_and_brackets_are_classes() -> None:
    r = _rules("version: 1\ngeneric:\n  Crypto: ['EVP_*', '[[]libfoo.so]']\n")
    m = r.matcher(None)
    assert m("EVP_AEAD_CTX_seal") == "Crypto"
    assert m("evp_aead") is None
    assert m("[libfoo.so]") == "Crypto"


@needs_zstd
def test_fixture_shares_lsquic_server(rules: perf.Rules) -> None:
    stacks = parse_perf_script(lines_of(SERVER_SLICE))
    proc = categorize(filter_comm(stacks, lambda c: c == "http_server"), rules, "lsquic")
    assert math.isclose(sum(proc.values()), 1.0)
    # as in the paper's Fig. 7: Packet I/O is the largest category for lsquic
    assert max(proc, key=lambda c: proc[c]) == "Packet I/O"
    assert 0.48 <= proc["Packet I/O"] <= 0.62
    assert 0.14 <= proc["Crypto"] <= 0.24
    assert 0.14 <= proc["Connection Management"] <= 0.25
    assert 0.03 <= proc["I/O"] <= 0.10
    assert proc["Uncategorized"] <= 0.03
    counts = category_counts(stacks, rules, "lsquic")
    assert counts["Idle"] == 56
    system = categorize(stacks, rules, "lsquic")
    assert 0.40 <= system["Packet I/O"] <= 0.55
    assert 0.15 <= system["Uncategorized"] <= 0.30  # truncated interrupt stacks of swapper


@needs_zstd
def test_fixture_shares_quiche_client(rules: perf.Rules) -> None:
    stacks = parse_perf_script(lines_of(CLIENT_SLICE), comm_filter=lambda c: c == "quiche-client")
    shares = categorize(stacks, rules, "quiche")
    # the client decrypts: Crypto leads; quiche was built without frame pointers, so a large
    # Uncategorized share remains, as the paper reports for quiche
    assert max(shares, key=lambda c: shares[c]) == "Crypto"
    assert 0.30 <= shares["Crypto"] <= 0.42
    assert 0.15 <= shares["Packet I/O"] <= 0.28
    assert 0.15 <= shares["Uncategorized"] <= 0.28


@needs_zstd
def test_local_capture_categories(rules: perf.Rules) -> None:
    stacks = parse_perf_script(lines_of(LOCAL_FP))

    def share(comm: str, category: str) -> float:
        return categorize(filter_comm(stacks, lambda c: c == comm), rules, None)[category]

    assert share("openssl", "Crypto") >= 0.8      # openssl speed aes-128-gcm
    assert share("python3", "Packet I/O") >= 0.7  # UDP sendto/recv loop on localhost
    assert share("dd", "I/O") >= 0.9              # writes to /dev/shm


# ------------------------------------------------------------------ folded files, flame graphs


def test_write_and_read_folded(tmp_path: Path) -> None:
    stacks = Counter({"a;b;c": 3, "a;std::vector<int, x> >::f": 2, "z": 1, "zero": 0})
    path = tmp_path / "s.folded"
    write_folded(stacks, path)
    assert path.read_text() == "a;b;c 3\na;std::vector<int, x> >::f 2\nz 1\n"
    assert read_folded(path) == Counter({"a;b;c": 3, "a;std::vector<int, x> >::f": 2, "z": 1})
    path.write_text("a;b\n")
    with pytest.raises(ValueError, match="not a folded stack line"):
        read_folded(path)


def _tool_available() -> bool:
    try:
        flamegraph.find_flamegraph_tool()
    except FlamegraphToolMissing:
        return False
    return True


@pytest.mark.skipif(not _tool_available(),
                    reason="inferno-flamegraph missing (cargo install inferno --version 0.12.8 "
                           "--locked)")
@needs_zstd
def test_write_flamegraph_svg(tmp_path: Path) -> None:
    stacks = parse_perf_script(lines_of(SERVER_SLICE), comm_filter=lambda c: c == "http_server")
    svg = tmp_path / "out" / "server.svg"
    write_flamegraph(stacks, svg, "lsquic server <goodput 4>")
    text = svg.read_text()
    assert text.startswith("<?xml") and text.rstrip().endswith("</svg>")
    assert "lsquic server &lt;goodput 4&gt;" in text
    assert "<title>iquic_esf_encrypt_packet (" in text
    assert "<title>all (1,301 samples, 100%)</title>" in text
    assert not list(svg.parent.glob("*.part"))
    with pytest.raises(ValueError, match="no samples"):
        write_flamegraph(Counter(), tmp_path / "empty.svg", "t")


def test_missing_flamegraph_tool_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CARGO_HOME", str(tmp_path / "cargo"))
    with pytest.raises(FlamegraphToolMissing, match="inferno-flamegraph not found.*cargo "
                                                    "install inferno --version 0.12.8 --locked"):
        write_flamegraph(Counter({"a;b": 1}), tmp_path / "x.svg", "t")
    assert not (tmp_path / "x.svg").exists()
    assert os.environ["PATH"] == str(tmp_path)


def test_not_perf_script_output_is_a_parse_error() -> None:
    with pytest.raises(ParseError,
                       match=re.escape("not perf script output: 'Linux 6.1.0 (pidstat)'")):
        parse_perf_script(["Linux 6.1.0 (pidstat)\n", "\n", "12:00:00 UID PID %usr\n"])
    assert parse_perf_script(["# only a comment\n", "\n"]) == Counter()
