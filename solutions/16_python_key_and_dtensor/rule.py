"""Solution of exercise 16 (notebook 16_python_key_and_dtensor): a sharding rule for ex16::rowdot."""
import torch
from torch import Tensor
from torch.distributed.tensor import Partial, Replicate, Shard
from torch.distributed.tensor.experimental import register_sharding


def _check_shapes(x: Tensor, w: Tensor) -> None:
    torch._check(w.dim() == 1 and w.shape[0] == x.shape[-1],
                 lambda: f"ex16::rowdot: expected w of shape [{x.shape[-1]}] (x's last dimension), got {list(w.shape)}")


@torch.library.custom_op("ex16::rowdot", mutates_args=())
def rowdot(x: Tensor, w: Tensor) -> Tensor:
    _check_shapes(x, w)
    return (x * w).sum(-1)


@rowdot.register_fake
def _(x, w):
    _check_shapes(x, w)
    return x.new_empty(x.shape[:-1])


@register_sharding(torch.ops.ex16.rowdot.default)
def rowdot_sharding(x, w):
    last = x.ndim - 1
    strategies = [([Replicate()], [Replicate(), Replicate()])]
    # Rows are independent: a dimension the sum does not touch stays sharded, and w is needed whole.
    strategies += [([Shard(dim)], [Shard(dim), Replicate()]) for dim in range(last)]
    # The summed dimension split between ranks, w split the same way: each rank sums its part of every row.
    strategies.append(([Partial()], [Shard(last), Shard(0)]))
    # The sum is linear in each input alone: partial x times whole w is a partial result, and the other way round.
    strategies.append(([Partial()], [Partial(), Replicate()]))
    strategies.append(([Partial()], [Replicate(), Partial()]))
    return strategies
