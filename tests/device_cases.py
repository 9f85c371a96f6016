"""The cases of the demo device (csrc/device/), run by tests/test_device.py in a pytest process of their own.

Loading the device layer registers the backend, which makes it the accelerator of the process for good
(torch.accelerator, the streams of the autograd engine; see csrc/device/backend.cpp). Generic code then
treats the whole process differently: opcheck, for one, asks the accelerator for its random number
state. So these cases never run in the suite's own processes; the file's name keeps pytest from
collecting it there.
"""
import pytest
import torch

import myops
import myops.device
from myops import dispatch


@pytest.fixture(scope="session")
def layers():
    return myops.load()


FALLBACK = ("{op}: no kernel for the mydevice device, which has kernels only to create, copy and view tensors, "
            "for aten::add and for the myops operators; move the tensors to the CPU with .cpu() and call it there")


def randn(*shape, dtype=torch.float32, seed=0):
    return torch.randn(shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))


def cpu_results():
    """Results of CPU calls that loading the device must not change, and the CPU rows of two tables."""
    x, y, w = randn(4, 4), randn(4, 4, seed=1), randn(4, 4, seed=2)
    values = [myops.myadd(x, y), myops.mymatmul(x, w), myops.myrmsnorm(x, y[0]), torch.add(x, y, alpha=2), x * y]
    tables = [torch._C._dispatch_dump_table(op) for op in ("myops::myadd", "aten::add.Tensor")]
    return values, [line for table in tables for line in table.splitlines() if "PrivateUse1" not in line]


@pytest.fixture(scope="module")
def cpu_results_before(layers):
    assert "device" not in myops.loaded_layers()
    return cpu_results()


@pytest.fixture(scope="module")
def device(cpu_results_before):
    # No backward may run before the device is loaded: the autograd engine starts its worker threads
    # once, at the first backward, for the devices registered by then (see csrc/device/backend.cpp).
    return myops.device.load()


ADD_CASES = {
    "same shape": (randn(5, 7), randn(5, 7, seed=1), {}),
    "alpha": (randn(5, 7), randn(5, 7, seed=1), {"alpha": 2.5}),
    "negative int alpha": (randn(5, 7), randn(5, 7, seed=1), {"alpha": -3}),
    "broadcast row": (randn(5, 7), randn(7, seed=1), {}),
    "broadcast both": (randn(5, 1), randn(1, 7, seed=1), {"alpha": 0.5}),
    "transposed": (randn(7, 5).t(), randn(5, 7, seed=1), {}),
    "python number": (randn(5, 7), 2, {}),
    "0-dim": (randn(), randn(seed=1), {}),
    "empty": (randn(0, 7), randn(0, 7, seed=1), {}),
    "promotion": (randn(5, 7), randn(5, 7, dtype=torch.float64, seed=1), {}),
}


def op_inputs(name):
    if name == "myadd":
        return (randn(6, 5), randn(6, 5, seed=1)), {}
    if name == "mymatmul":
        return (randn(6, 5), randn(5, 4, seed=1)), {}
    return (randn(3, 6), randn(6, seed=1)), {"eps": 1e-3}


class TestDevice:
    # -- the backend -----------------------------------------------------------------------------
    def test_loading_changes_no_cpu_result(self, cpu_results_before, device):
        (values_before, rows_before), (values_after, rows_after) = cpu_results_before, cpu_results()
        assert all(torch.equal(before, after) for before, after in zip(values_before, values_after))
        assert rows_before == rows_after
        x, y, w = randn(4, 4), randn(4, 4, seed=1), randn(4, 4, seed=2)
        a = x.clone().requires_grad_()
        myops.mymatmul(myops.myadd(a, y), w).sum().backward()  # d/da sum((a + y) w) = ones w^T
        torch.testing.assert_close(a.grad, torch.ones(4, 4) @ w.t())

    def test_backend_is_named_and_is_the_accelerator(self, device):
        assert torch._C._get_privateuse1_backend_name() == "mydevice"
        assert torch.device("privateuseone", 0) == device  # the key's own name still parses
        assert torch.accelerator.current_accelerator() == torch.device("mydevice")

    def test_loading_twice_is_harmless(self, device):
        myops.load("device")
        assert myops.loaded_layers().count("device") == 1
        assert torch._C._get_privateuse1_backend_name() == "mydevice"

    @pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.bool], ids=str)
    def test_round_trip(self, device, dtype):
        x = (randn(4, 6) * 10).to(dtype)
        d = x.to(device)
        assert d.device == device and d.dtype == dtype and torch._C._dispatch_keys(d).has("PrivateUse1")
        assert d.untyped_storage().device == device
        assert torch.equal(d.cpu(), x)
        t = x.t().to(device)  # _to_copy keeps the strides of a transposed tensor
        assert t.stride() == x.t().stride() and torch.equal(t.cpu(), x.t())

    def test_views_dtype_conversion_and_empty(self, device):
        x = randn(4, 6)
        d = x.to(device)
        assert torch.equal(d[1:, ::2].cpu(), x[1:, ::2])
        assert torch.equal(d.view(24).cpu(), x.view(24))
        assert torch.equal(d.t().contiguous().cpu(), x.t().contiguous())
        assert torch.equal(d.double().cpu(), x.double())
        assert torch.equal(d.to(device, copy=True).cpu(), x)  # device -> device
        empty = torch.empty(2, 3, device=device)
        assert empty.device == device and empty.shape == (2, 3)

    # -- aten::add, the out-of-tree way ----------------------------------------------------------
    @pytest.mark.parametrize("case", ADD_CASES)
    def test_aten_add_matches_cpu(self, device, case):
        x, y, kwargs = ADD_CASES[case]
        expected = torch.add(x, y, **kwargs)
        result = torch.add(x.to(device), y.to(device) if isinstance(y, torch.Tensor) else y, **kwargs)
        assert result.device == device and result.dtype == expected.dtype and result.shape == expected.shape
        # ATen's vectorized CPU loop fuses alpha * other + self (one rounding fewer): equal up to an ulp.
        torch.testing.assert_close(result.cpu(), expected, **({} if kwargs else {"rtol": 0, "atol": 0}))

    @pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
    def test_aten_add_half_types_compute_in_float(self, device, dtype):
        x, y = randn(5, 7, dtype=dtype), randn(5, 7, dtype=dtype, seed=1)
        result = torch.add(x.to(device), y.to(device), alpha=3).cpu()
        assert torch.equal(result, (x.float() + 3 * y.float()).to(dtype))
        torch.testing.assert_close(result, torch.add(x, y, alpha=3))

    def test_aten_add_in_place(self, device):
        x, y = randn(5, 7), randn(7, seed=1)
        d = x.to(device)
        storage = d.untyped_storage().data_ptr()
        d += y.to(device)
        d.add_(y.to(device), alpha=2)
        assert d.untyped_storage().data_ptr() == storage
        torch.testing.assert_close(d.cpu(), x + y + 2 * y)

    @pytest.mark.parametrize("make, error, message", [
        (lambda d: torch.ones(3, dtype=torch.int64).to(d) + 1, NotImplementedError,
         "aten::add.Tensor: the demo device adds only float16, bfloat16, float32 and float64 tensors, got Long; "
         "convert with .float(), or add on the CPU"),
        (lambda d: torch.ones(3).to(d) + torch.ones(3), RuntimeError,
         "aten::add.Tensor: expected both tensors on mydevice:0 (or a 0-dim CPU tensor), got mydevice:0 and cpu; "
         'move one with .to("mydevice:0")'),
        (lambda d: torch.ones(2, 4).to(d) + torch.ones(3).to(d), RuntimeError,
         "The size of tensor a (4) must match the size of tensor b (3) at non-singleton dimension 1"),
        (lambda d: torch.ones(3).to(d).add_(torch.ones(2, 3).to(d)), RuntimeError,
         "aten::add_.Tensor: output with shape [3] doesn't match the broadcast shape [2, 3]; add out of place instead"),
    ])
    def test_aten_add_refuses_clearly(self, device, make, error, message):
        with pytest.raises(error) as caught:
            make(device)
        assert str(caught.value).splitlines()[0] == message

    # -- one boxed kernel for three operators ----------------------------------------------------
    @pytest.mark.parametrize("name", ["myadd", "mymatmul", "myrmsnorm"])
    def test_boxed_kernel_runs_each_op(self, device, name):
        op = getattr(myops, name)
        tensors, kwargs = op_inputs(name)
        expected = op(*tensors, **kwargs)
        result = op(*(t.to(device) for t in tensors), **kwargs)
        assert result.device == device and result.dtype == expected.dtype
        assert torch.equal(result.cpu(), expected)  # the CPU kernel computed it: bit-identical

    @pytest.mark.parametrize("call, message", [
        (lambda d: myops.myadd(torch.ones(2, 3).to(d), torch.ones(3).to(d)),
         "myops::myadd: expected tensors of the same shape, got [2, 3] and [3]; "
         "broadcast them first, e.g. with torch.broadcast_tensors"),
        (lambda d: myops.mymatmul(torch.ones(2, 3).to(d), torch.ones(2, 3).to(d)),
         "myops::mymatmul: inner dimensions differ: self is [2, 3] and other is [2, 3]; "
         "self.shape[1] must equal other.shape[0]"),
        (lambda d: myops.myrmsnorm(torch.ones(2, 3).to(d), torch.ones(4).to(d)),
         "myops::myrmsnorm: expected weight of shape [3] (the last dimension of self), got [4]; "
         "pass one weight per element of the last dimension"),
        # Copying every argument to the CPU would hide a mix of devices from the CPU kernel's own check.
        (lambda d: myops.myadd(torch.ones(3).to(d), torch.ones(3)),
         "myops::myadd: expected every tensor on mydevice:0, got argument 'other' on cpu; "
         'move it with .to("mydevice:0")'),
    ])
    def test_boxed_kernel_keeps_myops_errors(self, device, call, message):
        with pytest.raises(RuntimeError) as caught:
            call(device)
        assert str(caught.value).splitlines()[0] == message

    def test_dispatch_table_rows(self, device):
        for op in ("myops::myadd", "myops::mymatmul", "myops::myrmsnorm"):
            assert torch._C._dispatch_has_kernel_for_dispatch_key(op, "PrivateUse1")
            entry, = dispatch.dispatch_table(op, keys=("PrivateUse1",))
            assert (entry.kind, entry.source) == ("kernel", "csrc/device/run_on_cpu.cpp")
        for op in ("aten::add.Tensor", "aten::add_.Tensor", "aten::empty.memory_format", "aten::empty_strided",
                   "aten::_copy_from", "aten::as_strided", "aten::view"):
            assert torch._C._dispatch_has_kernel_for_dispatch_key(op, "PrivateUse1"), op
        assert torch._C._dispatch_has_backend_fallback(torch._C.DispatchKey.PrivateUse1)
        assert not torch._C._dispatch_has_kernel_for_dispatch_key("aten::mul.out", "PrivateUse1")
        fallback, = dispatch.dispatch_table("aten::mul.out", keys=("PrivateUse1",))
        assert (fallback.kind, fallback.source) == ("fallback", "csrc/device/fallback.cpp")
        # The autograd kernels of notebook 04 are on the Autograd alias key: they serve AutogradPrivateUse1 too.
        autograd, = dispatch.dispatch_table("myops::mymatmul", keys=("AutogradPrivateUse1",))
        assert (autograd.kind, autograd.source) == ("kernel", "csrc/autograd/mymatmul.cpp")

    # -- autograd through the device -------------------------------------------------------------
    def test_gradients_through_the_device_match_cpu(self, device):
        a0, b0, w0, grad = randn(4, 5), randn(4, 5, seed=1), randn(5, 3, seed=2), randn(4, 3, seed=3)
        grads = {}
        for where in (torch.device("cpu"), device):
            a, b, w = (t.clone().to(where).requires_grad_() for t in (a0, b0, w0))
            out = myops.mymatmul(myops.myadd(a, b), w)
            assert out.device == where and out.grad_fn is not None
            out.backward(grad.to(where))
            grads[where.type] = [t.grad for t in (a, b, w)]
        assert all(g.device == device for g in grads["mydevice"])
        for cpu_grad, device_grad in zip(grads["cpu"], grads["mydevice"]):
            assert torch.equal(device_grad.cpu(), cpu_grad)

    def test_gradients_of_a_reused_tensor_are_added_on_the_device(self, device):
        # `a` enters the graph three times: the engine adds up its gradients with aten::add_ on the device.
        a0 = randn(3, 3)
        a = a0.to(device).requires_grad_()
        myops.mymatmul(myops.myadd(a, a), a).backward(torch.ones(3, 3).to(device))
        b = a0.clone().requires_grad_()
        myops.mymatmul(myops.myadd(b, b), b).backward(torch.ones(3, 3))
        torch.testing.assert_close(a.grad.cpu(), b.grad)

    # -- the fallback for every other operator ---------------------------------------------------
    @pytest.mark.parametrize("call, op", [
        # mul.Tensor has a generic kernel for every backend, which calls mul.out: that reaches the device.
        (lambda d: torch.mul(torch.ones(3).to(d), 2), "aten::mul.out"),
        (lambda d: torch.ones(3).to(d)[0].item(), "aten::_local_scalar_dense"),
        (lambda d: torch.ones(3, device=d), "aten::fill_.Scalar"),
        (lambda d: myops.myadd_(torch.ones(3).to(d), torch.ones(3).to(d)), "myops::myadd_"),
    ])
    def test_fallback_names_the_operator_and_the_fix(self, device, call, op):
        with pytest.raises(NotImplementedError) as caught:
            call(device)
        assert str(caught.value).splitlines()[0] == FALLBACK.format(op=op)
