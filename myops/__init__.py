"""myops: build, load and call the layered C++ extension of the dispatcher notebooks."""
from myops.backward import backward_report
from myops.build import (
    LayerBuildError,
    LayerReloadError,
    LayerUnavailableError,
    load,
    load_layer,
    loaded_layers,
)
from myops.ops import myadd, myadd_, myadd_inplace, mymatmul, myrmsnorm, mytranspose
from myops.source import show

__all__ = [
    "LayerBuildError",
    "LayerReloadError",
    "LayerUnavailableError",
    "backward_report",
    "load",
    "load_layer",
    "loaded_layers",
    "myadd",
    "myadd_",
    "myadd_inplace",
    "mymatmul",
    "myrmsnorm",
    "mytranspose",
    "show",
]
