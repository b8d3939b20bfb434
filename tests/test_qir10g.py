"""Result trees of the predecessor framework (QIR 10G fork):
interop_runner.analysis.importers.qir10g.

Input: tests/data/qir10g/results, a subset of the published raw data of "QUIC on the Highway"
(tumi8/quic-10g-paper, results/; copied from /work/shared/fixtures/qir10g, see the README
there): crypto/aes-ni/run2 lsquic_lsquic repetitions 1-10 and quiche_quiche repetition 9,
crypto/aes-ni/tcp1 tls1.3_tls1.3 repetitions 1-2, the perf repetition lsquic_quiche/4, and the
predecessor's own processed.csv. The two out.perf.zst files are NOT the originals (2.6 MB each):
they hold every 20th sample of the original perf script output (awk paragraph mode,
NR % 20 == 0, recompressed with zstd -19); tests on the full files run when the shared
fixture is present.

Expected values marked "by hand" were computed from the raw files with bc/awk/grep, not
with this code (commands in the comments).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from interop_runner.analysis import (
    goodput_matrix,
    is_qir10g_tree,
    load_qir10g,
    load_qir10g_perf_categories,
    load_results,
    plot_matrix,
    summarize,
)
from interop_runner.parsers.perf import (
    categorize,
    category_counts,
    filter_comm,
    load_rules,
    read_perf_script,
)

from .conftest import ROOT

DATA = Path(__file__).parent / "data" / "qir10g" / "results"
SHARED = Path("/work/shared/fixtures/qir10g/results")
RUN2 = DATA / "crypto" / "aes-ni" / "run2"
PERF_REP = (DATA / "perf" / "goracle" / "optimized" / "lsquic-quiche-with-pidstat" /
            "lsquic_quiche" / "goodput" / "4")
LSQUIC_COMMIT = "8c565c4e73511e144c21337e17e3b2a8e09bdf66"


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return load_qir10g(DATA)


def _rep_dirs(root: Path) -> set[str]:
    """Repetition directories found independently: <exp>/<server>_<client>/goodput/<n>/."""
    return {os.path.dirname(p) for p in map(str, root.rglob("output.txt"))}


def _row(frame: pd.DataFrame, campaign: str, server: str, client: str, rep: int) -> pd.Series:
    sel = frame[(frame["campaign"] == campaign) & (frame["server"] == server) &
                (frame["client"] == client) & (frame["repetition"] == rep)]
    assert len(sel) == 1
    return sel.iloc[0]


def _copy(tmp_path: Path) -> Path:
    dst = tmp_path / "results"
    shutil.copytree(DATA, dst)
    for dirpath, _, files in os.walk(dst):
        os.chmod(dirpath, 0o755)
        for f in files:
            os.chmod(os.path.join(dirpath, f), 0o644)
    return dst


# ------------------------------------------------------------------------------------------
# detection and shape


def test_detects_predecessor_tree_and_not_own_campaigns():
    assert is_qir10g_tree(DATA)
    assert is_qir10g_tree(RUN2)  # an experiment directory itself
    assert not is_qir10g_tree(Path(__file__).parent / "data" / "results-sample")


def test_one_row_per_repetition_directory(frame):
    dirs = _rep_dirs(DATA)
    assert len(dirs) == 14  # 10 lsquic_lsquic + 1 quiche_quiche + 2 tls1.3 + 1 perf
    assert len(frame) == len(dirs)
    assert set(frame["path"]) == dirs
    for _, row in frame.iterrows():  # keyed by the directory, not by position
        assert Path(row["path"]).name == str(row["repetition"])
        assert Path(row["path"]).parent.parent.name == f"{row['server']}_{row['client']}"
    assert (frame["attempt"] == 1).all()
    assert sorted(frame.loc[frame["campaign"] == "crypto/aes-ni/run2", "repetition"]
                  .tolist()) == [1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 10]
    assert set(frame["campaign"]) == {"crypto/aes-ni/run2", "crypto/aes-ni/tcp1",
                                      "perf/goracle/optimized/lsquic-quiche-with-pidstat"}
    assert (frame["status"] == "ok").all()


def test_same_base_columns_and_monitor_names_as_own_results(frame):
    own = load_results(Path(__file__).parent / "data" / "results-sample", cache=False)
    base = list(own.columns[:own.columns.get_loc("path") + 1])
    assert list(frame.columns[:len(base)]) == base
    for col in base:  # (an all-NaT datetime column gets its own resolution)
        if own[col].dtype.kind == "M":
            assert frame[col].dtype.kind == "M" and frame[col].isna().all(), col
        else:
            assert frame[col].dtype == own[col].dtype, col
    for col in ("server_cpu_pct", "client_cpu_pct", "client_udp_rcvbuf_errors",
                "client_udp_in_datagrams", "server_udp_out_datagrams", "bottleneck",
                "monitors_missing", "link_rate_mbps"):
        assert col in own.columns and col in frame.columns, col
    assert frame["client_udp_rcvbuf_errors"].dtype == own["client_udp_rcvbuf_errors"].dtype


# ------------------------------------------------------------------------------------------
# values computed by hand from the raw files


def test_lsquic_rep3_by_hand(frame):
    r = _row(frame, "crypto/aes-ni/run2", "lsquic", "lsquic", 3)
    # client/time.json: {"start": 1674410301615279950, "end": 1674410325040863545}
    assert r["start_ns"] == 1674410301615279950 and r["end_ns"] == 1674410325040863545
    assert r["duration_s"] == pytest.approx(23.425583595, abs=1e-12)
    # echo "scale=12; 8*8589934592/((1674410325040863545-1674410301615279950)/1000000000)
    #        /1000000" | bc
    assert r["goodput_mbps"] == pytest.approx(2933.522507873298, rel=1e-12)
    assert r["file_size"] == 8589934592
    # result.json measurements[0][0].details[2]; output.txt: "Goodput: 2933.522 Mbps"
    assert r["qir_goodput_mbps"] == 2933.5224571562444
    # netstat -s (client): packets received 71842368 -> 77830753, receive buffer errors
    # 5484 -> 6384
    assert r["client_udp_in_datagrams"] == 77830753 - 71842368 == 5988385
    assert r["client_udp_rcvbuf_errors"] == 6384 - 5484 == 900
    # ethtool -S (client, bnxt): device-wide rx_bytes 109034243481 -> 118121223285;
    # per-queue "[N]: rx_ucast_packets" summed (awk): 71847849 -> 77837137
    assert r["client_nic_rx_bytes"] == 118121223285 - 109034243481 == 9086979804
    assert r["client_nic_rx_ucast_packets"] == 77837137 - 71847849 == 5989288
    # pidstat, samples stamped in [start, end + 1] s; clocks are CET (UTC+1: output.txt
    # "18:58:19,467 Starting client" vs time.json start 17:58:21.6 UTC): client 23 samples
    # 06:58:22 PM .. 06:58:44 PM summing to 2059, server 24 samples summing to 2111 (awk)
    assert r["client_cpu_pct"] == pytest.approx(2059 / 23, rel=1e-12)
    assert r["client_pidstat_cpu_pct"] == pytest.approx(2059 / 23, rel=1e-12)
    assert r["server_cpu_pct"] == pytest.approx(2111 / 24, rel=1e-12)
    # result.json
    assert r["server_version"] == LSQUIC_COMMIT and r["client_version"] == LSQUIC_COMMIT
    assert r["server_param_rmem_value"] == 6815744 == r["client_param_rmem_value"]
    assert json.loads(r["server_params"]) == {"rmem_value": 6815744}
    assert r["server_node"] == "goracle" and r["client_node"] == "gard"
    assert r["testbed"] == "goracle-gard"
    assert r["experiment"] == "crypto" and r["variant"] == "aes-ni/run2"
    assert r["qir_repetitions"] == 10 and r["qir_arg_filesize"] == 8192
    assert r["qir_commit"] == "cc46ab6d06d1f2de3c6922f73db9fa87795e12a1"
    assert r["qir_arg_disable_server_aes_offload"] == False  # noqa: E712 (pandas boolean)
    assert pd.isna(r["monitors_missing"])


def test_tcp_baseline_rep1_by_hand(frame):
    r = _row(frame, "crypto/aes-ni/tcp1", "tls1.3", "tls1.3", 1)
    # time.json {"start": 1674726501209405813, "end": 1674726509869123539}, bc as above
    assert r["goodput_mbps"] == pytest.approx(7935.533109777486, rel=1e-12)
    assert r["qir_goodput_mbps"] == 7935.533775064473  # details[0], log "7935.533"
    # server: two nginx-server PIDs (master 19216, worker 19217): %CPU added per interval;
    # 9 intervals in the window summing to 540; client wget: 8 summing to 798 (awk)
    assert r["server_cpu_pct"] == pytest.approx(540 / 9, rel=1e-12)
    assert r["client_cpu_pct"] == pytest.approx(798 / 8, rel=1e-12)
    assert r["cipher"] == "TLS_AES_128_GCM_SHA256"
    assert r["server_param_cipher"] == "TLS_AES_128_GCM_SHA256"
    assert r["server_version"] == "7114726b7f97851111cecf4e6439e26c6dcb4e04"
    assert r["bottleneck"] == "client_cpu"


def test_agrees_with_processed_csv_where_raw_files_exist(frame):
    """In this subset no repetition failed, and processed.csv agrees with the raw files on
    every repetition present; its other rows (run3, tcp2) have no raw data here."""
    csv = pd.read_csv(DATA / "crypto" / "aes-ni" / "processed.csv")
    csv["campaign"] = csv["logdir"].str.removeprefix("results/")
    merged = frame.merge(csv, on=["campaign", "server", "client", "repetition"],
                         suffixes=("", "_csv"))
    assert len(merged) == 13  # every crypto repetition directory of the subset
    assert len(csv) == 160 and set(csv["campaign"]) - set(frame["campaign"]) == {
        "crypto/aes-ni/run3", "crypto/aes-ni/tcp2"}
    for _, m in merged.iterrows():
        assert m["goodput"] == m["qir_goodput_mbps"]  # its goodput is result.json's details
        assert m["client_runtime"] == pytest.approx(m["duration_s"], abs=1e-9)
        assert m["client_netstat_receive_buffer_errors"] == m["client_udp_rcvbuf_errors"]
        assert m["client_netstat_packets_received"] == m["client_udp_in_datagrams"]
        assert m["server_netstat_send_buffer_errors"] == m["server_udp_sndbuf_errors"]
        assert m["client_ethtool_rx_bytes"] == m["client_nic_rx_bytes"]
        assert m["server_ethtool_tx_total_frames"] == m["server_nic_tx_total_frames"]
        # goodput from the client's ns timestamps vs the runner's us-rounded duration
        assert m["goodput_mbps"] == pytest.approx(m["goodput"], rel=1e-6)


# ------------------------------------------------------------------------------------------
# failed, missing and unmeasured repetitions


def _fail_repetition(exp: Path, pair: str, rep: int) -> None:
    """Turn a repetition into what the predecessor records for a failed one: the verdict in
    output.txt, and no entry in result.json details (interop.py _run_measurement skips it
    with continue_on_error)."""
    out = exp / pair / "goodput" / str(rep) / "output.txt"
    text = out.read_text(encoding="utf-8")
    text = re.sub(r"^(\S+ \S+) .*Transferring.*\n", "", text, flags=re.M)
    text = text.replace("\u2713 Test successful",
                        "Client or server failed\n2023-01-22 18:58:57,190 \u2620 Test failed")
    out.write_text(text, encoding="utf-8")
    meta = json.loads((exp / "result.json").read_text())
    details = meta["measurements"][0][0]["details"]
    del details[rep - 1]
    (exp / "result.json").write_text(json.dumps(meta))


def test_failed_repetition_stays_missing_and_nothing_shifts(tmp_path):
    root = _copy(tmp_path)
    exp = root / "crypto" / "aes-ni" / "run2"
    _fail_repetition(exp, "lsquic_lsquic", 3)
    shutil.rmtree(exp / "lsquic_lsquic" / "goodput" / "5")  # a repetition never stored
    df = load_qir10g(root)
    lsquic = df[(df["campaign"] == "crypto/aes-ni/run2") & (df["server"] == "lsquic")]
    assert lsquic["repetition"].tolist() == [1, 2, 3, 4, 6, 7, 8, 9, 10]  # 5 stays missing
    r3 = lsquic[lsquic["repetition"] == 3].iloc[0]
    assert r3["status"] == "failed" and r3["reason"] == "Client or server failed"
    assert pd.isna(r3["goodput_mbps"]) and pd.isna(r3["qir_goodput_mbps"])
    assert r3["client_udp_rcvbuf_errors"] == 900  # its counters are still its own
    r4 = lsquic[lsquic["repetition"] == 4].iloc[0]
    assert r4["qir_goodput_mbps"] == 3265.051958338152  # rep 4's own details value
    # echo "scale=12; 8*8589934592/((1674410381726752077-1674410360679773846)/10^9)/10^6" | bc
    assert r4["goodput_mbps"] == pytest.approx(3265.051922502746, rel=1e-12)
    # The predecessor's processed.csv pipeline (GoodputParser: details[repetition - 1])
    # would now put rep 4's goodput on rep 3 and every later value one repetition early:
    details = json.loads((exp / "result.json").read_text())["measurements"][0][0]["details"]
    assert len(details) == 9 and details[3 - 1] == 3265.051958338152
    positional = {rep: details[rep - 1] for rep in range(1, 10)}
    ours = dict(zip(lsquic["repetition"], lsquic["qir_goodput_mbps"]))
    shifted = [rep for rep in (3, 4, 6, 7, 8, 9)
               if pd.isna(ours[rep]) or positional[rep] != ours[rep]]
    assert shifted == [3, 4, 6, 7, 8, 9]
    summary = summarize(df)
    cell = summary[(summary["server"] == "lsquic") & (summary["client"] == "lsquic")].iloc[0]
    assert (cell["attempts"], cell["ok"], cell["failed"]) == (9, 8, 1)


def test_unverdicted_and_missing_output_are_failed_not_zero(tmp_path):
    root = _copy(tmp_path)
    reps = root / "crypto" / "aes-ni" / "run2" / "lsquic_lsquic" / "goodput"
    (reps / "7" / "output.txt").unlink()
    out = reps / "8" / "output.txt"
    out.write_text(out.read_text(encoding="utf-8").split("Client stderr")[0], encoding="utf-8")
    df = load_qir10g(root / "crypto")
    for rep, why in ((7, "output.txt missing"), (8, "no verdict")):
        r = _row(df, "crypto/aes-ni/run2", "lsquic", "lsquic", rep)
        assert r["status"] == "failed" and why in r["reason"]
        assert pd.isna(r["goodput_mbps"]) and pd.isna(r["bottleneck"])


def test_header_only_pidstat_gives_missing_cpu_not_zero(tmp_path):
    """pidstat -G prints only headers when no process matched its name. This subset has no
    such file, so one is made from a real one by deleting its sample rows."""
    root = _copy(tmp_path)
    side = root / "crypto" / "aes-ni" / "tcp1" / "tls1.3_tls1.3" / "goodput" / "2" / "client"
    lines = (side / "pidstat.txt").read_text().splitlines()
    kept = [ln for ln in lines if not ln.strip() or "Command" in ln or ln.startswith("Linux")]
    assert len(kept) < len(lines) and not any("wget" in ln for ln in kept)
    (side / "pidstat.txt").write_text("\n".join(kept) + "\n")
    r = _row(load_qir10g(root), "crypto/aes-ni/tcp1", "tls1.3", "tls1.3", 2)
    assert pd.isna(r["client_cpu_pct"]) and pd.isna(r["client_pidstat_cpu_pct"])
    assert "client.pidstat: no samples" in r["monitors_missing"]
    assert r["server_cpu_pct"] > 0  # the other side is unaffected
    assert r["status"] == "ok" and r["goodput_mbps"] > 7000


# ------------------------------------------------------------------------------------------
# perf


def test_perf_shares_per_role(frame):
    r = _row(frame, "perf/goracle/optimized/lsquic-quiche-with-pidstat", "lsquic", "quiche", 4)
    for role in ("server", "client"):
        shares = {c: r[c] for c in frame.columns if c.startswith(f"{role}_perf_")}
        assert set(shares) == {f"{role}_perf_{c}_share" for c in (
            "packet_io", "crypto", "connection_management", "io", "uncategorized")}
        assert sum(shares.values()) == pytest.approx(1.0)
    # process scope = the samples whose comm pidstat named for the role: by hand,
    # zstd -dc server/out.perf.zst | grep -c '^http_server '  -> 4229 samples;
    # zstd -dc client/out.perf.zst | grep -c '^quiche-client ' -> 3915 samples
    rules = load_rules()
    for role, comm, impl, n in (("server", "http_server", "lsquic", 4229),
                                ("client", "quiche-client", "quiche", 3915)):
        stacks = filter_comm(read_perf_script(PERF_REP / role / "out.perf.zst"),
                             lambda c, comm=comm: c == comm)
        assert sum(category_counts(stacks, rules, impl).values()) == n
        for cat, share in categorize(stacks, rules, impl).items():
            slug = cat.lower().replace(" ", "_").replace("/", "")
            assert r[f"{role}_perf_{slug}_share"] == pytest.approx(share, abs=1e-15)
    assert r["server_perf_packet_io_share"] > r["server_perf_crypto_share"]  # lsquic server
    assert r["client_cpu_pct"] > 0 and r["goodput_mbps"] == pytest.approx(
        8 * 8589934592 / ((1674835645017137860 - 1674835589906586664) / 1e9) / 1e6, rel=1e-12)


def test_perf_categories_long_frame():
    long = load_qir10g_perf_categories(DATA)
    assert set(long["scope"]) == {"process", "system"}
    assert set(long["role"]) == {"server", "client"}
    assert long.groupby(["role", "scope"])["share"].sum().tolist() == pytest.approx([1.0] * 4)
    wide = load_qir10g(PERF_REP.parents[3])
    proc = long[(long["scope"] == "process") & (long["role"] == "server")]
    for _, p in proc.iterrows():
        slug = p["category"].lower().replace(" ", "_").replace("/", "")
        assert wide.iloc[0][f"server_perf_{slug}_share"] == pytest.approx(p["share"])


@pytest.mark.skipif(not SHARED.exists(), reason="shared fixture with the full perf files absent")
def test_perf_shares_on_full_original_files():
    rep = (SHARED / "perf" / "goracle" / "optimized" / "lsquic-quiche-with-pidstat")
    r = load_qir10g(rep).iloc[0]
    # regression values of the full files (2.6 MB each); process samples by hand:
    # zstd -dc .../server/out.perf.zst | grep -c '^http_server ' -> 83677
    stacks = filter_comm(read_perf_script(rep / "lsquic_quiche/goodput/4/server/out.perf.zst"),
                         lambda c: c == "http_server")
    assert sum(stacks.values()) == 83677
    assert r["server_perf_packet_io_share"] == pytest.approx(0.524404, abs=1e-6)
    assert r["client_perf_crypto_share"] == pytest.approx(0.353653, abs=1e-6)


# ------------------------------------------------------------------------------------------
# through load_results, run.py parse and the views


def test_load_results_dispatches_and_writes_nothing(frame, tmp_path):
    root = _copy(tmp_path)
    before = sorted(p for p in root.rglob("*"))
    df = load_results(root)
    assert sorted(p for p in root.rglob("*")) == before  # no cache written into the tree
    assert len(df) == len(frame) == 14
    assert df["goodput_mbps"].tolist() == pytest.approx(frame["goodput_mbps"].tolist())
    assert df["campaign"].tolist() == frame["campaign"].tolist()


def test_run_py_parse(tmp_path):
    out = tmp_path / "qir.csv"
    res = subprocess.run([sys.executable, str(ROOT / "run.py"), "parse", str(DATA), "-o",
                          str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    table = pd.read_csv(out)
    assert len(table) == 14
    row = table[(table["server"] == "lsquic") & (table["client"] == "lsquic") &
                (table["repetition"] == 3)].iloc[0]
    assert row["goodput_mbps"] == pytest.approx(2933.522507873298, rel=1e-12)
    assert row["client_udp_rcvbuf_errors"] == 900


def test_summary_and_matrix_views(frame):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = summarize(frame)
    assert "variant" in summary.columns  # the experiment path below its first component
    lsq = summary[(summary["server"] == "lsquic") & (summary["client"] == "lsquic")].iloc[0]
    assert (lsq["variant"], lsq["attempts"], lsq["ok"], lsq["failed"]) == (
        "aes-ni/run2", 10, 10, 0)
    assert lsq["min_mbps"] == pytest.approx(2933.522507873298, rel=1e-12)  # rep 3, by hand
    matrix = goodput_matrix(frame)
    assert list(matrix.index) == ["lsquic", "quiche", "tls1.3"]
    assert list(matrix.columns) == ["lsquic", "quiche", "tls1.3"]
    assert matrix.loc["tls1.3", "tls1.3"] == pytest.approx(
        (7935.533109777486 + 8 * 8589934592 / ((1674726556288897464 - 1674726547673308579)
                                               / 1e9) / 1e6) / 2, rel=1e-12)
    assert pd.isna(matrix.loc["lsquic", "tls1.3"])
    ax = plot_matrix(frame)
    values = ax.images[0].get_array()
    finite = [v for v in values.compressed() if math.isfinite(v)]
    assert len(finite) == 4  # lsquic-lsquic, lsquic-quiche, quiche-quiche, tls1.3-tls1.3
    assert max(finite) == pytest.approx(matrix.loc["tls1.3", "tls1.3"])
    assert any(t.get_text() == f"{matrix.loc['tls1.3', 'tls1.3']:.0f}" for t in ax.texts)
    plt.close(ax.figure)


def test_mixed_tree_loads_own_campaigns_too(tmp_path):
    root = _copy(tmp_path)
    shutil.copytree(Path(__file__).parent / "data" / "results-sample", root / "own-sample")
    df = load_results(root, cache=False)
    own = df[df["campaign"].str.startswith("sample_")]
    assert len(df) == 15 and len(own) == 1 and own.iloc[0]["server"] == "quic-go"
    assert (df["campaign"] == "crypto/aes-ni/run2").sum() == 11


def test_the_report_of_a_predecessor_tree_has_its_bookkeeping(tmp_path):
    """The section's facts and Implementations table from what load_results read (result.json:
    interop_commit_hash, the testbed file named in args, server/client_implementations,
    the node names, filesize 8192 MiB, the start and end times), not "?" and "unknown"."""
    from interop_runner.report.build import bookkeeping, build_report, versions_table

    report = build_report([DATA / "perf"], tmp_path / "out")
    (campaign,) = report.campaigns
    facts = bookkeeping(campaign)
    assert facts["testbed(s)"] == "goracle-gard"
    assert facts["runner"] == "QIR 10G fork commit 02dae5f18698"
    assert facts["file"] == "8.00 GiB (8589934592 bytes)"
    assert (facts["started"], facts["finished"]) == ("2023-01-27T15:59:57+00:00",
                                                     "2023-01-27T16:19:01+00:00")
    assert facts["wall time"] == "1144.2 s" and facts["repetitions"] == 10
    assert facts["pairs"] == "1 x 1: lsquic x quiche" and facts["attempts"] == "1 (ok 1)"
    versions = versions_table(campaign)[["implementation", "role", "node", "version"]]
    assert versions.values.tolist() == [
        ["quiche", "client", "gard", "f4845037213dc26e7260350fa3d9f36a23174f82"],
        ["lsquic", "server", "goracle", LSQUIC_COMMIT]]
    html = report.html_file.read_text()
    assert "commit unknown" not in html and "<dd>?</dd>" not in html
    assert "f4845037213dc26e7260350fa3d9f36a23174f82" in html.split("<h3>Implementations")[1]


def test_report_renders_the_predecessor_tree(tmp_path):
    """`run.py report` takes the tree directly: one section per experiment directory, the
    interop matrix of crypto/aes-ni/run2 and the perf categories of the goracle repetition."""
    from interop_runner.report.build import build_report

    report = build_report([DATA], tmp_path / "out")
    names = sorted(c.name for c in report.campaigns)
    assert names == ["crypto/aes-ni/run2", "crypto/aes-ni/tcp1",
                     "goracle/optimized/lsquic-quiche-with-pidstat"]
    stems = {f.stem for c in report.campaigns for f in c.figures}
    assert any(s.endswith("__interop") and "run2" in s for s in stems)
    assert any(s.endswith("__perf") for s in stems)
    assert report.view_errors == []
    html = report.html_file.read_text()
    assert "predecessor (QIR 10G) result tree" in html and "<img" in html
    assert all(p.stat().st_size > 1000 for p in report.figure_files)
