"""Every mechanism a notebook explains names the PyTorch source that implements it, and that source exists.

A pointer is a markdown paragraph of a notebook that starts with `**PyTorch source:**`, followed by references
separated by `;`. A reference names one file and, after a colon, the symbols to read in it:

    **PyTorch source:** `torch/csrc/autograd/custom_function.h`: `Function<T>::apply`;
    [torch/csrc/autograd/VariableTypeManual.cpp](https://github.com/pytorch/pytorch/blob/v2.14.1/torch/csrc/autograd/VariableTypeManual.cpp): `ADInplaceOrView::copy_`

- A file that ships with torch (a header, a Python file) is cited by its path in the installed package: headers
  as they are included (`c10/core/DispatchKey.h`, under `torch/include/`), Python files from the package root
  (`torch/_library/autograd.py`). The file must exist and every part of each symbol (split at `::` and `.`,
  template arguments dropped) must occur in it as a word.
- A `.cpp` file does not ship: it is a link into PyTorch's repository at the tag of the installed torch, so
  upgrading torch fails this test at every explanation that must be read again.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
TORCH_PACKAGE = Path(torch.__file__).resolve().parent
TAG = "v" + torch.__version__.split("+")[0]
REPOSITORY_BLOB = "https://github.com/pytorch/pytorch/blob/"

MARKER = "**PyTorch source:**"
REFERENCE = re.compile(
    r"(?:`(?P<path>[\w./-]+\.(?:h|hpp|cuh|py))`"
    r"|\[`?(?P<link_text>[\w./-]+)`?\]\((?P<url>[^)\s]+)\))"
    r"(?::\s*(?P<symbols>`[^`]+`(?:\s*,\s*`[^`]+`)*))?")
ANY_PYTORCH_LINK = re.compile(re.escape(REPOSITORY_BLOB) + r"(?P<ref>[^/\s)]+)/(?P<path>[^)\s\"#]+)")

# The mechanisms the course teaches, where it teaches them, and a file that implements each (issue-level list:
# the guard and redispatch, the key extractor, the autograd fallback, ADInplaceOrView's bookkeeping, the autocast
# cast cache, functorch's layers, FakeTensor's size specialization, boxing, the stable C shim).
REQUIRED = {
    "00": "c10/core/DispatchKey.h",
    "04": "torch/csrc/autograd/custom_function.h",
    "02": "ATen/core/dispatch/DispatchKeyExtractor.h",
    "05": "autograd_not_implemented_fallback.cpp",
    "06": "VariableTypeManual.cpp",
    "07": "ATen/autocast_mode.h",
    "09": "torch/_subclasses/fake_tensor.py",
    "10": "torch/_functorch/autograd_function.py",
    "11": "torch/_library/autograd.py",
    "12": "ATen/core/boxing/KernelFunction.h",
    "14": "torch/csrc/stable/library.h",
    "15": "torch/csrc/inductor/aoti_torch/oss_proxy_executor.h",
}


def markdown_paragraphs(notebook: Path) -> list[str]:
    cells = json.loads(notebook.read_text())["cells"]
    text = "\n\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown")
    return [" ".join(block.split()) for block in re.split(r"\n\s*\n", text)]


def pointers(notebook: Path) -> list[str]:
    return [p.split(MARKER, 1)[1] for p in markdown_paragraphs(notebook) if MARKER in p]


def references(pointer: str) -> list[re.Match]:
    return list(REFERENCE.finditer(pointer))


def shipped_file(path: str) -> Path:
    """Where a cited file lies in the installed torch: Python files from the package root, headers as included."""
    if path.endswith(".py"):
        return TORCH_PACKAGE.parent / path
    return TORCH_PACKAGE / "include" / path


def symbol_parts(symbol: str) -> list[str]:
    while re.search(r"<[^<>]*>", symbol):
        symbol = re.sub(r"<[^<>]*>", "", symbol)
    symbol = symbol.removesuffix("()")
    return [part for part in re.split(r"::|\.", symbol) if part]


def all_references() -> list[tuple[str, re.Match]]:
    return [(notebook.name[:2], ref) for notebook in NOTEBOOKS for p in pointers(notebook) for ref in references(p)]


def reference_id(item: tuple[str, re.Match]) -> str:
    notebook, ref = item
    return f"{notebook}:{ref['path'] or ref['link_text']}"


def test_the_parser_reads_both_kinds_of_reference():
    example = (f"{MARKER} `torch/csrc/autograd/custom_function.h`: `Function<T>::apply`, `CppNode`; "
               f"[torch/csrc/autograd/VariableTypeManual.cpp]({REPOSITORY_BLOB}{TAG}/torch/csrc/autograd/"
               f"VariableTypeManual.cpp): `ADInplaceOrView::copy_`")
    (pointer,) = [p.split(MARKER, 1)[1] for p in [example]]
    first, second = references(pointer)
    assert first["path"] == "torch/csrc/autograd/custom_function.h"
    assert re.findall(r"`([^`]+)`", first["symbols"]) == ["Function<T>::apply", "CppNode"]
    assert second["link_text"] == "torch/csrc/autograd/VariableTypeManual.cpp" and second["url"].endswith(".cpp")
    assert symbol_parts("Function<std::vector<T>>::apply()") == ["Function", "apply"]


@pytest.mark.parametrize("notebook, mechanism_file", sorted(REQUIRED.items()))
def test_each_taught_mechanism_names_its_source(notebook, mechanism_file):
    (path,) = [p for p in NOTEBOOKS if p.name.startswith(notebook)]
    cited = [ref["path"] or ref["link_text"] for p in pointers(path) for ref in references(p)]
    assert any(c.endswith(mechanism_file) for c in cited), (
        f"{path.name} explains the mechanism in {mechanism_file} but has no '{MARKER}' pointer to it "
        f"(it cites: {cited or 'nothing'})")


@pytest.mark.parametrize("notebook", [p.name for p in NOTEBOOKS])
def test_every_pointer_is_well_formed(notebook):
    for pointer in pointers(REPO_ROOT / "notebooks" / notebook):
        refs = references(pointer)
        assert refs, f"{notebook}: a '{MARKER}' paragraph names no file: {pointer[:120]!r}"
        for ref in refs:
            assert ref["symbols"], (f"{notebook}: {ref[0]!r} names a file but no symbol to read in it "
                                    "(write `file`: `Function`)")


@pytest.mark.parametrize("item", all_references(), ids=reference_id)
def test_a_cited_file_and_its_symbols_exist_in_the_installed_torch(item):
    notebook, ref = item
    symbols = re.findall(r"`([^`]+)`", ref["symbols"] or "")
    if ref["url"] is not None:
        assert ref["url"] == f"{REPOSITORY_BLOB}{TAG}/{ref['link_text']}", (
            f"notebook {notebook}: the link for {ref['link_text']} must point at {REPOSITORY_BLOB}{TAG}/... "
            f"(the installed torch {torch.__version__}); it is {ref['url']}. Re-read the explanation at this "
            "release and update the tag.")
        return
    path = shipped_file(ref["path"])
    assert not ref["path"].endswith((".cpp", ".cu")), "a .cpp file does not ship: link it at the release tag"
    assert path.is_file(), (f"notebook {notebook} cites {ref['path']}, which the installed torch "
                            f"{torch.__version__} does not have (looked for {path.relative_to(TORCH_PACKAGE.parent)})")
    text = path.read_text(errors="replace")
    for symbol in symbols:
        missing = [part for part in symbol_parts(symbol) if not re.search(rf"(?<!\w){re.escape(part)}(?!\w)", text)]
        assert not missing, f"notebook {notebook}: {ref['path']} has no {missing} (cited as `{symbol}`)"


def test_a_cpp_source_is_cited_only_as_a_link_at_the_installed_tag():
    """Any link into PyTorch's repository, in a notebook or a course file, names the installed release."""
    files = [*NOTEBOOKS, *sorted((REPO_ROOT / "csrc").rglob("*.*")), *sorted((REPO_ROOT / "exercises").rglob("*.*")),
             REPO_ROOT / "README.md"]
    stale = []
    for path in files:
        if path.suffix in {".so", ".o", ".png"} or not path.is_file():
            continue
        for link in ANY_PYTORCH_LINK.finditer(path.read_text(errors="replace")):
            if link["ref"] != TAG:
                stale.append(f"{path.relative_to(REPO_ROOT)}: {link[0]}")
    assert not stale, f"links into PyTorch's repository must name {TAG}, the installed torch:\n" + "\n".join(stale)


def test_a_bare_cpp_path_in_a_pointer_is_refused():
    for notebook in NOTEBOOKS:
        for pointer in pointers(notebook):
            linked = {ref["link_text"] for ref in references(pointer) if ref["url"]}
            bare = [p for p in re.findall(r"`([\w./-]+\.(?:cpp|cu))`", pointer) if p not in linked]
            assert not bare, f"{notebook.name}: {bare} must be linked at {REPOSITORY_BLOB}{TAG}/<path>"
