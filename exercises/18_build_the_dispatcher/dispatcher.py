"""Exercise 18 (notebook 18_build_the_dispatcher): the two hearts of a dispatcher, proved equal to PyTorch's.

Checked by myops/exercises/ex18_build_the_dispatcher.py.

Write the two functions of the toy dispatcher (myops/toy_dispatcher.py) that decide which kernel a call runs.
The check plugs them into the toy, in place of the toy's own, and runs notebook 18's differential test: a
thousand generated operators, each with Python kernels on random keys, called on random tensors under random
thread-local state, in PyTorch and in the toy. Its answer is the first case where the two disagree, shrunk
(usually to a minimal one), in one sentence; when all agree, it compares your computed_entry's tables, `why`
included, with PyTorch's. Write them from the rules, not by calling the toy's own two (the check
replaces those with functions that refuse to run).

Your part:
  1. call_key_set(tensors, tls) -> KeySet: the key set of a call, before the operator's fallthroughs are masked
     out. `tensors` is a list of KeySets, one per tensor argument; `tls` a ThreadLocalState with the thread's
     `included` and `excluded` sets. Mind what removing keys from a KeySet removes (KeySet.__sub__).
  2. computed_entry(op, key) -> Entry: what the operator's dispatch table holds at the runtime key `key`
     ("CPU", "AutogradMeta", "Undefined", ...). `op.kernels` maps each key a kernel was registered to, alias keys
     included ("Autograd", "CompositeImplicitAutograd", ...), to its Kernel; `op.fallbacks` the keys PyTorch has a
     fallback for. Return Entry(key, kernel, source, why): `source` is the registration key the kernel came from
     (or "fallback", or "" for nothing); `why` is the word torch._C._dispatch_dump_table prints: "kernel",
     "default backend kernel" (CompositeExplicitAutograd or
     CompositeExplicitAutogradNonFunctional), "math kernel" (CompositeImplicitAutograd),
     "autograd kernel" (Autograd), "backend fallback", or "missing" (with kernel None). Follow the order of
     OperatorEntry::computeDispatchTableEntryWithDebug, which notebook 18 shows with its exceptions: which alias
     key wins over which, which key the composites fill that no alias covers, and when
     CompositeImplicitAutograd must leave an autograd key alone.
You may use alias_covers(alias, key) (which runtime keys an alias key fills, as PyTorch says) and split_key /
runtime_key (a runtime key as functionality and backend, and back).
Check your answer with:  python -m myops.exercises check 18
"""
from myops.toy_dispatcher import (Entry, KeySet, Operator, ThreadLocalState,  # noqa: F401
                                  alias_covers, runtime_key, split_key)


def call_key_set(tensors: list[KeySet], tls: ThreadLocalState) -> KeySet:
    """The tensors' keys and the thread's included keys, minus its excluded keys."""
    raise NotImplementedError("not solved yet: write call_key_set in exercises/18_build_the_dispatcher/dispatcher.py")


def computed_entry(op: Operator, key: str) -> Entry:
    """What `op`'s dispatch table holds at runtime key `key`."""
    raise NotImplementedError("not solved yet: write computed_entry in exercises/18_build_the_dispatcher/dispatcher.py")
