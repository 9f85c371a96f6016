"""Stage 5: the NotImplemented autograd fallback, shown on myrmsnorm (whose values: tests/test_myrmsnorm.py)."""
import subprocess
import sys
import textwrap

import pytest
import torch

import myops


def test_not_implemented_fallback_keeps_the_graph_and_names_the_op(layers):
    x = torch.randn(4, 8, requires_grad=True)
    w = torch.randn(8, requires_grad=True)
    out = myops.myrmsnorm(x, w)
    assert out.requires_grad and out.grad_fn.name() == "torch::autograd::NotImplemented"
    with pytest.raises(RuntimeError, match=r"^derivative for myops::myrmsnorm is not implemented$"):
        out.sum().backward()


@pytest.mark.pytorch_pin
def test_not_implemented_fallback_without_grad_is_free(layers):
    """PyTorch's fallback (not our code) records nothing when grad mode is off."""
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
