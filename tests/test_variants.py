"""Implementation variants (other releases, source trees, build options), `impl` substitution
axes and the paired (A/B) run order: the pure parts, no testbed."""

import subprocess
import tarfile
from pathlib import Path

import pytest

from interop_runner.config.implementations import VariantSpec, load_registry, resolve
from interop_runner.config.loader import load_campaign
from interop_runner.config.sweep import order_runs
from interop_runner.errors import ConfigError
from interop_runner.measure.campaign import side_params
from interop_runner.measure.plan import plan_runs
from interop_runner.measure.variants import pack_source

AB = """name: ab
file_size: 1MiB
repetitions: 4
pairs: [{server: quic-go, client: quic-go}, {server: quic-go, client: quiche},
        {server: quinn, client: quic-go}]
server_params: {quic-go: {force_buffers: false}}
sweep:
  order: paired
  seed: 11
  axes: [{path: impl.quic-go, values: [quic-go, quic-go@v0.64.0], name: version}]
"""


def test_resolve_registry_entry_and_undeclared_release():
    registry = load_registry()
    assert resolve("quic-go", registry) is registry["quic-go"]
    meta = resolve("quic-go@v0.64.0", registry)
    assert meta.name == "quic-go@v0.64.0" and meta.folder == "quic-go"
    assert meta.version == "v0.64.0" and meta.variant == VariantSpec(base="quic-go",
                                                                      version="v0.64.0")
    assert meta.path == registry["quic-go"].path and meta.alpns == registry["quic-go"].alpns
    # the variant's harness hash differs from the base's only through the spec, not the files
    assert meta.source_hash() == registry["quic-go"].source_hash()


def test_resolve_refuses_unknown_base_and_unsupported_kinds():
    registry = load_registry()
    with pytest.raises(KeyError) as err:
        resolve("quik-go@v1", registry)
    assert err.value.args[0] == "quik-go"
    with pytest.raises(ValueError, match="quiche cannot build version variants"):
        resolve("quiche@0.29.0", registry)
    with pytest.raises(ValueError, match="not an environment variable name: bad-name"):
        resolve("qg", registry, {"qg": VariantSpec(base="quic-go", build_env={"bad-name": "1"})})
    with pytest.raises(ValueError, match="QIR_X"):
        resolve("qg", registry, {"qg": VariantSpec(base="quic-go", build_env={"QIR_X": "1"})})


def test_config_errors_name_the_key(campaign_file, tmp_path):
    path = campaign_file("""name: v
file_size: 1MiB
pairs: [{server: quiche@0.29.0, client: quic-go}, {server: quic-go, client: nope@1}]
implementations:
  quic-go: {base: quic-go, version: v0.64.0}
  qg-src: {base: quic-go, source: /nonexistent/tree}
impl: {quic-go: qg-src}
""")
    with pytest.raises(ConfigError) as err:
        load_campaign(path)
    text = "\n".join(err.value.lines)
    assert "pairs[0].server: quiche@0.29.0: quiche cannot build version variants" in text
    assert "pairs[1].client: unknown implementation 'nope'" in text
    assert "implementations.quic-go: 'quic-go' is a registry implementation" in text
    assert "implementations.qg-src.source: not a directory: /nonexistent/tree" in text


def test_paired_order_puts_both_variants_of_a_cell_back_to_back():
    units = [(v, cell) for cell in ("p1", "p2", "p3") for v in ("A", "B")]
    order = order_runs(units, 6, "paired", seed=3, group=lambda u: u[1])
    assert order == order_runs(units, 6, "paired", seed=3, group=lambda u: u[1])
    assert len(order) == 36
    for i in range(0, 36, 2):
        (rep1, (v1, c1)), (rep2, (v2, c2)) = order[i], order[i + 1]
        assert rep1 == rep2 and c1 == c2 and {v1, v2} == {"A", "B"}
    firsts = [order[i][1][0] for i in range(0, 36, 2)]
    assert "A" in firsts and "B" in firsts  # the order within a pair is drawn, not fixed
    # every repetition round visits every cell once
    for rep in range(1, 7):
        assert sorted(c for r, (_, c) in order if r == rep) == ["p1"] * 2 + ["p2"] * 2 + \
            ["p3"] * 2


def test_plan_substitutes_the_variant_and_keeps_the_cell(campaign_file):
    cfg, _ = load_campaign(campaign_file(AB))
    runs = plan_runs(cfg, seed=0)
    assert len(runs) == 2 * 3 * 4
    for a, b in zip(runs[::2], runs[1::2]):
        assert a.cell == b.cell and a.repetition == b.repetition
        assert {a.variant.as_dict()["version"], b.variant.as_dict()["version"]} == \
            {"quic-go", "quic-go@v0.64.0"}
    by_variant = {r.variant.as_dict()["version"]: r for r in runs if r.cell == ("quic-go",
                                                                              "quiche")}
    assert (by_variant["quic-go@v0.64.0"].server, by_variant["quic-go@v0.64.0"].client) == \
        ("quic-go@v0.64.0", "quiche")
    old_self = [r for r in runs if r.cell == ("quic-go", "quic-go")
                and r.variant.as_dict()["version"] == "quic-go@v0.64.0"]
    assert {(r.server, r.client) for r in old_self} == {("quic-go@v0.64.0", "quic-go@v0.64.0")}
    assert all(r.alpn == "h3" for r in runs)
    assert len({r.key for r in runs}) == len(runs)


def test_params_of_the_written_name_reach_the_variant():
    by_impl = {"quic-go": {"force_buffers": False}, "quic-go@v0.64.0": {"extra": 1}}
    assert side_params(by_impl, "quic-go@v0.64.0", ("quic-go", "quiche"), 0) == \
        {"force_buffers": False, "extra": 1}
    assert side_params(by_impl, "quiche", ("quic-go", "quiche"), 1) == {}
    assert side_params(by_impl, "quic-go", None, 0) == {"force_buffers": False}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                                          "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
                                          "PATH": "/usr/bin:/bin"}).stdout.strip()


def test_pack_source_exports_the_commit_and_flags_a_dirty_tree(tmp_path):
    repo = tmp_path / "lib"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "a.go").write_text("package a // v1\n")
    _git(repo, "add", "a.go")
    _git(repo, "commit", "-qm", "one")
    first = _git(repo, "rev-parse", "HEAD")
    (repo / "a.go").write_text("package a // v2\n")
    _git(repo, "commit", "-qam", "two")
    registry = load_registry()
    at_first = resolve("qg", registry, {"qg": VariantSpec(base="quic-go", source=str(repo),
                                                           commit=first[:10])})
    archive = pack_source(at_first, tmp_path)
    assert archive.identity["commit"] == first and archive.label == first[:12]
    with tarfile.open(archive.path) as tar:
        fh = tar.extractfile("a.go")
        assert fh is not None and fh.read() == b"package a // v1\n"
    (repo / "a.go").write_text("package a // local edit\n")
    head = resolve("qg", registry, {"qg": VariantSpec(base="quic-go", source=str(repo))})
    out = tmp_path / "dirty"
    out.mkdir()
    dirty = pack_source(head, out)
    assert dirty.identity["dirty"] is True and dirty.label.endswith("+dirty")
    with tarfile.open(dirty.path) as tar:  # the work tree as it is, without .git
        names = tar.getnames()
        fh = tar.extractfile("a.go")
        assert fh is not None and fh.read() == b"package a // local edit\n"
    assert not any(n.startswith(".git") for n in names)
    assert dirty.identity["sha256"] != archive.identity["sha256"]


def test_release_archive_errors_name_the_key(campaign_file):
    """A version variant of an archive-built implementation needs its release's archive;
    a registry-built one takes none; an archive without a version is refused."""
    sha = "a" * 64
    path = campaign_file(f"""name: v
file_size: 1MiB
pairs: [{{server: lsq-old, client: qg-arch}}]
implementations:
  lsq-old: {{base: lsquic, version: 4.9.2}}
  qg-arch: {{base: quic-go, version: v0.64.0,
            archive: {{file: quic-go.tar.gz, sha256: {sha}, url: "https://example.invalid/x"}}}}
""")
    with pytest.raises(ConfigError) as err:
        load_campaign(path)
    text = "\n".join(err.value.lines)
    assert "implementations.lsq-old: lsquic builds from upstream source archives: a version " \
        "variant needs archive: {file, sha256, url} of that release" in text
    assert "implementations.qg-arch.archive: quic-go is not built from upstream source " \
        "archives (give version alone)" in text
    with pytest.raises(ValueError, match="archive names the release of a version variant"):
        VariantSpec(base="lsquic", archive={"file": "x.tar.gz", "sha256": sha,
                                            "url": "https://example.invalid/x"})
