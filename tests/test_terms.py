"""Every term of the course is defined before a learner reads it.

A term is *defined* where it first appears in bold or in italics (`**fallback**`, `*redispatches*`), in the
sentence that says what it is, in the notebook that teaches it: its home. Read in course order, no notebook before
the home may use the term, and the home may not use it in a cell before the defining one. Only Markdown prose is
read: code cells, code spans, fenced blocks and link targets are not. Cell 0 (the title and "You will learn")
names what the notebook is about to define, so it is not read either.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

nbformat = pytest.importorskip("nbformat", reason="the notebook packages are not installed here")
from myops.build import REPO_ROOT  # noqa: E402

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@dataclass(frozen=True)
class Term:
    name: str
    home: str      # the two-digit number of the notebook that defines it
    pattern: str   # every form a sentence may use; case-insensitive unless the term is a C++ name


TERMS = [
    Term("dispatch key", "00", r"\bkeys?\b"),
    Term("key set", "00", r"\bkey sets?\b"),
    Term("functionality", "00", r"\bfunctionalit(?:y|ies)\b"),
    Term("runtime key", "00", r"\bruntime keys?\b"),
    Term("kernel", "00", r"\bkernels?\b"),
    Term("redispatch", "00", r"\bredispatch(?:es|ed|ing)?\b"),
    Term("include set", "00", r"\binclude sets?\b"),
    Term("exclude set", "00", r"\bexclude sets?\b"),
    Term("BackendSelect", "00", r"BackendSelect"),
    Term("meta tensor", "00", r"\bmeta tensors?\b"),
    Term("inference tensor", "00", r"\binference tensors?\b"),
    Term("dispatch table", "00", r"\bdispatch tables?\b"),
    Term("fallback", "00", r"\bfallbacks?\b"),
    Term("fallthrough", "00", r"\bfallthroughs?\b"),
    Term("boxed", "00", r"\b(?:un)?boxed\b"),
    Term("alias key", "00", r"\balias keys?\b"),
    Term("CompositeImplicitAutograd", "00", r"CompositeImplicitAutograd"),
    Term("CompositeExplicitAutograd", "00", r"CompositeExplicitAutograd"),
    Term("schema", "01", r"\bschemas?\b"),
    Term("dispatch function", "02", r"\bdispatch functions?\b"),
    Term("fake tensor", "03", r"\bfake tensors?\b"),
    Term("guard", "04", r"\bguard(?:s|ed)?\b"),
    Term("IValue", "08", r"\bIValue"),
    Term("grain", "08", r"\bgrains?\b"),
    Term("structured kernel", "08", r"\bstructured kernels?\b"),
    Term("collective", "16", r"\bcollectives?\b"),
    Term("process group", "16", r"\bprocess groups?\b"),
    Term("all-gather", "16", r"\ball-gathers?\b"),
    Term("all-reduce", "16", r"\ball-reduces?\b"),
    Term("reduce-scatter", "16", r"\breduce-scatters?\b"),
    Term("all-to-all", "16", r"\ball-to-all\b"),
]

FENCED = re.compile(r"```.*?```", re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK_TARGET = re.compile(r"\]\([^)]*\)")


def prose(markdown: str) -> str:
    """What a learner reads as words: no code and no link targets."""
    return CODE_SPAN.sub("", LINK_TARGET.sub("]", FENCED.sub("", markdown)))


def flags(term: Term) -> int:
    return 0 if term.name[0].isupper() else re.I


def uses(term: Term, markdown: str) -> bool:
    text = markdown if term.name[0].isupper() else prose(markdown)
    return re.search(term.pattern, text, flags(term)) is not None


def defines(term: Term, markdown: str) -> bool:
    """The term set in bold or italics (a C++ name in code inside the emphasis: **`BackendSelect`**)."""
    emphasised = r"(\*\*|(?<!\*)\*(?!\*))[^*\n]*?(?:" + term.pattern + r")[^*\n]*?\1"
    return re.search(emphasised, LINK_TARGET.sub("]", markdown), flags(term)) is not None


def read_markdown(path) -> list[tuple[int, str]]:
    cells = nbformat.read(path, as_version=4).cells
    return [(index, cell.source) for index, cell in enumerate(cells) if cell.cell_type == "markdown" and index > 0]


def early_uses(term: Term, notebook: str, cells: list[tuple[int, str]]) -> list[str]:
    """Where `notebook` uses `term` before the learner has read its definition."""
    if notebook < term.home:
        return [f"cell {index}" for index, text in cells if uses(term, text)]
    if notebook > term.home:
        return []
    for index, text in cells:
        if defines(term, text):
            return []
        if uses(term, text):
            return [f"cell {index} (defined in no cell before it)"]
    return ["nowhere: the notebook never defines it"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_no_term_is_used_before_it_is_defined(path):
    notebook, cells = path.name[:2], read_markdown(path)
    early = {term.name: where for term in TERMS if (where := early_uses(term, notebook, cells))}
    assert not early, (f"{path.name} uses these terms before defining them (define a term in bold or italics in "
                       f"the sentence that says what it is, or say it without the term): {early}")


def test_each_term_has_a_home_that_exists():
    numbers = {path.name[:2] for path in NOTEBOOKS}
    assert {term.home for term in TERMS} <= numbers
    assert len({term.name for term in TERMS}) == len(TERMS)


@pytest.mark.parametrize("cells, early", [
    ([(1, "Each key has a **fallback**: one function for every operator."), (2, "The fallback runs.")], []),
    ([(1, "The fallback runs."), (2, "A **fallback** is one function for every operator.")],
     ["cell 1 (defined in no cell before it)"]),
    ([(1, "`fallback` in code and [a link](fallback.md) are not prose."), (2, "A *fallback* is ...")], []),
    ([(1, "Fallbacks everywhere.")], ["cell 1 (defined in no cell before it)"]),
    ([(1, "Nothing here.")], ["nowhere: the notebook never defines it"]),
])
def test_the_rule_finds_a_use_before_the_definition(cells, early):
    fallback = next(term for term in TERMS if term.name == "fallback")
    assert early_uses(fallback, fallback.home, cells) == early


def test_a_notebook_before_the_home_may_not_use_the_term():
    guard = next(term for term in TERMS if term.name == "guard")
    assert early_uses(guard, "02", [(3, "The kernel guards its device.")]) == ["cell 3"]
    assert early_uses(guard, "05", [(3, "The guard again.")]) == []
