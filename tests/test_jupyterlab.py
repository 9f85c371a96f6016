"""`make lab` and `make lab-zh` as a learner meets them: JupyterLab on a loopback port with a token, notebooks run
through its user interface (in English, and in Chinese with the Chinese notebooks) in a real browser (headless
Chromium driven by Playwright)."""
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from helpers import chromium, launch_chromium
from myops.build import REPO_ROOT

NOTEBOOKS = REPO_ROOT / "notebooks"
SCREENSHOTS = REPO_ROOT / "build" / "jupyterlab"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """A JupyterLab server started the way `make lab` starts it, serving a folder of notebooks."""

    def __init__(self, root: Path, home: Path, options: tuple[str, ...] = ()):
        self.port, self.token, self.root = free_port(), secrets.token_hex(16), root
        self.process = subprocess.Popen(
            [str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser", "--ip=127.0.0.1",
             f"--port={self.port}", f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={root}",
             *(["--allow-root"] if os.geteuid() == 0 else []), *options],  # as `make lab` does
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, "HOME": str(home)})  # a first start: no user settings yet
        deadline = time.monotonic() + 60
        while True:
            try:
                self.api("status")
                return
            except OSError:
                assert self.process.poll() is None, "jupyter lab exited"
                assert time.monotonic() < deadline, "jupyter lab did not answer within 60 s"
                time.sleep(0.5)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path}?token={self.token}"

    def api(self, path: str):
        with urllib.request.urlopen(self.url(f"api/{path}"), timeout=5) as response:
            return json.load(response)

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=30)


def first_start_home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("home")
    # matplotlib's font cache, made once per home, says so on stderr in the first notebook that plots; the
    # stored outputs come from a machine where it exists.
    subprocess.run([sys.executable, "-c", "import matplotlib.font_manager"], env={**os.environ, "HOME": str(home)},
                   check=True, capture_output=True, timeout=300)
    return home


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    # A copy of the notebooks: running them through the UI saves them, and the stored ones must not change.
    root = tmp_path_factory.mktemp("lab") / "notebooks"
    shutil.copytree(NOTEBOOKS, root)
    server = Lab(root, first_start_home(tmp_path_factory))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def lab_zh(tmp_path_factory):
    """`make lab-zh`: its folder (tools/translation.py writes build/zh/; here a temporary one), served as it is."""
    sys.path.insert(0, str(REPO_ROOT / "tools"))
    import translation  # the site's packages: imported here, so that a machine without them still collects

    root = tmp_path_factory.mktemp("zh")
    assert translation.write_notebooks(root) == 0, "untranslated paragraphs (tests/test_translation.py lists them)"
    server = Lab(root, first_start_home(tmp_path_factory), (f"--LabApp.user_settings_dir={root / 'lab-settings'}",))
    yield server
    server.stop()


def test_jupyterlab_serves_the_notebooks(lab):
    served = {item["name"] for item in lab.api("contents")["content"] if item["type"] == "notebook"}
    assert served == {p.name for p in NOTEBOOKS.glob("*.ipynb")}


def test_make_lab_serves_on_loopback_with_the_news_prompt_turned_off():
    recipe = subprocess.run(["make", "-n", "lab"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60).stdout
    assert "jupyter lab --ip=127.0.0.1" in recipe
    installed = Path(sys.prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    assert json.loads(installed.read_text()) == json.loads((REPO_ROOT / "tools" / "jupyterlab-overrides.json").read_text())
    assert json.loads(installed.read_text())["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"


ENGLISH = {"run": "Run", "run all": "Run All Cells", "idle": "Idle", "saved": "Saving completed"}
CHINESE = {"run": "运行", "run all": "运行所有单元格", "idle": "空闲", "saved": "保存成功"}  # the language pack's


def run_all_cells_in_the_browser(lab, name: str, screenshot: Path, timeout: float = 600, labels=ENGLISH) -> dict:
    """Open `name` in JupyterLab, Run > Run All Cells, save from the UI; the notebook as saved."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(lab.url(f"lab/tree/{name}"))
            # The notebook's kernel started and idle, seen by the server and by the page: before that the status
            # bar can read "No Kernel", and Run All would open a kernel picker instead of running.
            deadline = time.monotonic() + 120
            while [s["kernel"]["execution_state"] for s in lab.api("sessions") if s["path"] == name] != ["idle"]:
                assert time.monotonic() < deadline, f"{name}: no idle kernel within 120 s"
                time.sleep(0.5)
            page.wait_for_selector(f".jp-StatusBar-Widget:has-text('Python 3 (ipykernel) | {labels['idle']}')",
                                   timeout=120_000)
            page.click(f"div.lm-MenuBar-itemLabel:text-is('{labels['run']}')")
            page.click(f"li.lm-Menu-item:has-text('{labels['run all']}')")
            deadline = time.monotonic() + timeout
            while True:
                time.sleep(1)
                states = [s["kernel"]["execution_state"] for s in lab.api("sessions") if s["path"] == name]
                assert states, f"{name}: the kernel's session is gone"
                assert states != ["dead"], f"{name}: the kernel died"
                if states == ["idle"]:
                    page.keyboard.press("Control+s")
                    page.wait_for_selector(f".jp-StatusBar-Widget:has-text('{labels['saved']}')", timeout=30_000)
                    saved = json.loads((lab.root / name).read_text())
                    if all(c["execution_count"] for c in saved["cells"] if c["cell_type"] == "code"):
                        break
                assert time.monotonic() < deadline, f"{name}: cells still running after {timeout} s"
            assert not page.get_by_text("official Jupyter news").is_visible(), "the news prompt covers the notebook"
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot))
            return saved
        finally:
            browser.close()


def sanitize_rules() -> list[tuple[re.Pattern, str]]:
    """notebooks/sanitize.cfg's (regex, replacement) pairs: what nbval applies to both sides before comparing."""
    lines = [line for line in (NOTEBOOKS / "sanitize.cfg").read_text().splitlines() if line.startswith(("regex:",
                                                                                                      "replace:"))]
    return [(re.compile(pattern.removeprefix("regex: ")), replace.removeprefix("replace: "))
            for pattern, replace in zip(lines[::2], lines[1::2])]


def shown(cell) -> list:
    """What a reader sees of a cell's outputs, as nbval compares them: stream text and the plain-text form of
    results (sanitized as notebooks/sanitize.cfg says), which pictures, and each error's name and message.
    The lines a cold build of a layer adds are left out."""
    def text(value):
        joined = "".join(value) if isinstance(value, list) else value
        for pattern, replace in sanitize_rules():
            joined = pattern.sub(replace, joined)
        return joined

    seen = []
    for output in cell["outputs"]:
        kind = output["output_type"]
        if kind == "stream":
            kept = "".join(line for line in text(output["text"]).splitlines(keepends=True)
                           if not line.startswith("myops: built layer"))
            if kept and seen and seen[-1][0] == output["name"]:  # how prints split into outputs is timing
                seen[-1] = (output["name"], seen[-1][1] + kept)
            elif kept:
                seen.append((output["name"], kept))
        elif kind == "error":
            seen.append(("error", output["ename"], output["evalue"]))
        else:
            data = output["data"]
            seen.append((kind, text(data.get("text/plain", "")), sorted(k for k in data if k.startswith("image/"))))
    return seen


def assert_ran_as_stored(saved: dict, name: str):
    stored = json.loads((NOTEBOOKS / name).read_text())
    code = [c for c in saved["cells"] if c["cell_type"] == "code"]
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1)), "cells ran out of order"
    for ran, expected in zip(code, (c for c in stored["cells"] if c["cell_type"] == "code")):
        errors = [o for o in ran["outputs"] if o["output_type"] == "error"]
        if "raises-exception" in expected["metadata"].get("tags", []):
            assert [e["ename"] for e in errors] == [o["ename"] for o in expected["outputs"] if o["output_type"] == "error"]
        else:
            assert not errors, f"{name}: {errors[0]['ename']}: {errors[0]['evalue']}"
        assert shown(ran) == shown(expected), "".join(ran["source"])[:200]


@pytest.mark.skipif(chromium() is None, reason="no system Chromium (apt-get install chromium); .ci/run installs it")
@pytest.mark.parametrize("name", ["01_schema.ipynb", "04_autograd.ipynb"])
def test_notebook_runs_through_the_jupyterlab_ui(lab, name):
    assert_ran_as_stored(run_all_cells_in_the_browser(lab, name, SCREENSHOTS / name.replace(".ipynb", ".png")), name)
    assert [s["kernel"]["execution_state"] for s in lab.api("sessions") if s["path"] == name] == ["idle"]


def test_make_lab_zh_writes_the_chinese_notebooks_and_opens_build_zh_in_chinese():
    recipe = subprocess.run(["make", "-n", "lab-zh"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60).stdout
    assert "tools/translation.py notebooks" in recipe
    lab = next(line for line in recipe.splitlines() if "jupyter lab" in line).split()
    assert "--ip=127.0.0.1" in lab and lab[-1] == "build/zh" and "--LabApp.user_settings_dir=build/zh/lab-settings" in lab


@pytest.mark.skipif(chromium() is None, reason="no system Chromium (apt-get install chromium); .ci/run installs it")
def test_a_chinese_notebook_runs_through_the_chinese_interface(lab_zh):
    name = "notebooks/01_schema.ipynb"
    saved = run_all_cells_in_the_browser(lab_zh, name, SCREENSHOTS / "zh_01_schema.png", labels=CHINESE)
    assert saved["cells"][0]["source"] != json.loads((NOTEBOOKS / "01_schema.ipynb").read_text())["cells"][0]["source"]
    assert_ran_as_stored(saved, "01_schema.ipynb")  # the outputs a learner reads are those the English one stores
