"""The stored notebooks: course structure, and outputs free of machine-specific paths."""
import ast
import json
import re

import pytest

from myops.build import REPO_ROOT

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))
MACHINE_PATH = re.compile(r"(/home/|/root/|/tmp/|/Users/|site-packages|" + re.escape(str(REPO_ROOT)) + ")")


def cells(path):
    return json.loads(path.read_text())["cells"]


def test_notebooks_are_numbered():
    names = [p.stem for p in NOTEBOOKS]
    assert names == ["00_dispatcher_tour", "01_schema", "02_cpu_kernel", "03_cuda_kernel", "04_autograd",
                     "05_not_implemented_fallback", "06_inplace_or_view", "07_autocast", "08_performance",
                     "09_compile_and_opcheck", "10_vmap", "11_python_torch_library", "12_boxed_kernels_and_backends",
                     "13_migrating_from_2020", "14_stable_abi_and_wheels",
                     "15_export_and_aotinductor", "16_python_key_and_dtensor",
                     "17_triton_kernels", "18_build_the_dispatcher", "19_objects_through_the_dispatcher"]
    assert all(re.fullmatch(r"\d\d_[a-z0-9_]+", name) for name in names)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_structure(path):
    markdown = "\n".join("".join(c["source"]) for c in cells(path) if c["cell_type"] == "markdown")
    for heading in ("**You will learn**", "## Exercise", "## Summary"):
        assert heading in markdown, heading
    code = ["".join(c["source"]) for c in cells(path) if c["cell_type"] == "code"]
    assert sum(asserts(source) > 0 for source in code) >= 3


def asserts(source: str) -> int:
    """The assert statements of a code cell (IPython magics set aside), not the word in a string or comment."""
    python = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    return sum(isinstance(node, ast.Assert) for node in ast.walk(ast.parse(python)))


def test_assert_counting_ignores_strings_and_comments():
    assert asserts("%matplotlib inline\nx = 1\nassert x == 1, 'assert'") == 1
    assert asserts("print('assert')  # assert") == 0


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_outputs_have_no_machine_paths(path):
    for cell in cells(path):
        for output in cell.get("outputs", []):
            text = json.dumps({k: v for k, v in output.items() if k != "data"})
            text += json.dumps({k: v for k, v in output.get("data", {}).items() if not k.startswith("image/")})
            assert not MACHINE_PATH.search(text), MACHINE_PATH.search(text).group(0)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_code_cell_was_run_in_order(path):
    counts = [c["execution_count"] for c in cells(path) if c["cell_type"] == "code"]
    assert counts == list(range(1, len(counts) + 1))


def test_sanitize_file_removes_build_progress_only():
    from nbval.plugin import get_sanitize_patterns

    patterns = get_sanitize_patterns((REPO_ROOT / "notebooks" / "sanitize.cfg").read_text())
    assert len(patterns) == 1  # nothing else differs between two runs of a notebook

    def sanitize(text):
        for regex, replace in patterns:
            text = re.sub(regex, replace, text)
        return text

    warm = "loaded layers: ['schema', 'cpu']\n"
    assert sanitize("myops: built layer schema in 5.3 s\nmyops: built layer cpu in 12.0 s\n" + warm) == warm
    first = "myops: built layer schema in 10.7 s (8.9 s of it precompiling torch/library.h)\n"
    assert sanitize(first + warm) == warm
    assert sanitize(warm) == warm
