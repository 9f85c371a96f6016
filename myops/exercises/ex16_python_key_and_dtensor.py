"""Exercise 16: a sharding rule for ex16::rowdot with register_sharding, run on two simulated ranks.

Every placement of x (Replicate, Shard of each dimension, Partial) meets every placement of w (Replicate,
Shard(0), Partial). For each pair the learner's rule is asked for its strategies, and each strategy is tried on
its own: the inputs are placed as it says, every rank runs the kernel on what it holds, and what the ranks then
hold must be what the strategy claims. Then DTensor itself runs the operator on each pair and the full result is
compared with one process; where the math lets the ranks work on what they hold, DTensor must not communicate.
"""
from __future__ import annotations

import functools

import torch
from torch.distributed.tensor import DTensor, Partial, Placement, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.debug import CommDebugMode

from myops.exercises.expect import call, expect_close, randn, require_op
from myops.exercises.runner import Context, Unsolved, one_line
from myops.mesh import simulated_mesh

_WORLD_SIZE = 2
_OP = "ex16::rowdot"


def check(context: Context) -> None:
    context.load_python("rule.py")
    op = require_op("ex16", "rowdot", f"keep the given operator in {context.file('rule.py')}")
    w = randn(6, dtype=torch.float64, seed=1)
    # Any shape [..., n]: a rule may be right for some numbers of dimensions only (x of one dimension has no rows).
    xs = (randn(4, 6, dtype=torch.float64, seed=2), randn(2, 4, 6, dtype=torch.float64, seed=3),
          randn(6, dtype=torch.float64, seed=4), randn(2, 2, 2, 6, dtype=torch.float64, seed=5))
    for x in xs:
        expect_close(f"{_OP} on x of shape {list(x.shape)}, in one process (keep the given kernel)",
                     call(_OP, op, x, w), _reference(x, w))
    rule = _registered_rule(op, context)
    with simulated_mesh(_WORLD_SIZE) as mesh:
        cases = [(x, xp, wp) for x in xs for xp in _placements(x.ndim) for wp in _placements(1)]
        tried: set[tuple] = set()
        for x, xp, wp in cases:  # first every strategy the rule gives, each on its own
            dx, dw = _place(x, xp, mesh), _place(w, wp, mesh)
            asked = f"rowdot_sharding for x {_name(xp)} of {x.ndim} dimensions and w {_name(wp)}"
            for strategy in _strategies(asked, call(asked, rule, dx._spec, dw._spec)):
                if (x.ndim, strategy) not in tried:
                    tried.add((x.ndim, strategy))
                    _try_strategy(op, mesh, x, w, strategy)
        for x, xp, wp in cases:  # then DTensor's own run, against one process
            what = f"{_OP} on DTensors x {_name(xp)} (shape {list(x.shape)}) and w {_name(wp)}"
            dx, dw = _place(x, xp, mesh), _place(w, wp, mesh)
            with CommDebugMode() as comm:
                out = call(what, op, dx, dw)
            _expect_on_every_rank(f"{what}, gathered with full_tensor()", out.full_tensor(), _reference(x, w))
            _expect_no_communication(comm, x.ndim, xp, wp)


def _reference(x, w):
    return (x * w).sum(-1)


def _registered_rule(op, context: Context):
    """The learner's function, as register_sharding recorded it in DTensor's sharding propagator
    (torch/distributed/tensor/experimental/_register_sharding.py: a partial of custom_strategy and the rule)."""
    found = DTensor._op_dispatcher.sharding_propagator.op_strategy_funcs.get(op)
    if found is None:
        raise Unsolved(f"{_OP} has no sharding rule, so DTensor refuses it (\"does not have a sharding strategy "
                       f"registered\"): decorate rowdot_sharding in {context.file('rule.py')} with "
                       "@register_sharding(torch.ops.ex16.rowdot.default)")
    if not (isinstance(found, functools.partial) and found.args and callable(found.args[0])):
        raise Unsolved(f"{_OP}'s sharding strategy was not registered by register_sharding: register rowdot_sharding "
                       "with @register_sharding(torch.ops.ex16.rowdot.default)")
    return found.args[0]


def _placements(ndim: int) -> list[Placement]:
    return [Replicate(), *(Shard(d) for d in range(ndim)), Partial()]


def _name(placement) -> str:
    if isinstance(placement, Shard):
        return f"Shard({placement.dim})"
    if isinstance(placement, Partial):
        return "Partial()" if placement.reduce_op == "sum" else f"Partial({placement.reduce_op!r})"
    return f"{type(placement).__name__}()" if isinstance(placement, Placement) else repr(placement)


def _show(strategy) -> str:
    outs, ins = strategy
    return f"([{', '.join(map(_name, outs))}], [{', '.join(map(_name, ins))}])"


def _place(tensor, placement, mesh):
    """`tensor` as a DTensor of one placement; a Partial one holds unequal parts (1/3 and 2/3 of it), so that a
    rank that uses its part as if it were the whole tensor gets a wrong value."""
    if isinstance(placement, Partial):
        from torch.distributed._local_tensor import rank_map

        parts = rank_map(lambda rank: tensor * (rank + 1) / 3)
        return DTensor.from_local(parts, mesh, [placement], run_check=False, shape=tensor.shape,
                                  stride=tensor.stride())
    return distribute_tensor(tensor, mesh, [placement])


def _strategies(asked: str, found) -> list[tuple]:
    """The rule's answer as (outputs, inputs) tuples of placements, or Unsolved saying what is malformed."""
    try:
        items = list(found)
    except TypeError:
        raise Unsolved(f"{asked} returned {type(found).__name__}: return a list of (output placements, input "
                       "placements) pairs, such as ([Replicate()], [Replicate(), Replicate()])") from None
    if not items:
        raise Unsolved(f"{asked} returned no strategy: list at least ([Replicate()], [Replicate(), Replicate()])")
    strategies = []
    for item in items:
        if not (isinstance(item, (tuple, list)) and len(item) == 2
                and all(isinstance(side, (tuple, list)) for side in item)):
            raise Unsolved(f"{asked} returned {item!r} as a strategy: each is a pair of lists, ([output placement], "
                           "[x's placement, w's placement])")
        outs, ins = item
        shown = f"the strategy {_show(item)}"
        if len(outs) != 1:
            raise Unsolved(f"{shown} gives {len(outs)} output placements; {_OP} returns one tensor: give a list "
                           "of one")
        if len(ins) != 2:
            raise Unsolved(f"{shown} gives {len(ins)} input placement(s); {_OP} takes two tensors, x and w: give "
                           "one placement for each, in that order")
        for role, placement in zip(("the output", "x", "w"), (*outs, *ins)):
            if placement is None:
                raise Unsolved(f"{shown} gives None for {role}, a tensor: None stands for an argument that is "
                               "not a tensor; give every tensor a placement")
            if not isinstance(placement, Placement):
                raise Unsolved(f"{shown} gives {placement!r} for {role}: give a placement (Replicate(), Shard(dim) "
                               "or Partial())")
            # DTensorSpec refuses a negative dimension (torch/distributed/tensor/_dtensor_spec.py:
            # DTensorSpec.compute_default_shard_order)
            if isinstance(placement, Shard) and placement.dim < 0:
                raise Unsolved(f"{shown} gives {role} {_name(placement)}: DTensor counts dimensions from 0 and "
                               f"refuses a negative one; {_LAST_DIMENSION[role]}")
        strategies.append((tuple(outs), tuple(ins)))
    return strategies


def _try_strategy(op, mesh, x, w, strategy) -> None:
    """Place x and w as the strategy says, run the kernel on every rank, and compare what the ranks hold with
    the output placement it claims; when that is wrong, name the placement they do hold, if any."""
    (claimed,), (xp, wp) = strategy
    shown = f"the strategy {_show(strategy)} (for x of shape {list(x.shape)})"
    try:
        dx, dw = _place(x, xp, mesh), _place(w, wp, mesh)
    except Exception as error:
        raise Unsolved(f"{shown} cannot place x of shape {list(x.shape)} and w of shape {list(w.shape)} that "
                       f"way: {one_line(error)}") from None
    local_x, local_w = dx.to_local(), dw.to_local()
    try:
        local = op(local_x, local_w)
    except Exception as error:
        raise Unsolved(f"{shown} has every rank call {_OP} on its part of x (shape {list(local_x.shape)}) and of w "
                       f"(shape {list(local_w.shape)}), which raised {one_line(error)}: the parts a rank holds "
                       "must still fit together") from None
    expected = _reference(x, w)
    if _holds(local, claimed, mesh, expected):
        return
    candidates = [Replicate(), *(Shard(d) for d in range(expected.ndim)), Partial()]
    held = next((p for p in candidates if _holds(local, p, mesh, expected)), None)
    summed = (" (x is split along its last dimension, the one the dot product sums over)"
              if isinstance(xp, Shard) and xp.dim == x.ndim - 1 else "")
    if held is None:
        raise Unsolved(f"{shown} is wrong: after each rank runs the kernel on its parts of x and w{summed}, what "
                       f"the ranks hold is no placement of the result at all, {_name(claimed)} or any other: leave "
                       "it out (DTensor redistributes inputs to a strategy you list)")
    raise Unsolved(f"{shown} claims the output is {_name(claimed)}, but after each rank runs the kernel on its "
                   f"parts of x and w{summed}, the ranks hold {_name(held)}: {_MEANING[type(held)]}")


# How to name each tensor's last dimension without a negative number (the output has one dimension less than x).
_LAST_DIMENSION = {"x": "write Shard(x.ndim - 1) for x's last dimension",
                   "the output": "write Shard(x.ndim - 2) for the output's last dimension",
                   "w": "w has one dimension: write Shard(0)"}


_MEANING = {Replicate: "every rank holds the whole result",
            Shard: "each rank holds its block of that dimension of the result",
            Partial: "each rank holds a partial sum, and the result is their sum across the ranks"}


def _holds(local, placement, mesh, expected) -> bool:
    """Whether the ranks' outputs `local`, read as `placement`, are `expected` on every rank."""
    try:
        full = DTensor.from_local(local, mesh, [placement], run_check=False, shape=expected.shape,
                                  stride=expected.stride()).full_tensor()
    except Exception:  # a placement that cannot describe this output (a dimension it does not have)
        return False
    return all(value.shape == expected.shape and torch.allclose(value, expected) for value in _per_rank(full))


def _per_rank(tensor) -> list:
    from torch.distributed._local_tensor import LocalTensor

    if isinstance(tensor, LocalTensor):
        return [tensor._local_tensors[rank] for rank in sorted(tensor._local_tensors)]
    return [tensor]


def _expect_on_every_rank(what: str, actual, expected) -> None:
    for rank, value in enumerate(_per_rank(actual)):
        expect_close(f"{what} on rank {rank}", value, expected)


def _expect_no_communication(comm: CommDebugMode, ndim: int, xp, wp) -> None:
    """Where each rank can compute its part of the result from what it holds, DTensor must not communicate:
    if it does, the rule lists no strategy for these placements and DTensor redistributed to one it does list."""
    why = _FREE.get((_kind(xp, ndim), _kind(wp, 1)))
    if why is None or comm.get_total_counts() == 0:
        return
    done = ", ".join(sorted(f"{str(op).split('.')[-1]} x{n}" for op, n in comm.get_comm_counts().items()))
    raise Unsolved(f"with x {_name(xp)} (of {ndim} dimensions) and w {_name(wp)}, DTensor ran collectives ({done}) "
                   f"to move the inputs to a strategy your rule lists: no strategy of yours fits these "
                   f"placements, yet {why}: list it")


def _kind(placement, ndim: int) -> str:
    if isinstance(placement, Shard):
        return "summed" if placement.dim == ndim - 1 else "rows"
    return type(placement).__name__


# The input placements where the ranks need nothing from each other, and why.
_FREE = {("Replicate", "Replicate"): "every rank can compute the whole result",
         ("rows", "Replicate"): "rows are independent: each rank can compute the output of its own rows",
         ("summed", "summed"): "each rank can sum its part of every row, with the matching part of w",
         ("Partial", "Replicate"): "the dot product is linear in x: a partial x gives a partial result",
         ("Replicate", "Partial"): "the dot product is linear in w: a partial w gives a partial result"}
