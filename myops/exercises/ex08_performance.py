"""Exercise 08: timing a call with torch's threads and a median.

The function the answer times runs on a scripted clock (myops.perf.ScriptedClock): each call moves every Python
clock by a known amount, so the verdict depends on how the answer measures, never on how busy the machine is.
"""
import torch

from myops.exercises.expect import call
from myops.exercises.runner import Context, Unsolved
from myops.perf import ScriptedClock

THREADS = 3  # not 1, and not necessarily the number of cores: the answer must ask torch
TYPICAL, COLD, PAUSE, EVERY = 0.002, 0.6, 0.040, 20  # seconds; a pause hits one call in EVERY


def seconds_of_call(number: int) -> float:
    """What call `number` (from 1) costs: a cold first call, then 2 ms, and a pause (a garbage collection,
    another process) on every twentieth — inside any measurement of more than a few calls."""
    if number == 1:
        return COLD
    return TYPICAL + (PAUSE if number % EVERY == 2 else 0.0)


def check(context: Context) -> None:
    with ScriptedClock() as clock:
        module = context.load_python("timing.py")  # inside: a clock the module keeps is the scripted one too
        measure = getattr(module, "seconds_per_call", None)
        if measure is None:
            raise Unsolved(f"{context.file('timing.py')} defines no function seconds_per_call")
        torch.set_num_threads(THREADS)
        calls, threads = [0], set()

        def timed(*args):
            calls[0] += 1
            threads.add(torch.get_num_threads())
            clock.advance(seconds_of_call(calls[0]))

        seconds = call("seconds_per_call", measure, timed, 1.0)
    if threads != {THREADS}:
        raise Unsolved(f"seconds_per_call ran the function with {sorted(threads)} thread(s) while torch uses "
                       f"{THREADS}; pass num_threads=torch.get_num_threads() to the Timer")
    if not isinstance(seconds, float):
        raise Unsolved(f"seconds_per_call returned {type(seconds).__name__}, expected a float (seconds)")
    if seconds < TYPICAL / 100:
        raise Unsolved(f"seconds_per_call said {seconds:.4g} for a function that moves time.perf_counter by 2 ms "
                       "per call: measure with time.perf_counter or torch.utils.benchmark.Timer (which reads it)")
    if not 0.95 * TYPICAL <= seconds <= 1.05 * TYPICAL:
        raise Unsolved(f"seconds_per_call said {seconds:.4g} after {calls[0]} call(s) of a function that takes 2 ms "
                       f"per call, except 0.6 s for the first and 42 ms for one call in {EVERY}: expected 0.002 "
                       "(seconds per call, not per block of calls, not microseconds; the median of many calls or "
                       "blocks, which the few slow ones do not move, not the mean nor a single call)")
