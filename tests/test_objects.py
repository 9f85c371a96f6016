"""The objects layer (csrc/objects/, myops/objects.py): a C++ class, RunningStats, that operators take as an
argument. Its statistics and the operators' values against torch, bad inputs, pickling, what the dispatcher sees
of an object, and the object through torch.compile, torch.export and AOTInductor; what was saved is loaded in
fresh processes, with the layer and without it."""
import copy
import io
import pickle
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend

from myops import dispatch, objects
from myops.build import REPO_ROOT

from helpers import DTYPE_IDS, FLOAT_DTYPES, TOLERANCES, sample_inputs

sys.path.insert(0, str(REPO_ROOT / "csrc" / "deploy"))
import deploytools  # noqa: E402  (run_python: a fresh process with its temporary folder under build/)

LAYOUTS = [name for name, _, _ in sample_inputs(torch.float32, "meta")]


@pytest.fixture(scope="module", autouse=True)
def layer():
    objects.load()  # Inductor's cache is in build/ for the whole suite (conftest.py), child processes included


def fed(*tensors: torch.Tensor) -> torch.ScriptObject:
    return objects.running_stats(*tensors)


def every_value(*tensors: torch.Tensor) -> torch.Tensor:
    """The reference's input: every element of every tensor, in float64."""
    return torch.cat([t.detach().double().flatten() for t in tensors])


def sample_tensors(dtype: torch.dtype) -> list[torch.Tensor]:
    """Both tensors of every layout of helpers.sample_inputs (0-dim and empty included), as they are."""
    return [t for _, a, b in sample_inputs(dtype) for t in (a, b)]


def shifted_stats() -> torch.ScriptObject:
    """An object that has seen 1,000 values of mean ~2 and variance ~9, in three tensors."""
    values = 3 * torch.randn(1000, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) + 2
    return fed(values[:100], values[100:700].view(20, 30).t(), values[700:])


# -- the object's statistics ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_statistics_are_those_of_every_value_fed(dtype):
    tensors = sample_tensors(dtype)
    stats = fed(*tensors)
    values = every_value(*tensors)
    assert stats.count() == values.numel()
    torch.testing.assert_close(stats.mean(), values.mean().item(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(stats.variance(), torch.var(values, unbiased=False).item(), rtol=1e-10, atol=0)
    summary = objects.summary(stats)
    assert summary.dtype == torch.float64 and summary.shape == (3,)
    assert summary.tolist() == [stats.count(), stats.mean(), stats.variance()]


def test_merging_stays_accurate_far_from_zero():
    # Five tensors of values near 1e8 with variance ~1: a sum of squares would keep no digit of the variance.
    chunks = [1e8 + torch.randn(1000, dtype=torch.float64, generator=torch.Generator().manual_seed(i)) for i in range(5)]
    stats = fed(*chunks)
    torch.testing.assert_close(stats.variance(), torch.var(torch.cat(chunks), unbiased=False).item(), rtol=1e-9, atol=0)


def test_an_object_that_has_seen_nothing():
    stats = fed(torch.empty(0, 3))  # an empty tensor adds nothing
    assert stats.count() == 0 and stats.__obj_flatten__() == (("count", 0), ("mean", 0.0), ("m2", 0.0))
    assert torch.isnan(torch.tensor([stats.mean(), stats.variance()])).all()  # as torch.mean of nothing is nan
    assert objects.summary(stats)[0] == 0 and objects.summary(stats)[1:].isnan().all()


def test_one_value_has_variance_zero_and_the_state_is_flattened_raw():
    stats = fed(torch.tensor([5.0]))
    assert (stats.count(), stats.mean(), stats.variance()) == (1, 5.0, 0.0)
    stats.update(torch.tensor([7.0, 9.0]))
    assert stats.__obj_flatten__() == (("count", 3), ("mean", 7.0), ("m2", 8.0))


def test_update_ignores_autograd_and_inference_mode():
    x = torch.randn(4, 5, requires_grad=True)
    stats = fed(x)
    with torch.inference_mode():
        stats.update(torch.randn(3))
    assert stats.count() == 23 and x.grad is None


# -- the operators -------------------------------------------------------------------------------------------------
def standardize_reference(stats: torch.ScriptObject, x: torch.Tensor, eps: float) -> torch.Tensor:
    return ((x.double() - stats.mean()) / (stats.variance() + eps) ** 0.5).to(x.dtype)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name", LAYOUTS)
def test_standardize_matches_reference(name, dtype):
    x = next(a for case, a, _ in sample_inputs(dtype) if case == name)
    stats = shifted_stats()
    rtol, atol = TOLERANCES[dtype]
    for eps in (1e-5, 0.5):
        result = objects.standardize(stats, x, eps)
        assert result.dtype == dtype and result.shape == x.shape and result.is_contiguous()
        torch.testing.assert_close(result, standardize_reference(stats, x, eps), rtol=rtol, atol=atol)
    assert torch.equal(torch.ops.myops_objects.standardize(stats, x), objects.standardize(stats, x, 1e-5))


def test_eps_is_used():
    stats = fed(torch.full((4,), 3.0))  # variance 0
    torch.testing.assert_close(objects.standardize(stats, torch.tensor([5.0, 1.0]), eps=4.0), torch.tensor([1.0, -1.0]))
    assert torch.equal(objects.standardize(stats, torch.ones(2), eps=float("inf")), torch.zeros(2))


BAD_UPDATES = [
    (torch.ones(3, dtype=torch.int64),
     "RunningStats.update: expected a floating-point tensor, got Long; convert it with x.double()"),
    (torch.ones(3, dtype=torch.complex64),
     "RunningStats.update: expected a floating-point tensor, got ComplexFloat; convert it with x.double()"),
    (torch.ones(3, device="meta"),
     "RunningStats.update: expected a CPU tensor, got one on meta; the object keeps its statistics on the CPU: "
     "pass x.cpu()"),
    (torch.ones(3).to_sparse(),
     "RunningStats.update: expected a dense (strided) tensor; convert sparse inputs with .to_dense()"),
    (torch.tensor([1.0, float("nan")]),
     "RunningStats.update: x holds non-finite values (nan or inf), which would make every later mean and variance "
     "nan; drop them first, e.g. x[x.isfinite()]"),
    (torch.tensor([1.0, float("inf")], dtype=torch.float16),
     "RunningStats.update: x holds non-finite values (nan or inf), which would make every later mean and variance "
     "nan; drop them first, e.g. x[x.isfinite()]"),
    (torch.tensor([1e200, -1e200], dtype=torch.float64),
     "RunningStats.update: the values are too large to accumulate in float64 (the sum of their squared deviations "
     "overflows); scale x down first, e.g. x / x.abs().max()"),
]


@pytest.mark.parametrize("x, message", BAD_UPDATES, ids=["int", "complex", "meta", "sparse", "nan", "inf", "overflow"])
def test_bad_update_message_and_the_state_is_unchanged(x, message):
    stats = fed(torch.arange(4.0))
    before = stats.__obj_flatten__()
    with pytest.raises(RuntimeError) as error:
        stats.update(x)
    assert str(error.value).splitlines()[0] == message
    assert stats.__obj_flatten__() == before


def test_a_merge_that_would_overflow_is_refused_and_the_state_is_unchanged():
    stats = fed(torch.tensor([-1e200], dtype=torch.float64))  # each tensor alone is fine; together they overflow
    with pytest.raises(RuntimeError, match=r"^RunningStats.update: the values are too large to accumulate in float64"):
        stats.update(torch.tensor([1e200], dtype=torch.float64))
    assert stats.__obj_flatten__() == (("count", 1), ("mean", -1e200), ("m2", 0.0))


BAD_STANDARDIZE = [  # (values fed, x, eps, message)
    ([], torch.ones(2), 1e-5,
     "myops_objects::standardize: stats has seen no values yet; call stats.update(x) first"),
    ([1.0, 2.0], torch.ones(2, dtype=torch.int32), 1e-5,
     "myops_objects::standardize: unsupported dtype Int; supported are float16, bfloat16, float32 and float64, "
     "convert with .float()"),
    ([1.0, 2.0], torch.ones(2), -1.0,
     "myops_objects::standardize: eps must be >= 0, got -1; pass a small positive eps such as 1e-5"),
    ([1.0, 2.0], torch.ones(2), float("nan"),
     "myops_objects::standardize: eps must be >= 0, got nan; pass a small positive eps such as 1e-5"),
    ([3.0, 3.0], torch.ones(2), 0.0,
     "myops_objects::standardize: the variance of stats is 0 (every value it has seen is equal) and eps is 0, so "
     "every output would be inf or nan; pass eps > 0"),
]


@pytest.mark.parametrize("values, x, eps, message", BAD_STANDARDIZE,
                         ids=["no values", "dtype", "eps", "eps nan", "zero variance"])
def test_bad_standardize_message(values, x, eps, message):
    stats = fed(torch.tensor(values))
    with pytest.raises(RuntimeError) as error:
        objects.standardize(stats, x, eps)
    assert str(error.value).splitlines()[0] == message


def test_the_fake_kernel_checks_what_does_not_depend_on_the_object():
    # Reached here through the Meta key; torch.compile and torch.export call it with a fake object.
    stats = fed(torch.arange(3.0))
    with pytest.raises(RuntimeError) as error:
        objects.standardize(stats, torch.ones(2, dtype=torch.int32, device="meta"))
    assert str(error.value) == ("myops_objects::standardize: unsupported dtype torch.int32; supported are float16, "
                                "bfloat16, float32 and float64, convert with .float()")
    with pytest.raises(RuntimeError, match=r"^myops_objects::standardize: eps must be >= 0, got -1; pass a small"):
        objects.standardize(stats, torch.ones(2, device="meta"), -1.0)


# -- pickling ------------------------------------------------------------------------------------------------------
def test_pickle_deepcopy_and_torch_save_round_trip():
    stats = fed(torch.randn(50, generator=torch.Generator().manual_seed(0)))
    state = stats.__obj_flatten__()
    assert pickle.loads(pickle.dumps(stats)).__obj_flatten__() == state
    assert copy.deepcopy(stats).__obj_flatten__() == state
    buffer = io.BytesIO()
    torch.save({"stats": stats}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)["stats"]
    assert loaded.__obj_flatten__() == state and loaded._type().qualified_name() == (
        "__torch__.torch.classes.myops_objects.RunningStats")


@pytest.mark.pytorch_pin
def test_torch_load_refuses_a_script_object_by_default():
    buffer = io.BytesIO()
    torch.save(fed(torch.ones(2)), buffer)
    buffer.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        torch.load(buffer)


def test_a_damaged_state_is_refused():
    blob = pickle.dumps(fed(torch.arange(4.0)), protocol=2)
    assert blob.count(b"K\x04") == 1  # the count, 4, as pickle's one-byte integer; made -1 below
    with pytest.raises(RuntimeError) as error:
        pickle.loads(blob.replace(b"K\x04", b"J\xff\xff\xff\xff"))
    assert str(error.value).splitlines()[0] == (
        "RunningStats.__setstate__: not a valid state (count -1, mean 1.5, m2 5): expected count >= 0, a finite mean "
        "and a finite m2 >= 0 (both 0 when count is 0); the saved object is damaged: save it again")


# -- what the dispatcher sees --------------------------------------------------------------------------------------
def test_an_object_adds_no_dispatch_key():
    # summary's only argument is the object: the call's key set is empty and lands on the table's Undefined entry,
    # which only the CompositeExplicitAutograd kernel fills ("default backend kernel").
    table = dispatch.registrations("myops_objects::summary")
    assert table["Undefined"].kind == "default backend kernel"
    assert dispatch.repo_path(table["Undefined"].file) == "csrc/objects/running_stats.cpp"
    assert objects.summary(fed(torch.ones(2))).tolist() == [2.0, 1.0, 0.0]
    # standardize has a CPU kernel and a Meta one (the Python fake), and nothing at Undefined: the tensor alone
    # decides the kernel.
    table = dispatch.registrations("myops_objects::standardize")
    assert "Undefined" not in table and table["CPU"].kind == "kernel" and table["Meta"].file.endswith("library.py")
    meta = objects.standardize(fed(torch.arange(3.0)), torch.empty(2, 3, device="meta"))
    assert meta.device.type == "meta" and meta.shape == (2, 3)


# -- torch.compile -------------------------------------------------------------------------------------------------
def standardize_and_shift(stats, x):
    return objects.standardize(stats, x) * 2 + objects.summary(stats)[1]


def test_compiled_function_taking_the_object_equals_eager():
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")  # AOTAutograd traces with the fake object and fake kernels
    compiled = torch.compile(standardize_and_shift, fullgraph=True, backend=counter)
    stats, x = shifted_stats(), torch.randn(4, 5)
    torch.testing.assert_close(compiled(stats, x), standardize_and_shift(stats, x))
    [graph] = counter.graphs
    assert "L_stats_ : torch.ScriptObject" in graph.code  # the object is an input of the graph
    assert "myops_objects.standardize.default(l_stats_" in graph.code and "summary.default(l_stats_" in graph.code
    # Another object in the same state: no recompile (Dynamo guards on the state, not on which object it is).
    torch.testing.assert_close(compiled(shifted_stats(), x), standardize_and_shift(stats, x))
    assert counter.frame_count == 1


def test_a_change_of_state_recompiles_and_the_value_stays_right():
    # Dynamo guards on the values of __obj_flatten__(); after one change they become dynamic (no more recompiles),
    # and the operators read the real object when the graph runs, so every value stays right.
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled = torch.compile(standardize_and_shift, fullgraph=True, backend="aot_eager")
    stats, x = fed(torch.randn(10, dtype=torch.float64)), torch.randn(4, 5)
    graphs = []
    for step in range(4):
        torch.testing.assert_close(compiled(stats, x), standardize_and_shift(stats, x))
        graphs.append(torch._dynamo.utils.counters["stats"]["unique_graphs"])
        stats.update(torch.randn(3) + step)
    assert graphs == [1, 2, 2, 2]


@pytest.mark.pytorch_pin
def test_a_method_result_is_baked_into_the_graph_and_goes_stale_once_dynamic():
    """A method called in compiled code (stats.mean()) is run on the fake object while tracing and its result
    becomes a constant of the graph. Right while Dynamo guards on the state; after the second state, the flattened
    values turn dynamic, no guard checks them, and the graph keeps returning the old mean. dynamic=False keeps the
    guards (one compile per state); summary(stats) in the graph reads the real object and is always right."""
    def shifted(stats, x):
        return x - stats.mean()

    def shifted_by_summary(stats, x):
        return x - objects.summary(stats)[1]

    x = torch.zeros(2)
    results = {}
    for name, function, options in (("method", shifted, {}), ("method, dynamic=False", shifted, {"dynamic": False}),
                                    ("summary", shifted_by_summary, {})):
        torch._dynamo.reset()
        compiled = torch.compile(function, fullgraph=True, backend="aot_eager", **options)
        stats = fed(torch.tensor([1.0]))
        results[name] = []
        for value in (3.0, 5.0, 7.0):  # means 2, 3, 4
            stats.update(torch.tensor([value]))
            results[name].append(-compiled(stats, x)[0].item())
    assert results == {"method": [2.0, 3.0, 3.0], "method, dynamic=False": [2.0, 3.0, 4.0], "summary": [2.0, 3.0, 4.0]}


def test_update_inside_compiled_code_is_refused_by_the_fake():
    def observe(stats, x):
        stats.update(x)
        return x + 1

    torch._dynamo.reset()
    with pytest.raises(Exception, match=r"RunningStats.update: cannot be traced \(torch.compile, torch.export\): the "
                                        r"new statistics depend on the values of x; call stats.update\(x\) outside"):
        torch.compile(observe, fullgraph=True, backend="aot_eager")(fed(torch.ones(2)), torch.ones(3))


def test_the_fake_class_has_every_flattened_key_and_the_methods():
    stats = fed(torch.tensor([1.0, 2.0, 6.0]))
    fake = objects.FakeRunningStats.__obj_unflatten__(stats.__obj_flatten__())
    assert all(hasattr(fake, key) for key, _ in stats.__obj_flatten__())  # Dynamo reads each (output_graph.py)
    assert (fake.count(), fake.mean(), fake.variance()) == (stats.count(), stats.mean(), stats.variance())
    assert {"update", "count", "mean", "variance"} <= set(dir(fake))


# -- fresh processes -----------------------------------------------------------------------------------------------
# Only the C++ layer: neither the fake class nor the fake kernels (importing myops.objects registers nothing).
BARE_LAYER = """
import sys, torch
import myops.objects
from myops import build
build.load_layer("objects")
stats = torch.classes.myops_objects.RunningStats()
stats.update(torch.arange(4.0))
try:
    torch.ops.myops_objects.standardize(stats, torch.ones(2, device="meta"))
except NotImplementedError as error:
    print(str(error).split(". ")[0])
try:
    torch.compile(lambda s, x: torch.ops.myops_objects.standardize(s, x), fullgraph=True, backend="eager")(
        stats, torch.ones(2))
except Exception as error:
    print(str(error).strip().splitlines()[0])
"""


def test_without_the_fakes_meta_and_compile_fail_and_name_the_fix():
    result = deploytools.run_python(BARE_LAYER)
    assert result.returncode == 0, result.stderr[-3000:]
    meta, compile_error = result.stdout.splitlines()
    assert meta == ("myops_objects::standardize: attempted to run this operator with Meta tensors, but there was no "
                    "fake impl or Meta kernel registered")
    assert ("ScriptObject's __torch__.torch.classes.myops_objects.RunningStats haven't registered a fake class. "
            "Please use register_fake_class(myops_objects::RunningStats) to annotate a fake class") in compile_error


class Standardizer(torch.nn.Module):
    """A module holding the object: torch.export lifts it to an input of the program and saves it pickled."""

    def __init__(self):
        super().__init__()
        self.stats = fed(torch.arange(10.0))

    def forward(self, x):
        return objects.standardize(self.stats, x) * 2 + objects.summary(self.stats)[2]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("objects")
    model, x = Standardizer(), torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    program = torch.export.export(model, (x,), strict=False)  # strict=True keeps a fake object: unusable
    torch.export.save(program, folder / "program.pt2")
    torch.save(x, folder / "x.pt")
    return program, model(x), folder


def test_export_lifts_the_object_to_an_input_and_runs(exported):
    program, expected, folder = exported
    kinds = [(spec.kind.name, spec.target) for spec in program.graph_signature.input_specs]
    assert kinds == [("CUSTOM_OBJ", "stats"), ("USER_INPUT", None)]
    torch.testing.assert_close(program.module()(torch.load(folder / "x.pt")), expected)


# argv: with-layer|bare, then the files: the program, its input, where to write the output.
LOAD_PROGRAM = """
import sys, torch
from myops import build
if sys.argv[1] == "with-layer":
    build.load_layer("objects")  # the C++ alone: running a loaded program needs no fake
try:
    load = torch._inductor.aoti_load_package if sys.argv[2].endswith(".aoti.pt2") else torch.export.load
    program = load(sys.argv[2])
except RuntimeError as error:
    print(str(error).strip().splitlines()[0])
    sys.exit(1)
run = program.module() if isinstance(program, torch.export.ExportedProgram) else program
torch.save(run(torch.load(sys.argv[3])), sys.argv[4])
"""


def test_a_saved_program_loads_and_runs_in_a_fresh_process(exported):
    _, expected, folder = exported
    result = deploytools.run_python(LOAD_PROGRAM, "with-layer", str(folder / "program.pt2"), str(folder / "x.pt"),
                                    str(folder / "out.pt"))
    assert result.returncode == 0, result.stderr[-3000:]
    torch.testing.assert_close(torch.load(folder / "out.pt"), expected)


@pytest.mark.pytorch_pin
def test_without_the_layer_the_program_does_not_load(exported):
    _, _, folder = exported
    result = deploytools.run_python(LOAD_PROGRAM, "bare", str(folder / "program.pt2"), str(folder / "x.pt"),
                                    str(folder / "unused.pt"))
    assert result.returncode == 1
    assert result.stdout == ("We ran into an error when deserializing the saved file. Please check the warnings above "
                             "for possible errors.\n")
    # The cause, in the warning logged before (its format string is broken in torch 2.14.1).
    assert ("Couldn't resolve type '{}', did you forget to add its build dependency?"
            "__torch__.torch.classes.myops_objects.RunningStats") in result.stderr


# argv: the program, the package to write, the temporary folder (before torch: Inductor reads it on import).
COMPILE_PACKAGE = """
import os, sys
os.environ["TMPDIR"] = sys.argv[3]
import torch
from myops import objects
objects.load()
torch._inductor.aoti_compile_and_package(torch.export.load(sys.argv[1]), package_path=sys.argv[2])
"""


def test_an_aotinductor_package_runs_in_a_fresh_process_and_leaves_nothing_in_tmp(exported):
    # Compiled in a process of its own, whose temporary folder is build/inductor-tmp/: Inductor writes its
    # precompiled header (150 MB, half a minute) there whatever TORCHINDUCTOR_CACHE_DIR says, made once and kept
    # (as exercise 17's check does). The loader extracts the package into run_python's folder under build/tmp/.
    _, expected, folder = exported
    before = set(Path(tempfile.gettempdir()).glob("aotinductor_*"))
    package = folder / "program.aoti.pt2"
    inductor_tmp = REPO_ROOT / "build" / "inductor-tmp"
    inductor_tmp.mkdir(parents=True, exist_ok=True)
    made = deploytools.run_python(COMPILE_PACKAGE, str(folder / "program.pt2"), str(package), str(inductor_tmp))
    assert made.returncode == 0, made.stderr[-3000:]
    result = deploytools.run_python(LOAD_PROGRAM, "with-layer", str(package), str(folder / "x.pt"),
                                    str(folder / "aoti_out.pt"))
    assert result.returncode == 0, result.stderr[-3000:]
    torch.testing.assert_close(torch.load(folder / "aoti_out.pt"), expected)
    assert set(Path(tempfile.gettempdir()).glob("aotinductor_*")) == before
