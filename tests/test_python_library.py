"""pyops: the Python torch.library operators against ATen and against their C++ twins in myops."""
import pytest
import torch
from torch.library import opcheck

import myops
from myops.dispatch import CallCounter
from myops import python_library as pyops
from helpers import needs_gpu, sample_inputs

PY_MYADD, PY_MYMATMUL = torch.ops.pyops.myadd.default, torch.ops.pyops.mymatmul.default

CPP_FUNCTION_MESSAGE = "cannot use C++ torch::autograd::Function with functorch transforms"
# custom_op's generated autograd.Function defines forward(ctx, ...) and no setup_context staticmethod, even when
# register_autograd is given a setup_context: torch.func refuses it (pytorch/pytorch#168393, open on 2.14).
CUSTOM_OP_MESSAGE = "In order to use an autograd.Function with functorch transforms"


def randn(*shape, dtype=torch.float64, requires_grad=False):
    g = torch.Generator().manual_seed(sum(shape) + len(shape))
    return torch.randn(shape, generator=g, dtype=dtype).requires_grad_(requires_grad)


MATMUL_SAMPLES = {
    "contiguous": lambda: (randn(5, 7), randn(7, 3)),
    "transposed": lambda: (randn(7, 5).t(), randn(3, 7).t()),
    "sliced": lambda: (randn(10, 14)[::2, ::2], randn(7, 6)[:, 1:4]),
    "empty_inner": lambda: (randn(4, 0), randn(0, 3)),
    "empty_rows": lambda: (randn(0, 4), randn(4, 3)),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_myadd_matches_aten_and_is_contiguous(dtype):
    for name, a, b in sample_inputs(dtype):
        out = pyops.myadd(a, b)
        assert torch.equal(out, torch.add(a, b)), name
        assert out.is_contiguous(), name  # the contract of the fake kernel


@pytest.mark.parametrize("name", MATMUL_SAMPLES)
def test_mymatmul_matches_aten(name):
    a, b = MATMUL_SAMPLES[name]()
    torch.testing.assert_close(pyops.mymatmul(a, b), a @ b)


def test_both_stacks_agree(layers):
    a, b, m = randn(6, 5), randn(6, 5), randn(5, 4)
    assert torch.equal(pyops.myadd(a, b), myops.myadd(a, b))
    torch.testing.assert_close(pyops.mymatmul(a, m), myops.mymatmul(a, m))


def test_gradcheck():
    a, b = randn(3, 4, requires_grad=True), randn(3, 4, requires_grad=True)
    m = randn(4, 2, requires_grad=True)
    assert torch.autograd.gradcheck(pyops.myadd, (a, b))
    assert torch.autograd.gradcheck(pyops.mymatmul, (a, m))
    # The backward calls pyops::mymatmul, so its gradient is differentiable in turn.
    assert torch.autograd.gradgradcheck(pyops.mymatmul, (a, m))


@pytest.mark.parametrize("requires_grad", [False, True])
def test_opcheck_passes(requires_grad):
    cases = [(PY_MYADD, (randn(5, 7, requires_grad=requires_grad), randn(5, 7, requires_grad=requires_grad))),
             (PY_MYADD, (randn(2, 3, 4, 5).to(memory_format=torch.channels_last), randn(2, 3, 4, 5))),
             (PY_MYMATMUL, (randn(7, 5, requires_grad=requires_grad).t(), randn(7, 3, requires_grad=requires_grad)))]
    for op, args in cases:
        results = opcheck(op, args, raise_exception=False)
        assert results == dict.fromkeys(results, "SUCCESS"), results
        assert len(results) == 4


def test_autocast_cpu():
    x, w = randn(8, 16, dtype=torch.float32), randn(16, 4, dtype=torch.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = pyops.mymatmul(x, w)
        assert pyops.mymatmul(x.double(), w.double()).dtype == torch.float64  # float64 is never cast
        assert pyops.myadd(x, x).dtype == torch.float32  # no autocast registration: falls through
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, x.bfloat16() @ w.bfloat16(), rtol=1e-2, atol=1e-2)
    assert pyops.mymatmul(x, w).dtype == torch.float32


def test_autocast_dtype_is_fixed_at_registration(layers):
    # register_autocast casts to the dtype it was given; the C++ wrapper asks the region for its dtype.
    x, w = randn(8, 16, dtype=torch.float32), randn(16, 4, dtype=torch.float32)
    with torch.autocast("cpu", dtype=torch.float16):
        assert pyops.mymatmul(x, w).dtype == torch.bfloat16
        assert myops.mymatmul(x, w).dtype == torch.float16


@pytest.mark.parametrize("in_dims", [(0, 0), (1, None), (None, 2)], ids=str)
def test_vmap_myadd_one_call(in_dims):
    a = randn(4, 3, 5) if in_dims[0] == 0 else randn(3, 4, 5) if in_dims[0] == 1 else randn(3, 5)
    b = randn(4, 3, 5) if in_dims[1] == 0 else randn(3, 5, 4) if in_dims[1] == 2 else randn(3, 5)
    with CallCounter() as counter:
        out = torch.vmap(pyops.myadd, in_dims=in_dims)(a, b)
    assert torch.equal(out, torch.vmap(torch.add, in_dims=in_dims)(a, b))
    assert counter.calls["pyops::myadd"] == 1


@pytest.mark.parametrize(("in_dims", "calls"), [((0, None), 1), ((None, 0), 1), ((0, 0), 4)], ids=str)
def test_vmap_mymatmul_calls(in_dims, calls):
    a = randn(4, 3, 5) if in_dims[0] == 0 else randn(3, 5)
    b = randn(4, 5, 2) if in_dims[1] == 0 else randn(5, 2)
    with CallCounter() as counter:
        out = torch.vmap(pyops.mymatmul, in_dims=in_dims)(a, b)
    torch.testing.assert_close(out, torch.vmap(torch.mm, in_dims=in_dims)(a, b))
    assert counter.calls["pyops::mymatmul"] == calls  # one per batch element only when both operands are batched


def test_compile_fullgraph_forward_and_backward():
    torch._dynamo.reset()

    def f(x, w, b):
        return pyops.myadd(pyops.mymatmul(x, w), b).sum()

    inputs = [randn(8, 16, requires_grad=True), randn(16, 4, requires_grad=True), randn(8, 4, requires_grad=True)]
    out = torch.compile(f, fullgraph=True, backend="aot_eager")(*inputs)
    expected = f(*inputs)
    torch.testing.assert_close(out, expected)
    for got, want in zip(torch.autograd.grad(out, inputs), torch.autograd.grad(expected, inputs)):
        torch.testing.assert_close(got, want)


BAD_INPUTS = {  # case -> (operator name, arguments, the message's exact beginning)
    "shape": ("myadd", (randn(2, 3), randn(3)),
              "pyops::myadd: expected tensors of the same shape, got [2, 3] and [3]; broadcast them first"),
    "dtypes": ("myadd", (randn(3), randn(3, dtype=torch.float32)),
               "pyops::myadd: expected tensors of the same dtype, got torch.float64 and torch.float32; "),
    "integer": ("myadd", (torch.ones(3, dtype=torch.int64), torch.ones(3, dtype=torch.int64)),
                "pyops::myadd: unsupported dtype torch.int64; supported are float16, bfloat16, float32 and float64"),
    "sparse": ("myadd", (randn(3).to_sparse(), randn(3).to_sparse()),
               "pyops::myadd: expected dense (strided) tensors; "),
    "devices": ("myadd", (randn(3), torch.empty(3, dtype=torch.float64, device="meta")),
                "pyops::myadd: expected both tensors on the same device, got cpu and meta; move one with .to(device)"),
    "1-d": ("mymatmul", (randn(3), randn(3, 2)),
            "pyops::mymatmul: expected two 2-d tensors, got 1-d and 2-d; "),
    "inner": ("mymatmul", (randn(3, 4), randn(3, 2)),
              "pyops::mymatmul: inner dimensions differ: self is [3, 4] and other is [3, 2]; "),
    "matmul_dtypes": ("mymatmul", (randn(3, 4), randn(4, 2, dtype=torch.float32)),
                      "pyops::mymatmul: expected tensors of the same dtype, "),
}


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_inputs(case):
    op, args, prefix = BAD_INPUTS[case]
    with pytest.raises(RuntimeError) as error:
        getattr(torch.ops.pyops, op)(*args)
    assert str(error.value).startswith(prefix)


@pytest.mark.parametrize("case", ["shape", "devices", "1-d", "inner"])
def test_messages_equal_the_cpp_ones(layers, case):
    # Shapes and devices print alike in both languages (dtypes do not: torch.float32 vs Float).
    op, args, _ = BAD_INPUTS[case]
    messages = []
    for namespace in (torch.ops.pyops, torch.ops.myops):
        with pytest.raises(RuntimeError) as error:
            getattr(namespace, op)(*args)
        messages.append(str(error.value).splitlines()[0])
    assert messages[0] == messages[1].replace("myops::", "pyops::")


def test_fake_kernel_checks_too():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(), pytest.raises(RuntimeError, match=r"^pyops::mymatmul: inner dimensions differ"):
        pyops.mymatmul(torch.empty(3, 4), torch.empty(3, 2))


REVERSE_TRANSFORMS = {
    "grad": lambda f, x: torch.func.grad(lambda t: f(t).sum())(x),
    "vjp": lambda f, x: torch.func.vjp(f, x)[1](torch.ones_like(f(x))),
    "jacrev": lambda f, x: torch.func.jacrev(f)(x),
}


@pytest.mark.pytorch_pin
@pytest.mark.parametrize("transform", REVERSE_TRANSFORMS)
@pytest.mark.parametrize(("namespace", "message"), [("myops", CPP_FUNCTION_MESSAGE), ("pyops", CUSTOM_OP_MESSAGE)])
def test_reverse_mode_torch_func_fails_on_both_stacks(layers, transform, namespace, message):
    a, b = randn(3, 4), randn(4, 2)
    for f in (lambda t: getattr(torch.ops, namespace).mymatmul(t, b),
              lambda t: getattr(torch.ops, namespace).myadd(t, a)):
        with pytest.raises(RuntimeError) as error:
            REVERSE_TRANSFORMS[transform](f, a)
        assert str(error.value).startswith(message)


def test_plain_autograd_works_on_both_stacks(layers):
    x, b = randn(3, 4, requires_grad=True), randn(4, 2)
    for op in (torch.ops.myops.mymatmul, torch.ops.pyops.mymatmul):
        (grad,) = torch.autograd.grad(op(x, b).sum(), x)
        torch.testing.assert_close(grad, torch.ones(3, 2, dtype=torch.float64) @ b.t())


def test_forward_mode(layers):
    # The C++ kernels attach tangents; the Python kernels refuse dual tensors they can see. Under torch.func.jvp
    # they cannot see them: custom_op's autograd.Function has no jvp, and the tangent comes back zero (a torch
    # limitation, pinned here so that a fix in torch shows up).
    import torch.autograd.forward_ad as fwAD

    a, b = randn(3, 4), randn(4, 2)
    _, tangent = torch.func.jvp(lambda t: torch.ops.myops.mymatmul(t, b), (a,), (torch.ones_like(a),))
    torch.testing.assert_close(tangent, torch.ones_like(a) @ b)
    with fwAD.dual_level(), pytest.raises(RuntimeError, match=r"^pyops::mymatmul: forward-mode AD is not supported"):
        torch.ops.pyops.mymatmul(fwAD.make_dual(a, torch.ones_like(a)), b)
    _, tangent = torch.func.jvp(lambda t: torch.ops.pyops.mymatmul(t, b), (a,), (torch.ones_like(a),))
    assert torch.count_nonzero(tangent) == 0


def test_dynamic_shapes_compile_once():
    # The fake kernels compare and build shapes with the symbols they are given: new sizes reuse the graph.
    from torch._dynamo.testing import CompileCounter

    def f(x, w, b):
        return pyops.myadd(pyops.mymatmul(x, w), b)

    torch._dynamo.reset()
    counter = CompileCounter()
    compiled = torch.compile(f, fullgraph=True, backend=counter, dynamic=True)
    for rows, inner in ((8, 16), (5, 7), (11, 3)):
        inputs = (randn(rows, inner), randn(inner, 4), randn(rows, 4))
        torch.testing.assert_close(compiled(*inputs), f(*inputs))
    assert counter.frame_count == 1


@needs_gpu
def test_cuda_values_opcheck_and_autocast():
    # The kernels are device-agnostic (CompositeExplicitAutograd): nothing CUDA-specific was written for them.
    a, b, m = randn(64, 32).cuda(), randn(64, 32).cuda(), randn(32, 8).cuda()
    assert torch.equal(pyops.myadd(a, b), a + b)
    torch.testing.assert_close(pyops.mymatmul(a, m), a @ m)
    for op, args in ((PY_MYADD, (a, b)), (PY_MYMATMUL, (a, m.requires_grad_()))):
        results = opcheck(op, args, raise_exception=False)
        assert results == dict.fromkeys(results, "SUCCESS"), results
    with torch.autocast("cuda"):
        assert pyops.mymatmul(a.float(), m.float()).dtype == torch.float16
    with pytest.raises(RuntimeError, match=r"^pyops::myadd: expected both tensors on the same device, got cuda:0 and"):
        pyops.myadd(a, b.cpu())
