"""Every operator against every kind of input: a result equal to ATen's, or an error naming the operator.

Each (operator, case) pair has an expected outcome, so a kernel that starts refusing valid input fails as
surely as one that returns a wrong value. Errors must be RuntimeErrors (NotImplementedError is one) whose
message names the operator and gives a fix after a semicolon; crashes would take the test process down.
"""
import pytest
import torch

import myops

IN_PLACE = ("myadd_", "myadd_inplace")
OPS = ("myadd", "mymatmul", "myrmsnorm", "myadd_", "myadd_inplace", "mytranspose")


def shapes(op, rows=4, cols=6):
    """Argument shapes of a valid call of `op`."""
    return {"mymatmul": [(rows, cols), (cols, 3)], "myrmsnorm": [(rows, cols), (cols,)],
            "mytranspose": [(rows, cols)]}.get(op, [(rows, cols), (rows, cols)])


def randn(shape, dtype=torch.float32, **kwargs):
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, dtype=dtype, **kwargs)
    return torch.randint(0, 5, shape, **kwargs).to(dtype)


def reference(op, args):
    """ATen's answer, computed in float64 for floating inputs and cast back."""
    wide = [a.double() if a.dtype.is_floating_point else a for a in args]
    if op in ("myadd", *IN_PLACE):
        out = wide[0] + wide[1]
    elif op == "mymatmul":
        out = wide[0] @ wide[1]
    elif op == "myrmsnorm":
        x, w = wide
        out = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    else:
        out = args[0].t()
    return out.to(args[0].dtype)


# case -> (builder of the arguments of `op`, the operators for which the case must be an error)
def dtype_case(dtype):
    return lambda op: [randn(s, dtype) for s in shapes(op)]


def mixed_dtypes(op):
    first, *rest = shapes(op)
    return [randn(first)] + [randn(s, torch.float64) for s in rest]


def transposed(op):
    return [randn(s[::-1]).t() if len(s) == 2 else randn(s) for s in shapes(op)]


def sliced(op):
    return [randn(tuple(2 * d for d in s))[tuple(slice(None, None, 2) for _ in s)] for s in shapes(op)]


def expanded(op):
    return [randn((1,) + s[1:]).expand(s) for s in shapes(op)]


def channels_last(op):
    if op == "mymatmul":
        return [randn((2, 3, 4, 5)).to(memory_format=torch.channels_last), randn((5, 3))]
    if op == "myrmsnorm":
        return [randn((2, 3, 4, 5)).to(memory_format=torch.channels_last), randn((5,))]
    return [randn((2, 3, 4, 5)).to(memory_format=torch.channels_last) for _ in shapes(op)]


def zero_dim(op):
    return [randn(()) for _ in shapes(op)]


def empty(op):
    return [randn(s) for s in shapes(op, rows=0)]


def mismatched(op):
    first, *rest = shapes(op)
    return [randn(first)] + [randn(tuple(d + 1 for d in s)) for s in rest]


def mixed_devices(op):
    first, *rest = shapes(op)
    return [randn(first)] + [randn(s, device="meta") for s in rest]


def of_rank(rank):
    """Arguments whose first tensor has `rank` dimensions, its last one of size 6 (what the others fit)."""
    def build(op):
        first = (2, 4, 6)[3 - rank:]
        others = {"mymatmul": [(6, 3)], "myrmsnorm": [(6,)]}.get(op, [first] * (len(shapes(op)) - 1))
        return [randn(first)] + [randn(s) for s in others]
    return build


def requires_grad(op):
    # Non-leaf inputs for the in-place operators: in place on a leaf is refused by autograd itself.
    args = [randn(s, requires_grad=True) for s in shapes(op)]
    return [a * 1 for a in args] if op in IN_PLACE else args


NOT_FLOAT = ("myadd", "mymatmul", "myrmsnorm", *IN_PLACE)
CASES = {
    "float16": (dtype_case(torch.float16), ()),
    "bfloat16": (dtype_case(torch.bfloat16), ()),
    "float32": (dtype_case(torch.float32), ()),
    "float64": (dtype_case(torch.float64), ()),
    "int32": (dtype_case(torch.int32), NOT_FLOAT),
    "int64": (dtype_case(torch.int64), NOT_FLOAT),
    "bool": (dtype_case(torch.bool), NOT_FLOAT),
    "complex64": (dtype_case(torch.complex64), NOT_FLOAT),
    "mixed dtypes": (mixed_dtypes, NOT_FLOAT),
    "transposed": (transposed, ()),
    "sliced": (sliced, ()),
    "expanded": (expanded, IN_PLACE),  # writing through an expanded tensor
    "channels_last": (channels_last, ("mymatmul", "mytranspose")),  # 4-d
    "0-dim": (zero_dim, ("mymatmul", "myrmsnorm", "mytranspose")),
    "1-d": (of_rank(1), ("mymatmul", "mytranspose")),
    "3-d": (of_rank(3), ("mymatmul", "mytranspose")),
    "empty": (empty, ()),
    "mismatched shapes": (mismatched, NOT_FLOAT),
    "mixed devices": (mixed_devices, NOT_FLOAT),
    "requires_grad": (requires_grad, IN_PLACE[1:]),  # myadd_inplace refuses autograd, by name
}
TOLERANCE = {torch.float16: 2e-3, torch.bfloat16: 2e-2, torch.float32: 1e-5, torch.float64: 1e-12}
# Cases about a second tensor, which the one-tensor mytranspose does not have.
SECOND_TENSOR = ("mixed dtypes", "mismatched shapes", "mixed devices")
MATRIX = [(op, case) for op in OPS for case in CASES if not (op == "mytranspose" and case in SECOND_TENSOR)]


def call(op, args):
    if op in IN_PLACE:
        target = args[0]
        getattr(myops, op)(target, *args[1:])
        return target
    return getattr(myops, op)(*args)


@pytest.mark.parametrize("op, case", MATRIX, ids=[f"{op}-{case}" for op, case in MATRIX])
def test_correct_or_named_error(layers, op, case):
    build, errors = CASES[case]
    args = build(op)
    expected = None if op in errors else reference(op, [a.detach() for a in args])
    if expected is None:
        with pytest.raises(RuntimeError) as error:
            call(op, args)
        message = str(error.value).splitlines()[0]
        assert f"myops::{op}:" in message and ";" in message, message
        return
    result = call(op, args)
    assert result.shape == expected.shape and result.dtype == expected.dtype
    tol = TOLERANCE.get(expected.dtype, 0)
    torch.testing.assert_close(result.detach(), expected, rtol=tol, atol=tol)


def test_matrix_covers_every_operator_of_the_schema(layers):
    # A new operator in csrc/schema.cpp fails here until it has its row of cases.
    defined = {name.split("::")[1] for name in torch._C._dispatch_get_all_op_names() if name.startswith("myops::")}
    assert defined == set(OPS)
