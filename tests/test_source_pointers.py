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
- A reference names the file that *defines* each symbol: the header that only declares a function defined in a
  `.cpp` sends the reader to the wrong file. This is checked wherever the file can be read here: shipped headers
  and Python files, and `tools/autograd/*.py`, which torch ships as `torchgen/packaged/autograd/`. A reference
  that cites an interface on purpose (a C shim, the header a migration must include) says so with `(declared)`
  after its symbols; its symbols must still occur in the file.
"""
from __future__ import annotations

import ast
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
    r"(?::\s*(?P<symbols>`[^`]+`(?:\s*,\s*`[^`]+`)*))?"
    r"(?P<declared>\s*\(declared\))?")
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
    "16": "torch/distributed/tensor/experimental/_register_sharding.py",
    "17": "torch/_library/triton.py",
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
    assert first["declared"] is None and references(" `a.h`: `f` (declared)")[0]["declared"]
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


# -- where a symbol is defined ----------------------------------------------------------------------------------
# A pointer must name the file that defines what it cites, not one that only declares, imports or calls it: a
# header that declares `OperatorEntry::registerKernel` sends the reader to the wrong file.

def python_definitions(source: str) -> set[str]:
    """Qualified names (`Class.method`, `function.inner`) of what a Python file defines: classes, functions and
    assigned names, at any depth. Imports define nothing here."""
    found: set[str] = set()

    def visit(body, prefix):
        for node in body:
            names = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
                names += [t.attr for t in targets if isinstance(t, ast.Attribute)]  # self.attribute = ...
            found.update(prefix + name for name in names)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(node.body, prefix + node.name + ".")
            elif hasattr(node, "body"):  # if/try/with/for blocks define at the same level
                for block in ("body", "orelse", "finalbody", "handlers"):
                    visit(getattr(node, block, []), prefix)

    visit(ast.parse(source).body, "")
    return found


def python_defines(source: str, symbol: str) -> bool:
    name = ".".join(symbol_parts(symbol))
    return any(q == name or q.endswith("." + name) for q in python_definitions(source))


def without_comments(source: str) -> str:
    return re.sub(r"//[^\n]*|/\*.*?\*/", " ", source, flags=re.DOTALL)


def braced_bodies(source: str, name: str, kinds: str = r"class|struct|union|enum(?:\s+class)?|namespace") -> list[str]:
    """The bodies of the classes, structs, unions, enums and namespaces called `name` in a C++ source."""
    bodies = []
    pattern = rf"\b(?:{kinds})\s+(?:\w+\s+)*{name}\b[^;{{()]*\{{"
    for match in re.finditer(pattern, source):
        depth, start = 1, match.end()
        for end in range(start, len(source)):
            depth += {"{": 1, "}": -1}.get(source[end], 0)
            if depth == 0:
                bodies.append(source[start:end])
                break
    return bodies


def header_defines_name(source: str, name: str) -> bool:
    """Whether C++ `source` defines `name`: a macro, a type with a body, an alias, an enumerator or a variable with
    an initializer, or a function with a body (a declaration ending in `;` does not count)."""
    word = re.escape(name)
    if re.search(rf"#\s*define\s+{word}\b", source) or braced_bodies(source, word):
        return True
    if re.search(rf"\b(?:using\s+{word}\s*=|typedef\b[^;]*\b{word}\s*;)", source):
        return True
    enumerator = rf"(?:^|,)\s*{word}\s*(?:=[^,]*)?(?:,|$)"
    if any(re.search(enumerator, body.strip()) for body in braced_bodies(source, r"\w+", r"enum(?:\s+class)?")):
        return True
    if re.search(rf"[\w>*&\s]\s+{word}\s*(?:=[^=]|\{{)", source):  # a variable with an initializer
        return True
    for match in re.finditer(rf"(?<![.>\w]){word}\s*\(", source):  # a function: its parameters, then a body
        before = source[:match.start()].rstrip()
        if before.endswith(("->", ".", "(", ",", "=", "!", "return", "&&", "||")):
            continue  # a call, not a definition
        depth, end = 1, match.end()
        while depth and end < len(source):
            depth += {"(": 1, ")": -1}.get(source[end], 0)
            end += 1
        if re.match(r"[^;{}]*?\{", source[end:]):
            return True
    return False


def header_defines(source: str, symbol: str) -> bool:
    """`Scope::name` is defined inside the body of Scope or out of line as `Scope<...>::name(...) {`; a scope that
    is not a type or namespace of this file (a namespace opened elsewhere) is not required."""
    source = without_comments(source)
    *scopes, name = symbol_parts(symbol)
    if not scopes:
        return header_defines_name(source, name)
    scope = scopes[-1]
    if any(header_defines_name(body, name) for body in braced_bodies(source, re.escape(scope))):
        return True
    out_of_line = re.sub(rf"\b{re.escape(scope)}<[^;{{}}()<>]*>\s*::", f"{scope}::", source)  # Function<T>::apply
    if header_defines_name(out_of_line.replace(f"{scope}::{name}", f"{scope}__{name}"), f"{scope}__{name}"):
        return True
    return not braced_bodies(source, re.escape(scope)) and header_defines_name(source, name)


def cited_source(ref: re.Match) -> tuple[str, str] | None:
    """The text of a cited file this machine can read, and its kind: a shipped header or Python file, or a linked
    `tools/autograd/*.py`, which torch ships as `torchgen/packaged/autograd/`. A linked `.cpp` is not shipped."""
    if ref["path"]:
        path = shipped_file(ref["path"])
    elif ref["link_text"].startswith("tools/autograd/") and ref["link_text"].endswith(".py"):
        path = TORCH_PACKAGE.parent / "torchgen" / "packaged" / ref["link_text"].removeprefix("tools/")
    else:
        return None
    kind = "python" if path.suffix == ".py" else "header"
    return path.read_text(errors="replace"), kind


@pytest.mark.parametrize("item", all_references(), ids=reference_id)
def test_a_cited_symbol_is_defined_in_the_cited_file(item):
    notebook, ref = item
    readable = cited_source(ref)
    if ref["declared"]:
        pytest.skip("cited as a declaration: its symbols are checked to occur in the file")
    if readable is None:
        pytest.skip(f"{ref['link_text']} does not ship with torch: its link names the release to read it at")
    source, kind = readable
    defines = python_defines if kind == "python" else header_defines
    undefined = [s for s in re.findall(r"`([^`]+)`", ref["symbols"] or "") if not defines(source, s)]
    assert not undefined, (f"notebook {notebook}: {ref['path'] or ref['link_text']} does not define {undefined} "
                           "(it only declares, imports or uses them): cite the file that defines each")


def test_the_definition_check_tells_a_definition_from_a_declaration():
    header = """
        #define MACRO(x) x
        namespace ns {
        enum class Key : uint8_t { First, Second = 3, };
        TORCH_API void declared_only(int x);
        inline int defined_inline(int x) { return declared_only(x), x; }
        constexpr int constant = 1;
        struct TORCH_API Entry {
          void member(int x) const;
          int inline_member() const { return 0; }
        };
        template <class T> struct Function { static int apply(); };
        template <class T> int Function<T>::apply() { return 1; }
        }  // namespace ns
    """
    for symbol in ("MACRO", "Key", "First", "Second", "defined_inline", "constant", "Entry", "Entry::inline_member",
                   "Function<T>::apply", "ns::defined_inline"):
        assert header_defines(header, symbol), symbol
    for symbol in ("declared_only", "Entry::member", "Entry::defined_inline", "missing"):
        assert not header_defines(header, symbol), symbol
    python = "from x import imported\nclass A:\n    def f(self):\n        self.attr = 1\n        def inner(): pass\nB = 2\n"
    for symbol in ("A", "A.f", "inner", "A.f.inner", "attr", "B"):
        assert python_defines(python, symbol), symbol
    assert not python_defines(python, "imported") and not python_defines(python, "A.g")
