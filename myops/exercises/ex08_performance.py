"""Exercise 08: timing a call with torch's threads and a median."""
import time

import torch

from myops.exercises.expect import call
from myops.exercises.runner import Context, Unsolved


def check(context: Context) -> None:
    module = context.load_python("timing.py")
    measure = getattr(module, "seconds_per_call", None)
    if measure is None:
        raise Unsolved(f"{context.file('timing.py')} defines no function seconds_per_call")
    torch.set_num_threads(3)  # not 1, and not necessarily the number of cores: the answer must ask torch
    seen_threads = set()

    def records_threads():
        seen_threads.add(torch.get_num_threads())

    call("seconds_per_call", measure, records_threads)
    if seen_threads != {3}:
        raise Unsolved(f"seconds_per_call ran the function with {sorted(seen_threads)} thread(s) while torch uses "
                       f"{torch.get_num_threads()}; pass num_threads=torch.get_num_threads() to the Timer")
    calls = [0]

    def two_milliseconds(*args):
        calls[0] += 1
        time.sleep(0.002 if calls[0] > 1 else 0.6)  # one slow call, as a cold cache or a page fault makes

    seconds = call("seconds_per_call", measure, two_milliseconds, 1.0)
    if not isinstance(seconds, float):
        raise Unsolved(f"seconds_per_call returned {type(seconds).__name__}, expected a float (seconds)")
    if calls[0] < 10:
        raise Unsolved(f"seconds_per_call called the function {calls[0]} time(s): one measurement is noise, "
                       "time many calls and take the median (Timer.blocked_autorange)")
    if not 0.0019 <= seconds <= 0.005:
        raise Unsolved(f"seconds_per_call said {seconds:.4g} for a function that takes 2 ms per call after one "
                       "call of 0.6 s: expected about 0.002 (seconds per call, not per block of calls, not "
                       "microseconds; the median, which one slow call does not move, not the mean)")
