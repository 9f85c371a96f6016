"""Typed Python wrappers over the dispatcher's operators; load the layers first (myops.load())."""
from __future__ import annotations

import torch
from torch import Tensor


def myadd(self: Tensor, other: Tensor) -> Tensor:
    """Elementwise sum of two tensors of the same shape and floating dtype (myops::myadd)."""
    return torch.ops.myops.myadd.default(self, other)


def mymatmul(self: Tensor, other: Tensor) -> Tensor:
    """Matrix product of two 2-d tensors of the same floating dtype (myops::mymatmul)."""
    return torch.ops.myops.mymatmul.default(self, other)
