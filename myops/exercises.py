"""Exercises the learner can check, one per notebook 01-13 (rustlings-style).

`exercises/NN_name/` holds what the learner edits, `solutions/NN_name/` the reference answers, in the same
layout. A C++ exercise is one folder of `.cpp`/`.cu` files that becomes one library of its own, with its own
namespace (`ex02`, `ex04`, ...): a broken stub never touches another exercise or the course's layers.

    python -m myops.exercises check 02          # one exercise
    python -m myops.exercises check --all       # every exercise
    python -m myops.exercises check 02 --solution

Each check prints one line, `NN_name: solved`, `NN_name: not solved yet: <what is missing>` or
`NN_name: does not compile: <the first compiler error>`, and exits non-zero unless solved. It runs in a
child process per exercise: a process can load a namespace's TORCH_LIBRARY once (a second copy aborts it),
and a kernel that crashes must not take the checker down with it.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from myops.build import REPO_ROOT, relative_path

EXERCISES_DIR = REPO_ROOT / "exercises"
SOLUTIONS_DIR = REPO_ROOT / "solutions"
BUILD_DIR = REPO_ROOT / "build"

DEFAULT_TIMEOUT_S = 900  # a cold build of a .cu file on a busy 2-core machine takes minutes
_VERDICT_TAG = "@@myops-exercise-verdict "


@dataclass(frozen=True)
class Verdict:
    """What the checker says about one exercise."""

    exercise: str  # the folder name, e.g. "02_cpu_kernel"
    status: str  # "solved", "unsolved", "compile-error", "crashed", "timeout" or "skipped"
    message: str  # one line: "solved", "not solved yet: ...", "does not compile: ...", ...

    @property
    def solved(self) -> bool:
        return self.status == "solved"

    def __str__(self) -> str:
        return f"{self.exercise}: {self.message}"


class Unsolved(Exception):
    """Raised by a check: the exercise is not solved; the message says what is missing."""


@dataclass(frozen=True)
class _Exercise:
    number: str
    folder: str
    language: str  # "C++", "CUDA" or "Python"
    check: Callable[["_Context"], str | None]  # raises Unsolved; may return a note for the verdict


_EXERCISES: dict[str, _Exercise] = {}


def _exercise(folder: str, language: str):
    def register(check):
        number = folder[:2]
        _EXERCISES[number] = _Exercise(number, folder, language, check)
        return check
    return register


def numbers() -> list[str]:
    """The exercise numbers, in order: "01" ... "13"."""
    return sorted(_EXERCISES)


def folder(number: str) -> str:
    """The folder name of exercise `number` (e.g. "02" -> "02_cpu_kernel")."""
    return _EXERCISES[_normalize(number)].folder


def _normalize(number: str | int) -> str:
    text = str(number).strip().split("_")[0]
    key = text.zfill(2) if text.isdigit() else text
    if key not in _EXERCISES:
        raise ValueError(f"myops.exercises: no exercise {number!r}; the exercises are {', '.join(numbers())}")
    return key


# -- the parent side: one child process per exercise --------------------------------------------------

def _default_root(solution: bool) -> Path:
    return SOLUTIONS_DIR if solution else EXERCISES_DIR


def _build_dir_for(root: Path) -> Path:
    """Where a tree's libraries go: exercises and solutions apart, any other tree (a copy) by its path."""
    root = root.resolve()
    if root == EXERCISES_DIR.resolve():
        return BUILD_DIR / "exercises"
    if root == SOLUTIONS_DIR.resolve():
        return BUILD_DIR / "solutions"
    return BUILD_DIR / "exercise-copies" / hashlib.sha256(str(root).encode()).hexdigest()[:12]


def _crash_message(returncode: int) -> str:
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"exit status {returncode}"
    hint = (" (often a stack overflow: a kernel that calls its own operator without excluding its dispatch key "
            "recurses forever)" if name == "SIGSEGV" else "")
    return f"not solved yet: the check crashed with {name}{hint}"


def verdict(number: str | int, solution: bool = False, root: Path | str | None = None,
            timeout: float = DEFAULT_TIMEOUT_S, build_dir: Path | str | None = None) -> Verdict:
    """Check one exercise in a child process and return the verdict, printing nothing.

    `solution=True` checks `solutions/` instead of `exercises/`; `root` checks another tree of the same
    layout (a copy), building into `build_dir` (default: a folder of build/ named after the tree's path).
    """
    exercise = _EXERCISES[_normalize(number)]
    root = Path(root).resolve() if root is not None else _default_root(solution)
    build_dir = Path(build_dir) if build_dir is not None else _build_dir_for(root)
    command = [sys.executable, "-m", "myops.exercises", "_child", exercise.number, str(root), str(build_dir)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT, env=env)
    except subprocess.TimeoutExpired:
        return Verdict(exercise.folder, "timeout",
                       f"not solved yet: the check did not finish within {timeout:.0f} s (an endless loop?)")
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(_VERDICT_TAG):
            found = json.loads(line[len(_VERDICT_TAG):])
            return Verdict(exercise.folder, found["status"], found["message"])
    if done.returncode < 0:
        return Verdict(exercise.folder, "crashed", _crash_message(done.returncode))
    last = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return Verdict(exercise.folder, "crashed", f"not solved yet: the check stopped without a verdict: {last}")


def check(number: str | int, solution: bool = False, root: Path | str | None = None,
          build_dir: Path | str | None = None) -> bool:
    """Check one exercise, print its one-line verdict, and return whether it is solved.

    `solution=True` checks the reference solution instead of the learner's stub.
    """
    result = verdict(number, solution=solution, root=root, build_dir=build_dir)
    print(result, flush=True)
    return result.solved


def check_all(solution: bool = False, root: Path | str | None = None, jobs: int | None = None,
              build_dir: Path | str | None = None) -> list[Verdict]:
    """Check every exercise (`jobs` children at a time), print each verdict in order, and return them."""
    jobs = jobs or os.cpu_count() or 1
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(verdict, n, solution, root, DEFAULT_TIMEOUT_S, build_dir) for n in numbers()]
        results = []
        for future in futures:  # printed in exercise order as they complete
            results.append(future.result())
            print(results[-1], flush=True)
    return results


# -- the child side: build, load, run one check --------------------------------------------------------

@dataclass
class _Context:
    """What a check knows: where the exercise's files are and how to refer to them in messages."""

    folder: Path  # the exercise's folder, e.g. <root>/02_cpu_kernel
    display: str  # the same, as shown to the learner: "exercises/02_cpu_kernel"

    def file(self, name: str) -> str:
        return f"{self.display}/{name}"

    def load_python(self, name: str):
        """Import the learner's Python file `name` of this exercise as a fresh module."""
        path = self.folder / name
        spec = importlib.util.spec_from_file_location(f"exercise_{self.folder.name}", path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as error:  # a syntax error, a failing import: say where, in one line
            raise Unsolved(f"importing {self.file(name)} failed: {_one_line(error)}") from None
        return module


def _one_line(error: BaseException) -> str:
    text = str(error).strip()
    for line in text.splitlines():
        if "not solved yet" in line:  # a stub's marker: report it as the learner wrote it
            return line[line.index("not solved yet"):]
    first = text.splitlines()[0] if text else ""
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


def _compile_error(message: str, root: Path, display: str) -> str:
    """The first compiler error line of a LayerBuildError, with paths as the learner sees them."""
    lines = message.splitlines()
    chosen = next((line for line in lines[1:] if re.search(r"\berror\b", line)), lines[-1] if lines else message)
    chosen = chosen.replace(str(root.resolve()) + "/", display + "/").replace(str(root) + "/", display + "/")
    return chosen.strip()


class _BuildFailed(Exception):
    """(status, message) of a build that produced no library."""


def _build_and_load(root: Path, build_dir: Path, layer: str) -> None:
    """Build one exercise folder with the course's Builder (a no-op when up to date) and load it."""
    from myops.build import Builder, LayerBuildError, LayerUnavailableError

    try:  # its progress lines go to our stdout, which the parent does not show
        Builder(root, build_dir, prefix="exercise_").load(layer)
    except LayerUnavailableError as error:
        reason = str(error).split("cannot be built here: ", 1)[-1]
        raise _BuildFailed("skipped", f"cannot be checked here: {reason}") from None
    except LayerBuildError as error:
        raise _BuildFailed("compile-error", str(error)) from None


def _run_child(number: str, root: Path, build_dir: Path) -> Verdict:
    exercise = _EXERCISES[number]
    display = relative_path(root)
    context = _Context(root / exercise.folder, f"{display}/{exercise.folder}")
    if not context.folder.is_dir():
        return Verdict(exercise.folder, "unsolved", f"not solved yet: {context.display}/ does not exist")
    if exercise.language != "Python":
        try:
            _build_and_load(root, build_dir, exercise.folder)
        except _BuildFailed as failed:
            status, message = failed.args
            if status == "compile-error":
                message = f"does not compile: {_compile_error(message, root, display)}"
            return Verdict(exercise.folder, status, message)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # checks that look for warnings record them themselves
            note = exercise.check(context)
    except Unsolved as unsolved:
        message = str(unsolved)
        if not message.startswith("not solved yet"):
            message = f"not solved yet: {message}"
        return Verdict(exercise.folder, "unsolved", message)
    except Exception as error:  # a check must never end in a traceback: name the error in one line
        return Verdict(exercise.folder, "unsolved", f"not solved yet: {_one_line(error)}")
    return Verdict(exercise.folder, "solved", f"solved{f' ({note})' if note else ''}")


def _child_main(number: str, root: str, build_dir: str) -> None:
    result = _run_child(number, Path(root), Path(build_dir))
    print("\n" + _VERDICT_TAG + json.dumps({"status": result.status, "message": result.message}), flush=True)


# -- helpers the checks share ---------------------------------------------------------------------------

_TABLE_LINE = re.compile(
    r"^(?P<key>\w+)(?:\[alias\])?: (?:fallthrough )?registered at (?P<where>.+):\d+ \[(?P<kind>[^\]]+)\]$")


def _registrations(op: str) -> dict[str, tuple[str, str]]:
    """key -> (kind, file) of the dispatch table of `op`, as the dispatcher computed it."""
    import torch

    table = {}
    for line in torch._C._dispatch_dump_table(op).splitlines():
        match = _TABLE_LINE.match(line.strip())
        if match:
            table[match["key"]] = (match["kind"], match["where"])
    return table


def _require_kernel(context: _Context, op: str, key: str, hint: str) -> None:
    """`op` has a kernel of its own (not a fallback, not a catch-all) on `key`, from this exercise's files."""
    kind, where = _registrations(op).get(key, ("none", ""))
    # Ours if it names a file of this exercise's folder; by name, not by absolute path: a library built from
    # identical sources elsewhere (a moved checkout, a copy) is reused and carries that path.
    path = Path(where)
    mine = bool(where) and path.parent.name == context.folder.name and (context.folder / path.name).is_file()
    # A registration on an alias key (Autograd) shows up as an "autograd kernel" on each key it fills.
    if kind not in ("kernel", "autograd kernel") or not mine:
        article = "an " if kind[0] in "aeiou" else "a "
        found = "nothing" if kind == "none" else article + kind + ("" if mine else " from PyTorch")
        raise Unsolved(f"{op} has no kernel on the {key} key (the dispatch table shows {found} there); {hint}")


def _is_catch_all(op: str) -> bool:
    """A kernel given to def() (or registered without a key) is CompositeImplicitAutograd: a "math kernel"."""
    return _registrations(op).get("CPU", ("", ""))[0] == "math kernel"


@contextlib.contextmanager
def _captured_stderr():
    """Collect what C++ writes to file descriptor 2 meanwhile (sys.stderr does not see it)."""
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    text: list[str] = []
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield text
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            text.append(sink.read().decode(errors="replace"))


def _require_op(namespace: str, name: str, hint: str):
    import torch

    try:
        return getattr(getattr(torch.ops, namespace), name).default
    except (AttributeError, RuntimeError):
        raise Unsolved(f"there is no operator {namespace}::{name}; {hint}") from None


def _call(what: str, fn, *args, **kwargs):
    """Call learner code; an error becomes a one-line Unsolved that names the call."""
    try:
        return fn(*args, **kwargs)
    except Unsolved:
        raise
    except Exception as error:
        line = _one_line(error)
        raise Unsolved(line if line.startswith("not solved yet") else f"{what} raised {line}") from None


def _expect_close(what: str, actual, expected, rtol: float | None = None, atol: float | None = None) -> None:
    """`actual` equals `expected` in type, dtype, shape and values (within tolerance), or say how not."""
    import torch

    if not isinstance(actual, torch.Tensor):
        raise Unsolved(f"{what} returned {type(actual).__name__}, expected a tensor")
    if actual.dtype != expected.dtype:
        raise Unsolved(f"{what} returned dtype {actual.dtype}, expected {expected.dtype}")
    if actual.shape != expected.shape:
        raise Unsolved(f"{what} returned shape {list(actual.shape)}, expected {list(expected.shape)}")
    if actual.device != expected.device:
        raise Unsolved(f"{what} returned a tensor on {actual.device}, expected {expected.device}")
    try:
        torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
    except AssertionError:
        diff = (actual.double() - expected.double()).abs()
        worst = _index_of(int(diff.argmax()), list(actual.shape)) if diff.numel() else ()
        raise Unsolved(f"{what} returned wrong values: at index {list(worst)} expected "
                       f"{expected.double().flatten()[int(diff.argmax())].item():.6g}, got "
                       f"{actual.double().flatten()[int(diff.argmax())].item():.6g}") from None


def _index_of(flat: int, shape: list[int]) -> tuple[int, ...]:
    """The multi-index of element `flat` of a contiguous tensor of `shape`."""
    index = []
    for size in reversed(shape):
        flat, rest = divmod(flat, size)
        index.append(rest)
    return tuple(reversed(index))


def _randn(*shape, dtype=None, seed: int = 0, **kwargs):
    import torch

    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator, dtype=dtype or torch.float32).requires_grad_(
        kwargs.get("requires_grad", False))


def _layouts(dtype, seed: int = 0):
    """(name, self, other) pairs of one shape in the layouts a kernel must handle."""
    yield "contiguous", _randn(5, 7, dtype=dtype, seed=seed), _randn(5, 7, dtype=dtype, seed=seed + 1)
    yield "transposed", _randn(7, 5, dtype=dtype, seed=seed + 2).t(), _randn(5, 7, dtype=dtype, seed=seed + 3)
    sliced = _randn(10, 16, dtype=dtype, seed=seed + 4)[1:6, ::2][:, :7]
    yield "sliced", sliced, _randn(5, 7, dtype=dtype, seed=seed + 5)
    yield "expanded", _randn(1, 7, dtype=dtype, seed=seed + 6).expand(5, 7), _randn(5, 7, dtype=dtype, seed=seed + 7)
    yield "empty", _randn(0, 3, dtype=dtype, seed=seed + 8), _randn(0, 3, dtype=dtype, seed=seed + 9)


# -- the exercises ---------------------------------------------------------------------------------------

@_exercise("01_schema", "C++")
def _check_01(context: _Context) -> None:
    import torch

    where = f"define it with m.def(...) in {context.file('schema.cpp')}"
    for name in ("mylerp", "mylerp_"):
        schema = _require_op("ex01", name, where)._schema
        args = schema.arguments
        first = "self" if name == "mylerp_" else "start"
        if [a.name for a in args] != [first, "end", "weight"]:
            raise Unsolved(f"ex01::{name} has the arguments {[a.name for a in args]}, expected "
                           f"{[first, 'end', 'weight']}")
        if [str(a.type) for a in args] != ["Tensor", "Tensor", "float"]:
            raise Unsolved(f"ex01::{name} has argument types {[str(a.type) for a in args]}, expected "
                           "['Tensor', 'Tensor', 'float']")
        if not args[2].kwarg_only or args[0].kwarg_only or args[1].kwarg_only:
            raise Unsolved(f"ex01::{name}: only `weight` must be keyword-only (put `*,` before it)")
        if args[2].default_value != 0.5:
            raise Unsolved(f"ex01::{name}: `weight` defaults to {args[2].default_value}, expected 0.5")
        if len(schema.returns) != 1 or str(schema.returns[0].type) != "Tensor":
            raise Unsolved(f"ex01::{name} returns {[str(r.type) for r in schema.returns]}, expected one Tensor")
        written = args[0].alias_info
        returned = schema.returns[0].alias_info
        if name == "mylerp":
            if written is not None or returned is not None:
                raise Unsolved("ex01::mylerp writes nothing and returns a new tensor: it needs no alias annotation")
        else:
            if written is None or not written.is_write:
                raise Unsolved("ex01::mylerp_ writes `self`: annotate it as Tensor(a!)")
            if returned is None or returned.after_set != written.after_set:
                raise Unsolved("ex01::mylerp_ returns `self`: annotate the return with the same alias set, "
                               "Tensor(a!)")
            if any(a.alias_info is not None for a in args[1:]):
                raise Unsolved("ex01::mylerp_: only `self` is written and aliased; `end` needs no annotation")
    try:
        torch.ops.ex01.mylerp(torch.zeros(2), torch.ones(2))
    except NotImplementedError:
        pass  # a schema without a kernel: the dispatcher's "Could not run"
    else:
        raise Unsolved("ex01::mylerp ran: this exercise is about schemas only, register no kernel")


@_exercise("02_cpu_kernel", "C++")
def _check_02(context: _Context) -> None:
    import torch

    _require_op("ex02", "mymul", f"keep the TORCH_LIBRARY block of {context.file('mymul.cpp')}")
    _require_kernel(context, "ex02::mymul", "CPU",
                    "register mymul_cpu in the TORCH_LIBRARY_IMPL(ex02, CPU, m) block")
    if _is_catch_all("ex02::mymul"):
        raise Unsolved("ex02::mymul has a catch-all kernel (CompositeImplicitAutograd): register the kernel "
                       "for the CPU key only")
    op = torch.ops.ex02.mymul.default
    for dtype in (torch.float32, torch.float64):
        for layout, a, b in _layouts(dtype):
            _expect_close(f"ex02::mymul on {layout} {dtype} inputs", _call("ex02::mymul", op, a, b), a * b)
    try:
        op(torch.ones(2, device="meta"), torch.ones(2, device="meta"))
    except NotImplementedError:
        pass
    else:
        raise Unsolved("ex02::mymul ran on meta tensors: its kernel must serve the CPU key only")


def _code(context: _Context, suffixes: tuple[str, ...]) -> str:
    """The learner's sources of this exercise without // comments (for checks of what the code uses)."""
    text = "\n".join(p.read_text() for p in sorted(context.folder.iterdir()) if p.suffix in suffixes)
    return re.sub(r"//[^\n]*", "", text)


@_exercise("03_cuda_kernel", "CUDA")
def _check_03(context: _Context) -> str | None:
    import torch

    _require_op("ex03", "mymul", f"keep the TORCH_LIBRARY block of {context.file('mymul.cu')}")
    _require_kernel(context, "ex03::mymul", "CUDA",
                    "register mymul_cuda in the TORCH_LIBRARY_IMPL(ex03, CUDA, m) block")
    code = _code(context, (".cu",))
    if "not solved yet" in code:
        raise Unsolved("mymul_cuda still ends in the stub's TORCH_CHECK(false, ...); replace it with the launch")
    for needed, why in (("__global__", "write the kernel as a __global__ function"),
                        ("CUDAGuard", "take a c10::cuda::CUDAGuard on the inputs' device before allocating"),
                        ("getCurrentCUDAStream", "launch on at::cuda::getCurrentCUDAStream(), the caller's stream"),
                        ("C10_CUDA_KERNEL_LAUNCH_CHECK", "check the launch with C10_CUDA_KERNEL_LAUNCH_CHECK()")):
        if needed not in code:
            raise Unsolved(f"{context.file('mymul.cu')} does not use {needed}: {why}")
    if not torch.cuda.is_available():
        return "compiles and registers on the CUDA key; its values are checked only where a GPU is present"
    op = torch.ops.ex03.mymul.default
    for dtype in (torch.float32, torch.float64):
        for layout, a, b in _layouts(dtype):
            _expect_close(f"ex03::mymul on {layout} {dtype} CUDA inputs",
                          _call("ex03::mymul", op, a.cuda(), b.cuda()), (a * b).cuda())
    big = _randn(1 << 20 | 3, seed=7)  # many blocks, and a size that is no multiple of the block size
    _expect_close("ex03::mymul on 2^20+3 float32 CUDA elements", _call("ex03::mymul", op, big.cuda(), big.cuda()),
                  (big * big).cuda())
    torch.cuda.synchronize()
    return None


def _require_alias_autograd(context: _Context, op: str, kernel: str) -> None:
    """A kernel on the Autograd alias key fills AutogradCPU and AutogradCUDA from one registration."""
    _require_kernel(context, op, "AutogradCPU", f"register {kernel} in a TORCH_LIBRARY_IMPL({op.split('::')[0]}, "
                    "Autograd, m) block")
    _require_kernel(context, op, "AutogradCUDA", "register it on the Autograd alias key, which serves every "
                    "backend, not on AutogradCPU alone")


def _expect_grads(what: str, fn, inputs, reference) -> None:
    """Gradients of fn(*inputs) match those of reference(*inputs), for a fixed random incoming gradient."""
    import torch

    out = _call(what, fn, *inputs)
    expected_out = reference(*inputs)
    _expect_close(what, out.detach(), expected_out.detach())
    if out.grad_fn is None:
        raise Unsolved(f"{what}: the output has no grad_fn although an input requires grad; the autograd "
                       "kernel records nothing")
    grad = _randn(*out.shape, dtype=out.dtype, seed=11)
    wanted = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    got = _call(f"backward of {what}", torch.autograd.grad, out, wanted, grad, allow_unused=True)
    expected = torch.autograd.grad(expected_out, wanted, grad)
    for index, (g, e) in enumerate(zip(got, expected)):
        if g is None:
            raise Unsolved(f"backward of {what} returned no gradient for input {index}")
        _expect_close(f"the gradient of {what} for input {index}", g, e)


@_exercise("04_autograd", "C++")
def _check_04(context: _Context) -> None:
    import torch

    _require_op("ex04", "mymul", f"keep the TORCH_LIBRARY block of {context.file('mymul.cpp')}")
    _require_alias_autograd(context, "ex04::mymul", "mymul_autograd")
    op = torch.ops.ex04.mymul.default
    a, b = _randn(3, 4, dtype=torch.float64), _randn(3, 4, dtype=torch.float64, seed=1)
    # Nothing requires grad: the kernel must still compute (through the guard to the CPU kernel).
    _expect_close("ex04::mymul without grad", _call("ex04::mymul", op, a, b), a * b)
    for needs in ((True, True), (True, False), (False, True)):
        x, y = a.clone().requires_grad_(needs[0]), b.clone().requires_grad_(needs[1])
        _expect_grads(f"ex04::mymul with requires_grad={needs}", op, (x, y), torch.mul)
    x, y = a.clone().requires_grad_(), b.clone().requires_grad_()
    out = op(x, y)
    # One node for one call: the forward ran below autograd, so nothing else recorded a node in between.
    parents = [type(fn).__name__ for fn, _ in out.grad_fn.next_functions if fn is not None]
    if parents != ["AccumulateGrad", "AccumulateGrad"]:
        raise Unsolved(f"ex04::mymul recorded more than one autograd node (its node leads to {parents}, "
                       "expected the two inputs directly); run the forward under the guard")
    if not torch.autograd.gradcheck(op, (x, y), raise_exception=False):
        raise Unsolved("torch.autograd.gradcheck of ex04::mymul fails: the backward is not the derivative")


def _rmsnorm_reference(x, weight, eps=1e-6):
    import torch

    return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + eps) * weight


@_exercise("05_not_implemented_fallback", "C++")
def _check_05(context: _Context) -> None:
    import torch

    _require_op("ex05", "myrmsnorm", f"keep the TORCH_LIBRARY block of {context.file('myrmsnorm.cpp')}")
    _require_alias_autograd(context, "ex05::myrmsnorm", "myrmsnorm_autograd")
    op = torch.ops.ex05.myrmsnorm.default
    x, w = _randn(3, 5, dtype=torch.float64, requires_grad=True), _randn(5, dtype=torch.float64, seed=1,
                                                                          requires_grad=True)
    out = _call("ex05::myrmsnorm", op, x, w)
    if out.grad_fn is not None and "NotImplemented" in out.grad_fn.name():
        raise Unsolved("ex05::myrmsnorm's backward still reaches the NotImplemented fallback; register "
                       "myrmsnorm_autograd on the Autograd key in its place")
    for eps in (1e-6, 0.5):  # a large eps shows whether the kernel uses it
        for shape in ((3, 5), (5,), (2, 3, 5)):
            x = _randn(*shape, dtype=torch.float64, seed=len(shape), requires_grad=True)
            for needs in ((True, True), (True, False), (False, True)):
                xi, wi = x.detach().clone().requires_grad_(needs[0]), w.detach().clone().requires_grad_(needs[1])
                _expect_grads(f"ex05::myrmsnorm on shape {list(shape)} with eps={eps} and requires_grad={needs}",
                              lambda a, b: op(a, b, eps), (xi, wi), lambda a, b: _rmsnorm_reference(a, b, eps))


@_exercise("06_inplace_or_view", "C++")
def _check_06(context: _Context) -> None:
    import torch

    _require_op("ex06", "myscale_", f"keep the TORCH_LIBRARY block of {context.file('myscale.cpp')}")
    _require_kernel(context, "ex06::myscale_", "ADInplaceOrView",
                    "register myscale__ad_inplace_or_view in a TORCH_LIBRARY_IMPL(ex06, ADInplaceOrView, m) block")
    op = torch.ops.ex06.myscale_.default
    x = _randn(4, 3)
    before, version = x.clone(), x._version
    _call("ex06::myscale_", op, x, 3.0)
    _expect_close("ex06::myscale_(x, 3.0) (x afterwards)", x, before * 3.0)
    if x._version != version + 1:
        raise Unsolved(f"ex06::myscale_ moved x's version counter by {x._version - version}, expected exactly 1: "
                       "bump it once, after the redispatch")
    base = _randn(6)
    view, expected, version = base[2:], base.clone(), base._version
    expected[2:] *= 2.0
    _call("ex06::myscale_", op, view, 2.0)
    _expect_close("ex06::myscale_ on a view (the base afterwards)", base, expected)
    if base._version != version + 1:
        raise Unsolved("writing a view with ex06::myscale_ did not move its base's version counter")
    # What the counter is for: mul saved x for w's gradient; x is overwritten before backward.
    w, x = _randn(3, requires_grad=True), _randn(3, seed=1)
    y = w * x
    op(x, 2.0)
    try:
        y.sum().backward()
    except RuntimeError as error:
        if "modified by an inplace operation" not in str(error):
            raise Unsolved(f"backward after ex06::myscale_ failed for another reason: {_one_line(error)}") from None
    else:
        raise Unsolved("backward used a tensor that ex06::myscale_ had overwritten, without an error: "
                       "the version counter did not record the write")


@_exercise("07_autocast", "C++")
def _check_07(context: _Context) -> None:
    import torch

    _require_op("ex07", "mynorm", f"keep the TORCH_LIBRARY block of {context.file('mynorm.cpp')}")
    _require_kernel(context, "ex07::mynorm", "AutocastCPU",
                    "register mynorm_autocast_cpu in a TORCH_LIBRARY_IMPL(ex07, AutocastCPU, m) block (the old "
                    "key name Autocast is AutocastCUDA)")
    op = torch.ops.ex07.mynorm.default
    x = _randn(1000) * 10
    for dtype in (torch.bfloat16, torch.float16):
        low = x.to(dtype)
        with torch.autocast("cpu", dtype=dtype):
            out = _call(f"ex07::mynorm on {dtype} under CPU autocast", op, low)
        if isinstance(out, torch.Tensor) and out.dtype == dtype:
            raise Unsolved(f"under torch.autocast('cpu', dtype={dtype}), ex07::mynorm returned {dtype}, expected "
                           "torch.float32 (the fp32 policy); does cached_cast get c10::DeviceType::CPU?")
        expected = torch.linalg.vector_norm(low.float())
        _expect_close(f"ex07::mynorm on {dtype} under CPU autocast", out, expected)
    double = x.double()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _expect_close("ex07::mynorm on float64 under CPU autocast (cached_cast leaves float64 alone)",
                      _call("ex07::mynorm", op, double), torch.linalg.vector_norm(double))
    low = x.bfloat16()
    _expect_close("ex07::mynorm on bfloat16 outside autocast (the wrapper must not run)",
                  _call("ex07::mynorm", op, low), torch.sqrt((low * low).sum(dtype=torch.bfloat16)))


@_exercise("08_performance", "Python")
def _check_08(context: _Context) -> None:
    import time

    import torch

    module = context.load_python("timing.py")
    measure = getattr(module, "seconds_per_call", None)
    if measure is None:
        raise Unsolved(f"{context.file('timing.py')} defines no function seconds_per_call")
    torch.set_num_threads(3)  # not 1, and not necessarily the number of cores: the answer must ask torch
    seen_threads = set()

    def records_threads():
        seen_threads.add(torch.get_num_threads())

    _call("seconds_per_call", measure, records_threads)
    if seen_threads != {3}:
        raise Unsolved(f"seconds_per_call ran the function with {sorted(seen_threads)} thread(s) while torch uses "
                       f"{torch.get_num_threads()}; pass num_threads=torch.get_num_threads() to the Timer")
    calls = [0]

    def two_milliseconds():
        calls[0] += 1
        time.sleep(0.002)

    seconds = _call("seconds_per_call", measure, two_milliseconds)
    if not isinstance(seconds, float):
        raise Unsolved(f"seconds_per_call returned {type(seconds).__name__}, expected a float (seconds)")
    if calls[0] < 10:
        raise Unsolved(f"seconds_per_call called the function {calls[0]} time(s): one measurement is noise, "
                       "time many calls and take the median (Timer.blocked_autorange)")
    if not 0.0019 <= seconds <= 0.005:
        raise Unsolved(f"seconds_per_call said {seconds:.4g} for a function that takes 2 ms: expected about "
                       "0.002 (seconds per call, not per block of calls, not microseconds)")


def _opcheck(what: str, op, samples, tests: tuple[str, ...] | None = None) -> None:
    """torch.library.opcheck on every sample; the first failing test, by name, with its first line."""
    import torch

    for args in samples:
        outcome = _call(f"opcheck of {what}", torch.library.opcheck, op, args, raise_exception=False,
                        **({"test_utils": tests} if tests else {}))
        for test, result in outcome.items():
            if result != "SUCCESS":
                raise Unsolved(f"opcheck's {test} fails for {what}: {_one_line(result)}")


@_exercise("09_compile_and_opcheck", "C++")
def _check_09(context: _Context) -> None:
    import torch

    _require_op("ex09", "mymatmul", f"keep the TORCH_LIBRARY block of {context.file('mymatmul.cpp')}")
    _require_kernel(context, "ex09::mymatmul", "Meta",
                    "register mymatmul_meta in a TORCH_LIBRARY_IMPL(ex09, Meta, m) block")
    op = torch.ops.ex09.mymatmul.default
    for dtype in (torch.float32, torch.float64):
        a, b = torch.empty(3, 4, dtype=dtype, device="meta"), torch.empty(4, 5, dtype=dtype, device="meta")
        _expect_close(f"ex09::mymatmul on meta {dtype} tensors of shapes [3, 4] and [4, 5]",
                      _call("ex09::mymatmul on meta tensors", op, a, b), torch.empty(3, 5, dtype=dtype, device="meta"))
    for shapes in (((3, 4), (5, 6)), ((3, 4), (4,))):
        try:
            op(torch.empty(*shapes[0], device="meta"), torch.empty(*shapes[1], device="meta"))
        except RuntimeError:
            pass
        else:
            raise Unsolved(f"ex09::mymatmul accepted meta tensors of shapes {[list(s) for s in shapes]}, which the "
                           "CPU kernel rejects: make the Meta kernel run the same checks")
    _opcheck("ex09::mymatmul", op, [(_randn(3, 4), _randn(4, 5, seed=1))], ("test_schema", "test_faketensor"))
    # With symbolic sizes, a kernel that reads plain sizes does not fail: it fixes each size to the value it
    # has now (a guard), and torch.compile(dynamic=True) then recompiles for every new shape.
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

    mode = FakeTensorMode(shape_env=ShapeEnv())
    dynamic = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.DYNAMIC])
    a, b = (mode.from_tensor(t, symbolic_context=dynamic) for t in (_randn(3, 4), _randn(4, 5, seed=1)))
    with mode:
        out = _call("ex09::mymatmul on fake tensors with symbolic sizes", op, a, b)
    if not all(isinstance(size, torch.SymInt) for size in out.shape):
        raise Unsolved(f"on fake tensors of symbolic shapes [s0, s1] and [s1, s2], ex09::mymatmul returned the "
                       f"fixed shape {list(out.shape)}: read the sizes as SymInts (sym_size, at::empty_symint), "
                       "or torch.compile(dynamic=True) recompiles for every shape")


@_exercise("10_vmap", "Python")
def _check_10(context: _Context) -> None:
    import torch

    from myops.dispatch import CallCounter

    context.load_python("rule.py")
    op = _require_op("ex10", "myrmsnorm", f"keep the given operator in {context.file('rule.py')}")
    weight, batched_weight = _randn(8, seed=1), _randn(6, 8, seed=2)
    cases = [  # (in_dims, x, weight, eps, kernel calls a rule makes)
        ((0, None), _randn(6, 4, 8), weight, 1e-6, 1),
        ((1, None), _randn(4, 6, 8, seed=3), weight, 0.5, 1),
        ((0, None), _randn(6, 8, seed=4), weight, 1e-6, 1),
        ((0, 0), _randn(6, 4, 8, seed=5), batched_weight, 1e-6, None),
    ]
    for in_dims, x, w, eps, calls in cases:
        what = f"vmap(ex10::myrmsnorm, in_dims={in_dims}) on x of shape {list(x.shape)}"
        with CallCounter() as counter:
            out = _call(what, torch.vmap(lambda a, b: op(a, b, eps), in_dims=in_dims), x, w)
        xs = x.movedim(in_dims[0], 0)
        ws = w.movedim(in_dims[1], 0) if in_dims[1] is not None else w.expand(xs.shape[0], *w.shape)
        expected = torch.stack([_rmsnorm_reference(xi, wi, eps) for xi, wi in zip(xs, ws)])
        made = counter.calls.get("ex10::myrmsnorm", 0)
        if calls is not None and made != calls:
            raise Unsolved(f"{what} called the operator {made} times for {xs.shape[0]} examples, expected once: "
                           "register the batching rule with torch.library.register_vmap")
        _expect_close(what, out, expected)


@_exercise("11_python_torch_library", "Python")
def _check_11(context: _Context) -> None:
    import torch

    context.load_python("myrmsnorm.py")
    op = _require_op("ex11", "myrmsnorm", f"define it with torch.library.custom_op in {context.file('myrmsnorm.py')}")
    schema = op._schema
    found = ([(a.name, str(a.type), a.default_value) for a in schema.arguments], [str(r.type) for r in schema.returns])
    if found != ([("self", "Tensor", None), ("weight", "Tensor", None), ("eps", "float", 1e-6)], ["Tensor"]):
        raise Unsolved(f"the schema is {schema}, expected (Tensor self, Tensor weight, float eps=1e-06) -> Tensor "
                       "(it comes from the argument names, the type hints and the default)")
    w = _randn(5, dtype=torch.float64, seed=1)
    for shape in ((3, 5), (5,), (2, 3, 5)):
        x = _randn(*shape, dtype=torch.float64, seed=len(shape))
        for eps in (1e-6, 0.5):
            _expect_close(f"ex11::myrmsnorm on shape {list(shape)} with eps={eps}",
                          _call("ex11::myrmsnorm", op, x, w, eps), _rmsnorm_reference(x, w, eps))
    try:
        with torch._subclasses.fake_tensor.FakeTensorMode():
            op(torch.empty(3, 5), torch.empty(5))
    except Exception as error:
        raise Unsolved(f"ex11::myrmsnorm on fake tensors raised {_one_line(error)}: register a fake kernel "
                       "(@myrmsnorm.register_fake)") from None
    for shape in ((3, 5), (5,), (2, 3, 5)):
        x = _randn(*shape, dtype=torch.float64, seed=len(shape))
        for needs in ((True, True), (True, False), (False, True)):
            _expect_grads(f"ex11::myrmsnorm on shape {list(shape)} with requires_grad={needs}",
                          lambda a, b: op(a, b, 0.5),
                          (x.clone().requires_grad_(needs[0]), w.clone().requires_grad_(needs[1])),
                          lambda a, b: _rmsnorm_reference(a, b, 0.5))
    _opcheck("ex11::myrmsnorm", op, [(_randn(2, 4, requires_grad=True), _randn(4, seed=2, requires_grad=True), 0.1)])


@_exercise("12_boxed_kernels_and_backends", "C++")
def _check_12(context: _Context) -> None:
    import torch

    for name in ("sum2", "sum3", "scaled_sum"):
        _require_op("ex12", name, f"keep the TORCH_LIBRARY block of {context.file('sum_boxed.cpp')}")
        _require_kernel(context, f"ex12::{name}", "CPU", f"register sum_boxed for {name} in the "
                        "TORCH_LIBRARY_IMPL(ex12, CPU, m) block")
    if "makeFromBoxedFunction" not in _code(context, (".cpp",)):
        raise Unsolved("register sum_boxed as a boxed kernel, with torch::CppFunction::makeFromBoxedFunction")
    ops = torch.ops.ex12
    for dtype in (torch.float32, torch.float64):
        a, b, c = (_randn(4, 3, dtype=dtype, seed=seed) for seed in range(3))
        _expect_close(f"ex12::sum2 on {dtype}", _call("ex12::sum2", ops.sum2, a, b), a + b)
        _expect_close(f"ex12::sum3 on {dtype}", _call("ex12::sum3", ops.sum3, a, b, c), a + b + c)
        _expect_close(f"ex12::scaled_sum(a, b, 2.5) on {dtype}", _call("ex12::scaled_sum", ops.scaled_sum, a, b, 2.5),
                      (a + b) * 2.5)
        before = a.clone()
        ops.sum2(a, b)
        if not torch.equal(a, before):
            raise Unsolved("ex12::sum2 changed its first argument: add into a new tensor, not into the input")


@_exercise("13_migrating_from_2020", "C++")
def _check_13(context: _Context) -> None:
    import torch

    _require_op("ex13", "mymul", f"keep the schema in the TORCH_LIBRARY block of {context.file('mymul.cpp')}")
    if _is_catch_all("ex13::mymul"):
        raise Unsolved("ex13::mymul's kernel is still a catch-all (def(schema, fn) files it under "
                       "CompositeImplicitAutograd, for every backend): define the schema alone and register "
                       "mymul_cpu in a TORCH_LIBRARY_IMPL(ex13, CPU, m) block")
    _require_kernel(context, "ex13::mymul", "CPU", "register mymul_cpu in a TORCH_LIBRARY_IMPL(ex13, CPU, m) block")
    _require_alias_autograd(context, "ex13::mymul", "mymul_autograd")
    op = torch.ops.ex13.mymul.default
    a, b = _randn(2, 3, dtype=torch.float64, requires_grad=True), _randn(2, 3, dtype=torch.float64, seed=1,
                                                                          requires_grad=True)
    # The deprecated guard warns once per process, through c10's warning handler: straight to fd 2 here.
    with warnings.catch_warnings(record=True) as caught, _captured_stderr() as stderr:
        warnings.simplefilter("always")
        out = _call("ex13::mymul", op, a, b)
    if "AutoNonVariableTypeMode" in "".join(stderr) + "".join(str(w.message) for w in caught):
        raise Unsolved("ex13::mymul's autograd kernel uses at::AutoNonVariableTypeMode, which is deprecated and "
                       "warns at run time: use at::AutoDispatchBelowADInplaceOrView")
    if isinstance(out, torch.Tensor) and out.shape != a.shape:
        raise Unsolved(f"ex13::mymul with requires_grad returned shape {list(out.shape)} for inputs of shape "
                       f"{list(a.shape)}: apply() returns a Tensor, and [0] selects its first row")
    _expect_grads("ex13::mymul with requires_grad", op, (a, b), torch.mul)
    _require_kernel(context, "ex13::mymul", "AutocastCPU", "register the autocast wrapper on AutocastCPU (the "
                    "old key name Autocast is AutocastCUDA)")
    x, y = _randn(3, 4), _randn(3, 4, seed=1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = _call("ex13::mymul under CPU autocast", op, x, y)
    if isinstance(out, torch.Tensor) and out.dtype != torch.bfloat16:
        raise Unsolved(f"under torch.autocast('cpu', dtype=torch.bfloat16), ex13::mymul returned {out.dtype}, "
                       "expected torch.bfloat16: give cached_cast the device type (its default is CUDA)")
    _expect_close("ex13::mymul under CPU autocast", out, x.bfloat16() * y.bfloat16())
    try:
        op(torch.empty(2, device="meta"), torch.empty(2, device="meta"))
    except NotImplementedError:
        pass
    else:
        raise Unsolved("ex13::mymul ran on meta tensors: its kernel must serve the CPU key only")


def main(argv: list[str] | None = None) -> int:
    """`python -m myops.exercises check NN | --all [--solution]`: check exercises, one line each."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_child"]:
        _child_main(*argv[1:4])
        return 0
    parser = argparse.ArgumentParser(prog="python -m myops.exercises", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    checker = commands.add_parser("check", help="check one exercise, or all of them")
    checker.add_argument("number", nargs="?", help=f"the exercise: {', '.join(numbers())}")
    checker.add_argument("--all", action="store_true", help="check every exercise")
    checker.add_argument("--solution", action="store_true", help="check the reference solutions in solutions/")
    checker.add_argument("--root", type=Path, help="check this tree of exercise folders instead")
    checker.add_argument("--build", type=Path, help="where the libraries of --root go")
    checker.add_argument("--jobs", type=int, help="exercises checked at a time with --all (default: one per core)")
    commands.add_parser("list", help="list the exercises")
    args = parser.parse_args(argv)
    if args.command == "list":
        for number in numbers():
            exercise = _EXERCISES[number]
            print(f"{exercise.folder:<32}{exercise.language}")
        return 0
    if args.all == (args.number is not None):
        parser.error("give one exercise number or --all")
    if args.all:
        results = check_all(solution=args.solution, root=args.root, jobs=args.jobs, build_dir=args.build)
        return 0 if all(r.solved or r.status == "skipped" for r in results) else 1
    try:
        result = verdict(args.number, solution=args.solution, root=args.root, build_dir=args.build)
    except ValueError as error:
        print(error)
        return 2
    print(result)
    return 0 if result.solved else 1


if __name__ == "__main__":
    sys.exit(main())
