"""myops: build, load and call the layered C++ extension of the dispatcher notebooks.

The names below are imported on first use, so that `python -m myops.build` (or `myops.exercises`) runs its
module once, as the program, and not a second time as part of the package.
"""
import importlib
import logging

_EXPORTS = {
    "LayerBuildError": "myops.build",
    "LayerReloadError": "myops.build",
    "LayerUnavailableError": "myops.build",
    "backward_report": "myops.backward",
    "load": "myops.build",
    "load_layer": "myops.build",
    "loaded_layers": "myops.build",
    "myadd": "myops.ops",
    "myadd_": "myops.ops",
    "myadd_inplace": "myops.ops",
    "mymatmul": "myops.ops",
    "myrmsnorm": "myops.ops",
    "mytranspose": "myops.ops",
    "show": "myops.source",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'myops' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


class _NoGpuNotice(logging.Filter):
    """Drops the line torch.utils.cpp_extension logs when imported on a CUDA build of torch without a GPU: it
    carries a timestamp and a pid, so it would land in notebook output (whoever imports the module first,
    e.g. torch.utils.benchmark) and differ on every run."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("No CUDA runtime is found")


logging.getLogger("torch.utils.cpp_extension").addFilter(_NoGpuNotice())
