"""vmap batching rules for myadd and mymatmul, registered with `torch.library.register_vmap`.

Without a rule, `torch.vmap` runs an operator once per batch element (functorch's for-loop fallback). A rule
receives the whole batch and the position of its batch dimension in each argument (`in_dims`, None when an
argument is not batched) and calls the operator as few times as the operator's shape contract allows.

Why Python and not a C++ `FuncTorchBatched` kernel: `register_vmap` is public, documented API and works for
operators defined in C++. A C++ rule would need functorch's internal headers (`ATen/functorch/*`: unwrapping
batched tensors by level, re-wrapping results) that carry no compatibility promise between releases. The rule
only reshapes and calls the C++ kernels, so running it in Python costs microseconds per call, not per element.

The rules take the operator they batch, so any operator with myadd's or mymatmul's contract can reuse them.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor


def batch_first(x: Tensor, dim: int | None, size: int) -> Tensor:
    """x with its batch dimension at 0; an unbatched x is expanded (a view: no copy)."""
    return x.expand(size, *x.shape) if dim is None else x.movedim(dim, 0)


def elementwise_rule(op: Callable[[Tensor, Tensor], Tensor]):
    """Rule for an elementwise binary operator over same-shaped tensors: one call on the whole batch."""

    def rule(info, in_dims, self: Tensor, other: Tensor):
        self_dim, other_dim = in_dims
        # Our kernels accept any strides, so the expanded operand is read in place, not materialized.
        return op(batch_first(self, self_dim, info.batch_size),
                  batch_first(other, other_dim, info.batch_size)), 0

    return rule


def matmul_rule(op: Callable[[Tensor, Tensor], Tensor]):
    """Rule for a 2-d matrix product: one call when one operand is batched, one call per element when both are."""

    def rule(info, in_dims, self: Tensor, other: Tensor):
        self_dim, other_dim = in_dims
        if other_dim is None:
            # (B, m, k) @ (k, n): stack the B matrices on top of each other -> (B·m, k) @ (k, n).
            a = self.movedim(self_dim, 0)
            batch, m, k = a.shape
            return op(a.reshape(batch * m, k), other).view(batch, m, -1), 0
        if self_dim is None:
            # (m, k) @ (B, k, n): put the B matrices side by side -> (m, k) @ (k, B·n); the result is batched
            # along dimension 1, which vmap accepts as it is (no copy).
            b = other.movedim(other_dim, 1)
            k, batch, n = b.shape
            return op(self, b.reshape(k, batch * n)).view(self.shape[0], batch, n), 1
        # Both batched: no single 2-d product computes B independent products without B-fold waste, so this
        # is the loop the fallback would run — written out, so it needs no warning.
        a, b = self.movedim(self_dim, 0), other.movedim(other_dim, 0)
        return torch.stack([op(a[i], b[i]) for i in range(info.batch_size)]), 0

    return rule


_registered: list[str] = []


def register() -> list[str]:
    """Register the rules for myops::myadd and myops::mymatmul (once per process); returns the operators."""
    if not _registered:
        torch.library.register_vmap("myops::myadd", elementwise_rule(torch.ops.myops.myadd.default))
        torch.library.register_vmap("myops::mymatmul", matmul_rule(torch.ops.myops.mymatmul.default))
        _registered.extend(["myops::myadd", "myops::mymatmul"])
    return list(_registered)
