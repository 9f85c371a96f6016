"""Show a file of csrc/, or a marked slice of it, with syntax highlighting in a notebook."""
from __future__ import annotations

import textwrap

from myops.build import REPO_ROOT

CSRC = REPO_ROOT / "csrc"


def source_slice(path: str, name: str | None = None) -> str:
    """The text of csrc/<path>, or of its `// BEGIN name` ... `// END name` slice (markers excluded)."""
    text = (CSRC / path).read_text()
    if name is None:
        return text
    begin, end = f"// BEGIN {name}\n", f"// END {name}"
    if begin not in text:
        raise KeyError(f"myops: csrc/{path} has no '// BEGIN {name}' marker")
    body = text.split(begin, 1)[1].split(end, 1)[0]
    return textwrap.dedent(body).rstrip() + "\n"


def show(path: str, name: str | None = None):
    """Display csrc/<path> (or one named slice of it) as highlighted C++/CUDA (an IPython `Code` object)."""
    from IPython.display import Code  # only notebooks display: tests/ runs without IPython

    language = "cuda" if path.endswith((".cu", ".cuh")) else "cpp"
    return Code(source_slice(path, name), language=language)
