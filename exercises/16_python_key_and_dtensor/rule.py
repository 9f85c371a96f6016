"""Exercise 16 (notebook 16_python_key_and_dtensor): a sharding rule, so that DTensor can run ex16::rowdot.

Checked by myops/exercises/ex16_python_key_and_dtensor.py.

ex16::rowdot below takes x of any shape [..., n] and w of shape [n] and returns, for every row of x, its dot
product with w: out[...] = sum over j of x[..., j] * w[j]. Its kernel and fake kernel are given. Called with
DTensors, it stops at DTensor's "does not have a sharding strategy registered": DTensor does not know which
placements of x and w let each rank compute its part of the output from the parts it holds, nor what that
part is.

Your part:
  1. rowdot_sharding(x, w): return a list of (output placements, input placements) pairs, each a list with
     one placement per tensor: [out] and [x, w]. x and w arrive as DTensor's specs of the inputs (x.ndim is
     the number of dimensions of x). List every strategy the math allows with no communication, and nothing
     else: the check runs your rule on two simulated ranks for every placement of x (Replicate, Shard(d) for
     each d, Partial) and of w (Replicate, Shard(0), Partial) and compares each result with one process.
     Think about which dimension the sum runs over, what each rank holds when that dimension is split, and
     for which input a partial sum is still summable.
  2. Register it: decorate it with torch.distributed.tensor.experimental.register_sharding(
     torch.ops.ex16.rowdot.default).
Check your answer with:  python -m myops.exercises check 16
"""
import torch
from torch import Tensor
from torch.distributed.tensor import Partial, Replicate, Shard  # noqa: F401 (the placements you will need)
from torch.distributed.tensor.experimental import register_sharding  # noqa: F401


def _check_shapes(x: Tensor, w: Tensor) -> None:
    torch._check(w.dim() == 1 and w.shape[0] == x.shape[-1],
                 lambda: f"ex16::rowdot: expected w of shape [{x.shape[-1]}] (x's last dimension), got {list(w.shape)}")


# Given: the operator and its fake kernel (DTensor runs the fake kernel to learn the output's shape).
@torch.library.custom_op("ex16::rowdot", mutates_args=())
def rowdot(x: Tensor, w: Tensor) -> Tensor:
    _check_shapes(x, w)
    return (x * w).sum(-1)


@rowdot.register_fake
def _(x, w):
    _check_shapes(x, w)
    return x.new_empty(x.shape[:-1])


def rowdot_sharding(x, w):
    raise NotImplementedError("not solved yet: write rowdot_sharding in exercises/16_python_key_and_dtensor/rule.py")


# TODO: register the rule.
