"""Property tests: random shapes, strides and dtypes, each op and its gradients against ATen."""
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import myops

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
# (rtol, atol) for results rounded once from a float32/float64 accumulator, against a float64 reference.
TOLERANCE = {torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1.6e-2), torch.float32: (2e-5, 2e-5),
             torch.float64: (1e-12, 1e-12)}
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@st.composite
def strided(draw, shape, dtype):
    """A tensor of `shape` laid out contiguously, transposed, with a step, or expanded along one dimension."""
    layout = draw(st.sampled_from(["contiguous", "transposed", "stepped", "expanded"]))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    if layout == "transposed" and len(shape) >= 2:
        return torch.randn(shape[::-1], generator=g, dtype=dtype).permute(*reversed(range(len(shape))))
    if layout == "stepped" and shape:
        return torch.randn(shape[:-1] + (2 * shape[-1],), generator=g, dtype=dtype)[..., ::2]
    if layout == "expanded" and shape:
        dim = draw(st.integers(0, len(shape) - 1))
        return torch.randn(shape[:dim] + (1,) + shape[dim + 1:], generator=g, dtype=dtype).expand(shape)
    return torch.randn(shape, generator=g, dtype=dtype)


shapes = st.lists(st.integers(0, 9), min_size=0, max_size=4).map(tuple)


@SETTINGS
@given(data=st.data(), shape=shapes, dtype=st.sampled_from(DTYPES))
def test_myadd_is_aten_add(layers, data, shape, dtype):
    x, y = data.draw(strided(shape, dtype)), data.draw(strided(shape, dtype))
    torch.testing.assert_close(myops.myadd(x, y), torch.add(x, y), rtol=0, atol=0)


@SETTINGS
@given(data=st.data(), n=st.integers(0, 40), k=st.integers(0, 300), m=st.integers(0, 40),
       dtype=st.sampled_from(DTYPES))
def test_mymatmul_is_matmul(layers, data, n, k, m, dtype):
    x, y = data.draw(strided((n, k), dtype)), data.draw(strided((k, m), dtype))
    rtol, atol = TOLERANCE[dtype]
    expected = (x.double() @ y.double()).to(dtype)
    torch.testing.assert_close(myops.mymatmul(x, y), expected, rtol=rtol, atol=atol * max(1, k) ** 0.5)


@SETTINGS
@given(data=st.data(), shape=st.lists(st.integers(1, 9), min_size=1, max_size=3).map(tuple),
       dtype=st.sampled_from(DTYPES), eps=st.sampled_from([1e-6, 1e-2, 1.0]))
def test_myrmsnorm_is_the_formula(layers, data, shape, dtype, eps):
    x, w = data.draw(strided(shape, dtype)), data.draw(strided(shape[-1:], dtype))
    x64 = x.double()
    expected = (x64 / torch.sqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * w.double()).to(dtype)
    rtol, atol = TOLERANCE[dtype]
    torch.testing.assert_close(myops.myrmsnorm(x, w, eps), expected, rtol=rtol, atol=atol)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), n=st.integers(1, 8), k=st.integers(1, 8), m=st.integers(1, 8))
def test_gradients_are_atens(layers, data, n, k, m):
    x = data.draw(strided((n, k), torch.float64)).detach().requires_grad_()
    y = data.draw(strided((k, m), torch.float64)).detach().requires_grad_()
    z = data.draw(strided((n, k), torch.float64)).detach().requires_grad_()
    upstream = torch.randn(n, m, dtype=torch.float64)
    ours = torch.autograd.grad(myops.mymatmul(myops.myadd(x, z), y), (x, y, z), upstream)
    theirs = torch.autograd.grad(torch.matmul(x + z, y), (x, y, z), upstream)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


@SETTINGS
@given(data=st.data(), shape=st.lists(st.integers(0, 9), min_size=1, max_size=3).map(tuple),
       dtype=st.sampled_from(DTYPES), returns_self=st.booleans())
def test_in_place_is_aten_add_(layers, data, shape, dtype, returns_self):
    # `self` must not be expanded (it is written); `other` may have any layout.
    self_ = data.draw(strided(shape, dtype).filter(lambda t: 0 not in t.stride() or t.numel() <= 1))
    other = data.draw(strided(shape, dtype))
    expected = self_.clone().add_(other)
    (myops.myadd_ if returns_self else myops.myadd_inplace)(self_, other)
    torch.testing.assert_close(self_, expected, rtol=0, atol=0)


@SETTINGS
@given(data=st.data(), rows=st.integers(0, 9), cols=st.integers(0, 9), dtype=st.sampled_from(DTYPES))
def test_transpose_is_a_view_like_t(layers, data, rows, cols, dtype):
    x = data.draw(strided((rows, cols), dtype))
    view = myops.mytranspose(x)
    assert view._is_view() and view._base is (x if x._base is None else x._base)
    assert view.stride() == x.t().stride() and torch.equal(view, x.t())
