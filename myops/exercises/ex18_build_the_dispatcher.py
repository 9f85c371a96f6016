"""Exercise 18: the key set of a call and a computed table entry, written by the learner, proved equal to PyTorch's
dispatcher by notebook 18's differential test (myops/differential.py) on generated cases.

The verdict is the first counterexample, shrunk by hypothesis, in one sentence, followed where it can be told by
which of the two functions answers wrongly (its answer beside PyTorch's key set or table). The toy's own two
functions refuse to run while the check runs, so an answer that hands the work to them is told so.
"""
from __future__ import annotations

import contextlib

from myops import differential
from myops import toy_dispatcher as toy
from myops.exercises.expect import call
from myops.exercises.runner import Context, Unsolved

CASES = 1000  # generated calls; the same ones on every run (a fixed seed)
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
            return
        if _refused(found.__cause__):
            raise Unsolved(_refused(found.__cause__))
        try:
            diagnosis = differential.diagnose(found.case, functions["call_key_set"], functions["computed_entry"])
        except Exception:  # noqa: BLE001 - an answer that raises: the sentence already says so
            diagnosis = ""
    raise Unsolved(found.sentence if not diagnosis else f"{found.sentence[:-1]}: {diagnosis}")


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
