"""torch.library.opcheck on the course's operators: each passes, the missing derivative and a view output are seen,
the inplace tag lets myadd_'s aliasing return through, and each broken operator of csrc/mistakes/opcheck.cpp fails
exactly the opcheck test it targets."""
import contextlib
import warnings

import pytest
import torch
import torch._functorch.config
from torch.library import opcheck

import myops


def sample(*shapes, requires_grad=False):
    return tuple(torch.randn(s, requires_grad=requires_grad) for s in shapes)


@pytest.mark.parametrize("op, args", [
    ("myadd", sample((3, 4), (3, 4))),
    ("myadd", sample((3, 4), (3, 4), requires_grad=True)),
    ("mymatmul", sample((3, 4), (4, 2))),
    ("mymatmul", sample((3, 4), (4, 2), requires_grad=True)),
    ("myrmsnorm", sample((3, 4), (4,))),
    ("myadd_inplace", sample((3, 4), (3, 4))),
    ("myadd_", sample((3, 4), (3, 4))),
], ids=lambda v: v if isinstance(v, str) else ("grad" if v[0].requires_grad else "nograd"))
def test_opcheck_passes(layers, op, args):
    opcheck(getattr(torch.ops.myops, op).default, args)


def test_opcheck_sees_the_missing_derivative(layers):
    results = opcheck(torch.ops.myops.myrmsnorm.default, sample((3, 4), (4,), requires_grad=True),
                      raise_exception=False)
    assert results["test_autograd_registration"] == "SUCCESS"  # the NotImplemented fallback is registered
    assert "derivative for myops::myrmsnorm is not implemented" in str(results["test_aot_dispatch_dynamic"])


def test_opcheck_refuses_a_view_output(layers):
    results = opcheck(torch.ops.myops.mytranspose.default, sample((3, 4)), raise_exception=False)
    assert results["test_schema"] == results["test_faketensor"] == "SUCCESS"
    assert "Found a custom (non-ATen) operator whose output has alias annotations" in str(
        results["test_aot_dispatch_dynamic"])


def test_the_inplace_tag_is_what_lets_myadd__through_functionalization(layers):
    # The same schema and kernel as myadd_, without csrc/schema.cpp's torch.Tag.inplace.
    library = torch.library.Library("untagged_test", "DEF")
    library.define("myadd_(Tensor(a!) self, Tensor other) -> Tensor(a!)")
    library.impl("myadd_", torch.ops.myops.myadd_.default, "CompositeExplicitAutograd")
    untagged = opcheck(torch.ops.untagged_test.myadd_.default, sample((3, 4), (3, 4)), raise_exception=False)
    tagged = opcheck(torch.ops.myops.myadd_.default, sample((3, 4), (3, 4)), raise_exception=False)
    assert torch.ops.myops.myadd_.default.tags == [torch.Tag.inplace]
    assert tagged["test_aot_dispatch_dynamic"] == "SUCCESS"
    assert "Found a custom (non-ATen) operator whose output has alias annotations" in str(
        untagged["test_aot_dispatch_dynamic"])


@pytest.fixture(scope="module")
def mistakes(layers):
    myops.load("mistakes")
    return torch.ops.mistakes


def randn(*shape, grad=False):
    return torch.randn(shape, dtype=torch.float64, requires_grad=grad)


CASES = {
    "transpose_declared_fresh": (lambda: (randn(3, 4),), {"test_schema"}),
    # The missing autograd kernel also leaves the traced backward without gradients.
    "add_without_autograd_kernel": (lambda: (randn(3, 4, grad=True), randn(3, 4, grad=True)),
                                    {"test_autograd_registration", "test_aot_dispatch_dynamic"}),
    "add_meta_ignores_dtype": (lambda: (randn(3, 4), randn(3, 4)), {"test_faketensor"}),
    "twice": (lambda: (randn(3, 4, grad=True),), {"test_aot_dispatch_dynamic"}),
}


# torch makes a custom operator's aliased output an error when the CI environment variable is set, a warning
# otherwise (it will always be an error in a future release). The setting matters only to the mistake whose output
# aliases its input, so that case is run with both; the others once, as they are.
RUNS = [(name, None) for name in CASES if name != "transpose_declared_fresh"] + [
    ("transpose_declared_fresh", True), ("transpose_declared_fresh", False)]


@pytest.mark.parametrize("name, aliasing_is_an_error", RUNS,
                         ids=[name + {None: "", True: "-aliasing_error", False: "-aliasing_warning"}[error]
                              for name, error in RUNS])
def test_each_mistake_fails_its_opcheck_test(mistakes, name, aliasing_is_an_error):
    make_args, expected_failures = CASES[name]
    if aliasing_is_an_error:
        expected_failures = expected_failures | {"test_aot_dispatch_dynamic"}
    setting = (torch._functorch.config.patch(error_on_custom_op_aliasing=aliasing_is_an_error)
               if aliasing_is_an_error is not None else contextlib.nullcontext())
    with setting, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = opcheck(getattr(mistakes, name).default, make_args(), raise_exception=False)
    assert {test for test, outcome in results.items() if outcome != "SUCCESS"} == expected_failures


def test_the_mistakes_compute_the_right_values_eagerly(mistakes):
    a, b = randn(3, 4), randn(3, 4)
    assert torch.equal(mistakes.transpose_declared_fresh(a), a.t())
    assert torch.equal(mistakes.add_without_autograd_kernel(a, b), a + b)
    assert torch.equal(mistakes.add_meta_ignores_dtype(a, b), a + b)
    x = randn(3, 4, grad=True)
    mistakes.twice(x).sum().backward()
    assert torch.equal(x.grad, torch.full_like(x, 2.0))
