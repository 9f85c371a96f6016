"""myops/toy_dispatcher.py against PyTorch's dispatcher: key sets, tables, and the kernel thousands of generated
calls run.

The differential property lives in myops/differential.py (notebook 18 and exercise 18's check use it too):
`check_case` defines a fresh operator with Python kernels on random keys, calls it on random tensors under random
thread-local state, and asserts that the toy predicts the kernel that ran (or the error raised). It takes the toy's
`call_key_set` and `computed_entry` as parameters, so `find_counterexample` can run other versions of them (a
learner's, or the broken ones below) and describe the first shrunk counterexample in one sentence.
TOY_DISPATCHER_CASES sets the number of generated calls (1000 by default, with a fixed seed).
"""
from __future__ import annotations

import contextlib
import itertools
import os
from dataclasses import replace

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from myops import differential, dispatch
from myops import toy_dispatcher as toy
from myops.differential import (NAMESPACE, REGISTRATIONS, Case, Outcome, TensorCase, cases, explain,
                                find_counterexample, make_tensor, real_operator, registered, runtime_key_names,
                                table_difference, thread_state)

CASES = int(os.environ.get("TOY_DISPATCHER_CASES", str(differential.CASES)))
KEYS = torch._C.DispatchKey.__members__


def test_the_toy_runs_what_pytorch_runs():
    checked = differential.run_cases(CASES)
    assert len(checked) >= CASES
    # The generated cases reach every kind of outcome: our kernels, PyTorch's fallbacks, errors.
    assert {outcome.kind for _, outcome in checked} == {"kernel", "fallback", "error"}
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
    # C++ prints the runtime keys; the toy prints the same, then the bits C++'s printing hides (none here: every
    # set is made of runtime keys).
    assert not a.hidden() and repr(a) == repr(ta).replace("DispatchKeySet", "KeySet")


def test_repr_shows_the_bits_cpp_printing_hides():
    no_backend = toy.KeySet(frozenset({"BackendSelect", "AutogradFunctionality"}))
    assert repr(torch._C.DispatchKeySet.from_raw_repr(no_backend.raw())) == "DispatchKeySet(BackendSelect)"
    assert repr(no_backend) == "KeySet(BackendSelect, AutogradFunctionality(no backend))"
    lonely = toy.KeySet(frozenset({"BackendSelect"}), frozenset({"CPU"}))
    assert repr(torch._C.DispatchKeySet.from_raw_repr(lonely.raw())) == "DispatchKeySet(BackendSelect)"
    assert repr(lonely) == "KeySet(BackendSelect, CPU(backend bit only))"


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


# ---- what a counterexample says about the functions under test ------------------------------------------
def test_diagnose_names_the_function_that_answers_wrongly():
    case = Case(kernels=("Autograd", "CompositeImplicitAutograd"))
    assert differential.diagnose(case, toy.call_key_set, autograd_before_implicit) == (
        "your computed_entry gives AutogradCPU the kernel registered at Autograd where PyTorch's table holds the "
        "kernel registered at CompositeImplicitAutograd")
    excluding = Case(kernels=("AutogradCPU",), exclude=("AutogradCPU",))
    assert differential.diagnose(excluding, ignores_exclude, toy.computed_entry) == (
        "your call_key_set gives KeySet(CPU, BackendSelect, ADInplaceOrView, AutogradCPU, AutocastCPU) where PyTorch's "
        "key set is KeySet(CPU, BackendSelect, ADInplaceOrView)")
    assert differential.diagnose(excluding, toy.call_key_set, toy.computed_entry) == ""


def test_the_real_table_names_the_registration_behind_each_entry():
    case = Case(kernels=("CPU", "CompositeExplicitAutogradNonFunctional", "CompositeExplicitAutograd"),
                fallthroughs=("Autograd",))
    words = differential.real_table(case)
    assert words["CPU"] == "the kernel registered at CPU"
    assert words["Meta"] == words["Undefined"] == "the kernel registered at CompositeExplicitAutogradNonFunctional"
    assert words["AutogradCPU"] == words["AutogradMeta"] == "a fallthrough registered at Autograd"
    assert (words["ADInplaceOrView"], words["Python"]) == ("PyTorch's fallthrough", "PyTorch's fallback")


@pytest.mark.parametrize("state", ["plain", "inference_mode", "autocast"])
def test_the_paths_of_our_kernels_are_the_toys(layers, state):
    x, y = torch.randn(3, 3, requires_grad=True), torch.randn(3, 3)
    context = {"plain": contextlib.nullcontext, "inference_mode": torch.inference_mode,
               "autocast": lambda: torch.autocast("cpu")}[state]
    for name, args in (("myadd_inplace", (y.clone(), y)), ("mymatmul", (x, y))):
        with context():
            tls = toy.real_thread_local_state()
            with dispatch.record_path(name) as path:
                getattr(torch.ops.myops, name)(*args)
        hops = differential.predicted_path(f"myops::{name}", list(args), tls, path)
        assert path.steps and [hop.predicted for hop in hops] == [hop.recorded for hop in hops], (state, name)
