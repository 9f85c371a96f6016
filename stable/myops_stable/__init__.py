"""myops_stable: the course's myadd and mymatmul, compiled once against the LibTorch stable ABI.

Importing it loads the compiled library, which registers `torch.ops.stableops.myadd` and `.mymatmul`
with their CPU kernels, and then adds in Python what the stable C++ API cannot register: fake
(meta) kernels, autograd formulas and autocast rules (see ops.py).
"""
from pathlib import Path

import torch

# The library has no Python module init (it includes no Python header): torch.ops.load_library opens
# it, and its static STABLE_TORCH_LIBRARY blocks register the operators as it loads.
_FOUND = sorted(Path(__file__).parent.glob("_C*.so"))
if not _FOUND:
    raise ImportError("myops_stable: its compiled library (_C*.so) is not next to this file: this is the source "
                      "folder, not an installed wheel. Build the wheel with `make wheel` and pip install it "
                      "from dist/")
_LIBRARY = _FOUND[0]
torch.ops.load_library(str(_LIBRARY))

from myops_stable.ops import myadd, mymatmul  # noqa: E402  (registers the Python half)

__all__ = ["myadd", "mymatmul"]
