"""Exercise 08 (notebook 08_performance): time a call honestly.

Checked by myops/exercises/ex08_performance.py.

Write `seconds_per_call(fn, *args)`: the typical time of one call of `fn(*args)`, in seconds. Two things
decide whether the number means anything:

- threads: torch.utils.benchmark.Timer runs the statement with ONE thread unless told otherwise
  (num_threads=...), while the code you are timing normally uses torch.get_num_threads() of them;
- outliers: a cold first call, a garbage collection or another process makes a few calls much slower. The
  mean of many calls includes them; their median does not.

torch.utils.benchmark.Timer(stmt=..., globals=..., num_threads=...).blocked_autorange() first runs the
statement in growing blocks (1, 10, 100, ... calls) until a block is long enough to make the clock's own cost
negligible: that also warms up, and none of it is kept. Then it times blocks of that many calls until
min_run_time has passed, and returns a Measurement: .times holds each block's time per call (the block's mean),
.median the median over the blocks. A slow call moves only its own block, so the median of many blocks ignores
it; with a single block (Timer.timeit(n) makes one) the median is that block's mean. Return the .median of a
measurement of many blocks (Timer.adaptive_autorange() works too). Check your answer with:
python -m myops.exercises check 08
"""
import torch
import torch.utils.benchmark  # noqa: F401  (torch.utils.benchmark.Timer)


def seconds_per_call(fn, *args) -> float:
    """The median time of one call of fn(*args), in seconds, measured with all of torch's threads."""
    raise NotImplementedError("not solved yet: write seconds_per_call in exercises/08_performance/timing.py")
