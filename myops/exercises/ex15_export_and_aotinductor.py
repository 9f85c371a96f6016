"""Exercise 15: a model on ex15's operators through torch.export and an AOTInductor package."""
import json
import zipfile
from pathlib import Path

import torch

from myops.exercises.expect import call, expect_close, opcheck, randn, require_op
from myops.exercises.runner import Context, Unsolved, one_line
from myops.paths import relative_path, temp_dir_in_build

MODEL = "model.py"
OPERATORS = ("ex15::myscale", "ex15::myscale_")


def _reference(model, x):
    return x * model.scale * x[0]


def _require_fake_kernels(context: Context, myscale, myscale_) -> None:
    """export traces with fake tensors: both operators must run on them (a Meta kernel or a register_fake), refuse
    what the CPU kernels refuse, and return what they return."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    for name, op in (("ex15::myscale", myscale), ("ex15::myscale_", myscale_)):
        with FakeTensorMode():
            try:
                op(torch.empty(3, 8), torch.empty(8))
            except Exception as error:
                fix = (f"give it a Meta kernel (TORCH_LIBRARY_IMPL(ex15, Meta, m) in {context.file('myscale.cpp')}) "
                       "or a fake kernel")
                if torch._C._dispatch_has_kernel_for_dispatch_key(name, "Meta"):
                    fix = ("its Meta kernel must make its result where its inputs are, on the meta device (with "
                           "self's options, changing no more than the memory format)")
                raise Unsolved(f"{name} on fake tensors (what torch.export traces with) raised {one_line(error)}: "
                               f"{fix}") from None
        with FakeTensorMode():
            try:
                op(torch.empty(3, 8), torch.empty(5))
            except Exception:
                continue
        raise Unsolved(f"{name} on fake tensors of shapes [3, 8] and [5] did not raise: the fake kernel must "
                       "refuse what the CPU kernel refuses (the same check_inputs)")
    # opcheck runs each sample on fake tensors and on real ones and compares every output's shape, dtype,
    # device, strides, storage offset and aliasing (torch/_subclasses/fake_utils.py, CrossRefFakeMode).
    for name, op, samples in (("ex15::myscale", myscale, _samples(contiguous_only=False)),
                              ("ex15::myscale_", myscale_, _samples(contiguous_only=True))):
        for layout, args in samples:
            opcheck(f"{name} on {layout} x", op, [args], ("test_schema", "test_faketensor"), hints=_FAKE_HINT)


_FAKE_HINT = {"test_faketensor": " (the fake kernel must return what the CPU kernel returns: the same shape, dtype, "
                                 "device and strides, and for myscale_ self itself; myscale_cpu's output is "
                                 "contiguous whatever self's layout)"}


def _samples(contiguous_only: bool):
    """(layout, (x, scale)) in two dtypes; myscale_cpu writes only a contiguous x, so myscale_ gets only those."""
    yield "a contiguous float32", (randn(3, 8), randn(8, seed=1))
    yield "a 3-d float64", (randn(2, 3, 8, dtype=torch.float64), randn(8, dtype=torch.float64, seed=1))
    if not contiguous_only:
        yield "a transposed float32", (randn(8, 3).t(), randn(8, seed=1))
        yield "a sliced float64", (randn(6, 16, dtype=torch.float64)[1:4, ::2], randn(8, dtype=torch.float64, seed=1))


def _require_functionalizable(myscale_) -> None:
    """export's functionalization takes a custom in-place operator that returns its written argument only when
    the operator says it is in place (torch.Tag.inplace); can_auto_functionalize is its test."""
    from torch._higher_order_ops.auto_functionalize import can_auto_functionalize

    if not can_auto_functionalize(myscale_):
        raise Unsolved("ex15::myscale_ returns the tensor it writes (-> Tensor(a!)) and has no inplace tag, so "
                       "export's functionalization refuses it: define it with m.def(..., {at::Tag::inplace})")


def _targets(program) -> set[str]:
    """The operators the program's graph calls, an auto_functionalized call counted as the one it wraps."""
    found = set()
    for node in program.graph.nodes:
        if node.op == "call_function":
            target = node.args[0] if "auto_functionalized" in str(node.target) else node.target
            found.add(str(target).split(".default")[0].replace(".", "::", 1))
    return found


def check(context: Context) -> None:
    myscale = require_op("ex15", "myscale", f"keep the TORCH_LIBRARY block of {context.file('myscale.cpp')}")
    myscale_ = require_op("ex15", "myscale_", f"keep the TORCH_LIBRARY block of {context.file('myscale.cpp')}")
    module = context.load_python(MODEL)
    _require_fake_kernels(context, myscale, myscale_)
    _require_functionalizable(myscale_)

    model = call(f"Scaled() of {context.file(MODEL)}", module.Scaled)
    x = randn(4, 8)
    expect_close("Scaled()(x) in eager mode", call("Scaled()(x)", model, x), _reference(model, x))
    program = call(f"export_model of {context.file(MODEL)}", module.export_model, model, (x,))
    if not isinstance(program, torch.export.ExportedProgram):
        raise Unsolved(f"export_model returned {type(program).__name__}, not the torch.export.ExportedProgram "
                       "of torch.export.export(model, example_inputs)")
    missing = [name for name in OPERATORS if name not in _targets(program)]
    if missing:
        raise Unsolved(f"the exported graph does not call {', '.join(missing)}: export the model it was given, "
                       "whose forward calls both operators")

    path = Path(call(f"compile_package of {context.file(MODEL)}", module.compile_package, program,
                     context.build_dir / context.folder.name / "model.pt2"))
    if not path.is_file() or not zipfile.is_zipfile(path):
        raise Unsolved(f"compile_package returned {relative_path(path)}, which is no .pt2 package: return the path that "
                       "torch._inductor.aoti_compile_and_package wrote")
    archive = zipfile.ZipFile(path)
    described = [name for name in archive.namelist() if name.endswith(".json") and "/aotinductor/" in name]
    externs = {node["node"]["target"] for name in described
               for node in json.loads(archive.read(name)).get("nodes", []) if isinstance(node, dict)}
    if not set(OPERATORS) <= externs:
        raise Unsolved(f"the package at {path.name} does not call {', '.join(set(OPERATORS) - externs)} through "
                       "its proxy executor: compile the program export_model returned, with "
                       "torch._inductor.aoti_compile_and_package")

    temp_dir_in_build("ex15")  # the loader's extracted package stays out of /tmp
    compiled = call("torch._inductor.aoti_load_package", torch._inductor.aoti_load_package, str(path))
    x2 = randn(4, 8, seed=1)
    from torch.autograd.profiler import profile

    with profile() as prof:
        out = call("the AOTInductor package", compiled, x2)
    expect_close("the AOTInductor package's output", out, _reference(model, x2))
    ran = {event.name for event in prof.function_events}
    if not set(OPERATORS) <= ran:
        raise Unsolved(f"the package ran without calling {', '.join(sorted(set(OPERATORS) - ran))}")
