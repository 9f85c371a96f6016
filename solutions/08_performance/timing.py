"""Solution of exercise 08 (notebook 08_performance): time a call honestly."""
import torch
import torch.utils.benchmark


def seconds_per_call(fn, *args) -> float:
    """The median time of one call of fn(*args), in seconds, measured with all of torch's threads."""
    timer = torch.utils.benchmark.Timer(
        stmt="fn(*args)",
        globals={"fn": fn, "args": args},
        num_threads=torch.get_num_threads(),  # the Timer's default is one thread
    )
    # The median over blocks of calls, each block's mean per call: a few slow calls move only their blocks.
    return timer.blocked_autorange(min_run_time=0.2).median
