"""Exercise 08 (notebook 08_performance): time a call honestly.

Checked by myops/exercises/ex08_performance.py.

Write `seconds_per_call(fn, *args)`: the typical time of one call of `fn(*args)`, in seconds. Two things
decide whether the number means anything:

- threads: torch.utils.benchmark.Timer runs the statement with ONE thread unless told otherwise
  (num_threads=...), while the code you are timing normally uses torch.get_num_threads() of them;
- outliers: a page fault, another process or a garbage collection makes a few calls much slower. The median
  of many measurements ignores them; the mean does not.

torch.utils.benchmark.Timer(stmt=..., globals=..., num_threads=...).blocked_autorange() returns a
Measurement whose .median is what you want. Check your answer with:  python -m myops.exercises check 08
"""
import torch
import torch.utils.benchmark  # noqa: F401  (torch.utils.benchmark.Timer)


def seconds_per_call(fn, *args) -> float:
    """The median time of one call of fn(*args), in seconds, measured with all of torch's threads."""
    raise NotImplementedError("not solved yet: write seconds_per_call in exercises/08_performance/timing.py")
