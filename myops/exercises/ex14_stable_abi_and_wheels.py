"""Exercise 14: exercise 02's mymul on the LibTorch stable ABI, compiled for torch 2.13."""
import importlib.util
from pathlib import Path

import torch

from myops.exercises.expect import (call, expect_close, expect_raises, layouts, randn, require_kernel, require_op,
                                    require_only_allocations)
from myops.exercises.runner import Context, DoesNotCompile, Unsolved
from myops.paths import REPO_ROOT

SOURCE = "mymul.cpp"


def _wheeltools():
    """stable/wheeltools.py: the compile and nm helpers of notebook 14 and the stable wheel's tests."""
    spec = importlib.util.spec_from_file_location("wheeltools", REPO_ROOT / "stable" / "wheeltools.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _library(context: Context, tools) -> Path:
    """The learner's file compiled as the stable wheel is (stable/flags.py), linked to this torch."""
    source = (context.folder / SOURCE).resolve()
    torch_lib = Path(torch.__file__).parent / "lib"
    link = ["-Wl,--no-as-needed", f"-L{torch_lib}", "-ltorch", "-ltorch_cpu", "-lc10"]
    try:
        return tools.shared_library(source, [*tools.CXX_FLAGS, *link], "ex14",
                                    folder=context.build_dir / context.folder.name)
    except tools.WheelError as error:
        compiled, first = tools.compiles(source, tools.TORCH_TARGET_VERSION)
        if not compiled:
            raise DoesNotCompile(f"{context.file(SOURCE)} (for torch {tools.OLDEST_TORCH}'s stable ABI): "
                                 f"{first}") from None
        raise Unsolved(f"{context.file(SOURCE)} compiles but does not link: {str(error).splitlines()[-1]}") from None


def check(context: Context) -> None:
    if not (context.folder / SOURCE).is_file():
        raise Unsolved(f"{context.file(SOURCE)} does not exist")
    tools = _wheeltools()
    library = _library(context, tools)
    imported = tools.symbols(library)["torch C++"]
    if imported:
        raise Unsolved(f"the library of {context.file(SOURCE)} imports {len(imported)} C++ symbol(s) of libtorch or "
                       f"libc10 (such as {imported[0]}), which change between releases: include only headers of "
                       "torch/csrc/stable/ and torch/headeronly/, whose calls go through the C shim")
    call(f"loading the library of {context.file(SOURCE)}", torch.ops.load_library, str(library))
    require_op("ex14", "mymul", f"keep the STABLE_TORCH_LIBRARY block of {context.file(SOURCE)}")
    require_kernel(context, "ex14::mymul", "CPU", 'register mymul_cpu with m.impl("mymul", TORCH_BOX(&mymul_cpu)) '
                   "in the STABLE_TORCH_LIBRARY_IMPL(ex14, CPU, m) block")
    op = torch.ops.ex14.mymul.default
    for dtype in (torch.float32, torch.float64):
        for layout, a, b in layouts(dtype):
            expect_close(f"ex14::mymul on {layout} {dtype} inputs", call("ex14::mymul", op, a, b), a * b)
    require_only_allocations("ex14::mymul's kernel", op, randn(3, 4), randn(4, 3, seed=1).t(),
                             hint="do the arithmetic yourself, through data pointers")
    expect_raises("ex14::mymul on tensors of shapes [3] and [2]", op, randn(3), randn(2),
                  hint="check the shapes first (STD_TORCH_CHECK), as exercise 02 does")
    expect_raises("ex14::mymul on meta tensors", op, torch.ones(2, device="meta"), torch.ones(2, device="meta"),
                  errors=(NotImplementedError,), hint="its kernel must serve the CPU key only")
