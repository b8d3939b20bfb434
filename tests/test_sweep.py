"""Sweeps: axes, variants, their configs, the run order, validation and the dry run."""

import pytest

from interop_runner.config.campaign import variant_configs
from interop_runner.config.loader import load_campaign
from interop_runner.config.sweep import Axis, Sweep, apply, order_runs, slug, variants
from interop_runner.errors import ConfigError
from interop_runner.measure.plan import plan_runs

from .test_campaign import run_cli

BASE = """name: sw
file_size: 1MiB
repetitions: 3
pairs: [{server: quic-go, client: quic-go}, {server: quinn, client: quinn}]
"""
AXES = """sweep:
  axes:
    - {path: params.cipher, values: [TLS_AES_128_GCM_SHA256, TLS_CHACHA20_POLY1305_SHA256]}
    - {path: params.congestion_control, values: [cubic, reno, bbr], name: cc}
"""


def test_variants_are_the_cross_product_in_axis_order():
    sweep = Sweep(axes=[Axis(path="params.gso", values=[True, False]),
                        Axis(path="server_params.quic-go.force_buffers", values=[True, False],
                             name="force")])
    vs = variants(sweep)
    assert [v.id for v in vs] == ["gso=true,force=true", "gso=true,force=false",
                                  "gso=false,force=true", "gso=false,force=false"]
    assert vs[1].as_dict() == {"gso": True, "force": False}
    assert variants(Sweep())[0].id == ""


def test_apply_sets_nested_paths_without_touching_the_original():
    data = {"params": {"gso": True}, "server_params": {}, "sweep": {"axes": []}}
    sweep = Sweep(axes=[Axis(path="server_params.quic-go.force_buffers", values=[False])])
    out = apply(data, sweep, variants(sweep)[0])
    assert out["server_params"] == {"quic-go": {"force_buffers": False}}
    assert data["server_params"] == {} and "sweep" not in out


def test_slug():
    assert slug("TLS_AES_128_GCM_SHA256") == "TLS_AES_128_GCM_SHA256"
    assert slug(True) == "true" and slug("4 MiB/x") == "4-MiB-x"


def test_order_shuffled_is_interleaved_and_seeded():
    units = list("abcdef")
    first = order_runs(units, 3, "shuffled", seed=7)
    assert first == order_runs(units, 3, "shuffled", seed=7)
    assert first != order_runs(units, 3, "shuffled", seed=8)
    # each repetition round holds every unit once, rounds in order
    for rep in (1, 2, 3):
        assert sorted(u for r, u in first[(rep - 1) * 6:rep * 6] if r == rep) == units
    assert [u for _, u in first[:6]] != units or [u for _, u in first[6:12]] != units
    assert order_runs(units, 2, "sequential", 0)[:3] == [(1, "a"), (2, "a"), (1, "b")]


def test_plan_and_variant_configs(campaign_file):
    cfg, _ = load_campaign(campaign_file(BASE + AXES))
    configs = variant_configs(cfg)
    assert len(configs) == 6
    by_id = {v.id: c for v, c in configs}
    chacha_bbr = by_id["cipher=TLS_CHACHA20_POLY1305_SHA256,cc=bbr"]
    assert chacha_bbr.params.cipher == "TLS_CHACHA20_POLY1305_SHA256"
    assert chacha_bbr.params.congestion_control == "bbr" and not chacha_bbr.sweep.axes
    runs = plan_runs(cfg, seed=1)
    assert len(runs) == 6 * 2 * 3
    assert len({r.key for r in runs}) == len(runs)
    assert [r.repetition for r in runs] == sorted(r.repetition for r in runs)
    assert [r.key for r in plan_runs(cfg, seed=1)] == [r.key for r in runs]


def test_seed_in_config_wins(campaign_file):
    cfg, _ = load_campaign(campaign_file(BASE + AXES + "  seed: 42\n"))
    assert [r.key for r in plan_runs(cfg, seed=1)] == [r.key for r in plan_runs(cfg, seed=2)]


@pytest.mark.parametrize("axes,expected", [
    ("    - {path: params.congestion_control, values: [cubic, vegas]}\n",
     "sweep.axes[0].values[1] (params.congestion_control='vegas'): "),
    ("    - {path: client_params.quic-go.nonsense, values: [1]}\n",
     "sweep.axes[0].values[0] (client_params.quic-go.nonsense=1): "
     "unknown parameter for quic-go"),
    ("    - {path: file_size, values: [1MiB]}\n", "sweep.axes[0].path: cannot sweep 'file_size'"),
    ("    - {path: params.gso, values: []}\n", "sweep.axes[0].values: "),
    ("    - {path: params.gso, values: [true]}\n    - {path: server_params.x.gso, values: [1]}\n",
     "two axes are named 'gso'"),
])
def test_bad_axes_name_the_axis_and_value(campaign_file, axes, expected):
    with pytest.raises(ConfigError) as info:
        load_campaign(campaign_file(BASE + "sweep:\n  axes:\n" + axes))
    assert any(expected in line for line in info.value.lines), info.value.lines


def test_dry_run_counts(campaign_file):
    path = campaign_file(BASE + AXES + "  seed: 5\n")
    proc = run_cli("run", str(path), "--dry-run")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 36 + 2  # the runs, the summary, the estimated duration
    assert lines[-2].startswith("36 run(s) (6 variant(s) x 2 pair(s) x 3 repetition(s), "
                                "order shuffled, seed 5), 36 to run")
    assert lines[-1].startswith("estimated ")
    again = run_cli("run", str(path), "--dry-run")
    assert again.stdout == proc.stdout


def test_results_have_axis_columns_and_summaries_per_variant(tmp_path):
    import json
    import shutil
    from pathlib import Path

    from interop_runner.analysis import load_results, summarize

    camp = tmp_path / "camp"
    shutil.copytree(Path(__file__).parent / "data" / "results-sample", camp,
                    ignore=shutil.ignore_patterns(".cache"))
    (run,) = list(camp.rglob("run.json"))
    data = json.loads(run.read_text())
    for rmem, goodput in (("1x", 100.0), ("2x", 300.0)):
        target = run.parent.parent.parent / f"rmem={rmem}" / "1" / "attempt-1"
        target.mkdir(parents=True)
        for side in ("server", "client"):
            shutil.copytree(run.parent / side, target / side)
        (target / "run.json").write_text(json.dumps(
            {**data, "variant": f"rmem={rmem}", "axes": {"rmem": rmem, "gso": True},
             "goodput_mbps": goodput}))
    shutil.rmtree(run.parent)
    df = load_results(camp)
    assert sorted(df["axis_rmem"]) == ["1x", "2x"] and df["axis_gso"].all()
    table = summarize(df)
    assert list(table["variant"]) == ["rmem=1x", "rmem=2x"]
    assert list(table["median_mbps"]) == [100.0, 300.0]
