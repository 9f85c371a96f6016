"""Exercise 15 (notebook 15_export_and_aotinductor): a model on ex15's operators, exported and compiled into an
AOTInductor package. Checked by myops/exercises/ex15_export_and_aotinductor.py (first do the part in
myscale.cpp).

Your part in this file:
  1. export_model: the torch.export.ExportedProgram of `model` traced with `example_inputs`;
  2. compile_package: compile that program ahead of time with torch._inductor.aoti_compile_and_package into
     the package file `path`, and return its path.
The check loads the package (torch._inductor.aoti_load_package), runs it on new inputs and compares the output
with ATen's, and watches that your operators' kernels run inside the compiled model.
Check your answer with:  python -m myops.exercises check 15
"""
from pathlib import Path

import torch


class Scaled(torch.nn.Module):
    """y = x * scale, then y *= x[0] in place: both of ex15's operators, with a scale that needs no gradient."""

    def __init__(self, features: int = 8):
        super().__init__()
        generator = torch.Generator().manual_seed(15)
        self.register_buffer("scale", torch.rand(features, generator=generator) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.ops.ex15.myscale(x, self.scale)
        torch.ops.ex15.myscale_(y, x[0])  # in place, on the tensor this forward has just made
        return y


def export_model(model: torch.nn.Module, example_inputs: tuple) -> torch.export.ExportedProgram:
    raise NotImplementedError("not solved yet: write export_model in exercises/15_export_and_aotinductor/model.py")


def compile_package(program: torch.export.ExportedProgram, path: Path) -> Path:
    raise NotImplementedError("not solved yet: write compile_package in exercises/15_export_and_aotinductor/model.py")
