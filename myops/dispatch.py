"""Read an operator's dispatch table from the dispatcher, as text or as a picture."""
from __future__ import annotations

import re
from dataclasses import dataclass

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

_LINE = re.compile(r"^(?P<key>\w+): (?P<fallthrough>fallthrough )?registered at (?P<where>\S+) \[(?P<kind>[^\]]+)\]$")


@dataclass(frozen=True)
class Entry:
    key: str
    kind: str  # "kernel", "fallback", "fallthrough" or "none"
    source: str  # "csrc/..." for our kernels, "torch" for PyTorch's, "" for none

    def format(self, key_width: int = 16) -> str:
        return f"{self.key:<{key_width}}{self.kind:<12}{self.source}"

    def __str__(self) -> str:
        return self.format()


def _source(where: str) -> str:
    path = where.rsplit(":", 1)[0]
    csrc = str(REPO_ROOT / "csrc") + "/"
    if path.startswith(csrc):
        return "csrc/" + path[len(csrc):]
    # Kernels registered from Python are filed under the torch.library line that registered them.
    return "Python (torch.library)" if path.endswith(".py") else "torch"


def dispatch_table(op: str, keys: tuple[str, ...] = COURSE_KEYS) -> list[Entry]:
    """What the dispatcher would run for each of `keys` when `op` (e.g. "myops::myadd") is called."""
    found = {}
    for line in torch._C._dispatch_dump_table(op).splitlines():
        match = _LINE.match(line.strip())
        if match:
            kind = ("fallthrough" if match["fallthrough"] else
                    "fallback" if match["kind"] == "backend fallback" else "kernel")
            found[match["key"]] = Entry(match["key"], kind, _source(match["where"]))
    return [found.get(key, Entry(key, "none", "")) for key in keys]


def format_table(op: str, keys: tuple[str, ...] = COURSE_KEYS) -> str:
    """The dispatch table of `op` as aligned text, one key per line, highest priority first."""
    width = max([16] + [len(key) + 1 for key in keys])
    header = f"{'key':<{width}}{'runs':<12}from"
    return "\n".join([f"{op}", header] + [entry.format(width) for entry in dispatch_table(op, keys)])


_COLORS = {"kernel": "#4c9f70", "fallback": "#e0a458", "fallthrough": "#9db4c0", "none": "#e9e9e9"}


def plot_table(op: str, keys: tuple[str, ...] = COURSE_KEYS):
    """A picture of the dispatch table of `op`: one row per key, colored by what runs there."""
    from matplotlib.figure import Figure  # not pyplot: the notebook shows the returned figure once
    from matplotlib.patches import Patch

    entries = dispatch_table(op, keys)
    fig = Figure(figsize=(7, 0.42 * len(entries) + 0.9))
    ax = fig.subplots()
    for row, entry in enumerate(entries):
        ax.barh(row, 1, color=_COLORS[entry.kind], edgecolor="white")
        label = entry.kind if entry.kind == "none" else f"{entry.kind}  ({entry.source})"
        ax.text(0.02, row, label, va="center", fontsize=9)
    ax.set_yticks(range(len(entries)), [entry.key for entry in entries])
    ax.invert_yaxis()
    ax.set_xticks([])
    ax.set_xlim(0, 1)
    ax.set_title(f"{op}: what runs for each dispatch key (top = consulted first)", fontsize=10)
    ax.legend(handles=[Patch(color=c, label=k) for k, c in _COLORS.items()],
              loc="upper center", bbox_to_anchor=(0.5, -0.02), ncol=4, frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


def computed_table(registrations: list[str]) -> str:
    """The table the dispatcher computes for a toy op with kernels on `registrations` (PythonDispatcher)."""
    from torch._python_dispatcher import PythonDispatcher

    dispatcher = PythonDispatcher()  # registers a toy op; dropping it unregisters, so calls can repeat
    try:
        dispatcher.register(registrations)
        return dispatcher.dispatchTable().strip()
    finally:
        del dispatcher


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
