"""What the checks share: the expectations a learner's answer must meet (each raises Unsolved with a message
that says what is wrong and what to do) and the inputs they are tried on. Used in a check's child process."""
from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from pathlib import Path

import torch

from myops.dispatch import registrations, repo_path
from myops.exercises.runner import Context, Unsolved, one_line

def require_op(namespace: str, name: str, hint: str):
    """The default overload of `namespace::name`, or Unsolved: missing, or defined under an overload name."""
    try:
        packet = getattr(getattr(torch.ops, namespace), name)
    except (AttributeError, RuntimeError):
        raise Unsolved(f"there is no operator {namespace}::{name}; {hint}") from None
    overloads = packet.overloads()
    if "default" not in overloads:
        named = ", ".join(f"{namespace}::{name}.{o}" for o in overloads)
        raise Unsolved(f"{namespace}::{name} is defined only with an overload name ({named}); name the schema "
                       f"`{name}(...)`, without `.{overloads[0]}`")
    return packet.default


def _is_mine(context: Context, where: str) -> bool:
    # Ours if it names a file of this exercise's folder; by name, not by absolute path: a library built from
    # identical sources elsewhere (a moved checkout, a copy) is reused and carries that path.
    path = Path(where)
    return bool(where) and path.parent.name == context.folder.name and (context.folder / path.name).is_file()


def require_kernel(context: Context, op: str, key: str, hint: str) -> None:
    """`op` has a kernel of its own (not a fallback, a fallthrough or a catch-all) on `key`, from this
    exercise's files."""
    found = registrations(op).get(key)
    kind, where = (found.kind, found.file) if found else ("none", "")
    mine = _is_mine(context, where)
    if found and found.fallthrough and mine:
        raise Unsolved(f"{op} has a fallthrough on the {key} key, which skips the key instead of running a "
                       f"kernel; {hint}")
    # A registration on an alias key (Autograd) shows up as an "autograd kernel" on each key it fills.
    if kind not in ("kernel", "autograd kernel") or not mine:
        article = "an " if kind[0] in "aeiou" else "a "
        origin = "" if mine else f" from {repo_path(where) or 'PyTorch'}"  # the course's device layer, or torch
        found = "nothing" if kind == "none" else article + kind + origin
        raise Unsolved(f"{op} has no kernel on the {key} key (the dispatch table shows {found} there); {hint}")


def require_alias_autograd(context: Context, op: str, kernel: str) -> None:
    """A kernel on the Autograd alias key fills AutogradCPU and AutogradCUDA from one registration."""
    require_kernel(context, op, "AutogradCPU", f"register {kernel} in a TORCH_LIBRARY_IMPL({op.split('::')[0]}, "
                   "Autograd, m) block")
    require_kernel(context, op, "AutogradCUDA", "register it on the Autograd alias key, which serves every "
                   "backend, not on AutogradCPU alone")


def require_no_catch_all(op: str, hint: str) -> None:
    """A kernel given to def() (or registered without a key) is CompositeImplicitAutograd: a "math kernel"."""
    found = registrations(op).get("CPU")
    if found and found.kind == "math kernel":
        raise Unsolved(hint)


def require_own_function(what: str, out, function_hint: str) -> None:
    """`out` was recorded by a C++ torch::autograd::Function of the learner (its node is a CppNode<T>), not by
    ATen's autograd of the operators a kernel happened to call."""
    node = out.grad_fn
    name = node.name() if node is not None else "none"
    if not name.startswith("torch::autograd::CppNode<"):
        raise Unsolved(f"{what}: the output's grad_fn is {name}, not a node of your torch::autograd::Function "
                       f"(torch::autograd::CppNode<...>): {function_hint}")


def require_only_allocations(what: str, fn, *args, hint: str) -> None:
    """Run fn(*args) under the profiler: the operators the kernel calls may allocate and copy, not compute."""
    from torch.autograd.profiler import profile

    with profile() as prof:
        call(what, fn, *args)
    inner = sorted({e.name for e in prof.function_events
                    if e.cpu_parent is not None and e.name.startswith("aten::") and e.name[6:] not in _ALLOCATIONS})
    if inner:
        raise Unsolved(f"{what} called {', '.join(inner)}: {hint}")


# What a kernel may call to make and lay out its output and inputs; everything else computes.
_ALLOCATIONS = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
                "zero_", "fill_", "contiguous", "clone", "copy_", "as_strided", "view", "reshape", "_reshape_alias",
                "expand", "resize_", "_to_copy", "to", "lift_fresh", "alias", "detach", "t", "transpose",
                "permute", "_unsafe_view", "flatten", "unsqueeze", "squeeze", "select", "slice", "item",
                "_local_scalar_dense", "is_nonzero", "result_type", "broadcast_tensors"}


def call(what: str, fn, *args, **kwargs):
    """Call learner code; an error becomes a one-line Unsolved that names the call."""
    try:
        return fn(*args, **kwargs)
    except Unsolved:
        raise
    except Exception as error:
        line = one_line(error)
        raise Unsolved(line if line.startswith("not solved yet") else f"{what} raised {line}") from None


def expect_raises(what: str, fn, *args, errors=(RuntimeError,), match: str | None = None, hint: str) -> str:
    """fn(*args) raises one of `errors` (whose message contains `match`); its message, or Unsolved."""
    try:
        fn(*args)
    except errors as error:
        if match is None or match in str(error):
            return str(error)
        raise Unsolved(f"{what} raised {one_line(error)}; {hint}") from None
    except Exception as error:
        raise Unsolved(f"{what} raised {one_line(error)}; {hint}") from None
    raise Unsolved(f"{what} did not raise; {hint}")


def expect_close(what: str, actual, expected, rtol: float | None = None, atol: float | None = None) -> None:
    """`actual` equals `expected` in type, dtype, shape and values (within tolerance), or say how not."""
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
        diff = (actual.double() - expected.double()).abs().cpu()
        worst = int(diff.argmax()) if diff.numel() else 0
        index = _index_of(worst, list(actual.shape))
        wanted, got = _distinct(expected.double().flatten()[worst].item(), actual.double().flatten()[worst].item())
        raise Unsolved(f"{what} returned wrong values: at index {list(index)} expected {wanted}, got {got}") from None


def _distinct(wanted: float, got: float) -> tuple[str, str]:
    """Both numbers with 6 significant digits, or as many more as it takes to tell them apart (a float64 error
    can hide in the 10th)."""
    for digits in range(6, 18):
        shown = f"{wanted:.{digits}g}", f"{got:.{digits}g}"
        if shown[0] != shown[1]:
            return shown
    return shown


def _index_of(flat: int, shape: list[int]) -> tuple[int, ...]:
    """The multi-index of element `flat` of a contiguous tensor of `shape`."""
    index = []
    for size in reversed(shape):
        flat, rest = divmod(flat, size)
        index.append(rest)
    return tuple(reversed(index))


def expect_grads(what: str, fn, inputs, reference) -> None:
    """Gradients of fn(*inputs) match those of reference(*inputs), for a fixed random incoming gradient."""
    out = call(what, fn, *inputs)
    expected_out = reference(*inputs)
    expect_close(what, out.detach(), expected_out.detach())
    if out.grad_fn is None:
        raise Unsolved(f"{what}: the output has no grad_fn although an input requires grad; the autograd "
                       "kernel records nothing")
    grad = randn(*out.shape, dtype=out.dtype, seed=11)
    wanted = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    got = call(f"backward of {what}", torch.autograd.grad, out, wanted, grad, allow_unused=True)
    expected = torch.autograd.grad(expected_out, wanted, grad)
    for index, (g, e) in enumerate(zip(got, expected)):
        if g is None:
            raise Unsolved(f"backward of {what} returned no gradient for input {index}")
        expect_close(f"the gradient of {what} for input {index}", g, e)


def opcheck(what: str, op, samples, tests: tuple[str, ...] | None = None, hints: dict[str, str] | None = None) -> None:
    """torch.library.opcheck on every sample; the first failing test, by name, with its first line and the hint
    for that test (`hints`, else the general one)."""
    for args in samples:
        outcome = call(f"opcheck of {what}", torch.library.opcheck, op, args, raise_exception=False,
                       **({"test_utils": tests} if tests else {}))
        for test, result in outcome.items():
            if result != "SUCCESS":
                hint = {**_OPCHECK_HINTS, **(hints or {})}.get(test, "")
                raise Unsolved(f"opcheck's {test} fails for {what}: {one_line(result)}{hint}")


_OPCHECK_HINTS = {"test_faketensor": " (the fake kernel must return what the real one returns: the same shape, "
                                     "dtype and strides; torch.empty_like(self) keeps self's strides)"}


@contextlib.contextmanager
def captured_stderr():
    """Collect what C++ writes to file descriptor 2 meanwhile (sys.stderr does not see it)."""
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


def code(context: Context, suffixes: tuple[str, ...]) -> str:
    """The learner's sources of this exercise without comments and preprocessor lines (for checks of what the
    code uses: `#include <c10/cuda/CUDAGuard.h>` names a header, it uses nothing)."""
    text = "\n".join(p.read_text() for p in sorted(context.folder.iterdir()) if p.suffix in suffixes)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"^[ \t]*#[^\n]*", "", text, flags=re.M)


# -- inputs and references -------------------------------------------------------------------------------

def randn(*shape, dtype=None, seed: int = 0, requires_grad: bool = False, device: str = "cpu"):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator, dtype=dtype or torch.float32).to(device).requires_grad_(
        requires_grad)


def layouts(dtype, seed: int = 0, device: str = "cpu"):
    """(name, self, other) pairs of one shape in the layouts a kernel must handle, made on `device` (a copy
    to another device would make each of them dense)."""
    def make(*shape, offset):
        return randn(*shape, dtype=dtype, seed=seed + offset, device=device)

    yield "contiguous", make(5, 7, offset=0), make(5, 7, offset=1)
    yield "transposed", make(7, 5, offset=2).t(), make(5, 7, offset=3)
    yield "sliced", make(10, 16, offset=4)[1:6, ::2][:, :7], make(5, 7, offset=5)
    yield "expanded", make(1, 7, offset=6).expand(5, 7), make(5, 7, offset=7)
    # The same layouts on `other`: a kernel must not read either input as dense.
    yield "transposed other", make(5, 7, offset=12), make(7, 5, offset=13).t()
    yield "sliced other", make(5, 7, offset=14), make(10, 16, offset=15)[1:6, ::2][:, :7]
    yield "expanded other", make(5, 7, offset=16), make(1, 7, offset=17).expand(5, 7)
    yield "0-dim", make(offset=8), make(offset=9)
    yield "empty", make(0, 3, offset=10), make(0, 3, offset=11)


def rmsnorm_reference(x, weight, eps=1e-6):
    return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + eps) * weight
