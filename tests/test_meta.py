"""Meta kernels: shapes and dtypes without data, and the same errors as the real kernels."""
import pytest
import torch

import myops


def meta(*shape, dtype=torch.float32):
    return torch.empty(shape, device="meta", dtype=dtype)


def test_shapes(layers):
    assert myops.myadd(meta(2, 3), meta(2, 3)).shape == (2, 3)
    assert myops.mymatmul(meta(5, 7), meta(7, 2)).shape == (5, 2)
    assert myops.myrmsnorm(meta(4, 8, dtype=torch.bfloat16), meta(8, dtype=torch.bfloat16)).dtype == torch.bfloat16
    assert myops.mytranspose(meta(3, 4)).shape == (4, 3)
    x = meta(2, 3)
    assert myops.myadd_(x, meta(2, 3)) is x
    assert myops.myadd_inplace(x, meta(2, 3)) is None


@pytest.mark.parametrize("call, message", [
    (lambda: myops.myadd(meta(2, 3), meta(3)), "myops::myadd: expected tensors of the same shape"),
    (lambda: myops.mymatmul(meta(2, 3), meta(4, 5)), "myops::mymatmul: inner dimensions differ"),
    (lambda: myops.myrmsnorm(meta(2, 3), meta(4)), "myops::myrmsnorm: expected weight of shape [3]"),
    (lambda: myops.myadd_(meta(2, 3), meta(2, 3, dtype=torch.float64)), "myops::myadd_: expected tensors of the same dtype"),
])
def test_same_errors_as_the_real_kernels(layers, call, message):
    with pytest.raises(RuntimeError) as error:
        call()
    assert str(error.value).startswith(message)
