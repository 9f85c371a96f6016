"""The demo device of csrc/device/: load its layer and the Python module every PrivateUse1 backend needs.

Before creating a tensor on a PrivateUse1 device, PyTorch's Python bindings import `torch.<backend name>`
(to call its `_lazy_init`, if it has one); a real backend ships that module with its package. Ours is a
minimal stand-in. Load the device before the process's first backward (see csrc/device/backend.cpp).
"""
from __future__ import annotations

import types

import torch

from myops.build import load as load_layers


def register_module(name: str) -> None:
    """Register the minimal `torch.<name>` module PyTorch's Python bindings import for a PrivateUse1 backend."""
    if hasattr(torch, name):
        return
    module = types.ModuleType(f"torch.{name}")
    module.is_available = lambda: True
    module.device_count = lambda: 1
    module.current_device = lambda: 0
    module._is_in_bad_fork = lambda: False  # torch.manual_seed asks these two and warns without them;
    module.manual_seed_all = lambda seed: None  # the device has no random number generator
    torch._register_device_module(name, module)


def load() -> torch.device:
    """Load the `device` layer (and the layers it needs) and its Python module; returns the device."""
    load_layers("schema", "cpu", "device")
    name = torch._C._get_privateuse1_backend_name()
    register_module(name)
    return torch.device(name, 0)
