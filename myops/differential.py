"""The toy dispatcher against PyTorch's, on generated cases: one idea, used by tests/test_toy_dispatcher.py, notebook
18 and exercise 18's check.

A *case* is an operator's registrations (a Python kernel or a fallthrough on some of the toy's keys, alias keys
included), the tensors of one call (CPU or meta, requires_grad, made under inference_mode, of a __torch_dispatch__
subclass) and the thread-local state around it (no_grad, inference_mode, autocast, keys excluded and included by
guards). `cases()` generates them with hypothesis. `check_case` defines the operator for real in a torch.library
fragment, calls it under that state, observes what PyTorch ran (which of our kernels, a fallback of PyTorch's, or
the error raised), and asks a toy built from two functions, `call_key_set` and `computed_entry`, what it predicts.
`find_counterexample` runs that property on many cases with a fixed seed and returns the first counterexample,
shrunk by hypothesis to its simplest form, as one sentence.

The tables' side: `registered` reads a real operator's registrations into a toy Operator, and `table_difference`
lists the keys where the toy's computed table differs from PyTorch's.
"""
from __future__ import annotations

import contextlib
import os
import functools
import itertools
import operator
import re
from dataclasses import dataclass, replace

import torch
from hypothesis import HealthCheck, Verbosity, configuration, given, settings
from hypothesis import strategies as st

from myops import dispatch
from myops import toy_dispatcher as toy
from myops.paths import BUILD_DIR

# Hypothesis keeps caches in .hypothesis/ under the working directory, which for a notebook is notebooks/: keep
# them in build/, unless the user chose a folder.
if not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
    configuration.set_hypothesis_home_dir(BUILD_DIR / "hypothesis")

NAMESPACE = "toy_dispatcher"
CASES = 1000  # the test's default number of generated calls

# The keys a generated operator registers to, in registration order (torch.library refuses a Meta kernel once the
# operator has a CompositeImplicitAutograd one, so Meta comes first), with what each may hold, weighted by
# repetition: keys that shadow everything below them for most calls (BackendSelect, which every thread includes,
# PythonTLSSnapshot, Python, ADInplaceOrView) get a kernel less often than the alias keys.
REGISTRATIONS = {
    "CPU": ("none", "none", "kernel", "fallthrough"),
    "Meta": ("none", "none", "kernel", "fallthrough"),
    "BackendSelect": ("none",) * 9 + ("kernel",),
    "Python": ("none",) * 8 + ("kernel", "fallthrough"),
    "ADInplaceOrView": ("none",) * 6 + ("kernel", "fallthrough"),
    "AutogradCPU": ("none",) * 3 + ("kernel", "fallthrough"),
    "AutogradMeta": ("none",) * 3 + ("kernel", "fallthrough"),
    "AutocastCPU": ("none",) * 3 + ("kernel", "fallthrough"),
    "PythonTLSSnapshot": ("none",) * 9 + ("kernel",),
    "Autograd": ("none", "kernel", "kernel", "fallthrough"),
    "CompositeExplicitAutogradNonFunctional": ("none", "none", "kernel"),
    "CompositeExplicitAutograd": ("none", "none", "kernel"),
    "CompositeImplicitAutograd": ("none", "kernel"),
}
EXCLUDABLE = ("CPU", "Meta", "BackendSelect", "Python", "ADInplaceOrView", "AutogradCPU", "AutogradMeta",
              "AutocastCPU", "PythonTLSSnapshot")
INCLUDABLE = ("CPU", "Meta", "ADInplaceOrView", "AutogradCPU", "AutogradMeta", "AutocastCPU", "PythonTLSSnapshot")


# ---- generated cases -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TensorCase:
    device: str = "cpu"
    requires_grad: bool = False
    inference: bool = False  # made under torch.inference_mode()
    subclass: bool = False  # a torch.Tensor subclass with __torch_dispatch__

    def describe(self) -> str:
        kind = "inference tensor" if self.inference else "tensor"
        return (f"a {'meta' if self.device == 'meta' else 'CPU'} {kind}"
                + (" of a __torch_dispatch__ subclass" if self.subclass else "")
                + (" that requires grad" if self.requires_grad else ""))


@dataclass(frozen=True)
class Case:
    kernels: tuple[str, ...] = ()
    fallthroughs: tuple[str, ...] = ()
    tensors: tuple[TensorCase, ...] = (TensorCase(),)
    no_grad: bool = False
    inference_mode: bool = False
    autocast: bool = False
    exclude: tuple[str, ...] = ()
    include: tuple[str, ...] = ()

    def describe(self) -> str:
        held = [f"{'a kernel' if len(self.kernels) == 1 else 'kernels'} at {' and '.join(self.kernels)}",
                f"{'a fallthrough' if len(self.fallthroughs) == 1 else 'fallthroughs'} at "
                f"{' and '.join(self.fallthroughs)}"]
        held = [words for words, keys in zip(held, (self.kernels, self.fallthroughs)) if keys]
        op = "an operator with " + (", ".join(held) or "no kernels")
        context = [("under no_grad", self.no_grad), ("under inference_mode", self.inference_mode),
                   ("under autocast('cpu')", self.autocast), (f"excluding {' and '.join(self.exclude)}", self.exclude),
                   (f"including {' and '.join(self.include)}", self.include)]
        called = f"called on {' and '.join(t.describe() for t in self.tensors)}"
        return ", ".join([op, called] + [words for words, on in context if on])

    def toy_tensors(self) -> list[toy.KeySet]:
        """The tensors' keys, as the toy derives them from the facts of each tensor."""
        return [toy.tensor_keys(t.device, t.inference, t.subclass) for t in self.tensors]

    def toy_state(self) -> toy.ThreadLocalState:
        """The thread-local state, as the toy derives it from the case's context managers and guards."""
        return toy.thread_local_state(self.inference_mode, self.autocast, self.exclude, self.include)


def _registrations(choices: tuple[str, ...]) -> Case:
    held = dict(zip(REGISTRATIONS, choices))
    return Case(tuple(key for key, what in held.items() if what == "kernel"),
                tuple(key for key, what in held.items() if what == "fallthrough"))


def _subset(keys: tuple[str, ...]):
    return st.lists(st.sampled_from(keys), unique=True, max_size=2).map(
        lambda chosen: tuple(key for key in keys if key in chosen))


_flag = st.sampled_from((False, False, False, True))  # shrinks to False
_tensor = st.builds(TensorCase, st.sampled_from(("cpu", "meta")), st.booleans(), _flag, _flag).map(
    lambda t: replace(t, requires_grad=t.requires_grad and not t.inference))
_registered = st.tuples(*[st.sampled_from(choices) for choices in REGISTRATIONS.values()]).map(_registrations)
_tensors = st.lists(_tensor, min_size=1, max_size=2).map(tuple)
_excluded, _included = _subset(EXCLUDABLE), _subset(INCLUDABLE)


@st.composite
def cases(draw) -> Case:
    """An operator's registrations, the tensors of the call and the thread-local state around it."""
    return replace(draw(_registered), tensors=draw(_tensors),
                   no_grad=draw(_flag), inference_mode=draw(_flag), autocast=draw(_flag),
                   exclude=draw(_excluded), include=draw(_included))


# ---- running a case on PyTorch ---------------------------------------------------------------------------
RAN: list[str] = []  # what our kernels and __torch_dispatch__ record, in order


class Recorded(torch.Tensor):
    """A tensor subclass whose __torch_dispatch__ only notes that it ran."""
    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        RAN.append("__torch_dispatch__")
        return torch.empty(0)


def recording_kernel(key: str):
    def kernel(*args, **kwargs):
        RAN.append(key)  # before anything that could raise: the first entry is the kernel that ran
        return torch.empty(0)
    return kernel


def make_tensor(spec: TensorCase) -> torch.Tensor:
    with torch.inference_mode() if spec.inference else contextlib.nullcontext():
        t = torch.ones(1, device=spec.device)
        if spec.subclass:
            return torch.Tensor._make_subclass(Recorded, t, spec.requires_grad)
    return t.requires_grad_(spec.requires_grad)


@contextlib.contextmanager
def thread_state(case: Case):
    """The case's thread-local state, entered in the order toy.thread_local_state applies it."""
    with contextlib.ExitStack() as stack:
        if case.no_grad:
            stack.enter_context(torch.no_grad())
        if case.inference_mode:
            stack.enter_context(torch.inference_mode())
        if case.autocast:
            stack.enter_context(torch.autocast("cpu"))
        if case.exclude:
            excluded = [torch._C.DispatchKeySet(torch._C._dispatch_key_parse(key)) for key in case.exclude]
            stack.enter_context(torch._C._ExcludeDispatchKeyGuard(functools.reduce(operator.or_, excluded)))
        for key in case.include:
            stack.enter_context(torch._C._IncludeDispatchKeyGuard(torch._C._dispatch_key_parse(key)))
        yield


_names = itertools.count()


@contextlib.contextmanager
def real_operator(case: Case):
    """A fresh operator `NAMESPACE::opN` with the case's registrations, unregistered on exit."""
    name = f"op{next(_names)}"
    lib = torch.library.Library(NAMESPACE, "FRAGMENT")
    try:
        lib.define(f"{name}(Tensor a, Tensor? b=None) -> Tensor")
        for key in REGISTRATIONS:
            if key in case.kernels or key in case.fallthroughs:
                fn = torch.library.fallthrough_kernel if key in case.fallthroughs else recording_kernel(key)
                lib.impl(name, fn, key)
        yield f"{NAMESPACE}::{name}", getattr(getattr(torch.ops, NAMESPACE), name).default
    finally:
        lib._destroy()


@dataclass(frozen=True)
class Outcome:
    kind: str  # "kernel" (ours, named by its registration key), "fallback" (PyTorch's, by its key), "error"
    name: str  # the key, or the exception's type
    message: str = ""  # the error's first sentence, the operator's name replaced by "op"
    what: str = ""  # for a fallback of the toy: the toy's name for it ("ADInplaceOrView fallthrough", ...)

    def describe(self) -> str:
        if self.kind == "error":
            return f"raises {self.name}: {self.message.rstrip('.')}"
        if self.kind == "fallback" and self.name == "Python":
            return "runs the Python fallback, which calls __torch_dispatch__"
        if self.kind == "fallback":
            return f"runs the {self.what or self.name + ' fallback'}"
        return f"runs the {self.name} kernel"

    def matches(self, other: Outcome) -> bool:
        # The toy predicts an error's first sentence.
        return (self.kind, self.name) == (other.kind, other.name) and other.message.startswith(self.message)


def first_sentence(message: str, op_name: str) -> str:
    return message.split(". ")[0].rstrip(".").replace(op_name, "op") + "."


def toy_outcome(call: toy.Call, op_name: str) -> Outcome:
    last = call.path[-1]
    if call.error:
        return Outcome("error", "NotImplementedError", first_sentence(call.error, op_name))
    if last.source == "fallback":
        return Outcome("fallback", last.key, what=last.kernel.name)
    return Outcome("kernel", last.source)


@dataclass
class Observed:
    name: str  # the real operator's name, "toy_dispatcher::opN"
    outcome: Outcome
    tensor_keys: list[toy.KeySet]  # each tensor's keys, as torch._C._dispatch_keys gives them
    tls: toy.ThreadLocalState  # the thread's include and exclude sets during the call
    keys: toy.KeySet  # the call's key set: the tensors' keys and the include set, minus the exclude set
    table: dict[str, dispatch.Registration]  # the operator's computed table (dispatch.registrations)


def run_real(case: Case) -> Observed:
    """Define the case's operator, call it under the case's state, and observe what PyTorch ran."""
    tensors = [make_tensor(spec) for spec in case.tensors]
    with real_operator(case) as (name, op):
        table = dispatch.registrations(name)
        RAN.clear()
        with thread_state(case):
            tls = toy.real_thread_local_state()
            keys = toy.from_torch(dispatch.call_key_set(*tensors))
            try:
                op(*tensors)
                error = None
            except Exception as e:  # noqa: BLE001 - the error is what the toy predicts
                error = e
        if RAN:
            outcome = (Outcome("fallback", "Python") if RAN[0] == "__torch_dispatch__" else Outcome("kernel", RAN[0]))
        elif error is not None:
            outcome = Outcome("error", type(error).__name__, first_sentence(str(error), name))
        else:
            outcome = Outcome("kernel", "none of our")
        return Observed(name, outcome, [toy.from_torch(torch._C._dispatch_keys(t)) for t in tensors], tls, keys,
                        table)


# ---- the property ----------------------------------------------------------------------------------------
class Mismatch(AssertionError):
    """The toy under test does not run what PyTorch runs for `case`; `sentence` says how, in one sentence."""

    def __init__(self, case: Case, sentence: str):
        super().__init__(sentence)
        self.case, self.sentence = case, sentence


def explain(case: Case, pytorch: Outcome, yours: Outcome) -> str:
    """One sentence: what the case is, what PyTorch does, what the toy under test does."""
    return f"For {case.describe()}, PyTorch {pytorch.describe()}; yours {yours.describe()}."


def check_case(case: Case, call_key_set=toy.call_key_set, computed_entry=toy.computed_entry) -> Outcome:
    """PyTorch's outcome for `case`; raise Mismatch unless a toy built from these two functions runs the same."""
    before = toy.real_thread_local_state()
    real = run_real(case)
    assert toy.real_thread_local_state() == before, "the case leaked thread-local state"
    tensors = case.toy_tensors()
    if tensors != real.tensor_keys:
        raise Mismatch(case, f"For {case.describe()}, the tensors' keys are {real.tensor_keys}; toy: {tensors}.")
    tls = case.toy_state()
    if tls != real.tls:
        raise Mismatch(case, f"For {case.describe()}, the thread-local state is {real.tls}; toy: {tls}.")
    op = toy.Operator.make(real.name, case.kernels, case.fallthroughs)
    try:
        call = toy.dispatch(op, tensors, tls, call_key_set=call_key_set, computed_entry=computed_entry)
    except Exception as e:  # noqa: BLE001 - a bug of the functions under test is a counterexample too
        yours = f"{type(e).__name__}: {e}".rstrip(".")
        raise Mismatch(case, f"For {case.describe()}, PyTorch {real.outcome.describe()}; yours raises {yours}.") from e
    predicted = toy_outcome(call, real.name)
    if not predicted.matches(real.outcome):
        raise Mismatch(case, explain(case, real.outcome, predicted))
    return real.outcome


def _settings(max_examples: int):
    return settings(max_examples=max_examples, derandomize=True, deadline=None, database=None,
                    verbosity=Verbosity.quiet, report_multiple_bugs=False, suppress_health_check=list(HealthCheck))


def find_counterexample(call_key_set=toy.call_key_set, computed_entry=toy.computed_entry,
                        max_examples: int = CASES) -> str | None:
    """Run the property on `max_examples` generated cases (a fixed seed: the same cases on every run); the
    sentence that describes the first counterexample, shrunk, or None when every case agrees."""
    found = counterexample(call_key_set, computed_entry, max_examples)
    return None if found is None else found.sentence


def counterexample(call_key_set=toy.call_key_set, computed_entry=toy.computed_entry,
                   max_examples: int = CASES) -> Mismatch | None:
    """As find_counterexample, but the Mismatch itself: its `case` and its `sentence`."""
    @_settings(max_examples)
    @given(cases())
    def property_(case):
        check_case(case, call_key_set, computed_entry)

    try:
        property_()
    except Mismatch as mismatch:
        return mismatch
    return None


def run_cases(max_examples: int, call_key_set=toy.call_key_set,
              computed_entry=toy.computed_entry) -> list[tuple[Case, Outcome]]:
    """Every generated case the property checked, with what PyTorch did; raises the first Mismatch."""
    checked = []

    @_settings(max_examples)
    @given(cases())
    def property_(case):
        checked.append((case, check_case(case, call_key_set, computed_entry)))

    property_()
    return checked


def diagnose(case: Case, call_key_set, computed_entry) -> str:
    """Which of the two functions answers wrongly for `case`, beside PyTorch's own answer: the call's key set (the
    tensors' keys and the include set, minus the exclude set), or a computed table entry; "" when neither does by
    itself (the fallthroughs masked out, or a pass-on fallback, make the difference)."""
    real = run_real(case)
    yours = call_key_set(case.toy_tensors(), case.toy_state())
    if yours != real.keys:
        return f"your call_key_set gives {yours!r} where PyTorch's key set is {real.keys!r}"
    theirs = real_table(case)
    op = toy.Operator.make(real.name, case.kernels, case.fallthroughs)
    # The keys of the call first, highest first: the entries the call looked up.
    keys = [key for key in reversed(real.keys.keys()) if key in toy.TOY_KEYS]
    for key in keys + [key for key in toy.TOY_KEYS if key not in keys]:
        mine = _toy_entry_words(computed_entry(op, key))
        if mine != theirs[key]:
            return f"your computed_entry gives {key} {mine} where PyTorch's table holds {theirs[key]}"
    return ""


def real_table(case: Case) -> dict[str, str]:
    """For each of the toy's keys, what PyTorch's table for the case's operator holds, in words. Where it holds a
    kernel of ours, calling that computed kernel (torch._C._dispatch_get_computed_kernel_for_dispatch_key) tells
    which registration filled the entry: each records its key when it runs."""
    words = {}
    with real_operator(case) as (name, _):
        table = dispatch.registrations(name)
        for key in toy.TOY_KEYS:
            found = table.get(key)
            if found is None:
                words[key] = "nothing"
            elif found.kind == "backend fallback":
                words[key] = "PyTorch's fallthrough" if found.fallthrough else "PyTorch's fallback"
            elif found.fallthrough:  # a fallthrough of ours runs nothing; only its registration key tells
                words[key] = "a fallthrough registered at " + (key if key in case.fallthroughs else
                                                               _alias_fallthrough(case, key))
            else:
                kernel = torch._C._dispatch_get_computed_kernel_for_dispatch_key(name, getattr(torch._C.DispatchKey,
                                                                                              key))
                RAN.clear()
                kernel.call_boxed(torch._C.DispatchKeySet(torch._C.DispatchKey.CPU), torch.ones(1))
                words[key] = f"the kernel registered at {RAN[0]}"
    return words


def _alias_fallthrough(case: Case, key: str) -> str:
    """The alias key whose fallthrough fills `key` (the generator registers fallthroughs to Autograd only)."""
    return next(alias for alias in case.fallthroughs if alias in toy.ALIAS_FUNCTIONALITIES
                and toy.alias_covers(alias, key))


def _toy_entry_words(entry: toy.Entry) -> str:
    if entry.kernel is None:
        return "nothing"
    if entry.source == "fallback":
        return "PyTorch's fallthrough" if entry.fallthrough else "PyTorch's fallback"
    return f"{'a fallthrough' if entry.fallthrough else 'the kernel'} registered at {entry.source}"


# ---- tables ----------------------------------------------------------------------------------------------
def runtime_key_names() -> list[str]:
    """The names torch._C.DispatchKey gives runtime keys (no alias keys, no markers, no bare per-backend
    functionality such as Dense)."""
    names = []
    for name, key in torch._C.DispatchKey.__members__.items():
        if name.startswith(("StartOf", "EndOf")) or torch._C._dispatch_is_alias_key(key):
            continue
        if name == "Undefined" or toy.split_key(name)[0] not in toy.PER_BACKEND or toy.split_key(name)[1]:
            names.append(name)
    return names


_DUMP_LINE = re.compile(r"^(?P<key>\w+)(?:\[alias\])?: registered at (?P<file>.+?):\d+ :: .* \[ (?P<forms>[^\]]*) \]$")


def registered(op_name: str) -> toy.Operator:
    """The operator's registrations as torch._C._dispatch_dump lists them (the active kernel of each key, alias
    keys included), each kernel named after the file that registered it."""
    kernels = {}
    for line in torch._C._dispatch_dump(op_name).splitlines():
        if match := _DUMP_LINE.match(line):
            fallthrough = "fallthrough" in match["forms"].split()
            kernels[match["key"]] = toy.Kernel(match["file"], fallthrough=fallthrough)
    return toy.Operator(op_name, kernels)


def table_difference(op_name: str, op: toy.Operator, keys=toy.TOY_KEYS, computed_entry=toy.computed_entry) -> dict:
    """{key: (PyTorch's entry, the toy's)} for `keys` where the two computed tables differ. An entry is compared as
    (the word the dump prints, fallthrough or not, the file that registered the kernel); a fallback's file is
    PyTorch's, which the toy does not know."""
    real = dispatch.registrations(op_name)
    differences = {}
    for key in keys:
        entry = computed_entry(op, key)
        ours = None if entry.kernel is None else (
            entry.why, entry.fallthrough, None if entry.why == "backend fallback" else entry.kernel.name)
        theirs = None if key not in real else (
            real[key].kind, real[key].fallthrough, None if real[key].kind == "backend fallback" else real[key].file)
        if ours != theirs:
            differences[key] = (theirs, ours)
    return differences


# ---- the paths of our C++ kernels ------------------------------------------------------------------------
@dataclass(frozen=True)
class Hop:
    """One kernel of a recorded path (dispatch.record_path) beside the toy's prediction for it."""
    how: str  # "call": from Python; "guard": reached under a guard (a redispatch inside it, or a fresh call under it:
    # a recording tells them apart by exclude sets only, not by call site); "redispatch": the caller's keys below its own
    keys: toy.KeySet  # the key set the toy computed for this hop, fallthroughs masked out
    recorded: tuple[str, str]  # (the key our kernel is registered for, its file) as the recording saw it
    predicted: tuple[str, str]  # the same, for the kernel the toy's table holds at the key it looks up


def _excluded_keys(names) -> toy.KeySet:
    """Names as dispatch.record_path gives them ("Autograd" for the autograd functionality) as a toy KeySet."""
    keys = toy.KeySet()
    for name in names:
        keys |= toy.AUTOGRAD_KEYS if name == "Autograd" else toy.KeySet.of(name)
    return keys


def predicted_path(op_name: str, tensors: list[torch.Tensor], tls: toy.ThreadLocalState,
                   recorded: dispatch.CallPath) -> list[Hop]:
    """For each kernel of a recorded call of `op_name` on `tensors` under `tls` (the thread's sets when the call
    began), the kernel the toy predicts. The toy models kernels that stop, so each hop is replayed from what the
    recording saw: a kernel entered with more keys excluded than its caller was reached under a guard, and the
    toy replays it as a fresh call under that guard, its key set computed afresh from the tensors and the grown
    exclude set (a recording sees exclude sets, not call sites: a redispatch made inside the guard, as the
    ADInplaceOrView kernel of myadd_inplace makes, is replayed the same way, and lands on the same kernel); a kernel
    entered with nothing newly excluded was reached by a redispatch with the caller's keys below the caller's own
    key. Every kernel of the path must serve `op_name` (our kernels call their own operator again)."""
    op = registered(op_name)
    tensor_keys = [toy.from_torch(torch._C._dispatch_keys(t)) for t in tensors]
    hops: list[Hop] = []
    for index, step in enumerate(recorded.steps):
        parent = recorded.parent(index)
        newly_excluded = parent is not None and set(step.excluded) - set(recorded.steps[parent].excluded)
        if parent is None or newly_excluded:
            state = replace(tls, excluded=tls.excluded | _excluded_keys(step.excluded))
            keys = toy.mask_fallthroughs(op, toy.call_key_set(tensor_keys, state))
            how = "guard" if newly_excluded else "call"
        else:
            caller = hops[parent]
            # Our autograd kernels pass keys & after_autograd_keyset, which drops AutogradOther too; below(the
            # caller's key) keeps it, but no tensor carries AutogradOther (LEFT_OUT), so the two sets are equal here.
            keys = caller.keys.below(toy.computed_entry(op, caller.keys.highest_key()).key)
            how = "redispatch"
        ran = toy.follow(op, keys)
        entry = ran.path[-1]
        hops.append(Hop(how, ran.keys, (step.key, step.source),
                        (entry.source, dispatch.repo_path(entry.kernel.name) or entry.kernel.name
                         if entry.kernel else "")))
    return hops
