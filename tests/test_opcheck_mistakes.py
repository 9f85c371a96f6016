"""Each broken operator of csrc/mistakes/opcheck.cpp works eagerly and fails exactly the opcheck test it targets."""
import warnings

import pytest
import torch
import torch._functorch.config
from torch.library import opcheck

import myops


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


@pytest.fixture(params=[True, False], ids=["aliasing_error", "aliasing_warning"])
def aliasing_is_an_error(request):
    # torch makes a custom operator's aliased output an error when the CI environment variable is set, a
    # warning otherwise (it will always be an error in a future release); both settings are tested.
    with torch._functorch.config.patch(error_on_custom_op_aliasing=request.param):
        yield request.param


@pytest.mark.parametrize("name", CASES)
def test_each_mistake_fails_its_opcheck_test(mistakes, name, aliasing_is_an_error):
    make_args, expected_failures = CASES[name]
    if name == "transpose_declared_fresh" and aliasing_is_an_error:
        expected_failures = expected_failures | {"test_aot_dispatch_dynamic"}
    with warnings.catch_warnings():
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
