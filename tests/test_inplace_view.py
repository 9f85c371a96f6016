"""Stage 6: in-place and view operators through ADInplaceOrView: version counters, views, guards.

(What opcheck says of each form: tests/test_opcheck.py.)"""
import subprocess
import sys
import textwrap

import pytest
import torch

import myops


@pytest.mark.parametrize("inplace", [myops.myadd_, myops.myadd_inplace], ids=["myadd_", "myadd_inplace"])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
def test_inplace_values_and_version(layers, inplace, layout):
    base = torch.randn(6, 8)
    x = {"contiguous": base, "transposed": base.t(), "sliced": base[::2, 1:5]}[layout]
    y = torch.randn(x.shape).t().contiguous().t()
    expected = x + y
    version = x._version
    result = inplace(x, y)
    torch.testing.assert_close(x, expected, rtol=0, atol=0)
    assert x._version == version + 1
    assert result is None if inplace is myops.myadd_inplace else result.data_ptr() == x.data_ptr()


def test_inplace_aliasing_errors(layers):
    with pytest.raises(RuntimeError, match=r"^myops::myadd_: self has elements that share memory \(e.g. it was "
                       r"expanded\); write into self.clone\(\) instead$"):
        myops.myadd_(torch.ones(1).expand(3), torch.ones(3))
    z = torch.randn(6)
    with pytest.raises(RuntimeError, match=r"^myops::myadd_: self and other partially overlap in memory; "
                       r"pass other.clone\(\)$"):
        myops.myadd_(z[:4], z[2:])
    w = torch.ones(3)
    myops.myadd_(w, w)  # exact overlap is fine for an elementwise operator
    assert torch.equal(w, torch.full((3,), 2.0))


def test_inplace_on_a_leaf_that_requires_grad(layers):
    leaf = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        myops.myadd_(leaf, torch.ones(3))
    with pytest.raises(RuntimeError, match=r"^myops::myadd_inplace: autograd through this in-place operator is "
                       "not implemented; call it under torch.no_grad"):
        myops.myadd_inplace(leaf * 1, torch.ones(3))


def test_inplace_result_gets_a_not_implemented_node(layers):
    b = torch.randn(3, requires_grad=True) * 2
    myops.myadd_(b, torch.ones(3))
    assert b.grad_fn.name() == "torch::autograd::NotImplemented"


@pytest.mark.parametrize("inplace", [myops.myadd_, myops.myadd_inplace], ids=["myadd_", "myadd_inplace"])
def test_modified_saved_tensor_is_detected(layers, inplace):
    a = torch.randn(3, requires_grad=True)
    b = a.sigmoid()  # saves its output for backward
    with torch.no_grad():
        inplace(b, torch.ones(3))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        b.sum().backward()


def test_without_ad_inplace_or_view_the_gradient_is_silently_wrong():
    code = """
        import torch, myops
        myops.load("schema", "cpu", "autograd")
        a = torch.randn(3, requires_grad=True)
        b = a.sigmoid()
        with torch.no_grad():
            torch.ops.myops.myadd_(b, torch.ones(3))
        b.sum().backward()
        s = torch.sigmoid(a.detach())
        print(b._version, torch.allclose(a.grad, s * (1 - s)))
        """
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=600)
    assert result.stdout.split() == ["0", "False"], result.stderr


def test_view_shares_storage_base_and_version(layers):
    x = torch.randn(3, 5)
    v = myops.mytranspose(x)
    assert v.shape == (5, 3) and v._is_view() and v._base is x
    assert v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert torch.equal(v, x.t())
    myops.myadd_(x, torch.ones(3, 5))
    assert v._version == x._version == 1 and torch.equal(v, x.t())


def test_the_functional_guard_in_an_in_place_kernel_skips_the_version_bump(layers):
    # mistakes::add_inplace_with_functional_guard: notebook 04's guard copied into an in-place operator's
    # autograd kernel. Values are right; ADInplaceOrView is skipped, so the version never moves.
    myops.load("mistakes")
    right, wrong = torch.zeros(3), torch.zeros(3)
    myops.myadd_inplace(right, torch.ones(3))
    torch.ops.mistakes.add_inplace_with_functional_guard(wrong, torch.ones(3))
    assert torch.equal(right, wrong) and (right._version, wrong._version) == (1, 0)
