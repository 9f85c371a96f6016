"""DTensor sharding rules for the course's operators, registered with `register_sharding`.

DTensor (torch.distributed.tensor) knows how to shard ATen's operators, not ours: without a rule, calling
myops::myadd on DTensors raises "does not have a sharding strategy registered". A rule lists the placements an
operator accepts, one strategy per line: `(output placements, input placements)`, one placement per output and
one per argument, None for a non-tensor one such as eps (DTensor counts only the tensor arguments' placements;
`install` checks the full count against the schema). DTensor picks the strategy that needs the least
communication, redistributes the inputs to it if they do not already match, runs our kernel on each rank's local
shard, and labels the result with the output placement the rule claims. DTensor never checks that claim against
the math: a rule is right only if every local result, so labelled, is the global result.

Import this module in a training script and call `register()` once the operators are loaded (`myops.load()`).
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch.distributed.tensor import Partial, Replicate, Shard
from torch.distributed.tensor.experimental import register_sharding

Strategy = tuple[list, list]  # (output placements, input placements)


def elementwise(self, other) -> list[Strategy]:
    """myadd: both operands and the result alike: replicated, sharded on any one dimension, or partial sums."""
    # (a0 + b0) + (a1 + b1) = (a0 + a1) + (b0 + b1): a sum of pending partial sums is a pending partial sum.
    alike = [Replicate(), Partial()] + [Shard(dim) for dim in range(self.ndim)]
    return [([p], [p, p]) for p in alike]


def rmsnorm(self, weight, eps=None) -> list[Strategy]:
    """myrmsnorm: rows are independent, the last dimension is reduced over: never shard it; weight replicated.

    eps reaches the rule only when it differs from its default: on its way into Python the dispatcher drops the
    trailing arguments equal to their defaults (`parseIValuesToPyArgsKwargs`, torch/csrc/autograd/python_variable.cpp).
    """
    strategies = [([Replicate()], [Replicate(), Replicate(), None])]
    strategies += [([Shard(dim)], [Shard(dim), Replicate(), None]) for dim in range(self.ndim - 1)]
    return strategies


def matmul(self, other) -> list[Strategy]:
    """mymatmul (m, k) @ (k, n): split the rows of self, or the columns of other, or the shared k (partial sums)."""
    return [
        ([Replicate()], [Replicate(), Replicate()]),
        ([Shard(0)], [Shard(0), Replicate()]),   # each rank: its rows of self @ all of other = its rows
        ([Shard(1)], [Replicate(), Shard(1)]),   # all of self @ its columns of other = its columns
        ([Partial()], [Shard(1), Shard(0)]),     # its k-slice of both: a full-size term of the sum over k
        ([Partial()], [Partial(), Replicate()]),  # (a1 + a2) @ b = a1 @ b + a2 @ b: the sum stays pending
        ([Partial()], [Replicate(), Partial()]),  # a @ (b1 + b2) likewise
    ]


def transpose(self) -> list[Strategy]:
    """mytranspose: the sharded dimension moves with the data (rows become columns); replicas and sums stay."""
    return [
        ([Replicate()], [Replicate()]),
        ([Partial()], [Partial()]),
        ([Shard(1)], [Shard(0)]),
        ([Shard(0)], [Shard(1)]),
    ]


def checked(op: torch._ops.OpOverload, rule: Callable[..., Sequence[Strategy]]) -> Callable[..., list[Strategy]]:
    """rule, refusing a strategy whose placement counts do not match op's schema, with a message naming op."""
    schema = op._schema
    outputs, arguments = len(schema.returns), len(schema.arguments)
    names = ", ".join(argument.name for argument in schema.arguments)

    def checked_rule(*args, **kwargs) -> list[Strategy]:
        strategies = list(rule(*args, **kwargs))
        for output, inputs in strategies:
            if len(output) != outputs or len(inputs) != arguments:
                raise ValueError(
                    f"sharding rule for {schema.name}: the strategy {output} <- {inputs} gives {len(output)} "
                    f"output and {len(inputs)} input placements; the schema has {outputs} output(s) and "
                    f"{arguments} arguments ({names}): give one placement per argument, None for a non-tensor one")
        return strategies

    return checked_rule


def forget_chosen_strategies() -> None:
    """Clear DTensor's memo of the strategy it chose per operator and input specs (in C++ and in Python).

    Without this, a replaced rule would go on being ignored for inputs seen before. Private API; an older torch
    has only the Python cache.
    """
    from torch.distributed.tensor import DTensor, debug

    clear = getattr(debug, "_clear_sharding_prop_cache", None)
    clear() if clear else DTensor._op_dispatcher.sharding_propagator.propagate_op_sharding.cache_clear()


def install(op: torch._ops.OpOverload, rule: Callable[..., Sequence[Strategy]]) -> None:
    """Register rule for op (checked against its schema), replacing any earlier rule and what DTensor chose by it."""
    register_sharding(op)(checked(op, rule))
    forget_chosen_strategies()


def rules() -> dict[torch._ops.OpOverload, Callable[..., Sequence[Strategy]]]:
    """Each course operator and its rule (the operators must be loaded)."""
    ops = torch.ops.myops
    return {
        ops.myadd.default: elementwise,
        # In place, DTensor keeps only the strategies whose placements for self and for the output are both self's
        # current one: self never moves.
        ops.myadd_.default: elementwise,
        ops.myrmsnorm.default: rmsnorm,
        ops.mymatmul.default: matmul,
        ops.mytranspose.default: transpose,
    }


def register() -> list[str]:
    """Register the rule of every course operator (again, if a rule was replaced); returns the operator names."""
    for op, rule in rules().items():
        install(op, rule)
    return [op._schema.name for op in rules()]
