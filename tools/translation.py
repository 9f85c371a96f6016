"""The Chinese edition: its gettext catalogues, and the Chinese notebooks written from them.

One English source. `make catalogues` extracts every sentence a learner reads (Sphinx's gettext builder: each
paragraph, heading, list item and table cell of the README, the notebooks' Markdown, the exercises' instructions and
the site's own pages) and merges it into docs/locale/zh_CN/LC_MESSAGES/<page>.po, where the Chinese is written.
The Chinese site is Sphinx reading those catalogues; the Chinese notebooks are written here from the same ones.

    python tools/translation.py tidy              after sphinx-intl: stable headers, code-only entries filled
    python tools/translation.py check [DOCNAME]   what is untranslated, fuzzy, or breaks a rule below
    python tools/translation.py notebooks         build/zh/: the Chinese notebooks, and links to the repository

The rules a translation keeps (tests/test_translation.py holds every catalogue to them): each entry translated and
none fuzzy; the entry's inline code, MyST roles, link targets and URLs exactly as in the English; Chinese in every
translation of a sentence; the terms of docs/locale/zh_CN/glossary.md's first table rendered as it says. A
translator's comment `# glossary: <term> <why>` above an entry exempts it from one term, where the English uses the
word in another sense.
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from collections import Counter

from babel.messages.catalog import Catalog, Message
from babel.messages.pofile import read_po, write_po
from markdown_it import MarkdownIt

REPO = Path(__file__).resolve().parent.parent
LOCALE = REPO / "docs" / "locale" / "zh_CN"
MESSAGES = LOCALE / "LC_MESSAGES"
GLOSSARY = LOCALE / "glossary.md"
ZH = REPO / "build" / "zh"
# What build/zh/ links to, so that the notebooks' relative links (../csrc/schema.cpp) and paths work there.
LINKED = ["csrc", "exercises", "solutions", "myops", "README.md"]

# The parts of a sentence that no translation changes: inline code, a MyST role with its target, a link's target.
CODE = re.compile(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)")
ROLE = re.compile(r"(?<!`)\{[\w:-]+\}(`+)(.+?)\1")
LINK_TARGET = re.compile(r"\]\(([^)\s]+)\)")
URL = re.compile(r"<?https?://[^\s>)]+>?")
PARSER = MarkdownIt("commonmark").enable("table")


def catalogue_path(docname: str) -> Path:
    return MESSAGES / f"{docname}.po"


def read(path: Path) -> Catalog:
    with path.open("rb") as file:
        return read_po(file, locale="zh_CN")


# Fixed, so that a catalogue changes only when its translations do (sphinx-intl writes dates and placeholders).
HEADER = """\
# Chinese translation of dispatcher-notebooks; tools/translation.py says how it is made.
msgid ""
msgstr ""
"Project-Id-Version: dispatcher-notebooks\\n"
"Language: zh_CN\\n"
"Plural-Forms: nplurals=1; plural=0;\\n"
"MIME-Version: 1.0\\n"
"Content-Type: text/plain; charset=utf-8\\n"
"Content-Transfer-Encoding: 8bit\\n"

"""


def write(path: Path, catalog: Catalog) -> None:
    with path.open("wb") as file:
        file.write(HEADER.encode())
        write_po(file, catalog, width=0, no_location=True, omit_header=True)


def catalogues() -> dict[str, Catalog]:
    """docname (e.g. notebooks/01_schema) -> its catalogue."""
    return {p.relative_to(MESSAGES).with_suffix("").as_posix(): read(p) for p in sorted(MESSAGES.rglob("*.po"))}


def kept(text: str) -> list[str]:
    """What a translation of `text` keeps exactly: its code spans, role targets, link targets and URLs, in order."""
    return [m.group(0) for m in ROLE.finditer(text)] + [m.group(0) for m in CODE.finditer(ROLE.sub("", text))] + \
        LINK_TARGET.findall(text) + [u.strip("<>") for u in URL.findall(CODE.sub("", text))]


# Names written without backticks that no translation changes: paths, file names, snake_case and C++ names.
NAME = re.compile(r"[\w.~-]*/[\w./~-]*|\b\w+\.(?:cpp|cu|cuh|h|py|ipynb|md|txt|so|whl|json|yml|cfg)\b|\b\w*_\w*\b|\w+::\w+(?:::\w+)*")


def prose(text: str) -> str:
    """`text` without what is kept: the words a translation replaces."""
    text = ROLE.sub(" ", text)
    text = CODE.sub(" ", text)
    text = LINK_TARGET.sub("]", text)
    return NAME.sub(" ", URL.sub(" ", text))


def nothing_to_translate(msgid: str) -> bool:
    """Code, a path or a link only: the translation is the English itself."""
    return not re.search(r"[A-Za-z]", prose(msgid))


def tidy(templates: Path = REPO / "build" / "gettext") -> None:
    """After `sphinx-intl update`: the entries in the order of the page (where sphinx-intl appends the new ones), a
    fixed header, and the entries that are code only filled with themselves."""
    for path in sorted(MESSAGES.rglob("*.po")):
        catalog = read(path)
        template = templates / path.relative_to(MESSAGES).with_suffix(".pot")
        if template.exists():
            order = {m.id: i for i, m in enumerate(read(template))}
            ordered = Catalog(locale="zh_CN")
            for message in sorted((m for m in catalog if m.id), key=lambda m: order.get(m.id, len(order))):
                ordered[message.id] = message
            catalog = ordered
        for message in catalog:
            if message.id and nothing_to_translate(message.id):
                message.string = message.id
                message.flags.discard("fuzzy")
        write(path, catalog)


# ---- checks ------------------------------------------------------------------------------------------------------

CJK = re.compile(r"[\u4e00-\u9fff]")


def forms(word: str) -> set[str]:
    """A word as English inflects it: *kernel(s)*, *redispatch(es/ed/ing)*, *trace(s/d)* and *tracing*."""
    found = {word + ending for ending in ("", "s", "es", "ed", "ing")}
    if word.endswith("e"):
        found |= {word + "d", word[:-1] + "ing"}
    return found


def glossary() -> list[tuple[str, str, re.Pattern]]:
    """(English, Chinese, how the English is found) for each row of the glossary's first (checked) table. A term is
    found in any form of its last word (*sharded*, *traced*, *mutation tags*), except a form that is a term of its
    own (*sharding*, kept in English, is not a form of *shard*, rendered 分片)."""
    text = GLOSSARY.read_text().split("\n## ")[1]  # the first section after the introduction
    table = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] not in ("English", "---") and not set(cells[0]) <= {"-"}:
            table.append((cells[0], cells[1]))
    terms = {english.lower() for english, _ in table}
    rows = []
    for english, chinese in table:
        *head, last = re.split(r"[\s-]", english)
        words = [" ".join(head + [form]) for form in sorted(forms(last), key=len, reverse=True)]
        words = [w for w in words if w.lower() == english.lower() or w.lower() not in terms]
        alternatives = "|".join(r"[\s-]".join(re.escape(w) for w in re.split(r"[\s-]", w)) for w in words)
        rows.append((english, chinese, re.compile(rf"\b(?:{alternatives})\b", re.I)))
    return rows


def markup(text: str) -> Counter:
    """How many bold, italic, link and code elements Markdown makes of `text`. CommonMark's flanking rules differ in
    Chinese: `**“加粗”**后文` is no bold (a closing `**` after punctuation needs a space or punctuation after it)."""
    kinds = ("strong_open", "em_open", "link_open", "code_inline")
    return Counter(t.type for block in PARSER.parseInline(text) for t in block.children or [] if t.type in kinds)


def problems(message: Message, terms=None) -> list[str]:
    """What is wrong with one entry's translation ([] when nothing is)."""
    english, chinese = message.id, message.string
    if not chinese:
        return ["untranslated"]
    found = []
    if message.fuzzy:
        found.append("fuzzy (the English changed: check the translation, then remove the fuzzy flag)")
    if Counter(kept(english)) != Counter(kept(chinese)):
        lost = Counter(kept(english)) - Counter(kept(chinese))
        added = Counter(kept(chinese)) - Counter(kept(english))
        found.append(f"code, links or URLs differ: missing {list(lost)}, not in the English {list(added)}")
    if markup(english) != markup(chinese):
        found.append(f"Markdown differs: the English makes {dict(markup(english))}, the translation "
                     f"{dict(markup(chinese))} (put a space between `**`/`*` and Chinese text next to punctuation)")
    blocks = [token.type for token in PARSER.parse(chinese) if token.nesting == 1]
    if blocks != ["paragraph_open"] and chinese != english:
        found.append(f"Sphinx reads this translation as {blocks[0] if blocks else 'nothing'}, not as text, and "
                     "keeps the English: escape what starts it (a heading `1. Title` is translated `1\\. 标题`)")
    if len(re.findall(r"[A-Za-z]{2,}", prose(english))) >= 3 and not CJK.search(chinese):
        found.append("no Chinese in the translation")
    exempt = " ".join(message.user_comments)
    for term, rendering, pattern in terms if terms is not None else glossary():
        if pattern.search(prose(english)) and f"glossary: {term}" not in exempt:
            if term.lower() == rendering.lower():
                if not pattern.search(prose(chinese)):
                    found.append(f"glossary: keep {term!r} in English")
            elif rendering not in prose(chinese):
                found.append(f"glossary: {term!r} is {rendering!r}")
    return found


def check(docnames: list[str] | None = None) -> dict[str, list[str]]:
    """docname -> one line per problem entry: its problems and its English."""
    terms, report = glossary(), {}
    for docname, catalog in catalogues().items():
        if docnames and docname not in docnames:
            continue
        lines = [f"{'; '.join(p)}: {m.id!r}" for m in catalog if m.id and (p := problems(m, terms))]
        if lines:
            report[docname] = lines
    return report


# ---- notebooks ---------------------------------------------------------------------------------------------------

def units(markdown: str):
    """(first line, last line + 1, English text, cell column or None) of each translatable unit of a Markdown cell:
    what Sphinx's gettext builder extracts from it (paragraphs, headings, table cells), in the form it extracts."""
    tokens = PARSER.parse(markdown)
    for index, token in enumerate(tokens):
        if token.type == "tr_open":
            row, column = token.map, 0
        elif token.type in ("th_open", "td_open"):
            if text := tokens[index + 1].content.strip():
                yield row[0], row[1], text, column
            column += 1
        elif token.type in ("paragraph_open", "heading_open"):
            if text := tokens[index + 1].content.replace("\n", " ").strip():
                yield token.map[0], token.map[1], text, None


def split_row(line: str) -> list[str]:
    """A table row's cells, split at each `|` that is neither escaped nor inside a code span."""
    cells, cell, ticks = [], "", 0
    i = 0
    while i < len(line):
        char = line[i]
        if char == "`":
            run = len(line[i:]) - len(line[i:].lstrip("`"))
            ticks = 0 if ticks == run else (run if ticks == 0 else ticks)
            cell += line[i:i + run]
            i += run
            continue
        if char == "\\" and i + 1 < len(line):
            cell += line[i:i + 2]
            i += 2
            continue
        if char == "|" and not ticks:
            cells.append(cell)
            cell = ""
        else:
            cell += char
        i += 1
    cells.append(cell)
    return cells


def translate_markdown(markdown: str, translations: dict[str, str]) -> tuple[str, list[str]]:
    """The cell in Chinese, and the English units the catalogue has no translation for."""
    lines = markdown.split("\n")
    missing, replaced = [], {}
    for first, end, english, column in units(markdown):
        chinese = translations.get(english)
        if not chinese:
            missing.append(english)
            continue
        if column is not None:
            cells = split_row(replaced.get(first, lines[first]))
            cell = cells[column + 1]  # cells[0] is what precedes the row's first `|`
            cells[column + 1] = cell.replace(english, chinese, 1)
            replaced[first] = "|".join(cells)
            continue
        head = lines[first]
        content_start = head.find(english.split(" ")[0]) if english else len(head)
        prefix = head[:content_start] if content_start >= 0 else ""
        replaced[first] = prefix + chinese
        for line in range(first + 1, end):
            replaced[line] = None
    out = [replaced.get(i, line) for i, line in enumerate(lines)]
    return "\n".join(line for line in out if line is not None), missing


def chinese_notebook(notebook: Path, catalog: Catalog | None) -> tuple[dict, list[str]]:
    """The notebook with each Markdown cell translated; code cells and outputs untouched."""
    translations = {m.id: m.string for m in catalog or [] if m.id and m.string and not m.fuzzy}
    data = json.loads(notebook.read_text())
    missing = []
    for cell in data["cells"]:
        if cell["cell_type"] == "markdown":
            text, absent = translate_markdown("".join(cell["source"]), translations)
            cell["source"] = text.splitlines(keepends=True)
            missing += absent
    return data, missing


def write_notebooks(target: Path = ZH) -> int:
    """`target` (build/zh/): notebooks/ in Chinese, the rest of the repository linked, and JupyterLab settings that
    choose its Chinese interface. Returns how many paragraphs are still in English."""
    (target / "notebooks").mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        if not (target / name).is_symlink():
            (target / name).symlink_to(os.path.relpath(REPO / name, target))
    untranslated = 0
    for notebook in sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        path = catalogue_path(f"notebooks/{notebook.stem}")
        data, missing = chinese_notebook(notebook, read(path) if path.exists() else None)
        untranslated += len(missing)
        (target / "notebooks" / notebook.name).write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n")
    settings = target / "lab-settings" / "@jupyterlab" / "translation-extension" / "plugin.jupyterlab-settings"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text('{"locale": "zh_CN"}\n')
    return untranslated


def print_notebooks() -> None:
    untranslated = write_notebooks()
    print(f"{ZH.relative_to(REPO)}/notebooks: the Chinese notebooks"
          + (f"; {untranslated} paragraphs still in English (make catalogues, then translate them)" if untranslated
             else ""))


def print_check(*docnames: str) -> None:
    report = check(list(docnames))
    for docname, lines in report.items():
        print(f"{catalogue_path(docname).relative_to(REPO)}: {len(lines)} to fix")
        for line in lines:
            print("  " + line)
    total = sum(len(catalog) for name, catalog in catalogues().items() if not docnames or name in docnames)
    print(f"{sum(map(len, report.values()))} problems in {total} entries")
    sys.exit(1 if report else 0)


if __name__ == "__main__":
    commands = {"tidy": tidy, "notebooks": print_notebooks, "check": print_check}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit(f"usage: python tools/translation.py {{{'|'.join(commands)}}} [docname ...]")
    commands[sys.argv[1]](*sys.argv[2:])
