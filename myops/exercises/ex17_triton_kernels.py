"""Exercise 17: ex17::myaxpy, a Triton kernel made an operator with triton_op, checked without a GPU.

The kernel runs under Triton's interpreter, switched on as notebook 17 does (myops.triton_interpreter, which
leaves no TRITON_INTERPRET variable behind). It executes each program with NumPy on CPU tensors and reads memory
through raw addresses: a load past the end of a tensor reads whatever lies there, silently. The check therefore
watches every address the kernel loads from or stores to and refuses one outside the tensors it was given. The
CPU fallback is checked in a second process, without the interpreter, where Triton cannot run CPU tensors at all.
"""
import os

if __name__ != "__main__":  # the fallback's process (see the end) runs without the interpreter
    from myops.triton_interpreter import use_triton_interpreter

    use_triton_interpreter()  # before triton.jit decorates the learner's kernel

import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch._library.triton import triton_ops_to_kernels

from myops.dispatch import registrations
from myops.exercises.expect import (call, expect_close, expect_grads, expect_raises, layouts, opcheck, randn,
                                    require_op)
from myops.exercises.runner import Context, Unsolved, one_line
from myops.paths import BUILD_DIR, REPO_ROOT

FILE = "myaxpy.py"
OP = "ex17::myaxpy"
SCHEMA = "ex17::myaxpy(Tensor x, Tensor y, float alpha) -> Tensor"
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
NO_DECOMPOSITION = ("torch.compile decomposes a triton_op into its Triton kernel whatever the inputs' device, and "
                    "Triton cannot run it on CPU tensors (nor the interpreter on fake ones), GPU or not: keep "
                    "ex17::myaxpy whole with a FunctionalTensorMode rule of its own (myaxpy.register_torch_dispatch) "
                    "that returns mode.__torch_dispatch__(func, types, args, kwargs), or set "
                    "torch._functorch.config.decompose_custom_triton_ops = False, which keeps every triton_op of the "
                    "process whole")
_RESULT_TAG = "@@ex17-fallback "


# -- watching the interpreter --------------------------------------------------------------------------------

class _Watch:
    """Launches of interpreted kernels, and the first access outside the tensors a launch was given."""

    def __init__(self):
        self.launches = 0
        self.ranges: list[tuple[int, int]] = []  # [start, end) byte ranges of the launch's tensor storages
        self.outside: str | None = None  # "read 3 elements", "wrote 3 elements"

    def check(self, verb: str, ptrs, mask) -> None:
        addresses = ptrs.data[np.broadcast_to(mask.data, ptrs.data.shape)].astype(np.uint64)
        size = np.dtype(_np_dtype(ptrs.get_element_ty())).itemsize
        inside = np.zeros(addresses.shape, dtype=bool)
        for start, end in self.ranges:
            inside |= (addresses >= start) & (addresses + size <= end)
        if not inside.all() and self.outside is None:
            self.outside = f"{verb} {int((~inside).sum())} element(s)"
            raise IndexError(f"{OP}'s kernel {self.outside} outside the tensors it was given")


def _np_dtype(triton_type):
    from triton.runtime.interpreter import _get_np_dtype

    return _get_np_dtype(triton_type)


@contextlib.contextmanager
def watched():
    """Count interpreted launches and check every masked-in address of every load and store meanwhile."""
    from triton.runtime import interpreter

    watch = _Watch()
    builder = interpreter.InterpreterBuilder
    init_args, load, store = (interpreter.GridExecutor._init_args_hst, builder.create_masked_load,
                              builder.create_masked_store)

    def init_args_watched(self, args, kwargs):
        args_hst, kwargs_hst = init_args(self, args, kwargs)
        watch.launches += 1
        storages = [a.untyped_storage() for a in (*args_hst, *kwargs_hst.values()) if isinstance(a, torch.Tensor)]
        watch.ranges = [(s.data_ptr(), s.data_ptr() + s.nbytes()) for s in storages]
        return args_hst, kwargs_hst

    def load_watched(self, ptrs, mask, other, *rest):
        watch.check("read", ptrs, mask)
        return load(self, ptrs, mask, other, *rest)

    def store_watched(self, ptrs, value, mask, *rest):
        watch.check("wrote", ptrs, mask)
        return store(self, ptrs, value, mask, *rest)

    interpreter.GridExecutor._init_args_hst = init_args_watched
    builder.create_masked_load, builder.create_masked_store = load_watched, store_watched
    try:
        yield watch
    finally:
        interpreter.GridExecutor._init_args_hst = init_args
        builder.create_masked_load, builder.create_masked_store = load, store


def run_kernel(watch: _Watch, what: str, fn, *args, hint_outside: str):
    """fn(*args), which must launch the Triton kernel and stay inside its tensors."""
    before = watch.launches
    watch.outside = None
    try:
        result = call(what, fn, *args)
    except Unsolved:
        if not watch.outside:
            raise
        raise Unsolved(f"{what}: the kernel {watch.outside} outside the tensors it was given; {hint_outside}") from None
    if watch.launches == before:
        raise Unsolved(f"{what} launched no Triton kernel under Triton's interpreter: the operator must run "
                       "axpy_kernel through wrap_triton")
    return result


# -- the check ----------------------------------------------------------------------------------------------

def reference(x, y, alpha):
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    return (alpha * x.to(acc) + y.to(acc)).to(x.dtype)


@contextlib.contextmanager
def inductor_temp_dir():
    """Inductor puts its precompiled header (150 MB) under the temp folder whatever TORCHINDUCTOR_CACHE_DIR says
    (torch/_inductor/codecache.py: _HEADER_DIR, fixed from default_cache_dir() when the module is imported, so
    before any compile): keep it and the cache in build/, shared by every run; remove anything else left there."""
    folder = BUILD_DIR / "inductor-tmp"
    folder.mkdir(parents=True, exist_ok=True)
    before = set(folder.iterdir())
    os.environ["TMPDIR"] = str(folder)
    tempfile.tempdir = None  # computed again from TMPDIR
    try:
        yield
    finally:
        for path in set(folder.iterdir()) - before:
            if path.is_dir() and not path.name.startswith("torchinductor_"):
                shutil.rmtree(path)
            elif path.is_file():
                path.unlink()


def check(context: Context) -> None:
    with inductor_temp_dir():
        with watched() as watch:
            _check_interpreted(context, watch)
        _check_fallback(context)


def _check_interpreted(context: Context, watch: _Watch) -> None:
    context.load_python(FILE)
    op = require_op("ex17", "myaxpy", f"define it with torch.library.triton_op in {context.file(FILE)}")
    if str(op._schema) != SCHEMA:
        raise Unsolved(f"the schema is {op._schema}, expected {SCHEMA} (from the type hints)")
    if OP not in triton_ops_to_kernels:
        raise Unsolved(f"{OP} is not a triton_op: define it with @torch.library.triton_op, whose kernels "
                       "torch.compile can see (a custom_op hides them)")
    cpu = registrations(OP).get("CPU")
    if cpu is not None and cpu.kind == "kernel":
        raise Unsolved(f"{OP} has a kernel of its own on the CPU key although its Triton kernel is interpreted "
                       "here, so CPU tensors never reach the Triton kernel: register the PyTorch fallback only "
                       "where isinstance(axpy_kernel, InterpretedFunction) is False (the interpreter, switched on "
                       "as notebook 17 does, leaves no TRITON_INTERPRET variable to read)")

    # Values: 5 x 7 and 37 x 41 are odd, so no power-of-two block divides them: the last block has a tail.
    tail = "mask the tail of the last block (offsets < n) in every tl.load and tl.store"
    for dtype in DTYPES:
        x, y = randn(37, 41, dtype=dtype, seed=1), randn(37, 41, dtype=dtype, seed=2)
        what = f"{OP} on contiguous {dtype} inputs of shape [37, 41]"
        expect_close(what, run_kernel(watch, what, op, x, y, 0.5, hint_outside=tail), reference(x, y, 0.5))
        for name, x, y in layouts(dtype, seed=3):
            if x.dim() != 2:
                continue
            what = f"{OP} on {name} {dtype} inputs"
            hint = tail if name == "contiguous" else "address each element through the strides of x and y"
            if x.numel():
                out = run_kernel(watch, what, op, x, y, -1.5, hint_outside=hint)
            else:  # nothing to compute: launching no program is right
                out = call(what, op, x, y, -1.5)
            expect_close(what, out, reference(x, y, -1.5))

    # Bad inputs are refused by the operator and by its fake kernel, naming it.
    refuse = "refuse it with an error that names ex17::myaxpy (torch._check in the kernel and the fake kernel)"
    fake_mode = torch._subclasses.fake_tensor.FakeTensorMode
    for x_shape, y_shape in (((3, 5), (5, 3)), ((15,), (15,))):
        bad = f"{OP} with x of shape {list(x_shape)} and y of shape {list(y_shape)}"
        expect_raises(bad, op, randn(*x_shape), randn(*y_shape), 0.5, errors=(Exception,), match=OP, hint=refuse)
        with fake_mode():
            expect_raises(f"{bad}, on fake tensors", op, torch.empty(x_shape), torch.empty(y_shape), 0.5,
                          errors=(Exception,), match=OP, hint=refuse)

    # The fake path: what torch.compile and opcheck trace with.
    try:
        with fake_mode():
            op(torch.empty(37, 41), torch.empty(41, 37).t(), 0.5)
    except Exception as error:
        raise Unsolved(f"{OP} on fake tensors raised {one_line(error)}: triton_op's own fake kernel is the "
                       "operator's body, which under the interpreter reads the tensors' data; give it a fake kernel "
                       "(@myaxpy.register_fake) that only makes the output") from None

    x, y = randn(7, 5, dtype=torch.float64, seed=4).t(), randn(5, 7, dtype=torch.float64, seed=5)
    for needs in ((True, True), (True, False), (False, True)):
        expect_grads(f"{OP} with requires_grad={needs}", lambda a, b: op(a, b, 0.5),
                     (x.clone().requires_grad_(needs[0]), y.clone().requires_grad_(needs[1])),
                     lambda a, b: 0.5 * a + b)

    samples = [(randn(5, 7, requires_grad=True), randn(5, 7, seed=1, requires_grad=True), 0.5),
               (randn(7, 5, seed=2).t(), randn(5, 7, seed=3), -2.0)]
    try:
        opcheck(OP, op, samples)
    except Unsolved as unsolved:
        hint = f": {NO_DECOMPOSITION}" if "test_aot_dispatch_dynamic" in str(unsolved) else ""
        raise Unsolved(f"{unsolved}{hint}") from None

    # Compiled, the graph calls the operator (opcheck above proved the decomposition is off), which launches
    # the kernel: the sin() around it is Inductor's. Compiled afresh: the keys of AOTAutograd's and Inductor's
    # caches cover the graph and the Triton kernel's source, not a rule registered on the operator
    # (register_torch_dispatch), so a cached graph of earlier code, kept whole, would answer for code that is not.
    x, y = randn(37, 41, seed=6), randn(41, 37, seed=7).t()
    compiled = torch.compile(lambda a, b: op(a, b, 0.5).sin(), fullgraph=True)
    what = f"torch.compile(fullgraph=True) of a function calling {OP}"
    from torch._functorch import config as functorch_config
    from torch._inductor import config as inductor_config  # here, not at the top: after inductor_temp_dir()

    with functorch_config.patch(enable_autograd_cache=False), inductor_config.patch(fx_graph_cache=False):
        expect_close(what, run_kernel(watch, what, compiled, x, y, hint_outside=tail), (0.5 * x + y).sin())


# -- the CPU fallback, in a process without the interpreter ---------------------------------------------------

def _check_fallback(context: Context) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    command = [sys.executable, "-m", "myops.exercises.ex17_triton_kernels", str(context.folder), context.display]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=REPO_ROOT, env=env)
    except subprocess.TimeoutExpired:
        raise Unsolved("without TRITON_INTERPRET the check did not finish within 600 s") from None
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(_RESULT_TAG):
            message = json.loads(line[len(_RESULT_TAG):])
            if message:
                raise Unsolved(message)
            return
    last = (done.stderr.strip().splitlines() or ["no output"])[-1]
    raise Unsolved(f"without TRITON_INTERPRET the check stopped without a verdict: {last}")


def _fallback_verdict(folder: str, display: str) -> str:
    """'' when CPU tensors work without the interpreter (Triton cannot run them), else what is wrong. The answer
    is loaded as on a machine with a GPU, so that one deciding on torch.cuda.is_available() fails here as there."""
    context = Context(Path(folder), display, BUILD_DIR)
    try:
        is_available, torch.cuda.is_available = torch.cuda.is_available, lambda: True
        try:
            context.load_python(FILE)
        finally:
            torch.cuda.is_available = is_available
        op = require_op("ex17", "myaxpy", f"define it with torch.library.triton_op in {context.file(FILE)}")
        if not triton_ops_to_kernels.get(OP):  # found in the source; an interpreted kernel is not recognised
            raise Unsolved(f"{OP} launches no kernel through wrap_triton: launch it with "
                           "wrap_triton(axpy_kernel)[grid](...), so that torch.compile can see the kernel")
        hint = ("register a fallback written in PyTorch for CPU tensors, myaxpy.register_kernel(\"cpu\"), used "
                "when the interpreter is off")
        own = sorted(key for key, found in registrations(OP).items() if found.kind == "kernel" and key != "Meta")
        if "CPU" not in own:
            yours = f"; yours is on {', '.join(own)}" if own else ""
            raise Unsolved(f"without TRITON_INTERPRET, {OP} has no kernel of its own on the CPU key: the dispatch "
                           "table shows the default backend kernel there (triton_op's body, which launches the "
                           f"Triton kernel){yours}; {hint}")
        # The fallback answers for the kernel: every dtype and layout, the kernel's dtype and (contiguous) layout.
        for dtype in DTYPES:
            for name, x, y in layouts(dtype, seed=8):
                if x.dim() == 2 and x.numel():
                    what = f"without TRITON_INTERPRET (Triton cannot run CPU tensors), {OP} on {name} {dtype} inputs"
                    try:
                        out = op(x, y, 0.5)
                    except Exception as error:
                        raise Unsolved(f"{what} raised {one_line(error)}: {hint}") from None
                    expect_close(what, out, reference(x, y, 0.5))
                    if not out.is_contiguous():
                        raise Unsolved(f"{what} returned a tensor of strides {list(out.stride())}, but the fake "
                                       "kernel and the Triton kernel make it contiguous: torch.compile plans with "
                                       "the fake's layout; return the fallback's result .contiguous()")
        samples = [(randn(5, 7, requires_grad=True), randn(5, 7, seed=1), 0.5),
                   (randn(7, 5, seed=2).t(), randn(5, 7, seed=3), -2.0),
                   (randn(5, 7, dtype=torch.float16, seed=4), randn(5, 7, dtype=torch.float16, seed=5), 2.0)]
        try:
            opcheck(f"{OP} without TRITON_INTERPRET", op, samples)
        except Unsolved as unsolved:
            hint = f": {NO_DECOMPOSITION}" if "test_aot_dispatch_dynamic" in str(unsolved) else ""
            raise Unsolved(f"{unsolved}{hint}") from None
    except Unsolved as unsolved:
        return str(unsolved)
    return ""


if __name__ == "__main__":  # the fallback's process: python -m myops.exercises.ex17_triton_kernels FOLDER DISPLAY
    print("\n" + _RESULT_TAG + json.dumps(_fallback_verdict(*sys.argv[1:3])), flush=True)
