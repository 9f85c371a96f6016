"""Stage 5: myrmsnorm and the NotImplemented autograd fallback."""
import subprocess
import sys
import textwrap

import pytest
import torch

import myops

from helpers import rmsnorm_reference

RMS_TOL = {torch.float64: (1e-12, 1e-12), torch.float32: (1e-5, 1e-5),
           torch.bfloat16: (2e-2, 2e-2), torch.float16: (2e-3, 2e-3)}


@pytest.mark.parametrize("dtype", list(RMS_TOL), ids=str)
@pytest.mark.parametrize("shape, layout", [((4, 16), "contiguous"), ((3, 5, 33), "contiguous"),
                                           ((16, 4), "transposed"), ((7,), "contiguous"), ((0, 8), "empty")])
def test_myrmsnorm_matches_reference(layers, dtype, shape, layout):
    x = torch.randn(shape, dtype=dtype, generator=torch.Generator().manual_seed(0))
    x = x.t() if layout == "transposed" else x
    w = torch.randn(x.shape[-1], dtype=dtype)
    rtol, atol = RMS_TOL[dtype]
    torch.testing.assert_close(myops.myrmsnorm(x, w), rmsnorm_reference(x, w), rtol=rtol, atol=atol)


def test_myrmsnorm_eps_is_used(layers):
    x, w = torch.zeros(2, 3), torch.ones(3)
    assert torch.equal(myops.myrmsnorm(x, w, eps=1.0), torch.zeros(2, 3))
    x = torch.full((1, 4), 2.0)
    torch.testing.assert_close(myops.myrmsnorm(x, torch.ones(4), eps=12.0), torch.full((1, 4), 0.5))


@pytest.mark.parametrize("x, w, eps, message", [
    (torch.tensor(1.0), torch.ones(1), 1e-6,
     "myops::myrmsnorm: expected a tensor with at least one dimension, got a 0-d tensor; "
     "normalize a 1-d view of it, e.g. x.reshape(1)"),
    (torch.ones(2, 3), torch.ones(4), 1e-6,
     "myops::myrmsnorm: expected weight of shape [3] (the last dimension of self), got [4]; "
     "pass one weight per element of the last dimension"),
    (torch.ones(2, 3), torch.ones(3), -1.0,
     "myops::myrmsnorm: eps must be >= 0, got -1; pass a small positive eps such as 1e-6"),
    (torch.ones(2, 3, dtype=torch.bfloat16), torch.ones(3), 1e-6,
     "myops::myrmsnorm: expected tensors of the same dtype, got BFloat16 and Float; convert one with .to(dtype)"),
])
def test_myrmsnorm_bad_input_message(layers, x, w, eps, message):
    with pytest.raises(RuntimeError) as error:
        myops.myrmsnorm(x, w, eps)
    assert str(error.value).splitlines()[0] == message


def test_not_implemented_fallback_keeps_the_graph_and_names_the_op(layers):
    x = torch.randn(4, 8, requires_grad=True)
    w = torch.randn(8, requires_grad=True)
    out = myops.myrmsnorm(x, w)
    assert out.requires_grad and out.grad_fn.name() == "torch::autograd::NotImplemented"
    with pytest.raises(RuntimeError, match=r"^derivative for myops::myrmsnorm is not implemented$"):
        out.sum().backward()


def test_not_implemented_fallback_without_grad_is_free(layers):
    with torch.no_grad():
        out = myops.myrmsnorm(torch.randn(2, 3, requires_grad=True), torch.ones(3))
    assert out.grad_fn is None and not out.requires_grad


@pytest.mark.pytorch_pin
def test_without_any_autograd_kernel_gradients_are_lost_with_a_warning():
    code = """
        import warnings, torch, myops
        myops.load("schema", "cpu")
        x = torch.randn(4, 8, requires_grad=True)
        out = torch.ops.myops.myrmsnorm(x, torch.ones(8))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out.sum().backward()
        print(out.requires_grad, x.grad is None, "myops::myrmsnorm: an autograd kernel was not registered" in str(caught[0].message))
        """
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=600)
    assert result.stdout.split() == ["True", "True", "True"], result.stderr
