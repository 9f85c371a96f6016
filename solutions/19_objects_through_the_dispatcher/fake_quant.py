"""Solution of exercise 19 (notebook 19_objects_through_the_dispatcher): a fake quantizer's two objects."""
import torch
from torch import Tensor
from torch._custom_class_base import CustomClassBase
from torch._library.opaque_object import register_custom_class


class QuantSpec:
    """The integer grid [qmin, qmax] values are rounded onto: fixed for a run."""

    def __init__(self, qmin: int, qmax: int):
        self.qmin, self.qmax = qmin, qmax

    def __eq__(self, other):
        return isinstance(other, QuantSpec) and (self.qmin, self.qmax) == (other.qmin, other.qmax)

    def __hash__(self):
        return hash((self.qmin, self.qmax))

    def __fx_repr__(self):
        return f"QuantSpec({self.qmin!r}, {self.qmax!r})", {"QuantSpec": QuantSpec}


class Observer(CustomClassBase):
    """How the range follows the data; `decay` may be retuned while the model runs."""

    def __init__(self, decay: float):
        self.decay = decay


# A constant: compiled code guards on __eq__ and bakes the object into its graph through __fx_repr__.
register_custom_class(QuantSpec, typ="constant")
# Symbolic: the graph takes the object as an input, and the operator reads the real one when the graph runs.
register_custom_class(Observer, typ="symbolic")


# amax is the state the observer keeps: declared written, so compile and export keep the write.
@torch.library.custom_op("ex19::observe_", mutates_args=("amax",))
def observe_(x: Tensor, amax: Tensor, observer: Observer) -> None:
    amax.copy_(torch.maximum(amax * observer.decay, x.abs().amax().to(amax.dtype)))


@torch.library.custom_op("ex19::fake_quantize", mutates_args=())
def fake_quantize(x: Tensor, amax: Tensor, spec: QuantSpec) -> Tensor:
    scale = amax.clamp_min(1e-12) / spec.qmax
    return ((x / scale).round().clamp(spec.qmin, spec.qmax) * scale).to(x.dtype)


# What torch.compile and torch.export trace with: an output like the real one (observe_, which returns
# nothing and declares what it writes, needs none).
@fake_quantize.register_fake
def _(x, amax, spec):
    return torch.empty_like(x)
