"""`make site` as a reader meets it: the website built from the stored notebooks (warnings are errors), every
internal link and picture resolving, then served on 127.0.0.1 and read in a real browser (headless Chromium
driven by Playwright): each page without console errors or requests off the machine, pictures decoded, C++
listings highlighted, next/previous through the course, and Sphinx's search. The Chinese edition the same way, under
zh_CN/: every page in Chinese, drawn with real glyphs, a language switch on each, and a search for Chinese words."""
import ast
import functools
import hashlib
import json
import re
import subprocess
import sys
import threading
import time
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest

from myops.build import REPO_ROOT

pytest.importorskip("myst_nb", reason="the site's packages (requirements.txt) are not installed")
from helpers import chromium, launch_chromium  # noqa: E402

SITE = REPO_ROOT / "build" / "site"
SCREENS = REPO_ROOT / "build" / "site-screens"
NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
EXERCISES = sorted(p.name for p in (REPO_ROOT / "exercises").iterdir() if p.is_dir())
SETUP_FILES = [".venv/.installed", ".venv/share/jupyter/lab/settings/overrides.json"]
needs_chromium = pytest.mark.skipif(
    chromium() is None, reason="no system Chromium (apt-get install chromium); .ci/run installs it")


def shown_files(notebook: Path) -> list[list[str]]:
    """For each code cell that calls myops.show(...), the csrc/ paths it shows (see docs/course_site.py)."""
    cells = []
    for cell in json.loads(notebook.read_text())["cells"]:
        if cell["cell_type"] != "code" or "myops.show(" not in "".join(cell["source"]):
            continue
        code = "\n".join(l for l in "".join(cell["source"]).splitlines() if not l.lstrip().startswith("%"))
        cells.append([n.args[0].value for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Call)
                      and ast.unparse(n.func) == "myops.show"])
    return cells


def stored(notebook: Path, count) -> int:
    """The sum of `count(output data)` over the notebook's stored outputs."""
    return sum(count(o.get("data", {})) for c in json.loads(notebook.read_text())["cells"] for o in c.get("outputs", []))


def pictures(data) -> int:
    return int("image/png" in data or "image/svg+xml" in data)


def listings(data) -> int:  # myops.show's (and show_py's) IPython Code objects: pygments HTML, some side by side
    return "".join(data.get("text/html", "")).count('<div class="highlight">')


def digest(paths) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


@pytest.fixture(scope="module")
def site():
    """`make site`, as a learner runs it (setup is done already: make test did it, or the learner did)."""
    before = digest((REPO_ROOT / "notebooks").iterdir())
    start = time.monotonic()
    make = subprocess.run(["make", "--no-print-directory", *(f"--old-file={f}" for f in SETUP_FILES),
                           "site", f"PY={sys.executable}"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=1200)
    assert make.returncode == 0, make.stdout[-4000:] + make.stderr[-8000:]
    print(f"make site: {time.monotonic() - start:.0f} s")
    assert digest((REPO_ROOT / "notebooks").iterdir()) == before, "building the site changed notebooks/"
    return SITE


def test_make_site_treats_warnings_as_errors():
    recipe = subprocess.run(["make", "-n", *(f"--old-file={f}" for f in SETUP_FILES), "site"], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=60).stdout
    english, chinese = (line.split() for line in recipe.splitlines() if "-m sphinx" in line)
    assert "-W" in english and "html" in english and english[-1] == "build/site"
    assert "-W" in chinese and "language=zh_CN" in chinese and chinese[-1] == "build/site/zh_CN"


class Page(HTMLParser):
    """The links, picture references and anchors of one HTML page, and its text."""

    def __init__(self, path: Path):
        super().__init__()
        self.refs, self.ids, self.text = [], set(), []
        self.feed(path.read_text())

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.ids.update(v for k, v in attrs.items() if k in ("id", "name") and v)
        for key in ("href", "src"):
            if attrs.get(key) and tag in ("a", "link", "img", "script", "source", "iframe"):
                self.refs.append((tag, attrs[key]))

    def handle_data(self, data):
        self.text.append(data)


def test_every_internal_link_and_picture_resolves(site):
    # _static/ holds the theme's files (one of them a Jinja template named .html), not pages
    pages = {p: Page(p) for p in site.rglob("*.html") if "_static" not in p.relative_to(site).parts}
    broken = []
    for path, page in pages.items():
        for tag, ref in page.refs:
            parts = urlsplit(ref)
            if parts.scheme or parts.netloc:  # another site (the reader's browser fetches none of them, see below)
                continue
            target = path if not parts.path else Path(unquote(urljoin(path.as_uri(), parts.path)).removeprefix("file://"))
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                broken.append(f"{path.relative_to(site)}: <{tag}> {ref}")
            elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in pages[target].ids:
                broken.append(f"{path.relative_to(site)}: <{tag}> {ref} (no such anchor)")
    assert not broken, "\n".join(broken[:40])


def test_the_site_has_every_page_of_the_course(site):
    front = Page(site / "index.html")
    assert {urlsplit(ref).path for _, ref in front.refs} >= {f"notebooks/{n.stem}.html" for n in NOTEBOOKS}
    assert "make lab" in "".join(front.text) and "make test" in "".join(front.text)
    assert "这是 dispatcher-notebooks 的中文版首页" not in "".join(front.text)  # the README's Chinese part is no page
    for notebook in NOTEBOOKS:
        assert (site / "notebooks" / f"{notebook.stem}.html").is_file()
        for paths in shown_files(notebook):
            for path in paths:  # the whole file, as a page of its own, line by line
                text = "".join(Page(site / "csrc" / f"{path}.html").text)
                lines = (REPO_ROOT / "csrc" / path).read_text().splitlines()
                assert [l for l in lines if l.strip() not in text] == [], path
    solutions = {p.read_bytes() for p in (REPO_ROOT / "solutions").rglob("*") if p.is_file()}
    for name in EXERCISES:
        text = "".join(Page(site / "exercises" / f"{name}.html").text)
        assert f"python -m myops.exercises check {name[:2]}" in text
        for stub in (REPO_ROOT / "exercises" / name).iterdir():
            lines = stub.read_text().splitlines()
            assert [l for l in lines if l.strip() not in text] == [], stub
            # No line that only the answer has (long enough to be its own) is a line of the page.
            shown = {re.sub(r"^\s*\d+", "", line).strip() for line in text.splitlines()}  # less the line numbers
            answer = (REPO_ROOT / "solutions" / name / stub.name).read_text().splitlines()
            assert [l for l in set(answer) - set(lines) if len(l.strip()) > 30 and l.strip() in shown] == [], stub
    assert not [p for p in site.rglob("*") if p.is_file() and p.read_bytes() in solutions], "a solution was copied"


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server(site):
    """build/site/ served on 127.0.0.1, on a port the system picks (free by construction)."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(site)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=30)


class Reader:
    """One browser tab; every console error, failed request and request off this machine is kept."""

    def __init__(self, browser, base: str):
        self.base, self.problems = base, []
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.page.set_default_timeout(60_000)  # a loaded 2-core machine
        self.page.on("console", lambda m: m.type == "error" and self.problems.append(f"console: {m.text}"))
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        # ERR_ABORTED is a fetch cancelled by the next navigation (the search page fetches its hits for snippets);
        # a missing file answers 404, kept below
        self.page.on("requestfailed", lambda r: r.failure != "net::ERR_ABORTED"
                     and self.problems.append(f"failed: {r.url} ({r.failure})"))
        self.page.on("response", lambda r: r.status >= 400 and self.problems.append(f"HTTP {r.status}: {r.url}"))
        self.page.route("**/*", self.local_only)

    def local_only(self, route):
        if route.request.url.startswith(self.base):
            route.continue_()
        else:  # the site must be complete offline: nothing from a CDN, no fonts, no trackers
            self.problems.append(f"off this machine: {route.request.url}")
            route.abort()

    def open(self, path: str):
        self.page.goto(self.base + path, wait_until="load")
        return self.page

    def path(self) -> str:
        return urlsplit(self.page.url).path.lstrip("/")

    def assert_clean(self, where: str):
        problems, self.problems = self.problems, []
        assert not problems, f"{where}: " + "; ".join(problems[:10])


@pytest.fixture(scope="module")
def reader(server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            yield Reader(browser, server)
        finally:
            browser.close()


PICTURES = """() => Promise.all(Array.from(document.querySelectorAll('.cell_output img')).map(async img => {
    img.scrollIntoView();
    try { await img.decode(); } catch (e) {}
    return img.naturalWidth;
}))"""

# Per listing: whether some token is coloured unlike the listing's plain text (pygments classes styled).
HIGHLIGHTED = """selector => Array.from(document.querySelectorAll(selector)).map(block => {
    const plain = getComputedStyle(block.querySelector('pre')).color;
    return Array.from(block.querySelectorAll('pre span[class]')).some(s => getComputedStyle(s).color !== plain);
})"""


@needs_chromium
def test_front_page_in_the_browser(reader):
    page = reader.open("index.html")
    assert page.title().startswith("dispatcher-notebooks")
    links = page.eval_on_selector_all("article a[href]", "as => as.map(a => a.getAttribute('href'))")
    assert {f"notebooks/{n.stem}.html" for n in NOTEBOOKS} <= set(links)
    SCREENS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENS / "index.png"))
    reader.assert_clean("index.html")


@needs_chromium
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_page_in_the_browser(reader, notebook):
    page = reader.open(f"notebooks/{notebook.stem}.html")
    assert page.locator("article h1").first.inner_text().startswith(notebook.stem[:2] + " ·")
    widths = page.evaluate(PICTURES)
    assert len(widths) == stored(notebook, pictures) and all(w > 0 for w in widths), widths
    highlighted = page.evaluate(HIGHLIGHTED, ".cell_output .text_html div.highlight")
    assert len(highlighted) == stored(notebook, listings) and all(highlighted), highlighted
    whole = page.eval_on_selector_all("p.course-listing-source a", "as => as.map(a => a.textContent)")
    assert whole == [f"csrc/{path}" for paths in shown_files(notebook) for path in dict.fromkeys(paths)]
    if notebook.stem.startswith("02"):
        page.locator(".cell_output .text_html div.highlight").first.scroll_into_view_if_needed()
        page.screenshot(path=str(SCREENS / f"{notebook.stem}.png"))
    reader.assert_clean(notebook.name)


SVG_TITLE = re.compile(r"<title>myops picture: ([a-z ]+)</title>")


def first_notebook_with(kind: str) -> Path:
    """The first notebook that stores a picture of `kind` (myops.pictures marks each SVG with its kind)."""
    return next(n for n in NOTEBOOKS if f"<title>myops picture: {kind}</title>" in n.read_text())


def has_glyph(character: str) -> bool:
    """Whether some installed font (fontconfig: what Chromium draws with) has a glyph for `character`."""
    found = subprocess.run(["fc-list", f":charset={ord(character):x}", "family"], capture_output=True, text=True)
    return bool(found.stdout.strip())


@needs_chromium
@pytest.mark.parametrize("language", ["", "zh_CN/"], ids=["en", "zh_CN"])
def test_each_kind_of_picture_is_drawn_in_the_browser(reader, language):
    from myops.pictures import KINDS

    SCREENS.mkdir(parents=True, exist_ok=True)
    for kind in KINDS:
        notebook = first_notebook_with(kind)
        page = reader.open(f"{language}notebooks/{notebook.stem}.html")
        sources = page.eval_on_selector_all(".cell_output img", "imgs => imgs.map(i => i.getAttribute('src'))")
        index, svg = next((i, (SITE / language / "notebooks" / src).resolve().read_text())
                          for i, src in enumerate(sources)
                          if src.endswith(".svg") and f"<title>myops picture: {kind}</title>" in
                          (SITE / language / "notebooks" / src).resolve().read_text())
        picture = page.locator(".cell_output img").nth(index)
        picture.scroll_into_view_if_needed()
        width = picture.evaluate("img => img.decode().then(() => img.naturalWidth, () => 0)")
        assert width > 100, (language, kind, notebook.stem, width)  # decoded: not a broken image
        picture.screenshot(path=str(SCREENS / f"picture-{language.strip('/') or 'en'}-{kind.replace(' ', '_')}.png"))
        text = "".join(re.findall(r"<text[^>]*>([^<]*)</text>", svg))
        assert text, (kind, "its labels are SVG text")
        assert all(has_glyph(c) for c in set(text) - {" "}), [c for c in set(text) - {" "} if not has_glyph(c)]
        reader.assert_clean(f"{language}notebooks/{notebook.stem}.html")


@needs_chromium
def test_next_and_previous_walk_the_course_in_order(reader):
    order = [f"notebooks/{n.stem}.html" for n in NOTEBOOKS]
    reader.open(order[0])
    for expected in order[1:]:
        reader.page.click("a.right-next")
        reader.page.wait_for_url(f"**/{expected}")
        assert reader.path() == expected
    for expected in reversed(order[:-1]):
        reader.page.click("a.left-prev")
        reader.page.wait_for_url(f"**/{expected}")
        assert reader.path() == expected
    reader.assert_clean("next/previous")


@needs_chromium
def test_search_finds_notebook_06(reader):
    page = reader.open("index.html")
    page.click("button.search-button__button")
    field = page.locator("#pst-search-dialog input[name=q]")
    field.fill("ADInplaceOrView")
    field.press("Enter")
    page.wait_for_url("**/search.html?q=ADInplaceOrView*")
    hit = page.locator("#search-results a[href*='notebooks/06_inplace_or_view.html']").first
    hit.wait_for(timeout=120_000)
    assert "06" in hit.inner_text()
    page.wait_for_load_state("networkidle")  # the snippets of every hit, fetched by the search page
    reader.assert_clean("search")


@needs_chromium
def test_cpp_and_exercise_pages_in_the_browser(reader):
    cpp = sorted({path for n in NOTEBOOKS for paths in shown_files(n) for path in paths})
    for path in [f"csrc/{p}.html" for p in cpp] + [f"exercises/{e}.html" for e in EXERCISES]:
        page = reader.open(path)
        highlighted = page.evaluate(HIGHLIGHTED, "article div.highlight")
        assert highlighted and all(highlighted), path
        reader.assert_clean(path)


# ---- the Chinese edition: the same site under zh_CN/, from docs/locale/zh_CN (tests/test_translation.py) ----------

ZH = "zh_CN"
CJK = re.compile(r"[\u4e00-\u9fff]")
needs_cjk_fonts = pytest.mark.skipif(
    not subprocess.run(["sh", "-c", "fc-list :lang=zh 2>/dev/null"], capture_output=True, text=True).stdout.strip(),
    reason="no CJK fonts: Chinese would be drawn as empty boxes (apt-get install fonts-noto-cjk); .ci/run installs them")


def pages(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*.html")
            if not {"_static", ZH} & set(p.relative_to(root).parts)}


def test_the_chinese_site_has_every_page_in_chinese(site):
    assert pages(site / ZH) == pages(site)
    for path in pages(site / ZH):
        html = (site / ZH / path).read_text()
        assert '<html lang="zh-CN"' in html, path
        switch = re.search(r'class="nav-link course-language-switch" href="([^"]+)"', html).group(1)
        assert (site / ZH / path).parent.joinpath(switch).resolve() == (site / path).resolve(), path
        english = re.search(r'class="nav-link course-language-switch" href="([^"]+)"', (site / path).read_text())
        assert (site / path).parent.joinpath(english.group(1)).resolve() == (site / ZH / path).resolve(), path
    for notebook in NOTEBOOKS:  # every notebook page, title and text, reads in Chinese
        text = "".join(Page(site / ZH / "notebooks" / f"{notebook.stem}.html").text)
        assert len(CJK.findall(text)) > 500, notebook.stem


# Per element: how many of its characters the CJK fonts drew (Chrome's own account of the fonts it rendered with).
def glyphs_drawn_by_cjk_fonts(page, selector: str) -> tuple[int, int]:
    session = page.context.new_cdp_session(page)
    session.send("DOM.enable")
    session.send("CSS.enable")
    root = session.send("DOM.getDocument")["root"]["nodeId"]
    node = session.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
    fonts = session.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
    text = page.locator(selector).first.inner_text()
    return sum(f["glyphCount"] for f in fonts if "CJK" in f["familyName"]), len(CJK.findall(text))


@needs_chromium
@needs_cjk_fonts
def test_a_chinese_notebook_page_in_the_browser(reader):
    page = reader.open(f"{ZH}/notebooks/06_inplace_or_view.html")
    for selector in ("article h1", "article section p"):
        drawn, chinese = glyphs_drawn_by_cjk_fonts(page, selector)
        assert chinese and drawn >= chinese, (selector, drawn, chinese)  # no character left to a missing glyph
    SCREENS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENS / "zh_notebook.png"))
    page.click("a.course-language-switch >> nth=0")
    page.wait_for_url("**/notebooks/06_inplace_or_view.html")
    assert reader.path() == "notebooks/06_inplace_or_view.html"
    page.click("a.course-language-switch >> nth=0")
    page.wait_for_url(f"**/{ZH}/notebooks/06_inplace_or_view.html")
    reader.assert_clean("zh_CN/notebooks/06_inplace_or_view.html")


@needs_chromium
def test_chinese_pages_open_without_errors(reader):
    for path in sorted(pages(SITE / ZH)):
        if path not in ("search.html", "genindex.html"):
            reader.open(f"{ZH}/{path}")
            reader.assert_clean(f"{ZH}/{path}")


@needs_chromium
@needs_cjk_fonts
def test_chinese_search_finds_a_chinese_word(reader):
    page = reader.open(f"{ZH}/index.html")
    page.click("button.search-button__button")
    field = page.locator("#pst-search-dialog input[name=q]")
    field.fill("原地")  # in-place, in the glossary's rendering: notebook 06 is about it
    field.press("Enter")
    page.wait_for_url("**/search.html?q=*")
    hit = page.locator("#search-results a[href*='notebooks/06_inplace_or_view.html']").first
    hit.wait_for(timeout=120_000)
    assert CJK.search(hit.inner_text())
    page.wait_for_load_state("networkidle")
    SCREENS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENS / "zh_search.png"))
    reader.assert_clean("zh_CN search")
