"""vmap: the batching rules of myops/vmap.py against ATen, kernel calls per batch, and the fallback they replace."""
import subprocess
import sys

import pytest
import torch

import myops
import myops.vmap
from myops.dispatch import CallCounter


@pytest.fixture(scope="module")
def rules(layers):
    return myops.vmap.register()


def randn(*shape):
    return torch.randn(shape, dtype=torch.float64, generator=torch.Generator().manual_seed(sum(shape)))


ADD_CASES = {  # in_dims -> (self, other), each example of shape (3, 5), batch of 4
    (0, 0): (randn(4, 3, 5), randn(4, 3, 5)),
    (1, None): (randn(3, 4, 5), randn(3, 5)),
    (None, 2): (randn(3, 5), randn(3, 5, 4)),
    (2, 0): (randn(3, 5, 4), randn(4, 3, 5)),
}


@pytest.mark.parametrize("in_dims", ADD_CASES, ids=str)
def test_myadd_rule_matches_aten(rules, in_dims):
    a, b = ADD_CASES[in_dims]
    expected = torch.vmap(torch.add, in_dims=in_dims)(a, b)
    assert torch.equal(torch.vmap(myops.myadd, in_dims=in_dims)(a, b), expected)


MATMUL_CASES = {  # in_dims -> (self, other), examples (3, 5) @ (5, 2), batch of 4
    (0, None): (randn(4, 3, 5), randn(5, 2)),
    (None, 0): (randn(3, 5), randn(4, 5, 2)),
    (None, 2): (randn(3, 5), randn(5, 2, 4)),
    (1, None): (randn(3, 4, 5), randn(5, 2)),
    (0, 0): (randn(4, 3, 5), randn(4, 5, 2)),
}


@pytest.mark.parametrize("in_dims", MATMUL_CASES, ids=str)
def test_mymatmul_rule_matches_aten(rules, in_dims):
    a, b = MATMUL_CASES[in_dims]
    expected = torch.vmap(torch.mm, in_dims=in_dims)(a, b)
    torch.testing.assert_close(torch.vmap(myops.mymatmul, in_dims=in_dims)(a, b), expected)


def test_nested_vmap(rules):
    a, b = randn(2, 4, 3, 5), randn(5, 2)
    inner = torch.vmap(myops.mymatmul, in_dims=(0, None))
    torch.testing.assert_close(torch.vmap(inner, in_dims=(0, None))(a, b), a @ b)
    x, y = randn(2, 4, 3), randn(4, 2, 3)
    torch.testing.assert_close(torch.vmap(torch.vmap(myops.myadd), in_dims=(0, 1))(x, y), x + y.transpose(0, 1))


@pytest.mark.parametrize("op, in_dims, args, calls", [
    ("myadd", (0, 0), ADD_CASES[(0, 0)], 1),
    ("myadd", (None, 2), ADD_CASES[(None, 2)], 1),
    ("mymatmul", (0, None), MATMUL_CASES[(0, None)], 1),
    ("mymatmul", (None, 0), MATMUL_CASES[(None, 0)], 1),
    ("mymatmul", (0, 0), MATMUL_CASES[(0, 0)], 4),  # no single 2-d product does it: one call per element
], ids=lambda v: str(v) if isinstance(v, (str, tuple)) else "")
def test_kernel_calls_per_batch(rules, op, in_dims, args, calls):
    with CallCounter() as counter:
        torch.vmap(getattr(torch.ops.myops, op).default, in_dims=in_dims)(*args)
    assert counter.calls[f"myops::{op}"] == calls


def test_gradients_through_vmap(rules):
    a = randn(4, 3, 5).requires_grad_()
    b = randn(5, 2).requires_grad_()
    torch.vmap(myops.mymatmul, in_dims=(0, None))(a, b).pow(2).sum().backward()
    a_ref, b_ref = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    (a_ref @ b_ref).pow(2).sum().backward()
    torch.testing.assert_close(a.grad, a_ref.grad)
    torch.testing.assert_close(b.grad, b_ref.grad)


def test_bad_input_under_vmap_names_the_op(rules):
    with pytest.raises(RuntimeError, match=r"^myops::myadd: expected tensors of the same shape"):
        torch.vmap(myops.myadd, in_dims=(0, None))(randn(4, 3, 5), randn(5))
    with pytest.raises(RuntimeError, match=r"^myops::mymatmul: "):
        torch.vmap(myops.mymatmul, in_dims=(0, None))(randn(4, 3, 5), randn(4, 2))


FALLBACK_THEN_RULE = """
import sys, torch, myops, myops.vmap
myops.load("schema", "cpu", "autograd")
x = torch.randn(4, 3, 5)
fallback = torch.vmap(myops.myadd)(x, x)
sys.stderr.write("-- rules registered --\\n"); sys.stderr.flush()
myops.vmap.register()
assert torch.equal(torch.vmap(myops.myadd)(x, x), fallback) and torch.equal(fallback, x + x)
"""


def test_fallback_warns_and_the_rule_does_not(layers):
    # The warning is a TORCH_WARN written by C++ straight to file descriptor 2: read it from a child process.
    child = subprocess.run([sys.executable, "-c", FALLBACK_THEN_RULE], capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr
    before, after = child.stderr.split("-- rules registered --")
    assert "we have not yet implemented the batching rule for myops::myadd" in before
    assert "batching rule" not in after
