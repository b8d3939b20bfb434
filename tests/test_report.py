"""`run.py report`: the HTML page, checked in a real headless Chromium.

How the browser check works: Chromium is started with ``--remote-debugging-pipe`` and driven
over the DevTools protocol (JSON messages separated by NUL bytes on file descriptors 3 and 4;
no port, no websocket, no extra package). Console messages and exceptions arrive as protocol
events (``Runtime.consoleAPICalled``, ``Runtime.exceptionThrown``, ``Log.entryAdded``), every
request the page makes as ``Network.requestWillBeSent``, and each figure's decoded size and
layout box come from ``Runtime.evaluate`` after ``img.decode()`` resolved. A full-page
screenshot (``Page.captureScreenshot``) is then cut at each figure's box and must not be one
flat colour. Chromium's own stderr is not used: it carries unrelated noise (D-Bus) and no
structured console output.

The fast tests use ``tests/data/results-sample`` (no testbed); ``test_report_of_real_results``
uses the ``analysis_results`` fixture (local testbed, or ``QIR_TEST_RESULTS``).
"""

from __future__ import annotations

import base64
import dataclasses
import fcntl
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from .analysis_fixture import analysis_results  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "tests" / "data" / "results-sample"
PATH_SAMPLE = ROOT / "tests" / "data" / "path-sample"  # one attempt over an emulated path
CHROMIUM = os.environ.get("QIR_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]
WIDTH = 1280


# ----------------------------------------------------------------------------- DevTools client

class DevToolsError(RuntimeError):
    """The browser answered a command with an error, or did not answer in time."""


class Chromium:
    """Headless Chromium driven over ``--remote-debugging-pipe`` (fds 3 and 4, NUL-separated
    JSON). Use as a context manager; :meth:`open_page` attaches to a fresh tab."""

    def __init__(self, binary: str = CHROMIUM, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.events: list[dict[str, Any]] = []
        self._next_id = 0
        self._buffer = b""
        self._profile = tempfile.mkdtemp(prefix="qir-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # move both ends the child needs above 10 so that dup2 onto 3 and 4 cannot clobber them
        child_in = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD_CLOEXEC, 10)
        child_out = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(to_browser_r)
        os.close(from_browser_w)

        def fds() -> None:  # in the child: its fd 3 reads our commands, fd 4 writes answers
            os.dup2(child_in, 3)
            os.dup2(child_out, 4)

        # stderr to a file, not a pipe: Chromium logs a lot (D-Bus noise) and would block on
        # a full pipe; its tail goes into the error when the browser dies
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [binary, *CHROMIUM_FLAGS, f"--user-data-dir={self._profile}",
             "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._stderr,
            preexec_fn=fds, close_fds=False)  # (close_fds would close 3 and 4 after fds())
        os.close(child_in)
        os.close(child_out)

    def __enter__(self) -> "Chromium":
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Ask the browser to quit, then make sure it did; remove its profile."""
        try:
            if self.proc.poll() is None:
                self.send("Browser.close", wait=False)
                self.proc.wait(timeout=10)
        except (OSError, DevToolsError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(timeout=10)
        finally:
            for fd in (self._to_browser, self._from_browser):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._stderr.close()
            shutil.rmtree(self._profile, ignore_errors=True)

    def stderr_tail(self, size: int = 2000) -> str:
        """The end of the browser's stderr (for error messages)."""
        self._stderr.seek(0, os.SEEK_END)
        self._stderr.seek(max(0, self._stderr.tell() - size))
        return self._stderr.read().decode(errors="replace")

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DevToolsError("timeout waiting for the browser")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if ready:
                chunk = os.read(self._from_browser, 1 << 20)
                if not chunk:
                    raise DevToolsError(f"browser closed the pipe (exit {self.proc.poll()}): "
                                        f"{self.stderr_tail()}")
                self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    def send(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None, wait: bool = True) -> dict[str, Any]:
        """Send a command; return its result (events that arrive meanwhile are kept)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method,
                                   "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        if not wait:
            return {}
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise DevToolsError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            if "method" in reply:
                self.events.append(reply)

    def wait_event(self, method: str, session: str | None = None) -> dict[str, Any]:
        """Wait for an event (one that already arrived counts)."""
        deadline = time.monotonic() + self.timeout
        seen = 0
        while True:
            for event in self.events[seen:]:
                if event["method"] == method and (session is None
                                                  or event.get("sessionId") == session):
                    return event
            seen = len(self.events)
            self.events.append(self._read_message(deadline))

    def open_page(self) -> str:
        """A new tab, attached (flat protocol); returns its session id."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session: str = self.send("Target.attachToTarget",
                                 {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Network", "Page"):
            self.send(f"{domain}.enable", session=session)
        return session


# ----------------------------------------------------------------------------- page check

FIGURES_JS = """
(async () => {
  const imgs = Array.from(document.querySelectorAll('img'));
  const decoded = await Promise.all(imgs.map(i => i.decode().then(() => 'ok', e => String(e))));
  return JSON.stringify(imgs.map((i, k) => {
    const r = i.getBoundingClientRect(), s = getComputedStyle(i);
    return {alt: i.alt, decoded: decoded[k], natural: [i.naturalWidth, i.naturalHeight],
            box: [r.left + scrollX, r.top + scrollY, r.width, r.height],
            visible: s.visibility === 'visible' && s.display !== 'none' && s.opacity !== '0'};
  }));
})()
"""


@dataclasses.dataclass
class PageCheck:
    """What the browser saw: problems (console errors, foreign requests), figures, screenshot."""

    errors: list[str]
    requests: list[str]
    figures: list[dict[str, Any]]
    screenshot: Path
    height: int


def check_page(html_file: Path, screenshot: Path) -> PageCheck:
    """Load ``html_file`` in headless Chromium; collect errors, requests, figure boxes and a
    full-page screenshot."""
    url = html_file.resolve().as_uri()
    with Chromium() as browser:
        session = browser.open_page()
        browser.send("Emulation.setDeviceMetricsOverride",
                     {"width": WIDTH, "height": 900, "deviceScaleFactor": 1, "mobile": False},
                     session=session)
        browser.send("Page.navigate", {"url": url}, session=session)
        browser.wait_event("Page.loadEventFired", session)
        result = browser.send("Runtime.evaluate", {"expression": FIGURES_JS,
                                                   "awaitPromise": True,
                                                   "returnByValue": True}, session=session)
        if "exceptionDetails" in result:
            raise DevToolsError(f"evaluate: {result['exceptionDetails']}")
        figures: list[dict[str, Any]] = json.loads(result["result"]["value"])
        metrics = browser.send("Page.getLayoutMetrics", session=session)
        height = int(metrics["cssContentSize"]["height"])
        shot = browser.send("Page.captureScreenshot",
                            {"format": "png", "captureBeyondViewport": True,
                             "clip": {"x": 0, "y": 0, "width": WIDTH, "height": height,
                                      "scale": 1}}, session=session)
        screenshot.write_bytes(base64.b64decode(shot["data"]))
        events = [e for e in browser.events if e.get("sessionId") == session]
    errors, requests = [], []
    for event in events:
        params = event.get("params", {})
        if event["method"] == "Runtime.consoleAPICalled" and params.get("type") in (
                "error", "assert", "warning"):
            errors.append(f"console.{params['type']}: "
                          + " ".join(str(a.get("value", a.get("description")))
                                     for a in params.get("args", [])))
        elif event["method"] == "Runtime.exceptionThrown":
            errors.append(f"exception: {params.get('exceptionDetails', {}).get('text')}")
        elif event["method"] == "Log.entryAdded" and params["entry"]["level"] in (
                "error", "warning"):
            errors.append(f"log {params['entry']['level']}: {params['entry']['text']}")
        elif event["method"] == "Network.requestWillBeSent":
            requests.append(params["request"]["url"])
        elif event["method"] == "Network.loadingFailed":
            errors.append(f"loading failed: {params.get('errorText')}")
    return PageCheck(errors, requests, figures, screenshot, height)


def distinct_colours(png: Path, box: list[float] | None = None) -> int:
    """Number of distinct colours in the screenshot (or in one box of it), up to 1000."""
    from PIL import Image

    with Image.open(png) as image:
        rgb = image.convert("RGB")
        if box is not None:
            x, y, w, h = (int(round(v)) for v in box)
            rgb = rgb.crop((x, y, x + w, y + h))
        colours = rgb.getcolors(maxcolors=1000)
    return 1000 if colours is None else len(colours)


def assert_renders(html_file: Path, screenshot: Path, min_figures: int) -> PageCheck:
    """The page loads without console errors or foreign requests, and every figure is
    decoded, laid out with a non-zero size and not blank in the screenshot."""
    page = check_page(html_file, screenshot)
    assert page.errors == [], page.errors
    url = html_file.resolve().as_uri()
    assert [r for r in page.requests if r != url and not r.startswith("data:")] == []
    assert len(page.figures) >= min_figures, page.figures
    for fig in page.figures:
        assert fig["decoded"] == "ok", fig
        assert fig["visible"], fig
        assert fig["natural"][0] > 0 and fig["natural"][1] > 0, fig
        assert fig["box"][2] > 100 and fig["box"][3] > 50, fig  # laid out, not squashed
        assert distinct_colours(screenshot, fig["box"]) > 8, f"blank figure: {fig['alt']}"
    assert distinct_colours(screenshot) > 16
    return page


# ----------------------------------------------------------------------------- helpers

def run_report(*args: str) -> subprocess.CompletedProcess[str]:
    """``run.py report ...`` as a user runs it."""
    return subprocess.run([sys.executable, str(ROOT / "run.py"), "report", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=600, check=False)


def figure_names(html: str) -> set[str]:
    """The view names of the figures in a report page."""
    return set(re.findall(r'<figure id="[^"]*__([^"]+)"', html))


def assert_self_contained(html: str) -> None:
    """No script, no stylesheet link, every src/href local (data: URI or #anchor)."""
    assert "<script" not in html.lower()
    assert "<link" not in html.lower()
    for attr, value in re.findall(r'\b(src|href)="([^"]*)"', html):
        assert value.startswith(("data:", "#")), f"{attr}={value[:80]}"
    assert "url(" not in html  # no CSS resources either


def keylog_expected(campaign: Path) -> bool:
    """Whether a campaign asked for TLS key logs (keylog: true)."""
    cfg = json.loads((campaign / "campaign.json").read_text()).get("config") or {}
    axes = ((cfg.get("sweep") or {}).get("axes")) or []
    return bool(cfg.get("keylog")
                or any(a.get("path") == "keylog" and True in a.get("values", []) for a in axes))


@pytest.fixture
def sample_copy(tmp_path: Path) -> Path:
    """A writable copy of the sample campaign (load_results caches below it)."""
    target = tmp_path / "results" / SAMPLE.name
    shutil.copytree(SAMPLE, target, ignore=shutil.ignore_patterns(".cache"))
    return target


# ----------------------------------------------------------------------------- fast tests

def test_sample_report_renders_in_chromium(sample_copy: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_report(str(sample_copy), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr, proc.stderr  # no view failed
    html = (out / "report.html").read_text()
    assert_self_contained(html)
    for heading in ("Summary", "Views", "Failures (0)", "Implementations", "Hosts",
                    "Configuration"):
        assert f"<h3>{heading}</h3>" in html
    assert "No TLS key logs" in html
    assert "v0.65.0" in html and "AMD EPYC" in html  # versions and host facts
    names = figure_names(html)
    assert "bottlenecks" in names
    # the views not drawn: one line, the views of one reason together
    (skipped,) = re.findall(r'<p class="skipped">(.*?)</p>', html)
    assert "<li" not in html.split("<h3>Views</h3>")[1].split("<h3>Summary</h3>")[0]
    groups = re.sub(r"</?span[^>]*>", "", skipped).split("; ")
    assert "Interop matrix (Fig. 6), CPU cost per GiB: skipped, needs 2 server/client pairs, "\
           "this campaign has 1" in groups
    assert "Hardware / testbeds (Fig. 8): skipped, needs 2 testbeds to compare, this campaign "\
           "has 1" in groups
    no_data = [g for g in groups if g.endswith(": skipped, no data in this campaign")]
    assert len(no_data) == 1 and "Socket buffer sweep (Fig. 3-4), " in no_data[0]
    for name in names:  # every embedded figure is also a file
        assert list((out / "figures").glob(f"*__{name}.png"))
        assert list((out / "figures").glob(f"*__{name}.svg"))
    assert_renders(out / "report.html", tmp_path / "sample.png", min_figures=len(names))


def test_keylogs_and_failures_are_reported(sample_copy: Path, tmp_path: Path) -> None:
    attempt = sample_copy / "quic-go_quic-go" / "goodput" / "1" / "attempt-1"
    (attempt / "client" / "keys.log").write_text("CLIENT_TRAFFIC_SECRET_0 00 11\n")
    failed = sample_copy / "quic-go_quic-go" / "goodput" / "2" / "attempt-1"
    failed.mkdir(parents=True)
    record = json.loads((attempt / "run.json").read_text())
    record.update(repetition=2, status="failed", reason="client exited with 1 <boom>",
                  goodput_mbps=None, hash_ok=None)
    (failed / "run.json").write_text(json.dumps(record))
    out = tmp_path / "out"
    proc = run_report(str(sample_copy.parent), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    html = (out / "report.html").read_text()
    assert "TLS key logs present" in html
    assert "quic-go_quic-go/goodput/1/attempt-1/client/keys.log" in html
    assert "Failures (1)" in html
    assert "client exited with 1 &lt;boom&gt;" in html  # reason shown, escaped
    assert "TLS key log" in proc.stderr


def test_hosts_and_versions_from_testbed_files(sample_copy: Path, tmp_path: Path) -> None:
    """A campaign over two testbeds keeps hosts and versions in testbed-<name>.json."""
    meta = json.loads((sample_copy / "campaign.json").read_text())
    for name, cpu in (("local", "CPU-A"), ("local-b", "CPU-B")):
        hosts = json.loads(json.dumps(meta["hosts"]))
        hosts["server"]["cpu_model"] = hosts["client"]["cpu_model"] = cpu
        (sample_copy / f"testbed-{name}.json").write_text(json.dumps(
            {"hosts": hosts, "implementations": meta["implementations"],
             "status": "finished"}))
    meta["testbeds"] = {"local": meta.pop("testbed"), "local-b": {}}
    meta["testbed_files"] = {n: f"testbed-{n}.json" for n in ("local", "local-b")}
    del meta["hosts"], meta["implementations"]
    (sample_copy / "campaign.json").write_text(json.dumps(meta))
    pair = sample_copy / "quic-go_quic-go" / "goodput"
    shutil.copytree(pair / "1", pair / "2")
    record = json.loads((pair / "2" / "attempt-1" / "run.json").read_text())
    record.update(repetition=2, testbed="local-b")
    (pair / "2" / "attempt-1" / "run.json").write_text(json.dumps(record))
    out = tmp_path / "out"
    proc = run_report(str(sample_copy), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    html = (out / "report.html").read_text()
    assert "<b>testbed local</b>" in html and "<b>testbed local-b</b>" in html
    assert "CPU-A" in html and "CPU-B" in html
    assert "hardware" in figure_names(html)  # two testbeds: the hardware view applies
    summary = html.split("<h3>Summary</h3>")[1].split("<h3>")[0]
    assert "<th>testbed</th>" in summary  # one row per testbed


def test_same_campaign_in_two_places_gets_two_sections(sample_copy: Path,
                                                        tmp_path: Path) -> None:
    other = tmp_path / "elsewhere" / sample_copy.name
    shutil.copytree(sample_copy, other)
    out = tmp_path / "out"
    proc = run_report(str(sample_copy), str(other), str(sample_copy), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    html = (out / "report.html").read_text()
    ids = re.findall(r'<section id="(c-[^"]+)"', html)
    assert len(ids) == 2 and len(set(ids)) == 2  # the repeated path counts once
    figures = re.findall(r'<figure id="([^"]+)"', html)
    assert len(figures) == len(set(figures)) == 2 * len(figure_names(html)) > 0
    assert {p.stem for p in (out / "figures").glob("*.svg")} == set(figures)


def test_a_report_of_several_campaigns_leads_with_their_cells(sample_copy: Path,
                                                               tmp_path: Path) -> None:
    """Above the campaigns' sections, one table of every cell of every campaign: the table
    the end of each run printed (run.py summary); a report of one campaign has none."""
    from interop_runner.report.build import build_report

    path_copy = sample_copy.parent / PATH_SAMPLE.name
    shutil.copytree(PATH_SAMPLE, path_copy, ignore=shutil.ignore_patterns(".cache"))
    html = build_report([sample_copy, path_copy], tmp_path / "out").html_file.read_text()
    assert html.index('<section id="campaigns">') < html.index('<section id="c-')
    part = html.split('<section id="campaigns">')[1].split("</section>")[0]
    head = re.findall(r"<th>([^<]*)</th>", part)
    assert head[:6] == ["campaign", "server", "client", "attempts", "ok", "failed"]
    rows = [dict(zip(head, re.findall(r"<td[^>]*>([^<]*)</td>", r)))
            for r in re.findall(r"<tr><td.*?</tr>", part)]
    assert [(r["campaign"], r["server"], r["attempts"], r["median_mbps"]) for r in rows] == [
        ("sample_20261121T121934Z", "quic-go", "1", "905.9"),  # in the order given
        ("pathcheck_20261126T192537Z", "quic-go", "1", "18.7")]
    assert [r["bottleneck"] for r in rows] == ["undetermined (1/1)", "path_rate (1/1)"]
    one = build_report([sample_copy], tmp_path / "one").html_file.read_text()
    assert 'id="campaigns"' not in one


def test_paths_section_only_for_a_campaign_with_a_path(sample_copy: Path,
                                                        tmp_path: Path) -> None:
    """The Paths view (goodput per bottleneck buffer and the calibration table) in the
    section of the campaign over a path; the direct-link campaign says it has none."""
    path_copy = sample_copy.parent / PATH_SAMPLE.name
    shutil.copytree(PATH_SAMPLE, path_copy, ignore=shutil.ignore_patterns(".cache"))
    out = tmp_path / "out"
    proc = run_report(str(path_copy), str(sample_copy), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr, proc.stderr
    html = (out / "report.html").read_text()
    assert_self_contained(html)
    over_path, direct = html.split('<section id="c-')[1:]
    assert "pathcheck_" in over_path and SAMPLE.name in direct
    assert '__paths"' in over_path and '__paths"' not in direct
    figure = over_path.split('__paths"')[1].split("</figure>")[0]
    assert "<b>Paths: goodput against the bottleneck buffer</b>" in figure
    calibration = figure.split("<b>Path calibration: configured against measured</b>")[1]
    calibration = calibration.split("</table>")[0]
    head = re.findall(r"<th>([^<]*)</th>", calibration)
    cells = dict(zip(head, re.findall(r"<td[^>]*>([^<]*)</td>", calibration)))
    assert cells["path_key"] == "path-e332eb1128b4" and cells["backend"] == "nfqueue"
    assert (cells["rtt_configured_ms"], cells["rtt_calibrated_ms"]) == ("20.0", "20.2")
    assert (cells["rate_configured_mbps"], cells["rate_calibrated_mbps"]) == ("20.0", "19.8")
    assert (cells["queue_configured_ms"], cells["queue_calibrated_ms"]) == ("20.0", "18.6")
    assert cells["loss_calibrated"] == "–" and cells["calibration_ok"] == "yes"
    data = figure.split("<summary>data (1 row(s))</summary>")[1]
    assert "<th>goodput_fraction_median</th>" in data and ">0.934<" in data
    assert "Paths: goodput against the bottleneck buffer: skipped" not in over_path
    assert ("Paths: goodput against the bottleneck buffer: skipped, no emulated path in this "
            "campaign (the direct link)") in direct
    assert "Path calibration" not in direct
    for suffix in ("png", "svg"):
        assert list((out / "figures").glob(f"pathcheck_*__paths.{suffix}"))
    assert_renders(out / "report.html", tmp_path / "paths.png",
                   min_figures=html.count("<figure "))


@pytest.mark.parametrize("make, message", [
    (lambda tmp: tmp / "missing", "no such directory"),
    (lambda tmp: tmp, "not a results directory"),
])
def test_user_errors_are_one_line_exit_2(tmp_path: Path, make: Any, message: str) -> None:
    proc = run_report(str(make(tmp_path)), "-o", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "Traceback" not in proc.stderr


# ----------------------------------------------------------------------------- real result set

def test_report_of_real_results(analysis_results: dict[str, Path],  # noqa: F811
                                tmp_path: Path) -> None:
    dirs = [str(analysis_results[n]) for n in ("buffers", "interop", "pinning")]
    out = tmp_path / "out"
    proc = run_report(*dirs, "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr, proc.stderr
    html = (out / "report.html").read_text()
    assert_self_contained(html)
    # `run` ingested the campaigns into history.duckdb beside them: the page leads with it
    table, history, *sections = html.split("<section ")[1:]
    assert table.startswith('id="campaigns"')  # the cells of the three campaigns
    assert history.startswith('id="history"') and "history.duckdb" in history
    assert len(sections) == 3
    by_name = {n: s for n, s in zip(("buffers", "interop", "pinning"), sections)}
    assert '__buffers"' in by_name["buffers"]  # <figure id="<campaign>__<view>">
    assert '__interop"' in by_name["interop"]
    assert '__pinning"' in by_name["pinning"]
    # the fixture's interop copy runs with keylog: true (stored sets may not)
    if any(keylog_expected(Path(d)) for d in dirs):
        assert "TLS key logs present" in html and "/client/keys.log" in html
    else:
        assert "No TLS key logs" in html
    for impl in ("quic-go", "quiche", "quinn"):
        assert impl in by_name["interop"]
    page = assert_renders(out / "report.html", tmp_path / "real.png",
                          min_figures=len(figure_names(html)))
    assert len(page.figures) >= 3


# ----------------------------------------------------------------------------- layout, CPU cost

GRID = ("a", "b", "c", "d")  # 4 x 4 pairs: a 16-row per-cell table, longer than FOLD_ROWS


def _cpu_cost(server: str, client: str) -> tuple[float, float]:
    """Known CPU-s/GiB per side of a pair; NaN for the client side of server ``a``."""
    server_cost = 1.0 + GRID.index(server)
    return server_cost, float("nan") if server == "a" else 10.0 + GRID.index(client)


@pytest.fixture
def grid_campaign(sample_copy: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The sample campaign with its attempt copied to every pair of :data:`GRID` (the
    original quic-go pair removed), loaded with the CPU cost columns set to
    :func:`_cpu_cost` (added where ``load_results`` lacks them, else replaced)."""
    import interop_runner.analysis as analysis

    source = sample_copy / "quic-go_quic-go"
    for server in GRID:
        for client in GRID:
            shutil.copytree(source, sample_copy / f"{server}_{client}")
            for run in (sample_copy / f"{server}_{client}").rglob("run.json"):
                record = json.loads(run.read_text())
                record["server"]["implementation"] = server
                record["client"]["implementation"] = client
                run.write_text(json.dumps(record))
    shutil.rmtree(source)
    load = analysis.load_results

    def with_costs(*paths: Any, **kwargs: Any) -> Any:
        frame = load(*paths, **kwargs)
        costs = [_cpu_cost(s, c) for s, c in zip(frame["server"], frame["client"])]
        frame["server_cpu_s_per_gib"] = [s for s, _ in costs]
        frame["client_cpu_s_per_gib"] = [c for _, c in costs]
        return frame

    monkeypatch.setattr(analysis, "load_results", with_costs)
    return sample_copy


def test_figures_lead_and_long_tables_fold(sample_copy: Path, tmp_path: Path) -> None:
    """Figures first, then the per-cell tables; a table of one row is shown as it is."""
    out = tmp_path / "out"
    assert run_report(str(sample_copy), "-o", str(out)).returncode == 0
    html = (out / "report.html").read_text()
    section = html.split("<section ")[1]
    assert section.index("<figure ") < section.index("<h3>Summary</h3>")
    assert section.index("<h3>Views</h3>") < section.index("<h3>Summary</h3>") \
        < section.index("<h3>Failures (0)</h3>") < section.index("<h3>Implementations</h3>")
    summary = section.split("<h3>Summary</h3>")[1].split("<h3>")[0]
    assert '<details class="table">' not in summary and "<table>" in summary


def test_folded_table_threshold() -> None:
    import pandas as pd

    from interop_runner.report.build import FOLD_ROWS, folded_table

    short, long = pd.DataFrame({"x": range(FOLD_ROWS)}), pd.DataFrame({"x": range(50)})
    assert "<details" not in folded_table(short, "cells")
    folded = folded_table(long, "cells")
    assert folded.startswith('<details class="table"><summary>cells: 50 rows</summary>')
    assert folded.count("<tr>") == 51  # every row is there, only folded


def test_cpu_cost_heatmap_and_column(grid_campaign: Path, tmp_path: Path) -> None:
    from interop_runner.report.build import build_report

    report = build_report([grid_campaign], tmp_path / "out")
    assert report.view_errors == []
    html = report.html_file.read_text()
    assert_self_contained(html)
    names = [re.sub(r".*__", "", f) for f in re.findall(r'<figure id="([^"]+)"', html)]
    assert names[:2] == ["interop", "cpu"]  # the cost heatmap next to the goodput one
    cpu = html.split('__cpu"')[1].split("</figure>")[0]
    assert '<img class="fig" alt="CPU cost per GiB" src="data:image/svg+xml;base64,' in cpu
    (figure,) = [f for f in report.campaigns[0].figures if f.view.name == "cpu"]
    data = figure.data.set_index(["server", "client"])
    assert data.loc[("b", "c"), "server_cpu_s_per_gib"] == 2.0
    assert data.loc[("b", "c"), "client_cpu_s_per_gib"] == 12.0
    assert data.loc[("b", "c"), "total_cpu_s_per_gib"] == 14.0
    assert data["client_cpu_s_per_gib"].isna().sum() == 4  # server a: not measured
    section = html.split("<section ")[1]
    assert section.index('__cpu"') < section.index("<h3>Summary</h3>")
    summary = section.split("<h3>Summary</h3>")[1].split("<h3>")[0]
    assert '<details class="table"><summary>statistics per cell: 16 rows</summary>' in summary
    head = re.findall(r"<th>([^<]*)</th>", summary)
    assert head[:2] == ["server", "client"]
    assert head[-2:] == ["server CPU-s/GiB", "client CPU-s/GiB"]
    rows = re.findall(r"<tr>(.*?)</tr>", summary.split("<tbody>")[1])
    cells = {tuple(re.findall(r"<td[^>]*>([^<]*)</td>", r)[:2]):
             re.findall(r"<td[^>]*>([^<]*)</td>", r)[-2:] for r in rows}
    assert cells[("a", "b")] == ["1.0", "–"] and cells[("d", "a")] == ["4.0", "10.0"]
    assert_renders(report.html_file, tmp_path / "grid.png", min_figures=3)


def test_cpu_view_without_costs_is_skipped_with_its_reason(
        sample_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import interop_runner.analysis as analysis
    from interop_runner.report.build import VIEWS, build_report

    load = analysis.load_results

    def unmeasured(*paths: Any, **kwargs: Any) -> Any:  # NaN: not measured, never 0
        return load(*paths, **kwargs).assign(server_cpu_s_per_gib=float("nan"),
                                             client_cpu_s_per_gib=float("nan"))

    monkeypatch.setattr(analysis, "load_results", unmeasured)
    shutil.copytree(sample_copy / "quic-go_quic-go", sample_copy / "quic-go_x")
    for run in (sample_copy / "quic-go_x").rglob("run.json"):
        record = json.loads(run.read_text())
        record["client"]["implementation"] = "x"
        run.write_text(json.dumps(record))
    views = [v for v in VIEWS if v.name in ("interop", "cpu")]
    report = build_report([sample_copy], tmp_path / "out", views)
    html = report.html_file.read_text()
    assert "CPU cost per GiB: skipped, no data in this campaign" in html
    assert "server CPU-s/GiB" not in html  # no attempt measured it: no column


# ----------------------------------------------------------------------------- history hook

@dataclasses.dataclass
class FakeSeries:
    """What a history provider returns for one series (duck-typed like the real one)."""

    name: str
    table: Any
    change_points: list[int]

    def draw(self) -> Any:
        """The series with a red line at each change point."""
        from matplotlib.figure import Figure

        fig = Figure(figsize=(5, 3))
        ax = fig.subplots()
        ax.plot(range(len(self.table)), self.table["median"], marker="o")
        for index in self.change_points:
            ax.axvline(index - 0.5, color="red")
        ax.set_title(self.name)
        return fig


def _series(name: str, changes: list[int]) -> FakeSeries:
    import pandas as pd

    medians = [100.0] * 4 + [80.0] * 4
    table = pd.DataFrame({"campaign": [f"c{i}" for i in range(8)], "median": medians})
    return FakeSeries(name, table, changes)


def test_no_history_section_by_default(sample_copy: Path, tmp_path: Path) -> None:
    from interop_runner.report.build import build_report

    html = build_report([sample_copy], tmp_path / "out").html_file.read_text()
    assert 'id="history"' not in html and "<h2>History</h2>" not in html


def test_history_section_draws_series_with_change_points(sample_copy: Path,
                                                         tmp_path: Path) -> None:
    from interop_runner.report import history
    from interop_runner.report.build import build_report

    db = tmp_path / "history.db"
    series = [_series(f"quic-go/quic-go s{i}", [4]) for i in range(history.MAX_HISTORY_FIGURES
                                                                     + 2)]
    series.insert(1, _series("quiche/quiche goodput_mbps", []))
    asked: list[Path] = []

    def provider(path: Path) -> list[FakeSeries]:
        asked.append(path)
        return series

    report = build_report([sample_copy], tmp_path / "out", history_db=db,
                          history_provider=provider)
    html = report.html_file.read_text()
    assert asked == [db]
    assert_self_contained(html)
    part = html.split('<section id="history">')[1].split("</section>")[0]
    assert html.index('<section id="history">') < html.index('<section id="c-')  # leads
    assert '<a href="#history">History</a>' in html
    drawn = re.findall(r'<figure id="history__([^"]+)"', part)
    assert len(drawn) == history.MAX_HISTORY_FIGURES  # capped
    assert "quiche-quiche-goodput_mbps" not in drawn  # no change point: listed, not drawn
    assert f"{len(series)} series, {len(series) - 1} with a change point" in part
    assert "<td>quiche/quiche goodput_mbps</td>" in part
    files = {p.name for p in report.figure_files}
    assert f"history__{drawn[0]}.svg" in files and f"history__{drawn[0]}.png" in files
    assert_renders(report.html_file, tmp_path / "history.png",
                   min_figures=history.MAX_HISTORY_FIGURES)


def test_history_section_from_a_history_database(sample_copy: Path, tmp_path: Path) -> None:
    """The default provider: interop_runner.analysis.history on a database holding the sample
    campaign (one campaign: every series listed, no change point, nothing drawn)."""
    from interop_runner.analysis.history import ingest
    from interop_runner.report.build import build_report

    db = tmp_path / "history.duckdb"
    ingest(db, [sample_copy])
    html = build_report([sample_copy], tmp_path / "out",
                        history_db=db).html_file.read_text()
    part = html.split('<section id="history">')[1].split("</section>")[0]
    assert "3 series, 0 with a change point (marked); 0 drawn." in part
    assert "<td>local quic-go/quic-go goodput goodput_mbps</td>" in part
    assert "<td>local quic-go/quic-go goodput client_cpu_s_per_gib</td>" in part
    assert "<figure" not in part


def test_a_report_of_a_workload_campaign_draws_its_views(
        analysis_results: dict[str, Path], tmp_path: Path) -> None:  # noqa: F811
    if "workloads" not in analysis_results:
        pytest.skip("QIR_TEST_RESULTS has no workloads_* campaign")
    out = tmp_path / "out"
    proc = run_report(str(analysis_results["workloads"]), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    html = (out / "report.html").read_text()
    # download and upload, 1 and 4 streams: both views have something to set side by side
    assert '__workload-direction"' in html and '__workload-streams"' in html
    assert '__buffers"' not in html  # nothing of the other campaigns
