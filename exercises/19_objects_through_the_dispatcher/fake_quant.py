"""Exercise 19 (notebook 19_objects_through_the_dispatcher): a fake quantizer's two objects, as Python opaque objects.

Checked by myops/exercises/ex19_objects_through_the_dispatcher.py.

A fake quantizer rounds x onto an integer grid [qmin, qmax] with scale = amax / qmax, where amax is a running
range of |x| that an observer keeps. Give its two objects to the operators with
torch._library.opaque_object.register_custom_class:
  1. QuantSpec(qmin, qmax), the grid, fixed for a run: a typ="constant" class. Compiled code guards on its
     __eq__ and bakes it into the graph, so it needs __eq__ (compare qmin and qmax), __hash__ (of the same
     fields) and __fx_repr__, returning ("QuantSpec(-8, 7)", {"QuantSpec": QuantSpec}): source that builds an
     equal object, and the names that source uses.
  2. Observer(decay), retuned while the model runs: a typ="symbolic" class, which must subclass
     torch._custom_class_base.CustomClassBase. Compiled code takes it as an input and the operator reads the
     real one when the graph runs; guard nothing of it (no guard_fn), so a new decay compiles nothing.
  3. ex19::observe_(x, amax, observer) -> None, with torch.library.custom_op: amax (a 0-dim float32 tensor,
     the state) becomes max(observer.decay * amax, max |x|), written in place; declare what it writes
     (mutates_args): compile and export take an undeclared write for none. Returning nothing and declaring its
     write, it gets a fake kernel from PyTorch (without the declaration it has none, and compile fails).
  4. ex19::fake_quantize(x, amax, spec) -> Tensor, writing nothing: with scale = amax.clamp_min(1e-12) / spec.qmax,
     ((x / scale).round().clamp(spec.qmin, spec.qmax) * scale).to(x.dtype); and its fake kernel
     (@fake_quantize.register_fake), an output with the shape, dtype, device and strides of the real one.
Annotate the objects with their classes (observer: Observer, spec: QuantSpec): the schema shows them as PyObject.
The check compiles both operators (fullgraph, aot_eager) and counts compiles as the objects change, exports a
module holding both objects, and saves one holding the observer, which it loads and runs in a fresh process.
Check your answer with:  python -m myops.exercises check 19
"""
import torch  # noqa: F401
from torch import Tensor  # noqa: F401
from torch._custom_class_base import CustomClassBase  # noqa: F401
from torch._library.opaque_object import register_custom_class  # noqa: F401


class QuantSpec:
    """The integer grid [qmin, qmax] values are rounded onto: fixed for a run."""

    def __init__(self, qmin: int, qmax: int):
        self.qmin, self.qmax = qmin, qmax

    # TODO: __eq__, __hash__ and __fx_repr__.


class Observer:  # TODO: the base class a symbolic class needs.
    """How the range follows the data; `decay` may be retuned while the model runs."""

    def __init__(self, decay: float):
        self.decay = decay


# TODO: register QuantSpec as a constant and Observer as symbolic.

# TODO: ex19::observe_.

# TODO: ex19::fake_quantize and its fake kernel.
