"""myops_stable: the course's myadd and mymatmul, compiled once against the LibTorch stable ABI.

Importing it loads the compiled library, which registers `torch.ops.stableops.myadd` and `.mymatmul`
with their CPU kernels, and then adds in Python what the stable C++ API cannot register: fake
(meta) kernels, autograd formulas and autocast rules (see ops.py).
"""
from pathlib import Path

import torch

# The library has no Python module init (it includes no Python header): torch.ops.load_library opens
# it, and its static STABLE_TORCH_LIBRARY blocks register the operators as it loads.
_LIBRARY = next(Path(__file__).parent.glob("_C*.so"))
torch.ops.load_library(str(_LIBRARY))

from myops_stable.ops import myadd, mymatmul  # noqa: E402  (registers the Python half)

__all__ = ["myadd", "mymatmul"]
