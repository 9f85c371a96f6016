"""Objects through the dispatcher: the C++ class RunningStats (csrc/objects/) and the operators that take it.

    from myops import objects
    objects.load()                                   # the layer, then the fakes below
    stats = objects.running_stats(x1, x2)            # a torch.ScriptObject fed with x1 and x2
    objects.standardize(stats, x), objects.summary(stats)

torch.compile and torch.export never hand the real object to a traced operator: they build a fake one from
`stats.__obj_flatten__()` through the class registered with `register_fake_class`, and the operators need
Python fake kernels, since a C++ Meta kernel cannot take the Python fake object. Both registrations look
the class and the operators up, so they happen in `load()`, after the layer is loaded; importing this module
registers nothing.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from myops import build

__all__ = ["LAYER", "CLASS", "FakeRunningStats", "load", "running_stats", "standardize", "summary"]

LAYER = "objects"
CLASS = "myops_objects::RunningStats"
_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_fakes_registered = False


def load() -> None:
    """Build (if needed) and load the objects layer, then register the fake class and fake kernels; idempotent."""
    global _fakes_registered
    build.load_layer(LAYER)
    if _fakes_registered:
        return
    # Each lookup fails before the layer is loaded ("Tried to instantiate class ... but it does not exist",
    # "operator ... does not exist"), and registering a fake kernel twice is an error: once per process.
    torch._library.register_fake_class(CLASS, FakeRunningStats)
    torch.library.register_fake("myops_objects::standardize", standardize_fake)
    torch.library.register_fake("myops_objects::summary", summary_fake)
    _fakes_registered = True


def running_stats(*tensors: Tensor) -> torch.ScriptObject:
    """A new RunningStats object (load() first), fed each of `tensors` in turn."""
    stats = torch.classes.myops_objects.RunningStats()
    for tensor in tensors:
        stats.update(tensor)
    return stats


def standardize(stats: torch.ScriptObject, x: Tensor, eps: float = 1e-5) -> Tensor:
    """(x - mean) / sqrt(variance + eps) with the statistics of `stats` (myops_objects::standardize)."""
    return torch.ops.myops_objects.standardize.default(stats, x, eps)


def summary(stats: torch.ScriptObject) -> Tensor:
    """[count, mean, variance] of `stats` as a float64 tensor (myops_objects::summary)."""
    return torch.ops.myops_objects.summary.default(stats)


# -- what tracing sees ---------------------------------------------------------------------------------------------
class FakeRunningStats:
    """The stand-in torch.compile and torch.export trace with: the state `__obj_flatten__` gave, no tensors.

    Dynamo reads an attribute of this object for every key of the real `__obj_flatten__()` (count, mean, m2):
    count and mean are the methods below, m2 is the field. A method the real class has and this one lacks is
    logged as a warning on every trace, so each is here.
    """

    def __init__(self, count: int, mean: float, m2: float):
        self._count, self._mean, self.m2 = count, mean, m2

    @classmethod
    def __obj_unflatten__(cls, flattened) -> FakeRunningStats:
        return cls(**dict(flattened))

    def count(self) -> int:
        return self._count

    def mean(self) -> float:
        return self._mean if self._count > 0 else math.nan

    def variance(self) -> float:
        return self.m2 / self._count if self._count > 0 else math.nan

    def update(self, x: Tensor) -> None:
        # The new state depends on the values of x, which a fake tensor does not have.
        raise RuntimeError("RunningStats.update: cannot be traced (torch.compile, torch.export): the new statistics "
                           "depend on the values of x; call stats.update(x) outside the compiled function")


def _check_standardize_inputs(x: Tensor, eps: float) -> None:
    # The checks of the C++ kernel that do not read the object (its state when the graph runs is what counts), as
    # RuntimeError like TORCH_CHECK's; Python names the dtype its own way (torch.int64 where C++ says Long).
    if x.dtype not in _FLOAT_DTYPES:
        raise RuntimeError(f"myops_objects::standardize: unsupported dtype {x.dtype}; supported are "
                           "float16, bfloat16, float32 and float64, convert with .float()")
    if not eps >= 0:
        raise RuntimeError(f"myops_objects::standardize: eps must be >= 0, got {eps:g}; pass a small positive eps "
                           "such as 1e-5")


def standardize_fake(stats, x: Tensor, eps: float = 1e-5) -> Tensor:
    """The fake kernel of myops_objects::standardize: the checks, then a contiguous tensor like x, no data."""
    _check_standardize_inputs(x, eps)
    return x.new_empty(x.shape)


def summary_fake(stats) -> Tensor:
    """The fake kernel of myops_objects::summary: a float64 tensor of 3, no data."""
    return torch.empty(3, dtype=torch.float64)
