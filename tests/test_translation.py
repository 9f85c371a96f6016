"""The Chinese edition keeps step with the English: every sentence a learner reads has a translated, non-fuzzy entry
in docs/locale/zh_CN (a prose change fails here until its translation changes too); every translation keeps its
entry's code, links and markup and the glossary's terms; the Chinese notebooks are the English ones with only their
Markdown translated. tools/translation.py holds the rules; the Chinese site is read in tests/test_site.py."""
import json
import os
import shutil
import subprocess
import sys
from collections import Counter

import pytest

from myops.build import REPO_ROOT

pytest.importorskip("sphinx_intl", reason="the site's packages (requirements.txt) are not installed")
from babel.messages.catalog import Message  # noqa: E402

sys.path.insert(0, str(REPO_ROOT / "tools"))
import translation  # noqa: E402

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.fixture(scope="module")
def extracted(tmp_path_factory):
    """What Sphinx's gettext builder extracts from today's English (as `make catalogues` does): docname -> msgids.
    Its own staging folder, so that a site build running beside it is not disturbed; beside build/site-src, since
    a page's relative links to the repository are part of its sentences."""
    work, src = tmp_path_factory.mktemp("gettext"), REPO_ROOT / "build" / f"site-src-{os.getpid()}"
    src.mkdir(parents=True)
    try:
        build = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "gettext",
                                "-c", str(REPO_ROOT / "docs"), "-d", str(work / "doctrees"), str(src),
                                str(work / "pot")], capture_output=True, text=True, timeout=600)
    finally:
        shutil.rmtree(src, ignore_errors=True)
    assert build.returncode == 0, build.stderr[-4000:]
    return {p.relative_to(work / "pot").with_suffix("").as_posix(): {m.id for m in translation.read(p) if m.id}
            for p in (work / "pot").rglob("*.pot")}


def test_every_page_has_a_catalogue(extracted):
    catalogues = translation.catalogues()
    assert sorted(set(extracted) - set(catalogues)) == [], "pages without a catalogue: run `make catalogues`"
    assert sorted(set(catalogues) - set(extracted)) == [], "catalogues of pages that no longer exist: delete them"


def test_every_english_sentence_is_in_its_catalogue(extracted):
    catalogues = translation.catalogues()
    missing = [f"{translation.catalogue_path(doc).relative_to(REPO_ROOT)}: {english!r}"
               for doc, ids in extracted.items() if doc in catalogues
               for english in sorted(ids) if english not in catalogues[doc]]
    stale = [f"{translation.catalogue_path(doc).relative_to(REPO_ROOT)}: {message.id!r}"
             for doc, catalog in catalogues.items() if doc in extracted
             for message in catalog if message.id and message.id not in extracted[doc]]
    assert not missing, (f"{len(missing)} English sentences have no entry (run `make catalogues`, then translate "
                         "them):\n" + "\n".join(missing[:60]))
    assert not stale, f"{len(stale)} entries are no longer in the English (`make catalogues` drops them):\n" + \
        "\n".join(stale[:60])


def test_every_entry_is_translated_and_keeps_its_code_links_markup_and_terms():
    report = translation.check()
    lines = [f"{translation.catalogue_path(doc).relative_to(REPO_ROOT)}: {line}"
             for doc, found in report.items() for line in found]
    total = sum(1 for catalog in translation.catalogues().values() for m in catalog if m.id)
    assert not lines, f"{len(lines)} of {total} entries to fix:\n" + "\n".join(lines[:80])


@pytest.mark.parametrize("english, chinese, problem", [
    ("Register the kernel.", "", "untranslated"),
    ("Call `myops::myadd` here.", "在这里调用 myops::myadd。", "code, links or URLs differ"),
    ("See [notebook 06](06_inplace_or_view.ipynb).", "见 [notebook 06](06_inplace.ipynb)。", "code, links or URLs differ"),
    ("A **view** shares memory.", "**“视图”**共享内存。", "Markdown differs"),
    ("It runs the kernel of each operator.", "它运行每个算子的内核。", "glossary: keep 'kernel' in English"),
    ("Every operator has a schema.", "每个运算符都有一个 schema。", "glossary: 'operator' is '算子'"),
    ("Tensors are written in place here.", "张量在这里被就地写入。", "glossary: 'in-place' is '原地'"),
    ("The rows of `m` are sharded over the ranks.", "`m` 的各行被切分到各个 rank 上。", "glossary: 'shard' is '分片'"),
    ("AOTAutograd traced the backward.", "AOTAutograd 对反向做了 trace。", "glossary: 'trace' is '追踪'"),
    ("The whole sentence stays as it was.", "The whole sentence stays as it was.", "no Chinese"),
])
def test_the_rules_catch_a_wrong_translation(english, chinese, problem):
    assert any(p.startswith(problem) for p in translation.problems(Message(english, chinese))), problem
    fuzzy = Message("The kernel runs.", "kernel 运行。", flags=["fuzzy"])
    assert [p for p in translation.problems(fuzzy) if p.startswith("fuzzy")]


def test_a_right_translation_passes_and_a_comment_exempts_one_term():
    right = Message("A **view** of `x` shares the storage ([06](06_inplace_or_view.ipynb)).",
                    "`x` 的 **视图** 与它共享存储（[06](06_inplace_or_view.ipynb)）。")
    assert translation.problems(right) == []
    # a form that is a term of its own belongs to that term: *sharding* stays English, it is not *shard* (分片)
    assert translation.problems(Message("Write its sharding rule.", "写出它的 sharding 规则。")) == []
    quoted = Message("The error says *no kernel for the 'CPU' backend*.", "报错说 *no kernel for the 'CPU' backend*。")
    assert [p for p in translation.problems(quoted) if "backend" in p]
    quoted.user_comments = ["glossary: backend inside the quoted error message"]
    assert translation.problems(quoted) == []


def structure(markdown: str) -> tuple:
    """What a translation of a Markdown cell leaves as it is: its blocks' kinds, its code blocks, and the inline
    code, link targets and pictures of its text, as Markdown parses them."""
    tokens = translation.PARSER.parse(markdown)
    blocks = [(t.type, t.tag) for t in tokens if t.type.endswith("_open") or t.type in ("fence", "code_block", "hr")]
    code = [t.content for t in tokens if t.type in ("fence", "code_block")]
    inline = Counter((c.type, c.content if c.type == "code_inline" else c.attrs.get("href") or c.attrs.get("src"))
                     for t in tokens if t.type == "inline" for c in t.children
                     if c.type in ("code_inline", "link_open", "image"))
    return blocks, code, inline


@pytest.fixture(scope="module")
def chinese(tmp_path_factory):
    """`make lab-zh`'s folder, written into a temporary one: the number of paragraphs left in English."""
    target = tmp_path_factory.mktemp("zh")
    return target, translation.write_notebooks(target)


def test_make_lab_zh_writes_every_notebook_in_chinese(chinese):
    target, untranslated = chinese
    assert untranslated == 0
    assert sorted(p.name for p in (target / "notebooks").iterdir()) == [p.name for p in NOTEBOOKS]
    for name in translation.LINKED:  # the notebooks' relative links, and the exercises, work from build/zh/
        assert (target / name).resolve() == (REPO_ROOT / name).resolve()
    settings = target / "lab-settings" / "@jupyterlab" / "translation-extension" / "plugin.jupyterlab-settings"
    assert json.loads(settings.read_text()) == {"locale": "zh_CN"}


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_chinese_notebook_is_the_english_one_with_its_markdown_translated(chinese, notebook):
    english = json.loads(notebook.read_text())
    zh = json.loads((chinese[0] / "notebooks" / notebook.name).read_text())
    assert zh["metadata"] == english["metadata"] and len(zh["cells"]) == len(english["cells"])
    for en_cell, zh_cell in zip(english["cells"], zh["cells"]):
        if en_cell["cell_type"] != "markdown":
            assert zh_cell == en_cell  # code, outputs, metadata and tags, byte for byte
            continue
        en_text, zh_text = "".join(en_cell["source"]), "".join(zh_cell["source"])
        # the same blocks (headings of the same level, lists, tables), code and links; Chinese wherever the English
        # has a sentence
        assert structure(en_text) == structure(zh_text), en_text[:200]
        if len(translation.prose(en_text).split()) >= 3:
            assert translation.CJK.search(zh_text), en_text[:200]
