"""Exercise 10 (notebook 10_vmap): a batching rule, so that vmap calls the operator once per batch.

Checked by myops/exercises/ex10_vmap.py.

ex10::myrmsnorm below normalizes the last dimension of `x` and scales it by `weight` (one value per element of
that dimension). Without a batching rule, torch.vmap falls back to a loop: one call per example. The
normalization only ever reads the last dimension, so every other dimension, a vmap dimension included, is
just more rows: one call can serve the whole batch.

Your part:
  1. myrmsnorm_batch_rule(info, in_dims, x, weight, eps=1e-6) -> (output, output batch dim). `in_dims` holds,
     for each argument the rule receives, its batch dimension, or None where it is not batched. eps, a float, is
     never batched, and it is not always received: with eps=0.5 in_dims has three entries, but when the caller
     leaves eps out, or passes it equal to its default 1e-6, the rule gets only x and weight, in_dims has two
     entries and eps keeps the rule's own default (keep it equal to the operator's). So read `in_dims[:2]`. Either
     of x and weight may be the unbatched one. Move x's batch dimension to the front (x.movedim; an unbatched
     x is expanded to info.batch_size), then call the operator once. When `weight` is batched too
     (in_dims[1] is not None), its batch dimension must broadcast against x's: normalize with a weight of
     ones and multiply by the batched weight, shaped to broadcast.
  2. Register it: torch.library.register_vmap("ex10::myrmsnorm", myrmsnorm_batch_rule).
Check your answer with:  python -m myops.exercises check 10
"""
import torch


# Given: the operator, written in Python with torch.library (notebook 11 shows how).
@torch.library.custom_op("ex10::myrmsnorm", mutates_args=())
def myrmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + eps) * weight


def myrmsnorm_batch_rule(info, in_dims, x, weight, eps=1e-6):
    raise NotImplementedError("not solved yet: write myrmsnorm_batch_rule in exercises/10_vmap/rule.py")


# TODO: register the rule.
