"""The notebooks as a person opens them: ``run.py notebooks`` starts JupyterLab, a notebook is
opened in headless Chromium (Debian's chromium + chromium-driver, driven by selenium), Run All
Cells runs it against a stored campaign, and the page must show the view's figure and no error
output; Ctrl-C then stops the server and nothing of it is left. Also the documented
``jupyter nbconvert --execute --to html`` command (notebooks/README.md, docs/report.md).

Deadlines are generous bounds on polls (``wait_until``), never sleeps: a slow machine only
makes the test slower.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from interop_runner.cli.notebooks import processes_with_env

from .conftest import wait_until
from .test_notebooks import ensure_kernelspec

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
SAMPLE = ROOT / "tests" / "data" / "results-sample"
BIN = Path(sys.executable).parent
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
NOTEBOOK = "interop.ipynb"  # its view (the goodput heatmap) has data in the sample campaign
MARK = "QIR_TEST_NOTEBOOKS"  # set on run.py notebooks: its server and kernels inherit it
STDERR_MIME = "application/vnd.jupyter.stderr"
RECLICK_S = 15  # Run All Cells again when no cell started this long after the click

needs_lab = pytest.mark.skipif(not (BIN / "jupyter-lab").is_file(),
                               reason="JupyterLab not installed (pos_scripts/install.sh "
                                      "--notebook)")


def notebook_files() -> dict[str, str]:
    """notebooks/: every file with its SHA-256, every folder (the test must change none, add
    none: no autosave, no .ipynb_checkpoints)."""
    return {str(p.relative_to(NOTEBOOKS)): hashlib.sha256(p.read_bytes()).hexdigest()
            if p.is_file() else "folder"
            for p in NOTEBOOKS.rglob("*") if "__pycache__" not in p.parts}


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    """A writable copy of the sample campaign (load_results writes its cache below it)."""
    target = tmp_path / SAMPLE.name
    shutil.copytree(SAMPLE, target, ignore=shutil.ignore_patterns(".cache"))
    return target


def lab_settings(where: Path) -> Path:
    """JupyterLab user settings for the test: no autosave (the checkout's notebooks stay as
    they are), every cell in the page (no windowing), no announcements or update checks."""
    files = {
        "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
        "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
            "fetchNews": "false", "checkForUpdates": False},
    }
    for name, content in files.items():
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(json.dumps(content))
    return where


def server_config(where: Path, checkpoints: Path) -> Path:
    """A Jupyter config folder keeping the checkpoints JupyterLab makes when it opens a
    notebook out of notebooks/."""
    where.mkdir(parents=True)
    (where / "jupyter_server_config.json").write_text(json.dumps(
        {"FileCheckpoints": {"checkpoint_dir": str(checkpoints)}}))
    return where


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Lines:
    """The lines a process prints on stdout, collected by a thread (never blocks the test)."""

    def __init__(self, proc: "subprocess.Popen[str]") -> None:
        self.lines: list[str] = []
        assert proc.stdout is not None
        stream = proc.stdout
        self.thread = threading.Thread(target=lambda: self.lines.extend(stream), daemon=True)
        self.thread.start()

    def find(self, pattern: str) -> re.Match[str] | None:
        return next((m for m in map(re.compile(pattern).match, list(self.lines)) if m), None)


@pytest.fixture
def lab(tmp_path: Path, sample: Path) -> Iterator[dict[str, Any]]:
    """``run.py notebooks SAMPLE --port P --no-browser``; stopped with SIGINT (Ctrl-C) at the
    end, which must leave no process of it and a free port."""
    ensure_kernelspec()
    mark = uuid.uuid4().hex
    port = free_port()
    env = {**os.environ, MARK: mark, "PYTHONPATH": str(ROOT),
           "JUPYTERLAB_SETTINGS_DIR": str(lab_settings(tmp_path / "lab-settings")),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
           "JUPYTER_CONFIG_DIR": str(server_config(tmp_path / "config",
                                                   tmp_path / "checkpoints"))}
    proc = subprocess.Popen([sys.executable, str(ROOT / "run.py"), "notebooks", str(sample),
                             "--port", str(port), "--no-browser"],
                            stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    out = Lines(proc)
    try:
        url = wait_until(lambda: proc.poll() is None and out.find(r"JupyterLab: (\S+)\n"),
                         timeout=180, what="run.py notebooks to print the URL").group(1)
        yield {"url": url, "port": port, "proc": proc, "lines": out.lines}
    finally:
        proc.send_signal(signal.SIGINT)  # what Ctrl-C in its terminal sends
        code = proc.wait(timeout=120)
    assert code == 0, out.lines
    assert processes_with_env(MARK, mark) == [], "JupyterLab or a kernel is still running"
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0, "the port still answers"


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    """Headless Chromium through the system chromedriver (selenium downloads nothing)."""
    if not (CHROMIUM.is_file() and CHROMEDRIVER.is_file()):
        pytest.skip("chromium/chromium-driver not installed (pos_scripts/install.sh --tests)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--window-size=1400,1000",
                f"--user-data-dir={tmp_path / 'chromium'}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def click_menu(driver: Any, menu: str, item: str) -> bool:
    """Open a menu of JupyterLab's menu bar and click one of its items; False (menu closed
    again) while the item is not there or disabled, e.g. before the notebook is current."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    driver.find_element(
        By.XPATH, f"//li[contains(@class,'lm-MenuBar-item')][.//div[text()='{menu}']]").click()
    found = driver.find_elements(
        By.XPATH, f"//li[contains(@class,'lm-Menu-item')][.//div[text()='{item}']]")
    if not found or "lm-mod-disabled" in (found[0].get_attribute("class") or ""):
        driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
        return False
    found[0].click()
    return True


def code_cells(name: str) -> int:
    return sum(c["cell_type"] == "code"
               for c in json.loads((NOTEBOOKS / name).read_text())["cells"])


def run_all(driver: Any, cells: int) -> None:
    """Run → Run All Cells once the notebook shows all its cells and its kernel is idle; again
    when no cell started within 15 s (a click can land while JupyterLab still sets up: seen
    on a busy machine, where a minute's wait made the test 70 s instead of 8; a click that was
    only slow runs the cells twice, which changes nothing the test checks)."""
    wait_until(lambda: len(run_state(driver)["prompts"]) == cells and driver.find_elements(
        "css selector", ".jp-Notebook-ExecutionIndicator[data-status='idle']"),
        timeout=180, what="the notebook and an idle kernel", retry_on=(Exception,))

    clicked_at: list[float] = []

    def started() -> bool:
        if clicked_at and any(p != "[ ]:" for p in run_state(driver)["prompts"]):
            return True
        accept_kernel_dialog(driver)
        if not clicked_at or time.monotonic() - clicked_at[-1] > RECLICK_S:
            if click_menu(driver, "Run", "Run All Cells"):
                clicked_at.append(time.monotonic())
        return False

    wait_until(started, timeout=300, interval=0.2, what="Run All Cells to start",
               retry_on=(Exception,))


def accept_kernel_dialog(driver: Any) -> None:
    """JupyterLab's "Select Kernel" dialog, with the notebook's own kernel (Python 3,
    ipykernel) preselected, accepted as a user would: it can open over the notebook on a
    busy machine (seen in the unit run beside the testbed run: it intercepted every click
    on the menu for 300 s)."""
    for button in driver.find_elements("css selector",
                                       ".jp-Dialog .jp-Dialog-button.jp-mod-accept"):
        button.click()


def run_state(driver: Any) -> dict[str, Any]:
    """The notebook as the page shows it: the code cells' prompts, the figures, error outputs."""
    return dict(driver.execute_script("""
        const nb = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
        if (!nb) return {prompts: [], images: 0, errors: []};
        return {
          prompts: [...nb.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]
                     .map(e => e.textContent.trim()),
          images: [...nb.querySelectorAll('.jp-OutputArea-output img')]
                     .filter(i => i.complete && i.naturalWidth > 100).length,
          errors: [...nb.querySelectorAll('.jp-OutputArea-output[data-mime-type="%s"]')]
                     .map(e => e.textContent.slice(0, 500)),
        };""" % STDERR_MIME))


def all_ran(state: dict[str, Any]) -> bool:
    return bool(state["prompts"]) and all(re.fullmatch(r"\[\d+\]:", p) for p in state["prompts"])


@needs_lab
def test_run_all_cells_in_jupyterlab_shows_the_figure(lab: dict[str, Any], browser: Any,
                                                      tmp_path: Path) -> None:
    before = notebook_files()
    base, _, query = lab["url"].partition("/lab?")
    browser.get(f"{base}/lab/tree/{NOTEBOOK}?{query}")
    shot = tmp_path / "jupyterlab.png"
    try:
        run_all(browser, code_cells(NOTEBOOK))
        state = wait_until(lambda: (s := run_state(browser)) and all_ran(s) and s,
                           timeout=600, what="every cell to run", retry_on=(Exception,))
    except BaseException:  # pytest's failure too: keep what the page showed
        browser.save_screenshot(str(shot))
        print(f"screenshot: {shot}; page state: {run_state(browser)}")
        raise
    assert state["errors"] == [], state["errors"]
    assert state["images"] >= 1, state
    # what a person sees: the figure, scrolled into view
    browser.execute_script("document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) "
                           ".jp-OutputArea-output img').scrollIntoView({block: 'center'})")
    browser.save_screenshot(str(shot))
    if os.environ.get("QIR_TEST_SCREENSHOT"):
        shutil.copyfile(shot, os.environ["QIR_TEST_SCREENSHOT"])
    assert notebook_files() == before, "the test changed or added files in notebooks/"


@needs_lab
def test_documented_nbconvert_command(sample: Path, tmp_path: Path) -> None:
    """notebooks/README.md: QIR_RESULTS=... .venv/bin/jupyter nbconvert --execute --to html
    notebooks/<view>.ipynb (here with --output-dir, so the checkout stays clean)."""
    ensure_kernelspec()
    proc = subprocess.run([str(BIN / "jupyter"), "nbconvert", "--execute", "--to", "html",
                           "--output-dir", str(tmp_path), f"notebooks/{NOTEBOOK}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "QIR_RESULTS": str(sample),
                               "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = (tmp_path / NOTEBOOK.replace(".ipynb", ".html")).read_text()
    assert re.search(r'<img[^>]+src="data:image/png;base64,', html), "no figure in the HTML"
    # a cell error fails nbconvert itself; stderr output would be such an element
    assert f'data-mime-type="{STDERR_MIME}"' not in html and "Traceback" not in html
