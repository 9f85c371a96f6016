"""Solution of exercise 18 (notebook 18_build_the_dispatcher): a call's key set and a computed table entry."""
from myops.toy_dispatcher import (Entry, KeySet, Operator, ThreadLocalState,  # noqa: F401
                                  alias_covers, runtime_key, split_key)


def call_key_set(tensors: list[KeySet], tls: ThreadLocalState) -> KeySet:
    """The tensors' keys and the thread's included keys, minus its excluded keys."""
    keys = tls.included
    for tensor in tensors:
        keys = keys | tensor
    # KeySet's minus removes functionality bits only: a tensor keeps its backend bits whatever is excluded.
    return keys - tls.excluded


# The alias keys in the order OperatorEntry::computeDispatchTableEntryWithDebug consults them, with the word the
# dispatcher's dump prints for a kernel found there.
ALIASES = (("CompositeExplicitAutogradNonFunctional", "default backend kernel"),
           ("CompositeExplicitAutograd", "default backend kernel"),
           ("CompositeImplicitAutograd", "math kernel"),
           ("Autograd", "autograd kernel"))
COMPOSITES = ("CompositeExplicitAutogradNonFunctional", "CompositeExplicitAutograd", "CompositeImplicitAutograd")


def computed_entry(op: Operator, key: str) -> Entry:
    """What `op`'s dispatch table holds at runtime key `key`."""
    if key in op.kernels:  # a registration to the key itself wins (a fallthrough too)
        return Entry(key, op.kernels[key], key, "kernel")
    functionality, backend = split_key(key)
    for alias, why in ALIASES:
        if alias not in op.kernels:
            continue
        # Undefined, the entry of a call left without any functionality, is filled by the composites only.
        covered = alias in COMPOSITES if key == "Undefined" else alias_covers(alias, key)
        if not covered:
            continue
        if alias == "CompositeImplicitAutograd" and functionality == "AutogradFunctionality":
            # A kernel for the backend itself, or a CompositeExplicitAutograd one, would be hidden from every call
            # under autograd: the autograd key is left to the Autograd alias, or to the fallback.
            if runtime_key("Dense", backend) in op.kernels or "CompositeExplicitAutograd" in op.kernels:
                continue
        return Entry(key, op.kernels[alias], alias, why)
    if key in op.fallbacks:
        return Entry(key, op.fallbacks[key], "fallback", "backend fallback")
    return Entry(key, None, "", "missing")
