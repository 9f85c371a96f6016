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


def myrmsnorm(self: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    """RMS normalization over the last dimension, scaled by weight (myops::myrmsnorm)."""
    return torch.ops.myops.myrmsnorm.default(self, weight, eps)


def myadd_(self: Tensor, other: Tensor) -> Tensor:
    """In place self += other, returning self (myops::myadd_)."""
    return torch.ops.myops.myadd_.default(self, other)


def myadd_inplace(self: Tensor, other: Tensor) -> None:
    """In place self += other, returning nothing: the torch.compile-friendly form (myops::myadd_inplace)."""
    torch.ops.myops.myadd_inplace.default(self, other)


def mytranspose(self: Tensor) -> Tensor:
    """The transpose of a 2-d tensor, as a view of it (myops::mytranspose)."""
    return torch.ops.myops.mytranspose.default(self)
