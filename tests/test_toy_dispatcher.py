"""myops/toy_dispatcher.py against PyTorch's dispatcher: key sets, tables, and the kernel thousands of generated
calls run.

The differential property (`check_case`) defines a fresh operator with Python kernels on random keys, calls it on
random tensors under random thread-local state, and asserts that the toy predicts the kernel that ran (or the error
raised). It takes the toy's `call_key_set` and `computed_entry` as parameters, so `find_counterexample` can run
other versions of them (a learner's, or the broken ones below) and describe the first shrunk counterexample in one
sentence. TOY_DISPATCHER_CASES sets the number of generated calls (1000 by default).
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import operator
import os
import re
from dataclasses import dataclass, replace

import pytest
import torch
from hypothesis import HealthCheck, Verbosity, given, settings
from hypothesis import strategies as st

from myops import dispatch
from myops import toy_dispatcher as toy

CASES = int(os.environ.get("TOY_DISPATCHER_CASES", "1000"))
NAMESPACE = "toy_dispatcher"
KEYS = torch._C.DispatchKey.__members__

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
    name: str
    outcome: Outcome
    tensor_keys: list[toy.KeySet]
    tls: toy.ThreadLocalState


def run_real(case: Case) -> Observed:
    tensors = [make_tensor(spec) for spec in case.tensors]
    with real_operator(case) as (name, op):
        RAN.clear()
        with thread_state(case):
            tls = toy.real_thread_local_state()
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
        return Observed(name, outcome, [toy.from_torch(torch._C._dispatch_keys(t)) for t in tensors], tls)


# ---- the property ----------------------------------------------------------------------------------------
class Mismatch(AssertionError):
    def __init__(self, case: Case, sentence: str):
        super().__init__(sentence)
        self.case, self.sentence = case, sentence


def explain(case: Case, pytorch: Outcome, yours: Outcome) -> str:
    """One sentence: what the case is, what PyTorch does, what the toy under test does."""
    return f"For {case.describe()}, PyTorch {pytorch.describe()}; yours {yours.describe()}."


def check_case(case: Case, call_key_set=toy.call_key_set, computed_entry=toy.computed_entry) -> None:
    """Raise Mismatch unless a toy built from these two functions runs what PyTorch runs for `case`."""
    before = toy.real_thread_local_state()
    real = run_real(case)
    assert toy.real_thread_local_state() == before, "the case leaked thread-local state"
    tensors = [toy.tensor_keys(t.device, t.inference, t.subclass) for t in case.tensors]
    if tensors != real.tensor_keys:
        raise Mismatch(case, f"For {case.describe()}, the tensors' keys are {real.tensor_keys}; toy: {tensors}.")
    tls = toy.thread_local_state(case.inference_mode, case.autocast, case.exclude, case.include)
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


def find_counterexample(call_key_set=toy.call_key_set, computed_entry=toy.computed_entry,
                        max_examples: int = CASES) -> str | None:
    """Run the property on generated cases; the sentence describing the shrunk counterexample, or None."""
    @settings(max_examples=max_examples, derandomize=True, deadline=None, database=None, verbosity=Verbosity.quiet,
              report_multiple_bugs=False, suppress_health_check=list(HealthCheck))
    @given(cases())
    def property_(case):
        check_case(case, call_key_set, computed_entry)

    try:
        property_()
    except Mismatch as mismatch:
        return mismatch.sentence
    return None


def test_the_toy_runs_what_pytorch_runs():
    checked = []

    @settings(max_examples=CASES, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(cases())
    def property_(case):
        check_case(case)
        checked.append(case)

    property_()
    assert len(checked) >= CASES
    # Every generated operator is gone again.
    assert not [name for name in torch._C._dispatch_get_all_op_names() if name.startswith(NAMESPACE + "::")]


# Three broken toys: each must fail, with a short counterexample that names the keys involved.
def autograd_before_implicit(op, key):
    """Alias precedence swapped: the Autograd alias is consulted before CompositeImplicitAutograd."""
    if key not in op.kernels and "Autograd" in op.kernels and toy.alias_covers("Autograd", key):
        return toy.Entry(key, op.kernels["Autograd"], "Autograd", "autograd kernel")
    return toy.computed_entry(op, key)


def ignores_exclude(tensors, tls):
    """The thread-local exclude set ignored."""
    return toy.call_key_set(tensors, replace(tls, excluded=toy.KeySet()))


def fallthrough_as_kernel(op, key):
    """A fallthrough entry treated as a kernel that runs."""
    entry = toy.computed_entry(op, key)
    return replace(entry, kernel=replace(entry.kernel, fallthrough=False)) if entry.fallthrough else entry


@pytest.mark.parametrize("functions, words", [
    (dict(computed_entry=autograd_before_implicit), ("CompositeImplicitAutograd", "Autograd kernel")),
    (dict(call_key_set=ignores_exclude), ("yours runs",)),
    (dict(computed_entry=fallthrough_as_kernel), ("fallthrough",)),
], ids=["alias-precedence", "tls-exclude", "fallthrough"])
def test_broken_toys_fail_with_a_short_counterexample(functions, words):
    sentence = find_counterexample(**functions, max_examples=300)
    assert sentence is not None
    assert len(sentence) < 300 and sentence.count(". ") == 0 and all(word in sentence for word in words), sentence
    assert any(key in sentence for key in toy.TOY_KEYS[1:] + tuple(REGISTRATIONS)), sentence


def test_left_out_corners_are_in_the_docstring():
    assert all(corner in toy.__doc__ for corner in toy.LEFT_OUT)


# ---- 1. key sets -----------------------------------------------------------------------------------------
def test_functionality_order_is_the_installed_enum():
    # Every name the toy types in sits at the bit the installed torch gives it (_dispatch_key_parse also knows the
    # names torch._C.DispatchKey leaves out, e.g. Tracer).
    for index, name in enumerate(toy.FUNCTIONALITIES):
        bits = torch._C.DispatchKeySet(torch._C._dispatch_key_parse(name)).raw_repr()
        assert bits == 1 << (len(toy.BACKENDS) + index), name
    for index, name in enumerate(toy.BACKENDS):  # the runtime key Dense + backend sets the backend's bit
        assert torch._C.DispatchKeySet(torch._C._dispatch_key_parse(name)).raw_repr() & 0xFFFF == 1 << index, name
    every = toy.KeySet(frozenset(toy.FUNCTIONALITIES), frozenset(toy.BACKENDS))
    assert every.raw() == torch._C._dispatch_keyset_full().raw_repr()  # nothing above PythonDispatcher
    assert toy.AUTOCAST_KEYS == tuple(f for f in toy.FUNCTIONALITIES if f.startswith("Autocast"))
    # The course's own reading of the order (myops.dispatch) agrees.
    named = dispatch.functionality_keys()
    assert [f for f in reversed(toy.FUNCTIONALITIES) if f in named] == named
    assert dispatch.priority_order(toy.TOY_KEYS[1:]) == sorted(
        toy.TOY_KEYS[1:], key=lambda key: toy.KeySet.of(key).raw(), reverse=True)


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


def test_runtime_keys_are_a_functionality_and_a_backend():
    names = runtime_key_names()
    assert {"CPU", "Meta", "AutogradCPU", "AutogradMeta", "QuantizedMeta", "SparseCsrCPU", "Python"} <= set(names)
    for name in names:
        raw = torch._C.DispatchKeySet(KEYS[name]).raw_repr()
        assert toy.KeySet.of(name).raw() == raw, name
        assert toy.KeySet.from_raw(raw).highest_key() == name
        assert toy.runtime_key(*toy.split_key(name)) == name


key_sets = st.lists(st.sampled_from(runtime_key_names()), max_size=6).map(lambda keys: toy.KeySet.of(*keys))


@settings(max_examples=300, derandomize=True, deadline=None, database=None)
@given(key_sets, key_sets)
def test_key_set_operations_are_cpps(a, b):
    ta, tb = (torch._C.DispatchKeySet.from_raw_repr(ks.raw()) for ks in (a, b))
    assert (a | b).raw() == (ta | tb).raw_repr()
    assert (a & b).raw() == (ta & tb).raw_repr()
    assert (a - b).raw() == (ta - tb).raw_repr()  # keeps a's backend bits
    assert toy.KeySet.from_raw((ta | tb).raw_repr()) == a | b
    if (a | b).functionalities:
        assert (a | b).highest_key() == torch._C._dispatch_key_name((ta | tb).highestPriorityTypeId())
    assert repr(a) == repr(ta).replace("DispatchKeySet", "KeySet")


def test_a_per_backend_key_brings_its_backend_bit_in_and_leaves_it_behind():
    cpu = toy.tensor_keys("cpu")
    # Excluding AutogradMeta removes the autograd functionality, so AutogradCPU goes too.
    assert (cpu - toy.KeySet.of("AutogradMeta")).keys() == ["CPU", "ADInplaceOrView", "AutocastCPU"]
    # Including it adds the Meta bit, the highest backend: a CPU tensor's call now looks up Meta's entries.
    with_meta = toy.call_key_set([cpu], toy.thread_local_state(include=["AutogradMeta"]))
    assert with_meta.highest_key() == "AutogradMeta"
    assert with_meta.below("AutogradOther").highest_key() == "ADInplaceOrView"
    assert with_meta.below("ADInplaceOrView").highest_key() == "BackendSelect"
    assert with_meta.below("BackendSelect").highest_key() == "Meta"


@pytest.mark.parametrize("spec", [TensorCase(*facts) for facts in itertools.product(
    ["cpu", "meta"], [False, True], [False, True], [False, True]) if not (facts[1] and facts[2])], ids=str)
def test_tensor_keys(spec):
    # requires_grad changes nothing: every tensor made outside inference_mode has its backend's autograd key.
    t = make_tensor(spec)
    assert toy.tensor_keys(spec.device, spec.inference, spec.subclass) == toy.from_torch(torch._C._dispatch_keys(t))


def test_thread_local_state():
    assert toy.real_thread_local_state() == toy.DEFAULT_TLS
    for inference_mode, autocast, exclude, include in itertools.product(
            [False, True], [False, True], [(), ("AutogradCPU",), ("CPU", "AutocastCPU")], [(), ("AutogradMeta",)]):
        case = Case(inference_mode=inference_mode, autocast=autocast, exclude=exclude, include=include)
        with thread_state(case):
            real = toy.real_thread_local_state()
        assert toy.thread_local_state(inference_mode, autocast, exclude, include) == real, case
    assert toy.real_thread_local_state() == toy.DEFAULT_TLS


# ---- 2. tables -------------------------------------------------------------------------------------------
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


def table_difference(op_name: str, op: toy.Operator) -> dict:
    """{key: (PyTorch's entry, the toy's)} for the toy's keys where the two computed tables differ."""
    real = dispatch.registrations(op_name)
    differences = {}
    for key, entry in toy.computed_table(op).items():
        ours = None if entry.kernel is None else (
            entry.why, entry.fallthrough, None if entry.why == "backend fallback" else entry.kernel.name)
        theirs = None if key not in real else (
            real[key].kind, real[key].fallthrough, None if real[key].kind == "backend fallback" else real[key].file)
        if ours != theirs:
            differences[key] = (theirs, ours)
    return differences


def test_backend_fallbacks_are_pytorchs():
    with real_operator(Case()) as (name, _):
        real = dispatch.registrations(name)
    for key in toy.TOY_KEYS:
        fallback = toy.BACKEND_FALLBACKS.get(key)
        assert (fallback is None) == (key not in real), key
        if fallback is not None:
            assert real[key].kind == "backend fallback" and real[key].fallthrough == fallback.fallthrough, key


def test_alias_keys_cover_what_pytorch_says():
    for alias in toy.ALIAS_FUNCTIONALITIES:
        for key in runtime_key_names():
            if key != "Undefined":
                assert toy.alias_covers(alias, key) == torch._C._dispatch_is_included_in_alias(
                    KEYS[key], KEYS[alias]), (alias, key)


ATEN_OPS = ["aten::add.Tensor", "aten::add_.Tensor", "aten::mm", "aten::empty.memory_format", "aten::linear",
            "aten::matmul", "aten::view", "aten::transpose.int", "aten::dropout", "aten::conv2d", "aten::relu",
            "aten::relu_", "aten::sum", "aten::detach", "aten::alias", "aten::ones", "aten::to.dtype", "aten::copy_",
            "aten::_to_copy", "aten::cat", "aten::softmax.int", "aten::_softmax", "aten::layer_norm", "aten::zeros",
            "aten::expand", "aten::reshape", "aten::clone", "aten::index.Tensor", "aten::lift_fresh", "aten::item",
            "aten::_local_scalar_dense", "aten::randn", "aten::arange", "aten::addmm", "aten::bmm",
            "aten::embedding", "aten::narrow", "aten::flatten.using_ints", "aten::squeeze.dim", "aten::new_empty",
            "aten::zero_", "aten::fill_.Scalar", "aten::resize_", "aten::set_.source_Tensor", "aten::is_nonzero",
            "aten::size.int", "aten::contiguous", "aten::t", "aten::einsum", "aten::batch_norm",
            "aten::native_batch_norm", "aten::_unsafe_view", "aten::as_strided", "aten::split.Tensor",
            "aten::unbind.int", "aten::where.self", "aten::max_pool2d", "aten::gelu", "aten::abs", "aten::abs_"]


def test_aten_tables_are_pytorchs():
    assert len(ATEN_OPS) >= 50
    kinds = set()
    for name in ATEN_OPS:
        op = registered(name)
        assert op.kernels, name
        assert table_difference(name, op) == {}, name
        kinds |= {entry.why for entry in toy.computed_table(op).values()}
    assert kinds >= {"kernel", "default backend kernel", "math kernel", "autograd kernel", "backend fallback"}


@settings(max_examples=min(CASES, 300), derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(cases())
def test_generated_tables_are_pytorchs(case):
    with real_operator(case) as (name, _):
        op = registered(name)
        assert {key for key, k in op.kernels.items() if not k.fallthrough} == set(case.kernels)
        assert {key for key, k in op.kernels.items() if k.fallthrough} == set(case.fallthroughs)
        assert table_difference(name, op) == {}, case


# ---- 3. calls --------------------------------------------------------------------------------------------
def test_a_path_through_the_autograd_fallback():
    op = toy.Operator.make("toy::f", kernels=["CPU"], fallthroughs=[])
    call = toy.dispatch(op, [toy.tensor_keys("cpu")])
    assert [(e.key, e.source) for e in call.path] == [("AutogradCPU", "fallback"), ("CPU", "CPU")]
    assert call.keys.keys() == ["CPU", "AutogradCPU"]  # BackendSelect, ADInplaceOrView: fallthroughs
    assert "autograd fallback" in call.format()
    missing = toy.dispatch(op, [toy.tensor_keys("meta")])
    assert missing.error.startswith("toy::f: attempted to run this operator with Meta tensors")
    # Excluding CPU (the Dense functionality) leaves no functionality: the Undefined entry, which
    # CompositeExplicitAutograd fills.
    excluded = toy.thread_local_state(exclude=["CPU"])
    assert toy.dispatch(op, [toy.tensor_keys("cpu")], excluded).error.startswith("There were no tensor arguments")
    composite = toy.Operator.make("toy::g", kernels=["CompositeExplicitAutograd"])
    assert toy.dispatch(composite, [toy.tensor_keys("cpu")], excluded).path[-1].key == "Undefined"


def test_a_subclass_passes_two_fallbacks_before_its_torch_dispatch():
    op = toy.Operator.make("toy::f", kernels=["CPU"])
    call = toy.dispatch(op, [toy.tensor_keys("cpu", python_subclass=True)])
    assert [(e.key, e.kernel.name) for e in call.path] == [
        ("PythonTLSSnapshot", "PythonTLSSnapshot fallback"), ("AutogradCPU", "autograd fallback"),
        ("Python", "Python fallback")]


def test_the_counterexample_sentence():
    case = Case(kernels=("Autograd", "CompositeImplicitAutograd"), tensors=(TensorCase("meta", True),),
                no_grad=True)
    sentence = explain(case, Outcome("kernel", "CompositeImplicitAutograd"), Outcome("kernel", "Autograd"))
    assert sentence == ("For an operator with kernels at Autograd and CompositeImplicitAutograd, called on a meta "
                        "tensor that requires grad, under no_grad, PyTorch runs the CompositeImplicitAutograd "
                        "kernel; yours runs the Autograd kernel.")


# ---- 4. boxed --------------------------------------------------------------------------------------------
def test_one_boxed_fallback_serves_two_operators():
    fallbacks = {**toy.BACKEND_FALLBACKS, "AutocastCPU": toy.round_below("AutocastCPU")}

    def binary(name, fn):
        kernel = toy.Kernel(f"{name} on CPU", fn=lambda op, keys, stack: fn(stack[0].value, stack[1].value))
        return toy.Operator(f"toy::{name}", {"CPU": kernel}, fallbacks)

    add, mul = binary("add", lambda a, b: a + b), binary("mul", lambda a, b: a * b)
    a, b = (toy.ToyTensor(v, toy.tensor_keys("cpu")) for v in (1.26, 2.04))
    assert toy.call_boxed(add, [a, b]) == pytest.approx(3.30)  # AutocastCPU excluded: the fallback is skipped
    autocast = toy.thread_local_state(autocast_cpu=True)
    assert toy.call_boxed(add, [a, b], autocast) == pytest.approx(1.3 + 2.0)
    assert toy.call_boxed(mul, [a, b], autocast) == pytest.approx(1.3 * 2.0)
    meta = toy.ToyTensor(1.0, toy.tensor_keys("meta"))
    with pytest.raises(NotImplementedError, match="toy::mul: attempted to run this operator with Meta tensors"):
        toy.call_boxed(mul, [meta, meta], autocast)
