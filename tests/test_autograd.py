"""The autograd layer: gradients against ATen, gradcheck, double backward, and the two classic mistakes."""
import subprocess
import sys
import textwrap

import pytest
import torch
from torch.autograd import gradcheck, gradgradcheck

import myops
from myops import dispatch

OPS = {"myadd": (myops.myadd, torch.add), "mymatmul": (myops.mymatmul, torch.matmul)}


def grad_inputs(name, dtype, layout):
    g = torch.Generator().manual_seed(1)
    x, y = (torch.randn(shape, generator=g, dtype=dtype) for shape in ((6, 5), (5, 6) if name == "mymatmul" else (6, 5)))
    if layout == "transposed":
        x, y = x.t().contiguous().t(), y.t().contiguous().t()
    return x.requires_grad_(), y.requires_grad_()


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", OPS)
def test_grads_match_aten(layers, name, dtype, layout):
    ours, aten = OPS[name]
    x, y = grad_inputs(name, dtype, layout)
    x_ref, y_ref = (t.detach().clone().requires_grad_() for t in (x, y))
    out, expected = ours(x, y), aten(x_ref, y_ref)
    assert out.grad_fn is not None and out.requires_grad
    grad = torch.randn_like(out)
    out.backward(grad)
    expected.backward(grad)
    tol = {"rtol": 1e-2, "atol": 1e-2} if dtype == torch.bfloat16 else {}
    torch.testing.assert_close(x.grad, x_ref.grad, **tol)
    torch.testing.assert_close(y.grad, y_ref.grad, **tol)


@pytest.mark.parametrize("name", OPS)
def test_gradcheck_and_gradgradcheck(layers, name):
    x, y = grad_inputs(name, torch.float64, "contiguous")
    assert gradcheck(OPS[name][0], (x, y))
    assert gradgradcheck(OPS[name][0], (x, y))


def test_only_needed_gradients_are_computed(layers):
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 2, dtype=torch.float64)  # a constant
    myops.mymatmul(x, w).sum().backward()
    torch.testing.assert_close(x.grad, torch.ones(4, 2, dtype=torch.float64) @ w.t())


def test_regression_32x32_shape_and_grads(layers):
    # The 2020 tutorial's autograd kernel returned apply(...)[0]: the first row, silently.
    x, y = torch.randn(32, 32, requires_grad=True), torch.randn(32, 32, requires_grad=True)
    out = myops.myadd(x, y)
    assert out.shape == (32, 32)
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)
    out.sum().backward()
    assert torch.equal(x.grad, torch.ones(32, 32)) and torch.equal(y.grad, torch.ones(32, 32))


@pytest.mark.parametrize("op", ["myadd", "mymatmul"])
def test_no_grad_skips_the_function_and_its_graph_node(layers, op):
    """With nothing to record our kernel calls below autograd itself: Function::apply would make a graph node
    anyway (custom_function.h), and every node takes the thread's next sequence number (node.h, Node())."""
    x = torch.randn(3, 3, requires_grad=True)

    def next_sequence_nr():
        return (x * 2).grad_fn._sequence_nr()

    before = next_sequence_nr()
    with torch.no_grad():
        assert getattr(myops, op)(x, x).grad_fn is None
    assert next_sequence_nr() == before + 1  # no node was made in between
    before = next_sequence_nr()
    getattr(myops, op)(x, x)
    assert next_sequence_nr() == before + 2  # with grad: our Function's node


def test_registered_on_the_autograd_alias(layers):
    for op in ("myops::myadd", "myops::mymatmul"):
        table = {entry.key: entry for entry in dispatch.dispatch_table(op)}
        folder = f"csrc/autograd/{op.split('::')[1]}.cpp"
        assert table["AutogradCPU"].source == table["AutogradCUDA"].source == folder


def test_indexed_apply_mistake_returns_one_row():
    myops.load("mistakes")
    x, y = torch.randn(32, 32, requires_grad=True), torch.randn(32, 32, requires_grad=True)
    out = torch.ops.mistakes.add_indexed(x, y)
    assert out.shape == (32,)  # the bug the regression test above guards against


def test_missing_guard_recurses_until_the_process_dies():
    code = """
        import torch, myops
        myops.load("schema", "cpu", "mistakes")
        x = torch.randn(3, requires_grad=True)
        torch.ops.mistakes.add_without_guard(x, x)
        print("returned")
        """
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode < 0 and "returned" not in result.stdout  # killed by a signal (stack overflow)


def test_forward_mode_tangents_match_aten(layers):
    # Function::apply has no forward mode; the kernels attach the tangent (a missing one would read as zero).
    import torch.autograd.forward_ad as fwAD

    g = torch.Generator().manual_seed(0)
    a, b, w = (torch.randn(shape, dtype=torch.float64, generator=g) for shape in ((5, 4), (5, 4), (4, 3)))
    ta, tb, tw = (torch.randn_like(t) for t in (a, b, w))
    for requires_grad in (False, True):  # with requires_grad the kernels record a node as well
        a_, w_ = a.clone().requires_grad_(requires_grad), w.clone().requires_grad_(requires_grad)
        with fwAD.dual_level():
            add = fwAD.unpack_dual(myops.myadd(fwAD.make_dual(a_, ta), b))
            add_both = fwAD.unpack_dual(myops.myadd(fwAD.make_dual(a_, ta), fwAD.make_dual(b, tb)))
            mm = fwAD.unpack_dual(myops.mymatmul(fwAD.make_dual(a_, ta), fwAD.make_dual(w_, tw)))
            mm_right = fwAD.unpack_dual(myops.mymatmul(a_, fwAD.make_dual(w_, tw)))
        assert torch.equal(add.tangent, ta) and torch.equal(add_both.tangent, ta + tb)
        torch.testing.assert_close(mm.tangent, ta @ w + a @ tw)
        torch.testing.assert_close(mm_right.tangent, a @ tw)
        assert mm.primal.requires_grad == requires_grad
    _, tangent = torch.func.jvp(lambda t: myops.mymatmul(myops.myadd(t, t), w), (a,), (ta,))
    torch.testing.assert_close(tangent, 2 * ta @ w)
