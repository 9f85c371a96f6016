"""A toy dispatcher in plain Python: which kernel runs when an operator is called, and why.

1. Key sets. A key set holds *functionality* bits (Dense, AutogradFunctionality, Python, ...) and *backend* bits
   (CPU, Meta, ...), as in C++. A runtime key is a functionality (Python), or a per-backend functionality with a
   backend (AutogradFunctionality + CPU = AutogradCPU). A call's keys: its tensors' keys and the thread-local
   include set, minus the thread-local exclude set.
2. Tables. An operator is its registrations, key -> kernel, alias keys included. `computed_entry` says what its
   table holds for a runtime key: the key's own kernel, an alias key's kernel, PyTorch's fallback for the key, or
   nothing.
3. Calls. `dispatch` masks out the keys whose entry is a fallthrough, looks up the highest key, and `follow`s the
   fallbacks that pass the call on (the autograd fallback, PythonTLSSnapshot's) until a kernel runs or it raises.
4. Boxed. A boxed kernel takes (operator, keys, stack of arguments), so one function serves every operator:
   `call_boxed` runs toy kernels, and `round_below` is a fallback that works for any operator (notebook 18
   registers the same fallback in PyTorch with torch.library and compares the results).

Each rule names the PyTorch source it follows; myops/differential.py checks them against the installed torch on
generated cases (tests/test_toy_dispatcher.py, notebook 18).
Left out (LEFT_OUT), and so kept out of the test's generated cases:
- backends other than CPU and Meta, with their Autograd and Autocast keys;
- AutogradOther ("ambiguous autogradother"), nested, sparse and quantized tensors;
- the alias keys CompositeImplicitAutogradNestedTensor and FuncTorchBatchedDecomposition;
- functorch, Functionalize, Conjugate/Negative/ZeroTensor, Tracer, PreDispatch and PythonDispatcher;
- kernels that call further (only PyTorch's pass-on fallbacks are followed);
- dispatch modes, and the Python key included in the thread-local state;
- fallthroughs registered to the composite alias keys: they fill Undefined too, and a call that ends there runs
  the fallthrough and fails an internal assert (fallthrough_kernel, aten/src/ATen/core/boxing/KernelFunction.cpp).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

LEFT_OUT = ("backends other than CPU and Meta", "AutogradOther", "nested, sparse and quantized tensors",
            "CompositeImplicitAutogradNestedTensor", "FuncTorchBatchedDecomposition", "functorch", "Functionalize",
            "Conjugate/Negative/ZeroTensor", "Tracer", "PreDispatch", "PythonDispatcher", "kernels that call further",
            "dispatch modes", "the Python key included in the thread-local state",
            "fallthroughs registered to the composite alias keys")

# ---- 1. key sets -----------------------------------------------------------------------------------------
# C10_FORALL_BACKEND_COMPONENTS (c10/core/DispatchKey.h): the backend bits, lowest first; CPU is bit 0.
BACKENDS = ("CPU", "CUDA", "HIP", "XLA", "MPS", "IPU", "XPU", "HPU", "VE", "Lazy", "MTIA", "MAIA",
            "PrivateUse1", "PrivateUse2", "PrivateUse3", "Meta")
# enum DispatchKey (DispatchKey.h) from Dense to PythonDispatcher: the functionality bits, lowest priority first,
# numbered after the backend bits. Undefined (0) has no bit.
FUNCTIONALITIES = (
    "Dense", "FPGA", "Vulkan", "Metal", "Quantized", "CustomRNGKeyId", "MkldnnCPU", "Sparse", "SparseCsr",
    "NestedTensor", "BackendSelect", "Fake", "Python", "FuncTorchDynamicLayerBackMode", "Functionalize",
    "Conjugate", "Negative", "ZeroTensor", "ADInplaceOrView", "AutogradOther", "AutogradFunctionality",
    "AutogradNestedTensor", "Tracer", "AutocastCPU", "AutocastMTIA", "AutocastMAIA", "AutocastXPU", "AutocastIPU",
    "AutocastHPU", "AutocastXLA", "AutocastMPS", "AutocastCUDA", "AutocastPrivateUse1", "FuncTorchBatched",
    "BatchedNestedTensor", "FuncTorchVmapMode", "Batched", "VmapMode", "FuncTorchGradWrapper", "DeferredInit",
    "PythonTLSSnapshot", "FuncTorchDynamicLayerFrontMode", "TESTING_ONLY_GenericWrapper",
    "TESTING_ONLY_GenericMode", "PreDispatch", "PythonDispatcher")
# C10_FORALL_FUNCTIONALITY_KEYS (DispatchKey.h): the per-backend functionalities, with the prefix of their runtime
# keys (Dense + CPU is "CPU"). SparseCsr before Sparse, so that a name splits at the longer prefix.
PER_BACKEND = {"Dense": "", "Quantized": "Quantized", "SparseCsr": "SparseCsr", "Sparse": "Sparse",
               "NestedTensor": "NestedTensor", "AutogradFunctionality": "Autograd"}
AUTOCAST_KEYS = tuple(f for f in FUNCTIONALITIES if f.startswith("Autocast"))


def split_key(key: str) -> tuple[str, str | None]:
    """A runtime key as (functionality, backend): "AutogradCPU" -> ("AutogradFunctionality", "CPU"),
    "CPU" -> ("Dense", "CPU"), "Python" -> ("Python", None)."""
    if key in FUNCTIONALITIES or key == "Undefined":
        return key, None
    for functionality, prefix in PER_BACKEND.items():
        if key.startswith(prefix) and key[len(prefix):] in BACKENDS:
            return functionality, key[len(prefix):]
    raise ValueError(f"not a runtime dispatch key: {key}")


def runtime_key(functionality: str, backend: str | None) -> str:
    """The inverse of split_key (toRuntimePerBackendFunctionalityKey, DispatchKey.h). Without a backend, C++ gives
    a per-backend functionality a placeholder key; no tensor gets there."""
    return PER_BACKEND[functionality] + backend if functionality in PER_BACKEND and backend else functionality


@dataclass(frozen=True)
class KeySet:
    """A DispatchKeySet (c10/core/DispatchKeySet.h): functionality bits and backend bits."""
    functionalities: frozenset = frozenset()
    backends: frozenset = frozenset()

    @classmethod
    def of(cls, *keys: str) -> KeySet:
        """DispatchKeySet({keys}): each key sets its functionality bit, a per-backend key its backend bit too."""
        pairs = [split_key(key) for key in keys]
        return cls(frozenset(f for f, _ in pairs if f != "Undefined"), frozenset(b for _, b in pairs if b))

    def __or__(self, other: KeySet) -> KeySet:
        return KeySet(self.functionalities | other.functionalities, self.backends | other.backends)

    def __and__(self, other: KeySet) -> KeySet:
        return KeySet(self.functionalities & other.functionalities, self.backends & other.backends)

    def __sub__(self, other: KeySet) -> KeySet:
        # operator- removes functionality bits only, "Any backend bits set on self will remain unchanged" (Note
        # [Removing keys from DispatchKeySet Only Affects Functionality Keys]): excluding AutogradCPU removes
        # autograd for every backend, and a CPU tensor keeps its CPU bit.
        return KeySet(self.functionalities - other.functionalities, self.backends)

    def below(self, key: str) -> KeySet:
        """This set & DispatchKeySet(FULL_AFTER, key): the functionalities below `key`'s and every backend bit;
        the FULL_AFTER constructor adds PythonDispatcher back."""
        rank = FUNCTIONALITIES.index(split_key(key)[0])
        return KeySet(frozenset(f for f in self.functionalities
                                if FUNCTIONALITIES.index(f) < rank or f == "PythonDispatcher"), self.backends)

    def highest_backend(self) -> str | None:
        return max(self.backends, key=BACKENDS.index, default=None)

    def highest_key(self) -> str:
        """highestPriorityTypeId: the highest functionality, with the highest backend if it is a per-backend one;
        Undefined when no functionality bit is set."""
        top = max(self.functionalities, key=FUNCTIONALITIES.index, default="Undefined")
        return runtime_key(top, self.highest_backend())

    def keys(self) -> list[str]:
        """The runtime keys, lowest first, as C++ iterates and prints them (a per-backend functionality without a
        backend bit has none)."""
        backends = sorted(self.backends, key=BACKENDS.index)
        return [key for f in sorted(self.functionalities, key=FUNCTIONALITIES.index)
                for key in ([runtime_key(f, b) for b in backends] if f in PER_BACKEND else [f])]

    def raw(self) -> int:
        """The 64-bit mask: backend b at bit BACKENDS.index(b), functionality f at len(BACKENDS) + its index."""
        return (sum(1 << BACKENDS.index(b) for b in self.backends)
                + sum(1 << (len(BACKENDS) + FUNCTIONALITIES.index(f)) for f in self.functionalities))

    @classmethod
    def from_raw(cls, raw: int) -> KeySet:
        return cls(frozenset(f for i, f in enumerate(FUNCTIONALITIES) if (raw >> (len(BACKENDS) + i)) & 1),
                   frozenset(b for i, b in enumerate(BACKENDS) if (raw >> i) & 1))

    def hidden(self) -> list[str]:
        """The bits keys() cannot show, as C++'s printing cannot either: a per-backend functionality without a
        backend bit ("AutogradFunctionality(no backend)"), a backend bit no per-backend functionality uses
        ("CPU(backend bit only)"). No tensor's key set has either; a wrong model's may."""
        per_backend = [f for f in sorted(self.functionalities, key=FUNCTIONALITIES.index) if f in PER_BACKEND]
        lonely = [] if per_backend else sorted(self.backends, key=BACKENDS.index)
        return ([f"{f}(no backend)" for f in per_backend if not self.backends]
                + [f"{b}(backend bit only)" for b in lonely])

    def __repr__(self) -> str:
        """As C++ prints a DispatchKeySet (its runtime keys, lowest first), then any bits that printing hides."""
        return f"KeySet({', '.join(self.keys() + self.hidden())})"


def from_torch(keyset) -> KeySet:
    """A torch._C.DispatchKeySet (torch._C._dispatch_keys(t), the thread-local sets, ...) as a KeySet."""
    return KeySet.from_raw(keyset.raw_repr())


DEVICE_BACKENDS = {"cpu": "CPU", "meta": "Meta"}
AUTOCAST_FOR_BACKEND = {"CPU": "AutocastCPU"}  # getAutocastRelatedKeySetFromBackend (DispatchKeySet.h); Meta: none


def tensor_keys(device: str, inference: bool = False, python_subclass: bool = False) -> KeySet:
    """A tensor's keys, from facts about it (the TensorImpl constructor, c10/core/TensorImpl.cpp)."""
    backend = DEVICE_BACKENDS[device]
    keys = KeySet.of(backend)
    if backend in AUTOCAST_FOR_BACKEND:  # inference tensors too
        keys |= KeySet.of(AUTOCAST_FOR_BACKEND[backend])
    if not inference:  # getAutogradRelatedKeySetFromBackend: none for a tensor made under inference_mode
        keys |= KeySet.of("ADInplaceOrView", runtime_key("AutogradFunctionality", backend))
    if python_subclass:  # python_ks, set by TensorImpl::set_python_dispatch for a __torch_dispatch__ subclass
        keys |= KeySet.of("Python", "PythonTLSSnapshot")
    return keys


@dataclass(frozen=True)
class ThreadLocalState:
    included: KeySet
    excluded: KeySet


# default_included_set, default_excluded_set (DispatchKeySet.h): every thread starts including BackendSelect and
# ADInplaceOrView, and excluding every Autocast key.
DEFAULT_TLS = ThreadLocalState(KeySet.of("BackendSelect", "ADInplaceOrView"), KeySet.of(*AUTOCAST_KEYS))
AUTOGRAD_KEYS = KeySet(frozenset({"AutogradOther", "AutogradFunctionality", "AutogradNestedTensor"}))  # no backends


def thread_local_state(inference_mode=False, autocast_cpu=False, exclude=(), include=()) -> ThreadLocalState:
    """The thread-local sets inside torch.inference_mode(), then torch.autocast("cpu"), then
    _ExcludeDispatchKeyGuard(exclude), then _IncludeDispatchKeyGuard(include). torch.no_grad changes neither."""
    tls = DEFAULT_TLS
    if inference_mode:  # the InferenceMode constructor (c10/core/InferenceMode.h)
        tls = ThreadLocalState(tls.included - KeySet.of("ADInplaceOrView"), tls.excluded | AUTOGRAD_KEYS)
    if autocast_cpu:  # set_autocast_enabled (aten/src/ATen/autocast_mode.cpp) un-excludes AutocastCPU
        tls = replace(tls, excluded=tls.excluded - KeySet.of("AutocastCPU"))
    # The guards add DispatchKeySet(key), backend bit included (c10/core/impl/LocalDispatchKeySet.h).
    return ThreadLocalState(tls.included | KeySet.of(*include), tls.excluded | KeySet.of(*exclude))


def real_thread_local_state() -> ThreadLocalState:
    """This thread's sets as PyTorch holds them now."""
    import torch

    return ThreadLocalState(from_torch(torch._C._dispatch_tls_local_include_set()),
                            from_torch(torch._C._dispatch_tls_local_exclude_set()))


def call_key_set(tensors: list[KeySet], tls: ThreadLocalState) -> KeySet:
    """(the tensors' keys | included) - excluded (DispatchKeyExtractor::getDispatchKeySetFromRawDispatchKeySet)."""
    keys = tls.included
    for tensor in tensors:
        keys = keys | tensor
    return keys - tls.excluded


# ---- 2. tables -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Kernel:
    name: str
    fallthrough: bool = False  # never runs: the dispatcher masks its key out of the call's keys (stage 3)
    continues_below: str = ""  # a fallback that does its work, then redispatches with the keys below this one
    raises: str = ""  # a fallback that raises NotImplementedError with this message ({op}: the operator)
    fn: Callable | None = field(default=None, compare=False)  # boxed: fn(op, keys, stack) -> result (stage 4)


FALLTHROUGH = Kernel("fallthrough", fallthrough=True)

# PyTorch's fallbacks for the toy's keys, as torch._C._dispatch_dump_table of an operator without kernels shows
# them (files under aten/src/ATen/; Meta's is core/MetaFallbackKernel.cpp); CPU and Undefined have none.
BACKEND_FALLBACKS = {
    "BackendSelect": Kernel("BackendSelect fallthrough", fallthrough=True),  # core/BackendSelectFallbackKernel.cpp
    "Python": Kernel("Python fallback"),  # core/PythonFallbackKernel.cpp pythonFallback: calls __torch_dispatch__
    "ADInplaceOrView": Kernel("ADInplaceOrView fallthrough", fallthrough=True),  # core/VariableFallbackKernel.cpp
    # core/VariableFallbackKernel.cpp autograd_fallback, i.e. basicAutogradNotImplementedFallbackImpl
    # (torch/csrc/autograd/autograd_not_implemented_fallback.cpp): where an input requires grad, it creates a
    # grad_fn node that warns in backward (WarnNotImplemented); it redispatches with its keys &
    # after_autograd_keyset; after the call returns, it attaches that node to the outputs.
    "AutogradCPU": Kernel("autograd fallback", continues_below="AutogradOther"),
    "AutogradMeta": Kernel("autograd fallback", continues_below="AutogradOther"),
    "AutocastCPU": Kernel("AutocastCPU fallthrough", fallthrough=True),  # autocast_mode.cpp
    # core/PythonFallbackKernel.cpp pythonTLSSnapshotFallback: saves the thread-local state, redispatches below.
    "PythonTLSSnapshot": Kernel("PythonTLSSnapshot fallback", continues_below="PythonTLSSnapshot"),
    "Meta": Kernel("Meta fallback", raises="{op}: attempted to run this operator with Meta tensors, but "
                                           "there was no fake impl or Meta kernel registered."),
}
TOY_KEYS = ("Undefined", "CPU", "Meta", "BackendSelect", "Python", "ADInplaceOrView", "AutogradCPU", "AutogradMeta",
            "AutocastCPU", "PythonTLSSnapshot")  # the runtime keys the toy's tables cover

# The functionalities an alias key fills (runtimeDispatchKeySetHas, c10/core/DispatchKeySet.cpp): Autograd is
# autograd_dispatch_keyset; CompositeExplicitAutograd is backend_dispatch_keyset = autogradother_backends | Dense,
# and its NonFunctional variant drops Sparse and the XLA and Lazy backends; CompositeImplicitAutograd is
# math_dispatch_keyset, both of those | NestedTensor (for the installed torch, without Functionalize).
_BACKEND_FUNCTIONALITIES = frozenset({"Dense", "FPGA", "Vulkan", "Metal", "CustomRNGKeyId", "MkldnnCPU", "Sparse",
                                      "SparseCsr", "Quantized"})
ALIAS_FUNCTIONALITIES = {
    "Autograd": AUTOGRAD_KEYS.functionalities,
    "CompositeExplicitAutograd": _BACKEND_FUNCTIONALITIES,
    "CompositeExplicitAutogradNonFunctional": _BACKEND_FUNCTIONALITIES - {"Sparse"},
    "CompositeImplicitAutograd": _BACKEND_FUNCTIONALITIES | AUTOGRAD_KEYS.functionalities | {"NestedTensor"},
}


def alias_covers(alias: str, key: str) -> bool:
    """Whether a kernel registered to `alias` may fill the entry of runtime `key` (isIncludedInAlias)."""
    functionality, backend = split_key(key)
    if alias == "CompositeExplicitAutogradNonFunctional" and backend in ("XLA", "Lazy"):
        return False
    return functionality in ALIAS_FUNCTIONALITIES[alias]


@dataclass
class Operator:
    name: str  # "ns::op"
    kernels: dict[str, Kernel] = field(default_factory=dict)  # registration key (runtime or alias) -> kernel
    # The dispatcher's fallbacks, one per key for every operator (Dispatcher::backendFallbackKernels_).
    fallbacks: dict[str, Kernel] = field(default_factory=lambda: BACKEND_FALLBACKS, repr=False)

    @classmethod
    def make(cls, name: str, kernels=(), fallthroughs=()) -> Operator:
        """An operator with a kernel named after its key at each of `kernels`, a fallthrough at `fallthroughs`."""
        return cls(name, {**{key: Kernel(key) for key in kernels}, **{key: FALLTHROUGH for key in fallthroughs}})


@dataclass(frozen=True)
class Entry:
    key: str  # the runtime key
    kernel: Kernel | None  # None: calling the key raises
    source: str  # the registration key the kernel came from, "fallback", or ""
    why: str  # the word torch._C._dispatch_dump_table prints: "kernel", "math kernel", ..., or "missing"

    @property
    def fallthrough(self) -> bool:
        return self.kernel is not None and self.kernel.fallthrough


def has_backend_kernel(op: Operator, key: str) -> bool:
    """For AutogradCPU: a registration (a fallthrough counts) to CPU itself or to CompositeExplicitAutograd, not
    to CompositeExplicitAutogradNonFunctional (getBackendKeySetFromAutograd, hasKernelForAnyDispatchKey)."""
    functionality, backend = split_key(key)
    direct = functionality == "AutogradFunctionality" and runtime_key("Dense", backend) in op.kernels
    return direct or "CompositeExplicitAutograd" in op.kernels


def computed_entry(op: Operator, key: str) -> Entry:
    """What `op`'s table holds for runtime `key`, in the order of
    OperatorEntry::computeDispatchTableEntryWithDebug (aten/src/ATen/core/dispatch/OperatorEntry.cpp)."""
    if key in op.kernels:  # 1. a kernel registered to the key itself
        return Entry(key, op.kernels[key], key, "kernel")
    # 2.1, 2.2 the explicit composites; Undefined, the entry of a call left with no functionality, takes them too.
    for alias in ("CompositeExplicitAutogradNonFunctional", "CompositeExplicitAutograd"):
        if alias in op.kernels and (key == "Undefined" or alias_covers(alias, key)):
            return Entry(key, op.kernels[alias], alias, "default backend kernel")
    # 2.3 CompositeImplicitAutograd; not where the operator has a CompositeExplicitAutograd kernel, nor at an
    # autograd key whose backend has a kernel, which it would hide from every call.
    alias = "CompositeImplicitAutograd"
    if alias in op.kernels and (key == "Undefined" or alias_covers(alias, key)) and not has_backend_kernel(op, key):
        return Entry(key, op.kernels[alias], alias, "math kernel")
    if "Autograd" in op.kernels and key != "Undefined" and alias_covers("Autograd", key):  # 2.4
        return Entry(key, op.kernels["Autograd"], "Autograd", "autograd kernel")
    if key in op.fallbacks:  # 3. the fallback registered for the key, for every operator
        return Entry(key, op.fallbacks[key], "fallback", "backend fallback")
    return Entry(key, None, "", "missing")  # 4. nothing


def computed_table(op: Operator, keys=TOY_KEYS) -> dict[str, Entry]:
    return {key: computed_entry(op, key) for key in keys}


# ---- 3. calls --------------------------------------------------------------------------------------------
def mask_fallthroughs(op: Operator, keys: KeySet, computed_entry=computed_entry) -> KeySet:
    """Drop each functionality whose entry, for the call's highest backend, is a fallthrough: the operator keeps a
    non-fallthrough set per backend (DispatchKeyExtractor::setOperatorHasFallthroughForKey) and ANDs the call's
    keys with it before any lookup. C++ takes CPU's set when there is no backend bit."""
    backend = keys.highest_backend() or BACKENDS[0]
    return KeySet(frozenset(f for f in keys.functionalities
                            if not computed_entry(op, runtime_key(f, backend)).fallthrough), keys.backends)


def error_message(op: Operator, entry: Entry) -> str:
    """The first sentence of the NotImplementedError raised at `entry` (OperatorEntry::reportError)."""
    if entry.kernel is not None:
        return entry.kernel.raises.format(op=op.name)
    functionality, backend = split_key(entry.key)
    if functionality in PER_BACKEND and backend is None:  # a key set no real call holds: say so, not C++'s words
        return (f"Could not run '{op.name}': the key set holds {functionality} but no backend bit, so it names no "
                "runtime key (no call of PyTorch's holds such a key set).")
    if entry.key == "Undefined":
        return ("There were no tensor arguments to this function (e.g., you passed an empty list of Tensors), "
                f"but no fallback function is registered for schema {op.name}.")
    return f"Could not run '{op.name}' with arguments from the '{entry.key}' backend."


@dataclass
class Call:
    keys: KeySet  # the call's keys, fallthroughs masked out
    path: list[Entry]  # the entries the call reached, in order: the last one ran, or raised
    error: str = ""  # the error's first sentence, when the call raises

    def format(self) -> str:
        lines = [f"{e.key:<18}{e.kernel.name if e.kernel else '-':<28}{e.source}" for e in self.path]
        return "\n".join([f"keys: {self.keys}", *lines] + ([f"raises: {self.error}"] if self.error else []))


def dispatch(op: Operator, tensors: list[KeySet], tls: ThreadLocalState = DEFAULT_TLS, *,
             call_key_set=call_key_set, computed_entry=computed_entry) -> Call:
    """The entries a call of `op` on tensors with these keys reaches (Dispatcher::callBoxed)."""
    return follow(op, mask_fallthroughs(op, call_key_set(tensors, tls), computed_entry), computed_entry)


def follow(op: Operator, keys: KeySet, computed_entry=computed_entry) -> Call:
    """The entries a call that holds the key set `keys` (fallthroughs masked out) reaches: the entry of its highest
    key, then, while that is a fallback that passes the call on, the entry below it (Dispatcher::redispatchBoxed)."""
    call = Call(keys, [])
    while True:
        entry = computed_entry(op, keys.highest_key())
        call.path.append(entry)
        if entry.kernel is None or entry.kernel.raises:
            call.error = error_message(op, entry)
            return call
        if not entry.kernel.continues_below:
            return call
        # Dispatcher::redispatchBoxed: the keys the fallback received, below its own; the thread-local state and
        # the fallthrough mask are not applied again.
        keys = keys.below(entry.kernel.continues_below)


# ---- 4. boxed --------------------------------------------------------------------------------------------
@dataclass
class ToyTensor:
    value: float
    keys: KeySet


def call_boxed(op: Operator, stack: list, tls: ThreadLocalState = DEFAULT_TLS):
    """Run `op` on `stack`, its arguments in a list: every kernel is boxed, fn(op, keys, stack), so one function
    can serve operators of any signature (KernelFunction::callBoxed)."""
    tensors = [arg.keys for arg in stack if isinstance(arg, ToyTensor)]
    return redispatch(op, mask_fallthroughs(op, call_key_set(tensors, tls)), stack)


def redispatch(op: Operator, keys: KeySet, stack: list):
    """Run the kernel of the highest of `keys`; a kernel that passes the call on calls this with the keys below."""
    entry = computed_entry(op, keys.highest_key())
    if entry.kernel is None or entry.kernel.raises:
        raise NotImplementedError(error_message(op, entry))
    if entry.kernel.fn is not None:
        return entry.kernel.fn(op, keys, stack)
    if entry.kernel.continues_below:  # a pass-on fallback of PyTorch's, without code in the toy
        return redispatch(op, keys.below(entry.kernel.continues_below), stack)
    raise NotImplementedError(f"the toy has no code for the {entry.kernel.name}")


def round_below(key: str, digits: int = 1) -> Kernel:
    """A boxed fallback for `key` that serves every operator: it rounds each tensor argument, whatever the
    operator's signature, then redispatches with the keys below `key`. It changes its arguments' precision as an
    autocast wrapper does (notebook 07), but written once for every operator, and it passes the call on by a
    redispatch, where an autocast wrapper makes a fresh call under a guard."""
    def fallback(op: Operator, keys: KeySet, stack: list):
        rounded = [replace(arg, value=round(arg.value, digits)) if isinstance(arg, ToyTensor) else arg
                   for arg in stack]
        return redispatch(op, keys.below(key), rounded)
    return Kernel(f"rounding fallback at {key}", fn=fallback)
