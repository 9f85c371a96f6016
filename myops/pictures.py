"""Pictures of the dispatcher's mechanisms, each drawn from live data.

    from myops import pictures
    pictures.key_set(x, op="aten::add.Tensor")  # a call's key set, bit by bit, and the key that runs
    pictures.table(["myops::myadd"])            # what each key of each operator holds, and where it came from
    pictures.path(recorded)                     # the kernels one call ran (myops.dispatch.record_path)
    pictures.placements("mymatmul", (a, b), out, comms)  # DTensor: each rank's piece, and the collectives
    pictures.triton_grid(x, weight)             # Triton: the programs of a launch, their blocks, the masked tail

Each function reads what it draws (from PyTorch, from a recording, from a launch) and returns a Picture that keeps
that data as `picture.data`; the notebook cell that shows a picture asserts the same data, so a picture cannot
drift from what the dispatcher does. Labels are names (keys, operators, files); what a picture means is said in
the Markdown beside it, where the translation reaches it. A Picture shows itself in Jupyter as SVG with its text
kept as text, and names its kind in its title ("myops picture: key set"), which tests/test_pictures.py counts.
"""
from __future__ import annotations

import functools
import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch._C import DispatchKeySet

from myops import dispatch

KINDS = ("key set", "table", "path", "placement", "grid")

# One palette for every picture: what runs, what is skipped, what is missing.
KERNEL, ALIAS, FALLBACK, FALLTHROUGH, NONE = "#cfe8d7", "#e4f1d0", "#d6e4f5", "#ececec", "#ffffff"
SET, EXCLUDED, RUNS = "#8fc7a3", "#e8a3a3", "#f0a030"
EDGE, TEXT, MUTED = "#4d4d4d", "#1a1a1a", "#666666"


@dataclass(eq=False)
class Picture:
    """A drawn figure, the data it was drawn from, and its kind (one of KINDS)."""
    kind: str
    data: Any
    figure: Any = field(repr=False)  # a matplotlib Figure

    def svg(self) -> str:
        """The picture as an SVG element; the same data gives the same text (nbval compares it)."""
        import matplotlib

        buffer = io.StringIO()
        with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "myops"}):
            self.figure.savefig(buffer, format="svg",
                                metadata={"Title": f"myops picture: {self.kind}", "Date": None, "Creator": None})
        text = buffer.getvalue()
        return text[text.index("<svg"):]  # without the XML prolog and DOCTYPE, so it embeds in HTML

    def _repr_svg_(self) -> str:
        return self.svg()

    def __repr__(self) -> str:
        return f"<myops picture: {self.kind}>"


def _figure(width: float, height: float, xlim: tuple[float, float], ylim: tuple[float, float]):
    """A figure of `width` x `height` inches whose one axes spans it, without ticks, in data units."""
    from matplotlib.figure import Figure  # not pyplot: nothing global, the notebook shows the Picture once

    figure = Figure(figsize=(width, height))
    axes = figure.add_axes((0, 0, 1, 1))
    axes.set_xlim(*xlim)
    axes.set_ylim(*ylim)
    axes.axis("off")
    return figure, axes


def _box(axes, x: float, y: float, w: float, h: float, color: str, *, edge: str = EDGE, width: float = 0.8,
         dashed: bool = False, hatch: str | None = None) -> None:
    from matplotlib.patches import Rectangle

    axes.add_patch(Rectangle((x, y), w, h, facecolor=color, edgecolor=edge, linewidth=width,
                             linestyle="--" if dashed else "-", hatch=hatch))


# -- key sets ------------------------------------------------------------------------------------------------
BACKEND_BITS = 16  # the low bits of a key set name backends; the bits above them, functionalities (DispatchKey.h)


@functools.cache
def functionality_names() -> tuple[str, ...]:
    """The functionality keys of c10/core/DispatchKey.h as installed, in enum order: the name of bit
    BACKEND_BITS + i of a key set is entry i. Python names only some of them (dispatch.functionality_keys)."""
    header = (Path(torch.__file__).parent / "include" / "c10" / "core" / "DispatchKey.h").read_text()
    body = header.split("enum class DispatchKey : uint16_t {")[1]
    body = re.split(r"^\s*EndOfFunctionalityKeys,", body, flags=re.MULTILINE)[0]
    names = tuple(re.findall(r"^\s*(\w+),", body, flags=re.MULTILINE))
    for name in dispatch.functionality_keys():  # the header's order is the masks' order: check it, never assume
        bit = DispatchKeySet(getattr(torch._C.DispatchKey, name)).raw_repr().bit_length() - 1
        if names[bit - BACKEND_BITS] != name:
            raise RuntimeError(f"myops.pictures: DispatchKey.h names bit {bit} {names[bit - BACKEND_BITS]}, "
                               f"torch._C.DispatchKey says {name}")
    return names


@functools.cache
def backend_names() -> dict[int, str]:
    """Each backend bit (0 to 15) with its backend's name, read from the runtime keys of the Dense functionality."""
    dense = DispatchKeySet(torch._C.DispatchKey.Dense).raw_repr()
    names = {}
    for name, key in torch._C.DispatchKey.__members__.items():
        try:
            raw = DispatchKeySet(key).raw_repr()
        except RuntimeError:  # an alias key has no bits
            continue
        backend = raw & ((1 << BACKEND_BITS) - 1)
        if raw & ~backend == dense and backend and backend & (backend - 1) == 0:
            names.setdefault(backend.bit_length() - 1, name)
    return names


def bit_name(bit: int) -> str:
    """The name of one bit of a key set: a backend below BACKEND_BITS, a functionality above."""
    if bit < BACKEND_BITS:
        return backend_names().get(bit, f"backend bit {bit}")
    return functionality_names()[bit - BACKEND_BITS]


def key_names(keys: DispatchKeySet) -> tuple[str, ...]:
    """The runtime keys of a key set as PyTorch lists them (its repr), e.g. ("CPU", "AutogradCPU")."""
    inside = str(keys)[len("DispatchKeySet("):-1]
    return tuple(name.strip() for name in inside.split(",") if name.strip())


def _bits(raw: int) -> list[int]:
    """The set bits of a raw key set, highest (highest priority) first."""
    return [bit for bit in range(raw.bit_length() - 1, -1, -1) if raw >> bit & 1]


@dataclass(frozen=True)
class KeySetData:
    """The key sets of one call, each as its runtime keys (names), and the key whose kernel runs."""
    tensors: tuple[str, ...]  # the union of the tensors' keys
    include: tuple[str, ...]  # the thread-local include set
    exclude: tuple[str, ...]  # the thread-local exclude set
    call: tuple[str, ...]     # tensors ∪ include − exclude
    runs: str | None          # the highest key of `call`, skipping the operator's fallthroughs; None: empty set
    skipped: tuple[str, ...]  # the keys above it that the operator falls through


def runs_at(keys: DispatchKeySet, op: str | None = None) -> tuple[str | None, tuple[str, ...]]:
    """The key whose kernel a call with key set `keys` runs, and the higher keys skipped as `op`'s fallthroughs.

    The dispatcher takes the highest functionality bit, and for a functionality kept per backend (Dense,
    AutogradFunctionality, ...) the highest backend bit with it (DispatchKeySet::highestPriorityTypeId); keys the
    operator falls through are removed first (OperatorEntry's non-fallthrough key set)."""
    raw = keys.raw_repr()
    backends = raw & ((1 << BACKEND_BITS) - 1)
    table = dispatch.registrations(op) if op else {}
    skipped = []
    for bit in _bits(raw >> BACKEND_BITS):
        key = DispatchKeySet.from_raw_repr((1 << (bit + BACKEND_BITS)) | backends).highestPriorityTypeId().name
        if key in table and table[key].fallthrough:
            skipped.append(key)
            continue
        return key, tuple(skipped)
    return None, tuple(skipped)


def key_set(*tensors: torch.Tensor, op: str | None = None, title: str = "") -> Picture:
    """The key set of a call with `tensors` under this thread's state, one column per bit, and the key that runs.

    Rows: the tensors' keys, the thread-local include and exclude sets, and the call's key set (tensors ∪
    include − exclude, as dispatch.call_key_set computes it). With `op`, the keys `op` falls through are crossed
    out and the first key after them is the one that runs."""
    sets = {"tensors": DispatchKeySet(torch._C.DispatchKey.Undefined)}
    for tensor in tensors:
        sets["tensors"] = sets["tensors"] | torch._C._dispatch_keys(tensor)
    sets["include"] = torch._C._dispatch_tls_local_include_set()
    sets["exclude"] = torch._C._dispatch_tls_local_exclude_set()
    sets["call"] = dispatch.call_key_set(*tensors)
    runs, skipped = runs_at(sets["call"], op)
    data = KeySetData(*(key_names(sets[row]) for row in ("tensors", "include", "exclude", "call")), runs, skipped)

    raws = {row: keys.raw_repr() for row, keys in sets.items()}
    # A column for each bit the tensors or the include set bring; excluding a bit nothing brings changes nothing,
    # so those exclude bits are only counted ("+N").
    every = raws["tensors"] | raws["include"]
    hidden = len(_bits(raws["exclude"] & ~every))
    functionality = [bit for bit in _bits(every) if bit >= BACKEND_BITS]
    backend = [bit for bit in _bits(every) if bit < BACKEND_BITS]
    gap = 0.6
    columns = {bit: i for i, bit in enumerate(functionality)}
    columns.update({bit: len(functionality) + gap + i for i, bit in enumerate(backend)})
    width = len(functionality) + gap + len(backend)
    runs_bits = set(_bits(DispatchKeySet(getattr(torch._C.DispatchKey, runs)).raw_repr())) if runs else set()
    skipped_bits = {max(_bits(DispatchKeySet(getattr(torch._C.DispatchKey, key)).raw_repr())) for key in skipped}
    label_width = 5.6
    right = 0.6 + 0.2 * len(f"+{hidden} more") if hidden else 1.8  # room for the exclude row's count
    header = 0.5 + 0.21 * max(len(bit_name(bit)) for bit in columns)  # room for the longest rotated name
    figure, axes = _figure(0.3 * (label_width + width + right), 0.3 * (4.2 + header + 2.1),
                           (-label_width, width + right), (-4.5, header + 2.1))
    axes.text(-label_width + 0.1, header + 1.65, title or "the key set of one call", fontsize=10, va="center")
    if runs:
        axes.text(-label_width + 0.1, header + 0.95, f"runs: {runs}", fontsize=10, va="center", fontweight="bold",
                  color="#9a5a00")
    for bit, x in columns.items():
        axes.text(x + 0.5, 0.2, bit_name(bit), rotation=90, fontsize=7.5, ha="center", va="bottom",
                  family="monospace")
    axes.text(len(functionality) / 2, header + 0.35, "functionality bits", fontsize=8, ha="center", color=MUTED)
    if backend:  # a call with no tensor may have none (notebook 19): no label over an empty group
        axes.text(len(functionality) + gap + len(backend) / 2, header + 0.35, "backend bits", fontsize=8,
                  ha="center", color=MUTED)
    rows = (("tensors", "tensors' keys  ∪"), ("include", "include (thread)  ∪"),
            ("exclude", "exclude (thread)  −"), ("call", "call's key set  ="))
    for r, (row, label) in enumerate(rows):
        y = -1 - r - (0.25 if row == "call" else 0)
        axes.text(-0.15, y + 0.5, label, fontsize=8.5, ha="right", va="center",
                  fontweight="bold" if row == "call" else "normal")
        if row == "exclude" and hidden:
            axes.text(width + 0.15, y + 0.5, f"+{hidden} more", fontsize=8, va="center", color=MUTED)
        for bit, x in columns.items():
            on = raws[row] >> bit & 1
            # Subtracting a key set removes functionality bits only (DispatchKeySet::operator-): an excluded backend
            # bit stays in the call, so it is drawn neutral, not red.
            color = (NONE if not on else FALLTHROUGH if row == "exclude" and bit < BACKEND_BITS else
                     EXCLUDED if row == "exclude" else RUNS if row == "call" and bit in runs_bits else SET)
            _box(axes, x + 0.05, y + 0.05, 0.9, 0.9, color, edge="#999999" if not on else EDGE,
                 width=1.6 if color == RUNS else 0.6)
            if row == "call" and on and bit in skipped_bits:
                axes.plot([x + 0.15, x + 0.85], [y + 0.15, y + 0.85], color=EDGE, linewidth=1)
    return Picture("key set", data, figure)


# -- dispatch tables -----------------------------------------------------------------------------------------
_COLORS = {"kernel": KERNEL, "fallback": FALLBACK, "fallthrough": FALLTHROUGH, "none": NONE}


def table(ops, keys: tuple[str, ...] = dispatch.COURSE_KEYS, title: str = "") -> Picture:
    """A grid of dispatch tables: one column per operator of `ops`, one row per key of `keys` (highest priority at
    the top); each cell says what the dispatcher computed for that key: a kernel (and its file), a kernel filled in
    from an alias key (which one), a fallback, a fallthrough, or nothing."""
    ops = [ops] if isinstance(ops, str) else list(ops)
    data = {op: {entry.key: entry for entry in dispatch.dispatch_table(op, keys)} for op in ops}
    def words(entry: dispatch.Entry) -> tuple[str, str]:  # the cell's two lines
        kind = "—" if entry.kind == "none" else f"{entry.kind} via {entry.alias}" if entry.alias else entry.kind
        return kind, entry.source

    unit = 0.62  # inches per data unit, across
    # Each column as wide as its longest line (bold 8.5 pt above, monospace 7 pt below, about 0.6 em a character).
    widths = [max([4.0, len(op) * 0.6 * 9 / 72 / unit + 0.4] +
                  [max(len(kind) * 0.62 * 8.5, len(where) * 0.6 * 7) / 72 / unit + 0.45
                   for kind, where in map(words, data[op].values())]) for op in ops]
    lefts = [sum(widths[:c]) for c in range(len(ops))]
    cell_h, label_w = 1.0, 0.6 + max(len(key) for key in keys) * 0.6 * 9 / 72 / unit
    top = 2.0 if title else 1.0
    figure, axes = _figure(unit * (label_w + sum(widths) + 0.2), 0.42 * (len(keys) + 0.1 + top),
                           (-label_w, sum(widths) + 0.2), (-len(keys) * cell_h - 0.1, top))
    if title:
        axes.text(-label_w + 0.1, 1.6, title, fontsize=10, va="center")
    for left, width, op in zip(lefts, widths, ops):
        axes.text(left + width / 2, 0.55, op, fontsize=9, ha="center", va="center", family="monospace",
                  fontweight="bold")
    for r, key in enumerate(keys):
        y = -(r + 1) * cell_h
        axes.text(-0.15, y + cell_h / 2, key, fontsize=9, ha="right", va="center", family="monospace")
        for left, width, op in zip(lefts, widths, ops):
            entry = data[op][key]
            kind, where = words(entry)
            _box(axes, left + 0.05, y + 0.05, width - 0.1, cell_h - 0.1,
                 ALIAS if entry.alias and entry.kind == "kernel" else _COLORS[entry.kind],
                 dashed=entry.kind == "fallthrough")
            axes.text(left + 0.2, y + cell_h * 0.66, kind, fontsize=8.5, va="center", fontweight="bold",
                      color=MUTED if entry.kind in ("none", "fallthrough") else TEXT)
            axes.text(left + 0.2, y + cell_h * 0.3, where, fontsize=7, va="center", family="monospace", color=TEXT)
    return Picture("table", data, figure)


# -- paths ---------------------------------------------------------------------------------------------------
def hop(path: dispatch.CallPath, index: int) -> str | None:
    """How kernel `index` of a recorded path was reached from the kernel that ran it: "guard" (the thread's exclude
    set grew on the way: the caller called, or redispatched, under a guard), "redispatch" (nothing newly excluded,
    and a lower key: the caller passed a masked key set), "call" (neither), or None for a kernel called from
    outside. A recording sees exclude sets, not call sites: under a guard, a fresh call and a redispatch look alike."""
    parent = path.parent(index)
    if parent is None:
        return None
    step, caller = path.steps[index], path.steps[parent]
    if set(step.excluded) - set(caller.excluded):
        return "guard"
    rank = [name for name in dispatch.priority_order(_ranked(step.key, caller.key))]
    return "redispatch" if len(rank) == 2 and rank[0] == _bits_name(caller.key) else "call"


def _bits_name(key: str) -> str:
    return "AutogradFunctionality" if key == "Autograd" else key  # the alias names the functionality's bit


def _ranked(*keys: str) -> list[str]:
    """The keys of `keys` that have bits (alias keys other than Autograd have none), by their bit names."""
    return [_bits_name(key) for key in keys if _bits_name(key) in dispatch._key_bits()]


def path(recorded: dispatch.CallPath) -> Picture:
    """A recorded path: one numbered box per kernel in the order they started, each indented under the kernel that
    ran it; a solid arrow where a guard excluded keys on the way (labelled by what it excludes), a dashed one for a
    redispatch with nothing newly excluded. Phases marked with CallPath.phase head their steps; C++ and Python
    kernels are labelled so."""
    steps = recorded.steps
    row, indent, header = 1.5, 0.55, 0.9
    starts = {first: label for first, label in recorded.phases}
    ys, y, headers = [], 0.0, []
    for i in range(max(len(steps), 1)):
        if i in starts:
            headers.append((y, starts[i]))
            y -= header
        ys.append(y)
        y -= row
    height = 0.62 * (-(ys[-1] - 0.5) + 0.5) + 0.5
    figure, axes = _figure(8.5, height, (0, 10), (ys[-1] - 0.55, 0.5 + 0.4 / 0.62))
    axes.text(0.1, 0.75, recorded.title or "the path of one call", fontsize=10, va="center")
    for hy, label in headers:
        axes.plot([0.1, 9.9], [hy + 0.05, hy + 0.05], color="#999999", linewidth=0.8)
        axes.text(0.1, hy - 0.25, label, fontsize=10, fontweight="bold", va="center", color="#1f4e79")
    nothing = "nothing" if not recorded.excluded_before else "nothing more than\noutside the call"
    hops = [hop(recorded, i) for i in range(len(steps))]
    for i, step in enumerate(steps):
        y, x = ys[i], 0.1 + indent * step.depth
        from matplotlib.patches import FancyBboxPatch

        axes.add_patch(FancyBboxPatch((x, y - 0.45), 9.9 - x, 0.9, boxstyle="round,pad=0.02",
                                      facecolor=KERNEL, edgecolor="#4c9f70"))
        language = "Python" if step.source.endswith(".py") else "C++"
        axes.text(x + 0.2, y + 0.13, f"{i + 1}. {step.key}", fontsize=11, fontweight="bold", va="center")
        axes.text(x + 0.2, y - 0.22, f"{step.source}  ({language})", fontsize=8.5, va="center",
                  family="monospace", color="#333333")
        excluded = dispatch.key_list(step.excluded, 44, 2) if step.excluded else nothing
        axes.text(9.75, y, f"excluded on entry:\n{excluded}", fontsize=8, va="center", ha="right",
                  color="#7a4b00" if step.excluded else MUTED)
        parent = recorded.parent(i)
        if parent is None:
            continue
        before = steps[parent]
        added = [key for key in step.excluded if key not in before.excluded]
        dropped = [key for key in before.excluded if key not in step.excluded]
        label = {"guard": f"under a guard that excludes {dispatch.key_list(added, 200, 1)}",
                 "redispatch": "redispatch: nothing newly excluded",
                 "call": (f"call; no longer excluded: {dispatch.key_list(dropped, 60, 1)}" if dropped
                          else "call: nothing newly excluded")}[hops[i]]
        px = 0.1 + indent * before.depth + 0.35
        axes.annotate("", xy=(x + 0.02, y), xytext=(px, ys[parent] - 0.47),
                      arrowprops=dict(arrowstyle="-|>", color="#555555", linestyle="--" if hops[i] == "redispatch"
                                      else "-", connectionstyle="angle,angleA=-90,angleB=0"))
        axes.text(px + 0.15, y + row / 2, label, fontsize=8.5, va="center", style="italic", color="#555555")
    if not steps:
        axes.text(5, 0, "no kernel of ours ran", ha="center", va="center")
    return Picture("path", recorded, figure)


# -- DTensor placements --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Piece:
    """One tensor of a sharded call: its global shape, its placement, and each rank's rows and columns of it."""
    name: str
    shape: tuple[int, ...]  # the global shape, as the tensor has it
    placement: str  # "R", "S(0)", "P(sum)", ... (str of the DTensor's placement)
    ranks: tuple[tuple[tuple[int, int], tuple[int, int]], ...]  # per rank: (row start, stop), (col start, stop)

    @property
    def matrix(self) -> tuple[int, int]:
        """Rows and columns as drawn: a 1-d tensor is one row."""
        return (1, *self.shape) if len(self.shape) == 1 else self.shape


@dataclass(frozen=True)
class PlacementData:
    op: str
    inputs: tuple[Piece, ...]
    output: Piece
    collectives: dict[str, int]  # CommDebugMode's counts, by collective's name


def _piece(name: str, tensor) -> Piece:
    """Where each rank's local tensor lies in the global one, read from DTensor's own bookkeeping."""
    # DTensor's own arithmetic for "rank r holds which part", asked for each rank's mesh coordinate in turn
    from torch.distributed.tensor._utils import _compute_local_shape_and_global_offset

    mesh, placements = tensor.device_mesh, tensor.placements
    if tensor.ndim not in (1, 2):
        raise ValueError(f"myops.pictures.placements: draws 1-d and 2-d tensors, {name} has {tensor.ndim} dims")
    ranks = []
    for rank in range(mesh.size()):
        local, offset = _compute_local_shape_and_global_offset(tensor.shape, mesh.shape, _coordinate_of(mesh, rank),
                                                               placements)
        local, offset = tuple(int(n) for n in local), tuple(int(n) for n in offset)
        if tensor.ndim == 1:
            local, offset = (1, *local), (0, *offset)
        ranks.append(((offset[0], offset[0] + local[0]), (offset[1], offset[1] + local[1])))
    return Piece(name, tuple(tensor.shape), str(placements[0]), tuple(ranks))


def _coordinate_of(mesh, rank: int) -> list[int]:
    return [int(index) for index in (mesh.mesh == rank).nonzero()[0]]


def placements(op: str, inputs: dict, output, collectives: dict) -> Picture:
    """Each tensor of one DTensor call (`inputs`: {name: DTensor}, `output`: the DTensor it returned) as its global
    matrix, cut into the part each rank holds; a replicated or partial tensor is whole on every rank. Between the
    inputs and the output: the collectives the call ran (`collectives`: CommDebugMode().get_comm_counts())."""
    data = PlacementData(op, tuple(_piece(name, tensor) for name, tensor in inputs.items()),
                         _piece("out", output), {str(k).split(".")[-1]: v for k, v in collectives.items() if v})
    pieces = list(data.inputs) + [data.output]
    shades = ("#9cc3e6", "#f4b183", "#a9d18e", "#ffd966")
    cell = 0.32
    x, boxes = 0.0, []
    for piece in pieces:
        boxes.append(x)
        x += piece.matrix[1] * cell + (4.2 if piece is data.inputs[-1] else 0.9)
    height = max(piece.matrix[0] for piece in pieces) * cell
    def label_lines(piece: Piece) -> int:  # placement and shape; a thin whole tensor also says what ranks hold
        return 2 + 2 * (len(set(piece.ranks)) == 1 and piece.matrix[0] < 3)

    bottom = max(piece.matrix[0] * cell + 0.35 + 0.3 * label_lines(piece) for piece in pieces)
    figure, axes = _figure(0.55 * x + 0.3, 0.55 * (bottom + 1.3) + 0.2, (-0.3, x), (-bottom, 1.3))
    axes.text(-0.2, 1.0, op, fontsize=10, va="center", family="monospace", fontweight="bold")
    for piece, left in zip(pieces, boxes):
        rows, cols = piece.matrix
        whole = len(set(piece.ranks)) == 1  # every rank holds the same part: replicated or partial
        for rank, ((r0, r1), (c0, c1)) in enumerate(piece.ranks):
            if whole:
                break
            _box(axes, left + c0 * cell, -r1 * cell, (c1 - c0) * cell, (r1 - r0) * cell, shades[rank % 4])
            axes.text(left + (c0 + c1) / 2 * cell, -(r0 + r1) / 2 * cell, f"rank {rank}", fontsize=7.5,
                      ha="center", va="center")
        below = [piece.placement, "×".join(map(str, piece.shape))]
        if whole:
            _box(axes, left, -rows * cell, cols * cell, rows * cell, "#e0e0e0")
            held = "every rank:\n" + ("a partial sum" if piece.placement.startswith("P") else "all of it")
            if rows >= 3:  # room inside the box; a thin one says it below
                axes.text(left + cols * cell / 2, -rows * cell / 2, held, fontsize=7.5, ha="center", va="center")
            else:
                below[1:1] = held.split("\n")
        axes.text(left + cols * cell / 2, 0.45, piece.name, fontsize=9, ha="center", va="center",
                  family="monospace")
        axes.text(left + cols * cell / 2, -rows * cell - 0.2, "\n".join(below), fontsize=7.5, ha="center",
                  va="top", family="monospace")
    arrow_x = boxes[-1] - 3.9
    moved = "\n".join(f"{name} ×{count}" for name, count in data.collectives.items()) or "0 collectives"
    axes.annotate("", xy=(boxes[-1] - 0.2, -height / 2), xytext=(arrow_x, -height / 2),
                  arrowprops=dict(arrowstyle="-|>", color=EDGE))
    axes.text(arrow_x, -height / 2 + 0.3, moved, fontsize=7.5, va="bottom", family="monospace", color="#7a4b00")
    return Picture("placement", data, figure)


# -- Triton's grid -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GridData:
    """One launch of a row-wise Triton kernel: the grid, the row length and the block each program reads."""
    grid: tuple[int, ...]  # programs along each axis of the launch
    cols: int              # elements in one row
    block: int             # elements one block operation covers (BLOCK)

    @property
    def slices(self) -> int:
        """Blocks a program steps through to cover its row."""
        return math.ceil(self.cols / self.block)

    @property
    def masked(self) -> int:
        """Lanes of a row's last block that the mask switches off."""
        return self.slices * self.block - self.cols


class _LaunchRecorder:
    """Stands in for a @triton.jit kernel: `kernel[grid](*args, **kwargs)` notes the launch and runs nothing."""

    def __init__(self):
        self.launches = []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launches.append((tuple(grid), args, kwargs))


def triton_grid(x: torch.Tensor, weight: torch.Tensor, max_rows: int = 6) -> Picture:
    """The launch myops.triton_ops.launch makes for `x` (read by running that launcher with a recorder in place
    of the kernel): one program per row, each stepping through its row BLOCK elements at a time, the lanes past
    the row's end masked off. Rows past `max_rows` are left out of the drawing, not the data."""
    from myops import triton_ops

    recorder = _LaunchRecorder()
    triton_ops.launch(recorder, x, weight, 1e-6)
    (grid, args, kwargs), = recorder.launches
    data = GridData(grid, int(args[3]), int(kwargs["BLOCK"]))
    rows = min(grid[0], max_rows)
    unit = 10.0 / (data.slices * data.block)  # drawing width of one element
    figure, axes = _figure(8.6, 0.42 * (rows + 2.6) + 0.2, (-1.7, 10.4), (-rows - 1.1, 1.5))
    axes.text(-1.6, 1.15, f"grid = {grid}, BLOCK = {data.block}, cols = {data.cols}", fontsize=9.5, va="center",
              family="monospace")
    for s in range(data.slices):
        axes.text((s + 0.5) * data.block * unit, 0.45, f"block {s}: cols {s * data.block}…"
                  f"{min((s + 1) * data.block, data.cols) - 1}", fontsize=7.5, ha="center", va="center",
                  family="monospace")
    for r in range(rows):
        y = -r - 1
        axes.text(-0.15, y + 0.5, f"program {r}", fontsize=8, ha="right", va="center", family="monospace")
        for s in range(data.slices):
            start = s * data.block
            live = min(data.block, data.cols - start)
            _box(axes, start * unit, y + 0.08, live * unit, 0.84, KERNEL if s % 2 == 0 else "#b7dcc4")
            if live < data.block:
                _box(axes, (start + live) * unit, y + 0.08, (data.block - live) * unit, 0.84, NONE,
                     edge="#aaaaaa", hatch="///", dashed=True)
    if grid[0] > rows:
        axes.text(-0.15, -rows - 0.6, f"+{grid[0] - rows} more", fontsize=8, ha="right", va="center", color=MUTED)
    if data.masked:
        axes.text((data.cols + data.masked / 2) * unit, -rows - 0.6, f"mask: {data.masked} lanes off",
                  fontsize=7.5, ha="center", va="center", family="monospace", color=MUTED)
    return Picture("grid", data, figure)
