"""Execute every analysis notebook with nbclient against real result sets.

A notebook fails the test when any cell raises, when a view expected to have data in the
given results shows an empty figure (no ``image/png`` output, a blank image, or the
notebook's own check "the figure is empty"), or when a view without data in them does not
say so. Which views have data is decided from the result set, per notebook (``PLAN``).

``test_notebook_on_sample`` runs on ``tests/data/results-sample`` (no testbed);
``test_notebook_on_real_results`` on the ``analysis_results`` fixture (the local testbed, or
``QIR_TEST_RESULTS``); ``test_paths_notebook_on_the_path_sample`` runs ``paths.ipynb`` on
``tests/data/path-sample`` (one real attempt over an emulated path).
"""

# mypy: disable-error-code="no-untyped-call, no-any-return"
# (nbformat has no type annotations; everything else here is checked strictly)
from __future__ import annotations

import base64
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from .analysis_fixture import analysis_results  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
SAMPLE = ROOT / "tests" / "data" / "results-sample"
PATH_SAMPLE = ROOT / "tests" / "data" / "path-sample"
FLOWS_SAMPLE = ROOT / "tests" / "data" / "flows-sample"
RUNNER_SAMPLE = ROOT / "tests" / "data" / "flows-runner-sample"  # QUIC against the kernel
NAMES = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")
               if p.name not in ("compare.ipynb", "history.ipynb"))  # hand-written, own tests
CHECK = re.compile(r"^(\w+): (\d+) axes, (\d+) row\(s\)$", re.MULTILINE)
NO_DATA = "no data for this view in"

Results = dict[str, Path]


# ----------------------------------------------------------------------------- execution

def ensure_kernelspec() -> None:
    """Install the venv's ``python3`` kernelspec (``--sys-prefix``) when it is missing."""
    from jupyter_client.kernelspec import KernelSpecManager

    if "python3" not in KernelSpecManager().find_kernel_specs():
        subprocess.run([sys.executable, "-m", "ipykernel", "install", "--sys-prefix"],
                       check=True, capture_output=True)


def execute(name: str, results: list[Path], monkeypatch: pytest.MonkeyPatch
            ) -> nbformat.NotebookNode:
    """Run a notebook (cwd notebooks/) with QIR_RESULTS set; fail on the first cell error."""
    return run_notebook(nbformat.read(NOTEBOOKS / name, as_version=4), name, results,
                        monkeypatch)


def run_notebook(nb: nbformat.NotebookNode, name: str, results: list[Path],
                 monkeypatch: pytest.MonkeyPatch) -> nbformat.NotebookNode:
    """Execute the notebook ``nb`` (cwd notebooks/) with QIR_RESULTS set; fail on the first
    cell error."""
    ensure_kernelspec()
    monkeypatch.setenv("QIR_RESULTS", ":".join(str(p) for p in results))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    client = NotebookClient(nb, kernel_name="python3", timeout=600,
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    try:
        client.execute()
    except CellExecutionError as exc:
        pytest.fail(f"{name}: a cell failed:\n{str(exc)[-3000:]}")
    return nb


def texts(nb: nbformat.NotebookNode) -> str:
    """All stream and text/plain output of a notebook."""
    out = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                out.append(output.get("text", ""))
            elif "data" in output:
                out.append(output["data"].get("text/plain", ""))
    return "\n".join(out)


def images(nb: nbformat.NotebookNode) -> dict[str, bytes]:
    """The PNG shown by each view's figure cell, keyed by the view's variable suffix."""
    found = {}
    for cell in nb.cells:
        match = re.match(r"data_(\w+), fig_\w+ = ", cell.get("source", ""))
        if cell.cell_type != "code" or not match:
            continue
        for output in cell.get("outputs", []):
            png = output.get("data", {}).get("image/png")
            if png:
                found[match.group(1)] = base64.b64decode(png)
    return found


def colours(png: bytes) -> int:
    """Distinct colours in a PNG (up to 1000): a blank image has one."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        counted = image.convert("RGB").getcolors(maxcolors=1000)
    return 1000 if counted is None else len(counted)


def check_views(name: str, nb: nbformat.NotebookNode, expect: dict[str, bool]) -> None:
    """Every view with data shows a non-blank figure and passed the notebook's own check;
    every view without data says so."""
    output = texts(nb)
    checked = {m.group(1): int(m.group(3)) for m in CHECK.finditer(output)}
    shown = images(nb)
    for view, has_data in expect.items():
        if has_data:
            assert view in checked, f"{name}: {view}: no data, expected some:\n{output[-2000:]}"
            assert checked[view] > 0
            assert view in shown, f"{name}: {view}: no image/png output"
            assert colours(shown[view]) > 8, f"{name}: {view}: the figure is blank"
        else:
            assert view not in checked, f"{name}: {view}: has data, the test expected none"
            assert NO_DATA in output, f"{name}: {view}: does not say that it has no data"


# ----------------------------------------------------------------------------- plans

def _has_rates(campaigns: list[Path]) -> bool:
    """Whether the ifstat monitor left per-second samples (short transfers may have none)."""
    from interop_runner.analysis import load_interface_rates

    return not load_interface_rates(*campaigns).empty


def _has_perf(campaigns: list[Path]) -> bool:
    """Whether the perf monitor left category shares in a successful attempt (the results
    frame's ``<role>_perf_<category>_share``, which the view draws)."""
    from interop_runner.analysis import load_results

    frame = load_results(*campaigns)
    shares = frame.filter(regex=r"^(server|client)_perf_.+_share$")
    return bool(shares[(frame["status"] == "ok").to_numpy()].notna().to_numpy().any())


def plan(results: Results) -> dict[str, tuple[list[Path], dict[str, bool]]]:
    """Per notebook: the campaigns to run it on and which of its views must have data."""
    every = list(results.values())

    def own(name: str) -> list[Path]:  # the notebook's own campaign when present, else all
        return [results[name]] if name in results else every

    return {
        "buffers.ipynb": (own("buffers"), {"buffers": "buffers" in results}),
        "interop.ipynb": (own("interop"), {"interop": True}),
        "pinning.ipynb": (own("pinning"), {"pinning": "pinning" in results}),
        "crypto.ipynb": (own("crypto"), {"crypto": "crypto" in results}),
        "offloads.ipynb": (own("offload"), {"offloads": "offload" in results}),
        # (goodput per testbed: one testbed is a plot too, without a comparison)
        "hardware.ipynb": (own("hardware"), {"hardware": True}),
        "perf.ipynb": (own("profile"), {"perf": _has_perf(own("profile"))}),
        "overview.ipynb": (every, {"bottlenecks": True,
                                   "timeline": _has_rates(every)}),
        "paths.ipynb": (own("paths"), {"paths": "paths" in results}),
        # (QUIC against TCP: the flows sample has TCP flows only)
        "flows.ipynb": (own("flows"), {"flowtime": "flows" in results,
                                       "fairness": "flows" in results,
                                       "share": "flows" in results, "quictcp": False}),
        "workloads.ipynb": (own("workloads"), {
            view: "workloads" in results for view in ("direction", "streams")}),
        "conformance.ipynb": (own("conformance"), {
            view: "conformance" in results for view in ("heatmap", "envelopes", "envelope")}),
    }


# ----------------------------------------------------------------------------- tests

def test_notebooks_are_built_by_the_generator() -> None:
    proc = subprocess.run([sys.executable, str(NOTEBOOKS / "_build.py"), "--check"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert set(NAMES) == {"buffers.ipynb", "crypto.ipynb", "interop.ipynb", "perf.ipynb",
                          "hardware.ipynb", "offloads.ipynb", "pinning.ipynb",
                          "overview.ipynb", "paths.ipynb", "flows.ipynb",
                          "conformance.ipynb", "workloads.ipynb"}
    for name in NAMES:
        nb = nbformat.read(NOTEBOOKS / name, as_version=4)
        nbformat.validate(nb)
        first = next(c for c in nb.cells if c.cell_type == "code")
        assert "parameters" in first.metadata.get("tags", [])
        assert re.search(r"^RESULTS = \[", first.source, re.MULTILINE)


@pytest.fixture
def sample(tmp_path: Path) -> Results:
    """A writable copy of the sample campaign (load_results writes its cache below it)."""
    target = tmp_path / SAMPLE.name
    shutil.copytree(SAMPLE, target, ignore=shutil.ignore_patterns(".cache"))
    return {"sample": target}


@pytest.mark.parametrize("name", NAMES)
def test_notebook_on_sample(name: str, sample: Results, monkeypatch: pytest.MonkeyPatch
                            ) -> None:
    campaigns, expect = plan(sample)[name]
    nb = execute(name, campaigns, monkeypatch)
    assert "1 attempt(s) from 1 campaign(s)" in texts(nb)
    check_views(name, nb, expect)


@pytest.mark.parametrize("name", NAMES)
def test_notebook_on_real_results(name: str, analysis_results: Results,  # noqa: F811
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    campaigns, expect = plan(analysis_results)[name]
    nb = execute(name, campaigns, monkeypatch)
    check_views(name, nb, expect)


def run_on_sample(notebook: str, key: str, sample: Path, tmp_path: Path,
                  monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, bool], str]:
    """Execute ``notebook`` on a copy of a stored sample (its cache left out) and check its
    views; what the plan expected and the notebook's text output."""
    target = tmp_path / sample.name
    shutil.copytree(sample, target, ignore=shutil.ignore_patterns(".cache"))
    campaigns, expect = plan({key: target})[notebook]
    nb = execute(notebook, campaigns, monkeypatch)
    check_views(notebook, nb, expect)
    return expect, texts(nb)


def test_paths_notebook_on_the_path_sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    """The calibration table, the buffer figure and the counters of a real path campaign."""
    expect, output = run_on_sample("paths.ipynb", "paths", PATH_SAMPLE, tmp_path, monkeypatch)
    assert expect == {"paths": True}
    assert "1 attempt(s) from 1 campaign(s)" in output
    assert "paths: 1 axes, 1 row(s)" in output
    assert "table calibration: 1 row(s)" in output and "table counters: 1 row(s)" in output
    assert "no data for this table" not in output
    assert "path-e332eb1128b4" in output and "rtt_calibrated_ms" in output
    assert "bottleneck_drops" in output and "14525" in output  # the counters, per attempt


def test_flows_notebook_on_the_flows_sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    """Throughput over time, Jain's index per rate, the share matrix and the tables of a
    real campaign of three competing TCP flows (tests/data/flows-sample)."""
    _, output = run_on_sample("flows.ipynb", "flows", FLOWS_SAMPLE, tmp_path, monkeypatch)
    assert "6 attempt(s) from 1 campaign(s)" in output
    assert "fairness: 1 axes, 2 row(s)" in output and "share: 2 axes, 6 row(s)" in output
    assert "table fairness_cells: 2 row(s)" in output and "table shares: 6 row(s)" in output
    assert "table flow_results: 18 row(s)" in output
    assert "no bottleneck captures" in output  # the attempt without captures, not zeros


def test_conformance_notebook_on_the_runner_sample(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The heatmap, the cells, the envelopes and the transitivity tables of a real campaign
    of QUIC flows against kernel TCP flows (tests/data/flows-runner-sample: quic-go/reno and
    quiche/cubic, one attempt each)."""
    _, output = run_on_sample("conformance.ipynb", "conformance", RUNNER_SAMPLE, tmp_path,
                              monkeypatch)
    assert "2 attempt(s) from 1 campaign(s)" in output
    assert "heatmap: 2 axes, 2 row(s)" in output  # the panel and its colour bar
    assert "envelopes: 2 axes, 2 row(s)" in output and "table cells: 2 row(s)" in output
    assert "envelope: 1 axes, 77 row(s)" in output  # quic-go/reno: 30 + 23 points, hulls
    assert "table pairs: 4 row(s)" in output and "table transitivity: 0 row(s)" in output
    assert "quiche/cubic" in output


# ----------------------------------------------------------------------------- the report

DATA = ROOT / "tests" / "data"
# Every stored result set: its directory below tests/data and the notebook views the report
# draws of it too (no other view may have data in either). Left out: conformance-variants/
# history (17 campaigns of the kind of conformance-variants/ab, minutes of k-means more);
# tests/data/perf holds perf script files, no results.
FLOW_VIEWS = {"bottlenecks", "fairness", "flowtime", "share"}
CONFORMANCE_VIEWS = FLOW_VIEWS | {"envelopes", "heatmap", "interop", "paths", "quictcp"}
SAMPLES: dict[str, tuple[str, set[str]]] = {
    "results": ("results-sample", {"bottlenecks"}),
    "path": ("path-sample", {"bottlenecks", "paths"}),
    "flows": ("flows-sample", FLOW_VIEWS),
    "flows-runner": ("flows-runner-sample", CONFORMANCE_VIEWS),
    "ack-ratio": ("ack-ratio-sample", {"bottlenecks", "interop", "paths"}),
    # the predecessor's tree: perf categories from the frame in the notebook too
    "predecessor": ("qir10g/results", {"bottlenecks", "crypto", "interop", "perf"}),
    "conformance-ab": ("conformance-variants/ab", CONFORMANCE_VIEWS),
    "history-aa": ("history/aa", {"bottlenecks"}),
    "history-step": ("history/step", {"bottlenecks"}),
}
VIEW_CALL = re.compile(r"^data_(\w+), fig_\w+ = views\.(\w+)\((\w+)\)", re.MULTILINE)


def generator() -> Any:
    """notebooks/_build.py as a module (what each notebook's cells are made of)."""
    spec = importlib.util.spec_from_file_location("notebooks_build", NOTEBOOKS / "_build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclasses look their module up there)
    spec.loader.exec_module(module)
    return module


def every_notebook() -> nbformat.NotebookNode:
    """The cells of every generated notebook in one notebook, each notebook's own parameter
    and setup cells leading its part, to run them all in one kernel (a kernel start per
    notebook and sample would take minutes). The views' variables differ between notebooks;
    each notebook alone is run by test_notebook_on_sample."""
    cells = [cell for name in NAMES for cell in nbformat.read(NOTEBOOKS / name, 4).cells]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata = nbformat.read(NOTEBOOKS / NAMES[0], 4).metadata
    return nb


def notebook_views(nb: nbformat.NotebookNode) -> dict[str, tuple[str, str]]:
    """Per view cell of the notebooks: its name -> (view function, what it is given)."""
    calls = [m.groups() for c in nb.cells if c.cell_type == "code"
             for m in VIEW_CALL.finditer(c.source)]
    names = [name for name, _, _ in calls]
    assert len(set(names)) == len(names), f"two views of one name: {sorted(names)}"
    return {name: (function, argument) for name, function, argument in calls}


def report_verdicts(report: Any) -> dict[str, bool | None]:
    """Per view function of the report: drawn in some campaign's section (True), said to
    have no data in every one (False), or not looked at where not drawn (None: too few
    testbeds or pairs to compare)."""
    from interop_runner.report.views import VIEWS

    verdicts: dict[str, bool | None] = {}
    for view in VIEWS:
        drawn = any(f.view == view for c in report.campaigns for f in c.figures)
        unknown = any(s.view == view and s.too_few for c in report.campaigns
                      for s in c.skipped)
        verdicts[view.function] = True if drawn else None if unknown else False
    return verdicts


def stored_copy(sample: str, tmp_path: Path) -> Path:
    """A writable copy of a stored sample (its caches left out), each flow series cache
    (flows.parquet, kept where the captures were not) newer than its record, as written."""
    from interop_runner.analysis.frames.flow_series import SERIES_FILE

    source = DATA / SAMPLES[sample][0]
    target = Path(shutil.copytree(source, tmp_path / "data" / source.name,
                                  ignore=shutil.ignore_patterns(".cache")))
    for cache in target.rglob(SERIES_FILE):
        record = (cache.parent / "run.json").stat().st_mtime_ns
        os.utime(cache, ns=(record + 10**9, record + 10**9))
    return target


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_report_and_notebooks_agree_on_the_views_with_data(
        sample: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On every stored sample, a view the report draws has data in its notebook and one the
    report skips for want of data says so in its notebook; every notebook gives a view of
    the report what the report gives it (the frame, or the paths)."""
    from interop_runner.report.build import build_report
    from interop_runner.report.views import VIEWS

    results = stored_copy(sample, tmp_path)
    report = build_report([results], tmp_path / "report")
    assert report.view_errors == []
    verdicts = report_verdicts(report)
    nb = run_notebook(every_notebook(), "every notebook", [results], monkeypatch)
    checked = {m.group(1) for m in CHECK.finditer(texts(nb))}
    takes = {v.function: v.takes for v in VIEWS}
    arguments = generator().ARGUMENTS
    agree, disagree = set(), []
    for name, (function, argument) in notebook_views(nb).items():
        if function not in takes:  # a notebook's own view (one flow's envelopes)
            continue
        assert argument == arguments[takes[function]], f"{name}: views.{function}({argument})"
        if verdicts[function] is None:
            continue
        if (name in checked) == verdicts[function]:
            agree.add(name)
        else:
            disagree.append(f"{name} ({function}): report {verdicts[function]}, notebook "
                            f"{name in checked}")
    assert disagree == []
    assert {name for name in agree if name in checked} == SAMPLES[sample][1]
    assert len(agree) >= 14  # (of 16 report views in the notebooks; 2 need 2 pairs/testbeds)
