"""Exercise 09: a Meta kernel with SymInt sizes, checked by opcheck."""
import torch

from myops.exercises.expect import call, expect_close, expect_raises, opcheck, randn, require_kernel, require_op
from myops.exercises.runner import Context, Unsolved


def _meta(*sizes, dtype=torch.float32):
    return torch.empty(*sizes, dtype=dtype, device="meta")


def check(context: Context) -> None:
    require_op("ex09", "mymatmul", f"keep the TORCH_LIBRARY block of {context.file('mymatmul.cpp')}")
    require_kernel(context, "ex09::mymatmul", "Meta",
                   "register mymatmul_meta in a TORCH_LIBRARY_IMPL(ex09, Meta, m) block")
    op = torch.ops.ex09.mymatmul.default
    for dtype in (torch.float32, torch.float64):
        expect_close(f"ex09::mymatmul on meta {dtype} tensors of shapes [3, 4] and [4, 5]",
                     call("ex09::mymatmul on meta tensors", op, _meta(3, 4, dtype=dtype), _meta(4, 5, dtype=dtype)),
                     _meta(3, 5, dtype=dtype))
    for what, inputs in (("shapes [[3, 4], [5, 6]]", (_meta(3, 4), _meta(5, 6))),
                         ("shapes [[3, 4], [4]]", (_meta(3, 4), _meta(4))),
                         ("dtypes float32 and float64", (_meta(3, 4), _meta(4, 5, dtype=torch.float64)))):
        expect_raises(f"ex09::mymatmul on meta tensors of {what}", op, *inputs,
                      hint="the CPU kernel rejects them: make the Meta kernel run the same checks")
    opcheck("ex09::mymatmul", op, [(randn(3, 4), randn(4, 5, seed=1))], ("test_schema", "test_faketensor"))
    # With symbolic sizes, a kernel that reads plain sizes does not fail: it fixes each size to the value it
    # has now (a guard), and torch.compile(dynamic=True) then recompiles for every new shape.
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

    mode = FakeTensorMode(shape_env=ShapeEnv())
    dynamic = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.DYNAMIC])
    a, b = (mode.from_tensor(t, symbolic_context=dynamic) for t in (randn(3, 4), randn(4, 5, seed=1)))
    with mode:
        out = call("ex09::mymatmul on fake tensors with symbolic sizes", op, a, b)
    if not all(isinstance(size, torch.SymInt) for size in out.shape):
        raise Unsolved(f"on fake tensors of shapes [3, 4] and [4, 5], every size symbolic, ex09::mymatmul returned "
                       f"the fixed shape {list(out.shape)}: read the sizes as SymInts (sym_size, at::empty_symint), "
                       "or torch.compile(dynamic=True) recompiles for every shape")
