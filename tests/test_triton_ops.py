"""tritonops::myrmsnorm{,_opaque,_portable}, the Triton kernel of myops/triton_ops.py as three operators: values
against a float64 reference and the C++ kernel (on CPU, through Triton's interpreter; on a GPU, compiled),
layouts, block tails and dtypes, bad inputs, gradients, the dispatch table, opcheck and torch.compile."""
import os
import subprocess
import sys

import pytest
import torch

import myops
from myops import dispatch
from myops.display import failures
from myops.paths import BUILD_DIR, REPO_ROOT
from helpers import DTYPE_IDS, FLOAT_DTYPES, TOLERANCES, needs_gpu, rmsnorm_layouts, rmsnorm_reference

RMSNORM_LAYOUTS = [name for name, _, _ in rmsnorm_layouts(torch.float32, "meta")]
OPS = ["tritonops::myrmsnorm_opaque", "tritonops::myrmsnorm", "tritonops::myrmsnorm_portable"]
TRITON_OPS = OPS[1:]  # made with triton_op


@pytest.fixture(scope="module")
def module():
    """myops.triton_ops: its kernel interpreted without a GPU, compiled by Triton with one."""
    import myops.triton_ops

    if not torch.cuda.is_available():
        assert myops.triton_ops.interpreted(), (
            "triton was imported in this process before tests/conftest.py could turn its interpreter on")
    return myops.triton_ops


@pytest.fixture(scope="module")
def T(module):
    """The module, for tests that run the kernel on CPU tensors (through the interpreter)."""
    if not module.interpreted():
        pytest.skip("a GPU is present: Triton compiles the kernel for it, and the CUDA tests of this file run it")
    return module


def op(T, name):
    return T.OPERATORS[name]


def case(name, dtype, device="cpu"):
    return next((x, w) for layout, x, w in rmsnorm_layouts(dtype, device) if layout == name)


# Every layout through the triton_op; the other two share its launcher (and the portable one's CPU kernel is
# PyTorch's), so two layouts each.
VALUE_CASES = [("tritonops::myrmsnorm", layout) for layout in RMSNORM_LAYOUTS] + [
    (name, layout) for name in (OPS[0], OPS[2]) for layout in ("contiguous", "transposed")]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name, layout", VALUE_CASES)
def test_values_match_the_reference_and_the_cpp_kernel(T, layers, name, dtype, layout):
    x, w = case(layout, dtype)
    rtol, atol = TOLERANCES[dtype]
    result = op(T, name)(x, w)
    assert result.dtype == dtype and result.shape == x.shape and result.is_contiguous()
    torch.testing.assert_close(result, rmsnorm_reference(x, w), rtol=rtol, atol=atol)
    torch.testing.assert_close(result, myops.myrmsnorm(x, w), rtol=rtol, atol=atol)
    torch.testing.assert_close(op(T, name)(x, w, 0.5), rmsnorm_reference(x, w, 0.5), rtol=rtol, atol=atol)


@pytest.mark.parametrize("cols", [1, 100, 1023, 1024, 1025, 2500])
def test_rows_that_are_no_multiple_of_the_block(T, cols):
    # Rows of 1025 and 2500 columns take two and three slices of 1024, the last one masked; 100 one slice of 128.
    g = torch.Generator().manual_seed(cols)
    x, w = torch.randn(3, cols, generator=g, dtype=torch.float64), torch.randn(cols, generator=g, dtype=torch.float64)
    torch.testing.assert_close(T.myrmsnorm(x, w), rmsnorm_reference(x, w), rtol=1e-12, atol=1e-12)
    # Each row alone gives the same values: no program reads a neighbouring row past its own end.
    for row in range(3):
        torch.testing.assert_close(T.myrmsnorm(x[row:row + 1].clone(), w), T.myrmsnorm(x, w)[row:row + 1])


def test_strided_input_is_read_in_place(T):
    # The launcher passes strides: a transposed matrix is launched as it is, not copied first.
    x, w = case("transposed", torch.float32)
    assert not x.is_contiguous() and x.reshape(-1, x.shape[-1]).data_ptr() == x.data_ptr()
    torch.testing.assert_close(T.myrmsnorm(x, w), T.myrmsnorm(x.contiguous(), w))


def test_one_program_per_row(T, monkeypatch):
    grids = []
    launch = T.rmsnorm_kernel.run

    def recording(*args, grid, **kwargs):
        grids.append(grid)
        return launch(*args, grid=grid, **kwargs)

    monkeypatch.setattr(T.rmsnorm_kernel, "run", recording)
    T.myrmsnorm(torch.ones(3, 5, 7), torch.ones(7))
    T.myrmsnorm(torch.ones(0, 7), torch.ones(7))  # no rows: no launch
    assert grids == [(15,)]


BAD_INPUTS = [  # (self, weight, eps, the message after the operator's name)
    (torch.ones(()), torch.ones(1), 1e-6,
     "expected a tensor with at least one dimension, got a 0-d tensor; normalize a 1-d view of it, e.g. x.reshape(1)"),
    (torch.ones(2, 3), torch.ones(4), 1e-6,
     "expected weight of shape [3] (the last dimension of self), got [4]; pass one weight per element of the last "
     "dimension"),
    (torch.ones(2, 3), torch.ones(3), -1.0, "eps must be >= 0, got -1.0; pass a small positive eps such as 1e-6"),
    (torch.ones(2, 3, dtype=torch.bfloat16), torch.ones(3), 1e-6,
     "expected tensors of the same dtype, got torch.bfloat16 and torch.float32; convert one with .to(dtype)"),
    (torch.ones(2, 3, dtype=torch.int32), torch.ones(3, dtype=torch.int32), 1e-6,
     "unsupported dtype torch.int32; supported are float16, bfloat16, float32 and float64, convert with .float()"),
]


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("x, w, eps, message", BAD_INPUTS, ids=["0-d", "weight", "eps", "dtypes", "int"])
def test_bad_input_names_the_operator_and_the_fix(T, name, x, w, eps, message, device):
    # On meta tensors the fake kernel runs: tracing refuses what running refuses, with the same words.
    with pytest.raises(RuntimeError) as error:
        op(T, name)(x.to(device), w.to(device), eps)
    assert str(error.value) == f"{name}: {message}"


@pytest.mark.parametrize("name", OPS)
def test_gradients(T, name):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 33, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(33, generator=g, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w: op(T, name)(x, w, 1e-6), (x, w))
    # float32 in, float32 gradients out, equal to autograd's through PyTorch operators
    x32, w32 = x.detach().float().requires_grad_(), w.detach().float().requires_grad_()
    ours = torch.autograd.grad(op(T, name)(x32, w32).square().sum(), (x32, w32))
    x_ref, w_ref = x.detach().float().requires_grad_(), w.detach().float().requires_grad_()
    theirs = torch.autograd.grad(T.reference(x_ref, w_ref).square().sum(), (x_ref, w_ref))
    for a, b in zip(ours, theirs):
        assert a.dtype == torch.float32
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_dispatch_tables(module):
    # custom_op registers the body on CompositeExplicitAutograd (every backend's default) and its own Meta and
    # Autograd kernels, which call what register_fake and register_autograd store; register_kernel("cpu") is the one
    # kernel on a backend key of its own.
    for name in OPS:
        kinds = {key: r.kind for key, r in dispatch.registrations(name).items()}
        assert kinds["CUDA"] == "default backend kernel" and kinds["Meta"] == "kernel"
        assert kinds["AutogradCPU"] == "autograd kernel"
        assert kinds["CPU"] == ("kernel" if name.endswith("_portable") else "default backend kernel")


def sample():
    g = torch.Generator().manual_seed(0)
    return torch.randn(4, 33, generator=g, dtype=torch.float64), torch.randn(33, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("name", OPS)
def test_opcheck_passes_where_compile_calls_the_operator(T, name):
    x, w = sample()
    with torch._functorch.config.patch(decompose_custom_triton_ops=False):
        assert failures(op(T, name), x, w, 1e-6) == {}
        assert failures(op(T, name), x.clone().requires_grad_(), w.clone().requires_grad_(), 1e-6) == {}


@pytest.mark.pytorch_pin
@pytest.mark.parametrize("name", TRITON_OPS)
def test_a_triton_op_is_decomposed_into_its_interpreted_kernel(T, name):
    # torch/_library/triton.py: triton_op's functional_decomp runs the body under FunctionalTensorMode, where
    # wrap_triton hands back the interpreter, which reads the data of tensors that have none.
    x, w = sample()
    found = failures(op(T, name), x, w, 1e-6)
    assert list(found) == ["test_aot_dispatch_dynamic"]
    assert "data pointer" in found["test_aot_dispatch_dynamic"]


@pytest.mark.pytorch_pin
def test_a_bare_triton_op_fails_its_fake_tensor_test(T):
    # Without register_fake, triton_op's fake kernel is its body: the interpreter runs on FakeTensors.
    bare = T.as_triton_op("tritonops::myrmsnorm_bare")
    x, w = sample()
    found = failures(bare, x, w, 1e-6)
    assert set(found) == {"test_faketensor", "test_aot_dispatch_dynamic"}
    assert found["test_faketensor"] == ('Attempted to set the storage of a tensor on device "meta" to a storage on '
                                        'different device "cpu".  This is no longer allowed; the devices must match.')


COMPILE_CHECK = """
import os
os.environ["TRITON_INTERPRET"] = "1"
import torch
from torch._inductor.utils import run_and_get_code
from myops import triton_ops

def f(x, w):
    return triton_ops.myrmsnorm(x.sin(), w) * 2

x, w = torch.randn(4, 33, dtype=torch.float64), torch.randn(33, dtype=torch.float64)
with torch._functorch.config.patch(decompose_custom_triton_ops=False):
    out, (code,) = run_and_get_code(torch.compile(f, fullgraph=True), x, w)
torch.testing.assert_close(out, triton_ops.reference(x.sin(), w) * 2)
assert "torch.ops.tritonops.myrmsnorm.default(" in code
torch._dynamo.reset()
try:
    torch.compile(f, fullgraph=True)(x, w)
except Exception as error:
    print(str(error).splitlines()[1])
"""


def test_compile_calls_the_operator_and_refuses_to_decompose_an_interpreted_kernel(T, tmp_path):
    # A process of its own, its temporary folder under build/: Inductor puts a large precompiled header into the
    # temporary folder whatever TORCHINDUCTOR_CACHE_DIR says (torch/_inductor/codecache.py, _HEADER_DIR).
    scratch = BUILD_DIR / "test_triton_ops"
    scratch.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TMPDIR": str(scratch), "TORCHINDUCTOR_CACHE_DIR": str(scratch / "inductor"),
           "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run([sys.executable, "-c", COMPILE_CHECK], cwd=REPO_ROOT, env=env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "RuntimeError: Attempted to access the data pointer on an invalid python storage."


# -- on a GPU: the kernel compiled by Triton, not interpreted ------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("layout", RMSNORM_LAYOUTS)
@needs_gpu
def test_compiled_kernel_on_cuda(module, layers, layout, dtype):
    gpu_op = module.myrmsnorm
    x, w = case(layout, dtype, "cuda")
    rtol, atol = TOLERANCES[dtype]
    result = gpu_op(x, w)
    assert result.device == x.device and result.is_contiguous()
    torch.testing.assert_close(result, rmsnorm_reference(x, w), rtol=rtol, atol=atol)
    torch.testing.assert_close(result, torch.nn.functional.rms_norm(x, (x.shape[-1],), w, 1e-6), rtol=rtol,
                               atol=atol)


@needs_gpu
def test_compiled_kernel_under_torch_compile_on_cuda(module, monkeypatch):
    from torch._inductor.utils import run_and_get_code

    # On a GPU compile decomposes the triton_op and Inductor launches the kernel itself.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(BUILD_DIR / "inductor"))
    gpu_op = module.myrmsnorm
    x, w = case("transposed", torch.float32, "cuda")
    torch._dynamo.reset()
    out, codes = run_and_get_code(torch.compile(lambda x, w: gpu_op(x.sin(), w) * 2, fullgraph=True), x, w)
    assert any("rmsnorm_kernel" in code for code in codes)
    assert not any("torch.ops.tritonops.myrmsnorm.default(" in code for code in codes)
    torch.testing.assert_close(out, module.reference(x.sin(), w) * 2, rtol=1e-5, atol=1e-5)



# -- the GPU check's Triton part, on CPU: the interpreted kernel and a stand-in timer ------------------------------
def test_the_gpu_checks_triton_measurement_runs_on_cpu(T, layers, tmp_path):
    from benchmarks import gpu

    plan = gpu.make_plan(gpu.parse_args(["--out", str(tmp_path)]))
    plan.myrmsnorm_shapes = ((3, 1500), (17, 64))
    results = {}
    gpu.measure_triton(plan, "cpu", lambda fn, t: (fn(), 1e-3)[1], 1e-3, 2**14, torch.Generator().manual_seed(0),
                       results, op=T.myrmsnorm)
    rows = results["triton"]
    assert [(r["dtype"], r["rows"]) for r in rows] == [(d, n) for d in gpu.DTYPES for n in (3, 17)]
    assert rows[0]["triton_GBps"] == pytest.approx(2 * 3 * 1500 * 2 / 1e-3 / 1e9) and rows[0]["ratio_vs_copy"] == 1
    assert "triton    float64   17x64" in gpu.summary({"measurements": results})
    assert (tmp_path / "triton_myrmsnorm_GBps.png") in gpu.write_results(tmp_path, {"measurements": results})
    skipped = {}
    gpu.measure_triton(plan, "cpu", None, 1e-3, 0, None, skipped)  # no operator given: nothing runs on a CPU
    assert skipped == {"triton": [{"skipped": "Triton compiles kernels for GPUs: nothing to measure on cpu"}]}
