"""Exercise 18: the key set of a call and a computed table entry, written by the learner, proved equal to PyTorch's
dispatcher by notebook 18's differential test (myops/differential.py) on generated cases.

The verdict is the first counterexample, shrunk by hypothesis, in one sentence, followed where it can be told by
which of the two functions answers wrongly (its answer beside PyTorch's key set or table). Calls do not read an
entry's `why`, so the check then holds the learner's computed_entry against PyTorch's tables entry for entry
(differential.table_difference: the word the dump prints, fallthrough or not, the file of the kernel) on the
course's six operators and every tenth ATen operator. The toy's own two functions refuse to run while the check
runs, so an answer that hands the work to them is told so.
"""
from __future__ import annotations

import contextlib

from myops import differential
from myops import toy_dispatcher as toy
from myops.exercises.expect import call
from myops.exercises.runner import Context, Unsolved

CASES = 1000  # generated calls; the same ones on every run (a fixed seed)
ATEN_STEP = 10  # every tenth ATen operator, in name order, has its table compared
LAYERS = ("schema", "cpu", "composite", "autograd", "inplace_or_view", "autocast", "meta")  # the course's six ops
FUNCTIONS = ("call_key_set", "computed_entry")


_REFUSAL = "your answer calls the toy's own {name} (myops.toy_dispatcher.{name}), which the check switches off: " \
           "write the rule yourself"


def check(context: Context) -> None:
    module = context.load_python("dispatcher.py")
    functions = {}
    for name in FUNCTIONS:
        function = getattr(module, name, None)
        if not callable(function):
            raise Unsolved(f"{context.file('dispatcher.py')} defines no function {name}")
        if function is getattr(toy, name):
            raise Unsolved(f"{name} is the toy's own (myops.toy_dispatcher.{name}): write it yourself in "
                           f"{context.file('dispatcher.py')}")
        functions[name] = function
    with _toys_own_refuse():
        # The stub's "not solved yet" first, and an answer that calls the toy's own, before any generated case.
        cpu = toy.tensor_keys("cpu")
        _probe("call_key_set", functions["call_key_set"], [cpu], toy.DEFAULT_TLS)
        probe = toy.Operator.make("ex18::probe", kernels=["CPU", "Autograd"])
        for key in toy.TOY_KEYS:
            _probe("computed_entry", functions["computed_entry"], probe, key)
        found = differential.counterexample(functions["call_key_set"], functions["computed_entry"], CASES)
        if found is None:
            table = _tables_differ(functions["computed_entry"])
            if table:
                raise Unsolved(table)
            return
        if _refused(found.__cause__):
            raise Unsolved(_refused(found.__cause__))
        try:
            diagnosis = differential.diagnose(found.case, functions["call_key_set"], functions["computed_entry"])
        except Exception:  # noqa: BLE001 - an answer that raises: the sentence already says so
            diagnosis = ""
    raise Unsolved(found.sentence if not diagnosis else f"{found.sentence[:-1]}: {diagnosis}")


def _tables_differ(computed_entry) -> str:
    """'' when the learner's computed_entry gives PyTorch's table at the toy's keys for the course's operators and a
    sample of ATen's; else one line on the first entry that differs."""
    import torch

    import myops

    myops.load(*LAYERS)
    names = sorted(torch._C._dispatch_get_all_op_names())
    ops = [n for n in names if n.startswith("myops::")] + [n for n in names if n.startswith("aten::")][::ATEN_STEP]
    for name in ops:
        try:
            differences = differential.table_difference(name, differential.registered(name),
                                                        computed_entry=computed_entry)
        except Exception as error:  # noqa: BLE001 - the answer's own error, in one line
            return f"your computed_entry raises {type(error).__name__}: {error} on the table of {name}"
        if differences:
            key, (theirs, yours) = next(iter(differences.items()))
            return (f"every generated call runs what PyTorch runs, but the table of {name} differs at {key}: "
                    f"PyTorch's entry is {_entry_words(theirs)}, yours {_entry_words(yours)}")
    return ""


def _entry_words(entry) -> str:
    """An entry as table_difference compares it: (the word the dump prints, fallthrough, file), or None."""
    if entry is None:
        return "missing"
    why, fallthrough, file = entry
    return f'"{why}"' + (" (a fallthrough)" if fallthrough else "") + (f" from {file.rsplit('/', 1)[-1]}" if file else "")


def _probe(name: str, function, *args) -> None:
    try:
        function(*args)
    except Exception as error:  # noqa: BLE001 - told apart below
        if _refused(error):
            raise Unsolved(_refused(error)) from None
    call(name, function, *args)  # the stub's "not solved yet", or the error in one line


def _refused(error: BaseException | None) -> str:
    """The refusal's message when `error` is the toy's own function refusing to run, else ""."""
    text = str(error) if isinstance(error, RuntimeError) else ""
    return text if text.startswith("your answer calls the toy's own") else ""


@contextlib.contextmanager
def _toys_own_refuse():
    """The toy's call_key_set and computed_entry raise while the check runs, however the answer reached them (an
    import binds the function object, so the object's code is swapped, not the module's name)."""
    saved = {}
    for name in FUNCTIONS:
        function = getattr(toy, name)
        namespace: dict = {}
        # The code runs with the toy module's globals: it may name builtins only.
        exec(f"def {name}(*args, **kwargs):\n    raise RuntimeError({_REFUSAL.format(name=name)!r})", namespace)
        saved[name] = function.__code__
        function.__code__ = namespace[name].__code__
    try:
        yield
    finally:
        for name, code in saved.items():
            getattr(toy, name).__code__ = code
