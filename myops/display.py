"""Display helpers the notebooks share: Python source, an operator's failing `opcheck` tests, an error's first line.

    from myops.display import failures, first_line, show_py, show_py_lines

(C++ from `csrc/` is shown by `myops.show(path, name)`, in myops/source.py.)
"""
from __future__ import annotations

import inspect
import types
import warnings
from collections.abc import Callable
from typing import Any

from torch.library import opcheck


__all__ = ["failures", "first_line", "show_py", "show_py_lines"]


def show_py(*functions: Callable) -> None:
    """Print the source of each function; for a `torch.library.custom_op`, of the function it was made from."""
    for function in functions:
        # custom_op returns a CustomOpDef object, which keeps the decorated function as _init_fn.
        print(inspect.getsource(getattr(function, "_init_fn", function)))


def show_py_lines(module: types.ModuleType, word: str) -> None:
    """Print the lines of a module's source that contain `word`, e.g. every `register_autograd(` call."""
    print("\n".join(line for line in inspect.getsource(module).splitlines() if word in line))


def failures(op: Any, *args: Any) -> dict[str, str]:
    """Run `torch.library.opcheck`'s four tests on `op(*args)`; return {test: first line of its error} for each
    test that failed (an empty dict when all four pass)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # opcheck and autograd warn about some defects as well
        results = opcheck(op, args, raise_exception=False)
    if len(results) != 4:
        raise RuntimeError(f"myops.display.failures: expected opcheck's four tests, got {sorted(results)}")
    return {test: str(outcome).splitlines()[0] for test, outcome in results.items() if outcome != "SUCCESS"}


def first_line(call: Callable[[], Any]) -> str:
    """Call `call()`; return the first line of the RuntimeError or NotImplementedError it raises, or "no error"."""
    try:
        call()
    except (RuntimeError, NotImplementedError) as error:
        return str(error).splitlines()[0]
    return "no error"
