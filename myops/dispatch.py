"""Read an operator's dispatch table from the dispatcher, and record the path one call takes through our kernels."""
from __future__ import annotations

import contextlib
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from myops.build import REPO_ROOT

# The keys the course adds kernels for, highest priority first: the dispatcher consults them in this
# order and runs the first one present in the call's key set that has a kernel (or a fallback).
COURSE_KEYS = (
    "AutocastCUDA",
    "AutocastCPU",
    "AutogradCUDA",
    "AutogradCPU",
    "ADInplaceOrView",
    "Meta",
    "CUDA",
    "CPU",
)

# One line of torch._C._dispatch_dump_table: "CPU: registered at <file>:<line> [kernel]", with "[alias]" after
# an alias key's name and "fallthrough " before "registered" for a fallthrough.
_LINE = re.compile(r"^(?P<key>\w+)(?:\[alias\])?: (?P<fallthrough>fallthrough )?registered at (?P<file>.+):\d+ "
                   r"\[(?P<kind>[^\]]+)\]$")


@dataclass(frozen=True)
class Registration:
    """What the dispatcher's table holds for one key of an operator, as its dump says."""
    key: str
    kind: str  # the dump's word: "kernel", "autograd kernel", "math kernel", "backend fallback", ...
    file: str  # where it was registered, as compiled (our sources by absolute path)
    fallthrough: bool


def registrations(op: str) -> dict[str, Registration]:
    """Every key of `op`'s dispatch table (e.g. "myops::myadd") that holds something, as the dispatcher computed it."""
    found = {}
    for line in torch._C._dispatch_dump_table(op).splitlines():
        match = _LINE.match(line.strip())
        if match:
            found[match["key"]] = Registration(match["key"], match["kind"], match["file"], bool(match["fallthrough"]))
    return found


@dataclass(frozen=True)
class Entry:
    key: str
    kind: str  # "kernel", "fallback", "fallthrough" or "none"
    source: str  # our file by its repository path ("csrc/..."), "torch" for PyTorch's, "" for none
    alias: str = ""  # the alias key the kernel was registered for, when the dispatcher filled this key from one

    def format(self, key_width: int = 16) -> str:
        return f"{self.key:<{key_width}}{self.kind:<12}{self.source}"

    def __str__(self) -> str:
        return self.format()


def kernel_forms(op: str, key: str) -> set[str]:
    """How the kernel registered for `key` of `op` can be called: {"boxed", "unboxed"}, {"boxed"} for a kernel
    made from a boxed function, set() for none (torch._C._dispatch_dump lists the kernels as registered)."""
    for line in torch._C._dispatch_dump(op).splitlines():
        if line.startswith(f"{key}: registered at ") and line.endswith("]"):
            return set(line[line.rindex("[") + 1:-1].split())
    return set()


def _source(path: str) -> str:
    # Kernels registered from Python are filed under the torch.library line that registered them.
    if path.endswith(".py"):
        return "Python (torch.library)"
    # Ours (csrc/, exercises/, solutions/, ...) by their path in the repository; the rest is PyTorch's.
    return repo_path(path) or "torch"


def repo_path(path: str) -> str | None:
    """`path` relative to the repository, or None when it lies outside it."""
    try:
        return str(Path(path).relative_to(REPO_ROOT))
    except ValueError:
        return None


def dispatch_table(op: str, keys: tuple[str, ...] = COURSE_KEYS) -> list[Entry]:
    """What the dispatcher would run for each of `keys` when `op` (e.g. "myops::myadd") is called."""
    found = registrations(op)

    def entry(key: str) -> Entry:
        if key not in found:
            return Entry(key, "none", "")
        kind = ("fallthrough" if found[key].fallthrough else
                "fallback" if found[key].kind == "backend fallback" else "kernel")
        return Entry(key, kind, _source(found[key].file), alias_of(op, found[key].kind))
    return [entry(key) for key in keys]


# The words of torch._C._dispatch_dump_table for a key filled from an alias key
# (OperatorEntry::computeDispatchTableEntryWithDebug), and the alias key each stands for.
_ALIAS_WORDS = {"math kernel": "CompositeImplicitAutograd", "autograd kernel": "Autograd",
                "default backend kernel": "CompositeExplicitAutograd",
                "nested kernel": "CompositeImplicitAutogradNestedTensor"}


def alias_of(op: str, kind: str) -> str:
    """The alias key behind a table entry of `op` whose dump says `kind`, or "" for a kernel of the key itself.
    "default backend kernel" is either CompositeExplicitAutograd or its NonFunctional variant: the dump of the
    operator's registrations says which was registered."""
    alias = _ALIAS_WORDS.get(kind, "")
    if alias == "CompositeExplicitAutograd" and not any(
            line.startswith("CompositeExplicitAutograd[alias]") for line in torch._C._dispatch_dump(op).splitlines()):
        return "CompositeExplicitAutogradNonFunctional"
    return alias


def format_table(op: str, keys: tuple[str, ...] = COURSE_KEYS) -> str:
    """The dispatch table of `op` as aligned text, one key per line, highest priority first."""
    width = max([16] + [len(key) + 1 for key in keys])
    header = f"{'key':<{width}}{'runs':<12}from"
    return "\n".join([f"{op}", header] + [entry.format(width) for entry in dispatch_table(op, keys)])


def computed_table(registrations: list[str]) -> str:
    """The table the dispatcher computes for a toy op with kernels on `registrations` (PythonDispatcher)."""
    from torch._python_dispatcher import PythonDispatcher

    dispatcher = PythonDispatcher()  # registers a toy op; dropping it unregisters, so calls can repeat
    try:
        dispatcher.register(registrations)
        return dispatcher.dispatchTable().strip()
    finally:
        del dispatcher


@functools.cache
def _key_bits() -> dict[str, int]:
    """Each name of torch._C.DispatchKey with its bits in a key set; alias keys have none and are left out."""
    bits = {}
    for name, key in torch._C.DispatchKey.__members__.items():
        try:
            bits[name] = torch._C.DispatchKeySet(key).raw_repr()
        except RuntimeError:
            continue
    return bits


def priority_order(keys) -> list[str]:
    """`keys` (names) sorted the way the dispatcher ranks them, highest priority first.

    The rank is read from the installed PyTorch, not typed in: a key set is a 64-bit mask with one
    *functionality* bit per functionality (Dense, AutogradFunctionality, AutocastCPU, ...) above the
    *backend* bits (CPU, CUDA, Meta, ...), and the dispatcher picks the highest functionality bit first,
    then the highest backend bit. So comparing the masks as numbers gives the dispatcher's order.
    """
    return sorted(keys, key=lambda name: _key_bits()[name], reverse=True)


def functionality_keys() -> list[str]:
    """The functionalities that torch._C.DispatchKey names, highest priority first: the order of
    c10/core/DispatchKey.h (Python names 30 of its 46 functionalities; Tracer and AutocastXLA, for two, are missing:
    notebook 00 counts them).

    Per-backend functionalities (Dense, AutogradFunctionality, ...) stand for one runtime key per backend:
    Dense for CPU, CUDA, Meta, ..., AutogradFunctionality for AutogradCPU, AutogradCUDA, ...
    """
    names: dict[int, str] = {}
    for name, bits in _key_bits().items():
        # one bit above the backend bits; the first name of each bit (not the StartOf... markers)
        if bits & (bits - 1) == 0 and bits >= 1 << 16 and bits not in names and not name.startswith("StartOf"):
            names[bits] = name
    return [names[bits] for bits in sorted(names, reverse=True)]


def call_key_set(*tensors: torch.Tensor) -> torch._C.DispatchKeySet:
    """The key set the dispatcher computes for a call with `tensors`.

    It is the union of the tensors' keys and the thread-local include set, minus the thread-local
    exclude set; the dispatcher then runs the highest-priority key of it that is not a fallthrough.
    """
    keys = torch._C._dispatch_tls_local_include_set()
    for tensor in tensors:
        keys = keys | torch._C._dispatch_keys(tensor)
    return keys - torch._C._dispatch_tls_local_exclude_set()


class CallCounter(TorchDispatchMode):
    """Counts, by name, the operator calls that reach the kernels; use as `with CallCounter() as counter:`.

    A dispatch mode runs at the Python key, below autograd and below vmap's FuncTorchBatched: it sees the calls
    a batching rule or a vmap fallback makes, not the call the user wrote.
    """

    def __init__(self):
        super().__init__()
        self.calls: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls[func.name()] = self.calls.get(func.name(), 0) + 1
        return func(*args, **(kwargs or {}))


# -- the path of one call ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    """One kernel of a recorded path: its key, its file, the keys guards had excluded on entry to it, and
    how many of our kernels were still running around it."""
    key: str  # the dispatch key the kernel is registered for ("Autograd" for the alias key)
    source: str  # its file in the repository, "csrc/..."
    excluded: tuple[str, ...]  # excluded on entry, beyond what was excluded when the recording began
    depth: int = 0  # 0: called from Python; 1: called while one kernel of ours ran; ...


@dataclass
class CallPath:
    """The kernels of our layers that ran during a recording, in the order they started (see record_path)."""
    title: str = ""
    steps: list[Step] = field(default_factory=list)
    excluded_before: tuple[str, ...] = ()  # what the thread already excluded when the recording began
    phases: list[tuple[int, str]] = field(default_factory=list)  # (index of the first step, label)
    _collect: Callable[[], None] | None = field(default=None, repr=False, compare=False)

    def phase(self, label: str) -> None:
        """Inside the `with` block, between two calls: the steps recorded from here on belong to `label`
        ("forward", "backward", ...), which the text and the picture show above them."""
        if self._collect is None:
            raise RuntimeError("myops: CallPath.phase() marks a point of a running recording (inside record_path)")
        self._collect()
        self.phases.append((len(self.steps), label))

    def phase_of(self, index: int) -> str | None:
        """The label of the phase step `index` belongs to, or None."""
        return next((label for first, label in reversed(self.phases) if first <= index), None)

    def keys(self) -> list[str]:
        """The key of each kernel that ran, in order."""
        return [step.key for step in self.steps]

    def parent(self, index: int) -> int | None:
        """The index of the kernel that was running when kernel `index` started, or None."""
        depth = self.steps[index].depth
        return next((i for i in range(index - 1, -1, -1) if self.steps[i].depth < depth), None)

    def format(self) -> str:
        """The path as aligned text: one kernel per line, in the order they started, indented by nesting."""
        keys = [" " * 2 * step.depth + step.key for step in self.steps]
        key_width = max([16] + [len(key) + 1 for key in keys])
        source_width = max([36] + [len(step.source) + 2 for step in self.steps])
        header = f"   {'kernel for':<{key_width}}{'in':<{source_width}}excluded on entry"
        starts = {first: label for first, label in self.phases}
        lines = []
        for i, (key, step) in enumerate(zip(keys, self.steps)):
            if i in starts:
                lines.append(f"-- {starts[i]}")
            lines.append(f"{i + 1}. {key:<{key_width}}{step.source:<{source_width}}{', '.join(step.excluded) or '-'}")
        lines += [f"-- {label}" for first, label in self.phases if first >= len(self.steps)]
        return "\n".join(([self.title] if self.title else []) + [header] + lines)

    def __str__(self) -> str:
        return self.format()


def _key_names(raw: int) -> list[str]:
    """The names of the dispatch keys in a raw key set, highest priority first; the autograd
    functionality (every Autograd<Backend> key at once) is named "Autograd"."""
    bits = {}
    for name, key_bits in _key_bits().items():
        if key_bits and key_bits & raw == key_bits and key_bits not in bits.values():
            bits[name] = key_bits
    names = sorted(bits, key=lambda name: bits[name], reverse=True)
    if "AutogradFunctionality" in names:  # what the autograd guards exclude: autograd for every backend
        names = ["Autograd" if name == "AutogradFunctionality" else name for name in names
                 if name not in ("AutogradOther", "AutogradNestedTensor")]
    return names


@contextlib.contextmanager
def record_path(title: str = ""):
    """Record which of our kernels run, in order, while the `with` block runs on this thread.

    `with dispatch.record_path("mymatmul(a, b)") as path: ...` fills `path` (a CallPath) when the block
    ends. Each kernel of csrc/ begins with MYOPS_TRACE (csrc/trace.h), which notes its key, its file, the
    thread-local exclude set on its entry and its nesting; PyTorch's own kernels and fallbacks are not
    recorded. Start the recording inside the context managers of the call (torch.autocast, torch.no_grad,
    ...): the keys shown as excluded are those excluded beyond what was excluded when the recording began.
    `path.phase("backward")` inside the block labels the steps recorded after it. Needs the cpu layer,
    which holds the recording.
    """
    if not hasattr(torch.ops.myops_trace, "start"):
        raise RuntimeError("myops: recording a path needs the cpu layer: call myops.load('cpu') first")
    before = _key_names(torch._C._dispatch_tls_local_exclude_set().raw_repr())
    baseline = set(before)
    path = CallPath(title, excluded_before=tuple(before))

    def collect(restart: bool) -> None:
        for line in torch.ops.myops_trace.stop().splitlines():
            key, source, raw, depth = line.split("\t")
            excluded = tuple(name for name in _key_names(int(raw)) if name not in baseline)
            path.steps.append(Step(key, repo_path(source) or source, excluded, int(depth)))
        if restart:
            torch.ops.myops_trace.start()

    torch.ops.myops_trace.start()
    path._collect = lambda: collect(restart=True)
    try:
        yield path
    finally:
        path._collect = None
        collect(restart=False)


def key_list(keys, width: int, lines: int) -> str:
    """`keys` joined by commas and wrapped at `width` characters, at most `lines` lines ("+N more" after)."""
    import textwrap

    for shown in range(len(keys), 0, -1):
        rest = len(keys) - shown
        text = ", ".join(list(keys[:shown]) + ([f"+{rest} more"] if rest else []))
        wrapped = textwrap.wrap(text, width)
        if len(wrapped) <= lines:
            return "\n".join(wrapped)
    return f"{len(keys)} keys"
