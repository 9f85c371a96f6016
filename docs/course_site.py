"""Lays out the website's sources and links the notebooks' C++ listings to pages of their own.

Sphinx reads only what lies under its source folder; the notebooks, the README and csrc/ stay where they are.
At `builder-inited` this extension writes into the source folder (under build/, never docs/ or the repository):

    index.md                  README.md up to its Chinese part, with the site's table of contents
    notebooks/NN_name.ipynb   a byte-for-byte copy of each stored notebook (read, never executed)
    exercises/NN_name.md      each exercise's instructions (its stubs' opening comments, as prose, so that they are
                              translated with the rest), its stub files and the command that checks it (no solutions)
    csrc/<path>.md            each csrc/ file a notebook shows with `myops.show(...)`, whole and highlighted

The layout mirrors the repository, so a link written for the repository (`../csrc/schema.cpp` in a notebook)
finds its page here. Files are rewritten only when their text changes, so a second build reads only what changed.
The README's Chinese part is the Chinese edition's front on the repository; the site's Chinese edition is the whole
site translated (`make site`), so that part is no page here.
"""
from __future__ import annotations

import ast
import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.search.zh import SearchChinese
from sphinx.transforms.post_transforms import SphinxPostTransform

REPO = Path(__file__).resolve().parent.parent
# The README's Chinese part starts at this heading and runs to the end of the file.
ZH_HEADING = "## 中文"
LANGUAGES = {".cpp": "cpp", ".h": "cpp", ".cu": "cuda", ".cuh": "cuda", ".py": "python", ".txt": "cmake"}


@dataclass
class Shown:
    """One csrc/ file and where the notebooks show it."""

    path: str  # relative to csrc/
    slices: dict[str, list[str]] = field(default_factory=dict)  # notebook stem -> slice names ("" = whole file)


def show_calls(source: str) -> list[tuple[str, str]]:
    """(path, slice) of every `myops.show(path[, slice])` call in one code cell; IPython magics are skipped."""
    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    calls = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "show":
            if not isinstance(node.func, ast.Attribute) or ast.unparse(node.func.value) != "myops":
                continue
            args = [a.value if isinstance(a, ast.Constant) else None for a in node.args]
            if not args or not isinstance(args[0], str) or None in args:
                raise ValueError(f"course_site: myops.show needs literal arguments: {ast.unparse(node)}")
            calls.append((args[0], args[1] if len(args) > 1 else ""))
    return calls


def notebook_listings(notebook: Path) -> dict[int, list[tuple[str, str]]]:
    """Cell index -> the csrc/ listings that code cell shows."""
    cells = json.loads(notebook.read_text())["cells"]
    found = {}
    for index, cell in enumerate(cells):
        if cell["cell_type"] == "code" and (calls := show_calls("".join(cell["source"]))):
            found[index] = calls
    return found


def outside_fences(lines: list[str]):
    """(index, line) of each Markdown line that is not inside a ``` code fence."""
    fenced = False
    for index, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            yield index, line


def english_readme(text: str) -> str:
    """The README up to its Chinese part (which starts at ZH_HEADING)."""
    lines = text.splitlines()
    start = next(i for i, line in outside_fences(lines) if line.startswith(ZH_HEADING))
    return "\n".join(lines[:start]).rstrip() + "\n"


# The command a stub's instructions end with; the page says it in a section of its own.
CHECK_LINE = re.compile(r"\s*Check your answer with:\s+python -m myops\.exercises check \d\d\s*$")


def stub_instructions(stub: Path) -> str:
    """A stub's opening comment (C++ `//` lines) or module docstring (Python): the exercise's instructions, which
    are written as Markdown."""
    text = stub.read_text()
    if stub.suffix == ".py":
        return CHECK_LINE.sub("", ast.get_docstring(ast.parse(text), clean=True) or "")
    lines = []
    for line in text.splitlines():
        if not line.startswith("//"):
            break
        lines.append(line[3:] if line.startswith("// ") else line[2:])
    return CHECK_LINE.sub("", "\n".join(lines).strip())


def write(path: Path, text: str, written: set[Path]) -> None:
    written.add(path)
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def copy(source: Path, target: Path, written: set[Path]) -> None:
    written.add(target)
    if not target.exists() or target.read_bytes() != source.read_bytes():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def relative(target: Path, page: Path) -> str:
    """`target` as a path relative to the folder of the page `page` (both absolute)."""
    return os.path.relpath(target, page.parent).replace(os.sep, "/")


def toctree(entries: list[str], caption: str | None = None, hidden: bool = False, maxdepth: int = 1) -> str:
    options = [f":maxdepth: {maxdepth}"] + ([f":caption: {caption}"] if caption else []) + ([":hidden:"] if hidden else [])
    return "```{toctree}\n" + "\n".join(options) + "\n\n" + "\n".join(entries) + "\n```\n"


def repository_link(path: str, page: Path, app: Sphinx) -> str:
    """The repository path as a link: to the hosted repository when `course_repository_url` is set (the
    published site), else to the file itself, copied beside the site by Sphinx's download role."""
    if app.config.course_repository_url:
        return f"[`{path}`]({app.config.course_repository_url.rstrip('/')}/{path})"
    return f"{{download}}`{path} <{relative(REPO / path, page)}>`"


def exercise_rows() -> dict[str, list[str]]:
    """exercises/README.md's table: folder -> (what you write, dispatch key, language)."""
    rows = {}
    for line in (REPO / "exercises" / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and re.fullmatch(r"\d\d_\w+", cells[0]):
            rows[cells[0]] = cells[1:]
    return rows


def stage(app: Sphinx) -> None:
    src = Path(app.srcdir).resolve()
    if src == REPO or REPO / "docs" in (src, *src.parents) or REPO / "notebooks" in (src, *src.parents):
        raise RuntimeError(f"course_site: the source folder {src} must be a staging folder, e.g. build/site-src")
    written: set[Path] = set()
    notebooks = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))

    # Notebooks: copied as stored; their listings collected for the C++ pages.
    shown: dict[str, Shown] = {}
    listings: dict[str, dict[int, list[tuple[str, str]]]] = {}
    for notebook in notebooks:
        copy(notebook, src / "notebooks" / notebook.name, written)
        listings[notebook.stem] = notebook_listings(notebook)
        for calls in listings[notebook.stem].values():
            for path, name in calls:
                slices = shown.setdefault(path, Shown(path)).slices.setdefault(notebook.stem, [])
                if name not in slices:
                    slices.append(name)
    app.env.course_listings = listings  # read by link_listings below
    write(src / "notebooks" / "index.md",
          "# Notebooks\n\nThe course in order. Each page is the notebook as stored, with the outputs "
          "`make test` proves again cell by cell.\n\n" + toctree([f"{n.stem}" for n in notebooks]), written)

    # The README's English part is the front page.
    lines = english_readme((REPO / "README.md").read_text()).splitlines()
    first_section = next(i for i, line in outside_fences(lines) if line.startswith("## "))
    contents = toctree(["notebooks/index", "exercises/index", "csrc/index"], hidden=True)
    write(src / "index.md", "\n".join(lines[:first_section] + [contents] + lines[first_section:]) + "\n", written)

    # Exercises: the stubs a learner edits and the command that checks them; solutions/ is only named.
    rows = exercise_rows()
    folders = sorted(p for p in (REPO / "exercises").iterdir() if p.is_dir() and re.fullmatch(r"\d\d_\w+", p.name))
    for folder in folders:
        page = src / "exercises" / f"{folder.name}.md"
        number, topic = folder.name[:2], folder.name[3:]
        what, key, language = rows[folder.name]
        text = [f"# Exercise {number} · {topic}", "",
                f"The exercise at the end of notebook [{folder.name}](../notebooks/{folder.name}.ipynb): "
                f"{what}.", "", f"Dispatch key: {key}. Language: {language}.", "", "## What to do", ""]
        stubs = sorted(p for p in folder.rglob("*") if p.is_file())
        for stub in stubs:
            if len(stubs) > 1:
                text += [f"### In `{stub.name}`", ""]
            text += [stub_instructions(stub), ""]
        text += ["## The files you edit", ""]
        for stub in stubs:
            repo_path = stub.relative_to(REPO).as_posix()
            text += [f"### `{repo_path}`", "", repository_link(repo_path, page, app), "",
                     "```{literalinclude} " + relative(stub, page),
                     f":language: {LANGUAGES.get(stub.suffix, 'text')}", ":linenos:", "```", ""]
        text += ["## Check it", "", "From the repository's root, after editing:", "", "```bash",
                 f".venv/bin/python -m myops.exercises check {number}", "```", "",
                 "It prints `solved`, `not solved yet: <what is missing>` or `does not compile: <the first compiler "
                 f"error>`, and exits non-zero until the exercise is solved. In the notebook, "
                 f"`myops.exercises.check(\"{number}\")` says the same. A reference answer is in "
                 f"`solutions/{folder.name}/` of the repository; this site does not show it.", ""]
        write(page, "\n".join(text), written)
    readme = (REPO / "exercises" / "README.md").read_text()
    readme = re.sub(r"^\| (\d\d_\w+) \|", lambda m: f"| [{m[1]}]({m[1]}.md) |", readme, flags=re.M)
    write(src / "exercises" / "index.md", readme + "\n" + toctree([f.name for f in folders], hidden=True), written)

    # C++ listings: each shown file whole, highlighted, with its repository path and the notebooks that show it.
    for path in sorted(shown):
        file = REPO / "csrc" / path
        page = src / "csrc" / f"{path}.md"
        where = []
        for stem, names in shown[path].slices.items():
            parts = ", ".join(f"`{n}`" for n in names if n) or "whole file"
            if "" in names and any(names):
                parts = "whole file, " + parts
            where.append(f"- [{stem}]({relative(src / 'notebooks' / f'{stem}.ipynb', page)}): {parts}")
        text = [f"# csrc/{path}", "", "In the repository: " + repository_link(f"csrc/{path}", page, app), "",
                "Shown in (named slices run from `// BEGIN name` to `// END name`):", "", *where, "",
                "```{literalinclude} " + relative(file, page), f":language: {LANGUAGES[file.suffix]}",
                ":linenos:", "```", ""]
        write(page, "\n".join(text), written)
    write(src / "csrc" / "index.md",
          "# C++ sources\n\nEvery file of `csrc/` that a notebook shows, whole. The notebooks show slices of "
          "them and compile these same files.\n\n" + toctree([p for p in sorted(shown)], maxdepth=1), written)

    # The catalogues, where conf.py's locale_dirs reads them (Sphinx writes a compiled .mo beside each).
    catalogues = REPO / "docs" / "locale"
    for po in catalogues.rglob("*.po"):
        copy(po, REPO / "build" / "locale" / po.relative_to(catalogues), written)

    # A notebook or page removed from the repository leaves nothing behind.
    for stale in [p for p in src.rglob("*") if p.is_file() and p not in written]:
        stale.unlink()


def link_listings(app: Sphinx, doctree: nodes.document) -> None:
    """Below each notebook cell that shows C++, a link to the whole file's page."""
    docname = app.env.docname
    if not docname.startswith("notebooks/"):
        return
    calls = getattr(app.env, "course_listings", {}).get(docname.removeprefix("notebooks/"), {})
    for cell in doctree.findall(nodes.container):
        if cell.get("nb_element") != "cell_code" or cell.get("cell_index") not in calls:
            continue
        paragraph = nodes.paragraph(classes=["course-listing-source"])
        paragraph += nodes.Text("Whole file: ")
        for i, path in enumerate(dict.fromkeys(p for p, _ in calls[cell["cell_index"]])):
            if i:
                paragraph += nodes.Text(", ")
            ref = addnodes.pending_xref("", refdomain="std", reftype="doc", reftarget=f"/csrc/{path}",
                                        refexplicit=True, refwarn=True, refdoc=docname)
            ref += nodes.literal(text=f"csrc/{path}")
            paragraph += ref
        cell += paragraph


class RepositoryPaths(SphinxPostTransform):
    """A Markdown link to a repository path that has a page here (`../csrc/schema.cpp`) goes to that page."""

    default_priority = 8  # before MyST's own resolver (9), which would warn about a path that is no document

    def run(self, **kwargs) -> None:
        for node in self.document.findall(addnodes.pending_xref):
            if node.get("reftype") != "myst" or node.get("refdomain"):
                continue
            target = node["reftarget"].split("#", 1)[0]
            docname = os.path.normpath(os.path.join(os.path.dirname(self.env.docname), target)).replace(os.sep, "/")
            if docname in self.env.all_docs:
                node["refdomain"], node["reftarget"], node["reftargetid"] = "doc", docname, None


class ChineseSearch(SearchChinese):
    """Sphinx's Chinese search (words split by jieba) with a script that runs. Sphinx 9.0 gives the Chinese index the
    English stemmer's JavaScript (EnglishStemmer) but names the stemmer after the language (`window.Stemmer =
    ChineseStemmer`), so every Chinese page threw "ChineseStemmer is not defined" and its search found nothing."""

    language_name = "English"


def setup(app: Sphinx) -> dict:
    # The hosted repository's address for file links, e.g. https://github.com/<owner>/<repo>/blob/main
    app.add_config_value("course_repository_url", os.environ.get("COURSE_REPOSITORY_URL", ""), "html")
    app.connect("builder-inited", stage)
    app.connect("doctree-read", link_listings)
    app.add_post_transform(RepositoryPaths)
    app.add_search_language(ChineseSearch)
    return {"parallel_read_safe": False, "parallel_write_safe": True}
