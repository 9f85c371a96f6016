"""Prove an installed myops-stable in the environment that runs this file: the operators against ATen.

    python stable/check_install.py      # in any environment where the wheel is installed

Values over four dtypes and several layouts, two error messages, and opcheck; one line per group of
checks, and an AssertionError (exit code 1) at the first mismatch. Tests and notebook 14 run it in
child processes, one per torch release.
"""
import torch

DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
UNIT_ROUNDOFF = {torch.float16: 2**-11, torch.bfloat16: 2**-8, torch.float32: 2**-24, torch.float64: 2**-53}
ACCUMULATES_IN = {torch.float16: torch.float32, torch.bfloat16: torch.float32, torch.float32: torch.float32,
                  torch.float64: torch.float64}


def assert_product_close(out, a, b, msg):
    """out is a @ b within a dot product's forward error: the rounding of the result to its dtype (2u |a @ b|)
    plus sqrt(k) roundings of the accumulation dtype on the terms' magnitudes (2 sqrt(k) u_acc (|a| @ |b|)),
    against an exact float64 product. Looser tolerances accept a wrong kernel; tighter ones a different order of
    summation fails."""
    exact, terms = a.double() @ b.double(), a.double().abs() @ b.double().abs()
    k = a.shape[1]
    bound = (2 * UNIT_ROUNDOFF[out.dtype] * exact.abs()
             + 2 * max(1.0, k ** 0.5) * UNIT_ROUNDOFF[ACCUMULATES_IN[out.dtype]] * terms)
    error = (out.double() - exact).abs()
    assert out.shape == exact.shape and bool((error <= bound).all()), (
        f"{msg}: off by up to {float((error / bound.clamp_min(1e-300)).max()):.1f} times its bound")


def layouts(dtype):
    """(name, self, other) pairs for myadd, of the layouts a kernel must handle."""
    g = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(shape, generator=g, dtype=dtype)

    yield "contiguous", randn(5, 7), randn(5, 7)
    yield "transposed", randn(7, 5).t(), randn(7, 5).t()
    yield "sliced", randn(10, 9)[1:6, ::2][:, :4], randn(5, 8)[:, 1:5]
    yield "expanded", randn(1, 7).expand(5, 7), randn(5, 1).expand(5, 7)
    yield "0-dim", randn(), randn()
    yield "empty", randn(0, 4), randn(0, 4)
    yield "large", randn(300_000), randn(300_000)  # split across threads


def matrices(dtype):
    """(name, self, other) pairs for mymatmul."""
    g = torch.Generator().manual_seed(1)

    def randn(*shape):
        return torch.randn(shape, generator=g, dtype=dtype)

    yield "contiguous", randn(70, 300), randn(300, 150)  # more than one block in every direction
    yield "transposed", randn(9, 5).t(), randn(7, 9).t()
    yield "sliced", randn(10, 12)[::2, 1:7], randn(12, 8)[:6, ::2]
    yield "expanded", randn(5, 1).expand(5, 6), randn(6, 3)
    yield "inner 0", randn(4, 0), randn(0, 3)
    yield "empty", randn(0, 4), randn(4, 3)


def reference(fn, a, b):
    return fn(a.double(), b.double()).to(a.dtype)


def check_values():
    count = 0
    for dtype in DTYPES:
        for name, a, b in layouts(dtype):
            out = myops_stable.myadd(a, b)
            assert out.is_contiguous(), f"myadd {dtype} {name}: output not contiguous"
            # One rounding of an exact sum, as ATen's add: equal, not merely close.
            torch.testing.assert_close(out, reference(torch.add, a, b), rtol=0, atol=0, msg=f"myadd {dtype} {name}")
            count += 1
        for name, a, b in matrices(dtype):
            assert_product_close(myops_stable.mymatmul(a, b), a, b, f"mymatmul {dtype} {name}")
            count += 1
    return count


def check_errors():
    expected = {
        (torch.ones(2), torch.ones(3)): "stableops::myadd: expected tensors of the same shape, got [2] and [3]; "
                                        "broadcast them first, e.g. with torch.broadcast_tensors",
        (torch.ones(2, dtype=torch.int64), torch.ones(2, dtype=torch.int64)):
            "stableops::myadd: unsupported dtype Long; supported are float16, bfloat16, float32 and float64, "
            "convert with .float()",
    }
    for (a, b), message in expected.items():
        try:
            myops_stable.myadd(a, b)
        except RuntimeError as error:
            assert str(error) == message, str(error)
        else:
            raise AssertionError(f"no error for {message}")
    return len(expected)


def check_opcheck():
    a, b = torch.randn(3, 4, requires_grad=True), torch.randn(4, 5, requires_grad=True)
    for op, args in ((torch.ops.stableops.myadd.default, (a, a.detach() * 2)),
                     (torch.ops.stableops.mymatmul.default, (a, b))):
        results = torch.library.opcheck(op, args)
        assert set(results.values()) == {"SUCCESS"}, results


if __name__ == "__main__":
    import myops_stable  # the installed package; tests import this file for assert_product_close

    print(f"torch {torch.__version__}")
    print(f"values equal ATen's: {check_values()} cases (myadd and mymatmul, 4 dtypes)")
    print(f"exact error messages: {check_errors()} cases")
    check_opcheck()
    print("opcheck: both operators pass")
