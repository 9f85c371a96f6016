"""Solution of exercise 15 (notebook 15_export_and_aotinductor): a model on ex15's operators, exported and
compiled into an AOTInductor package."""
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
    return torch.export.export(model, example_inputs)


def compile_package(program: torch.export.ExportedProgram, path: Path) -> Path:
    return Path(torch._inductor.aoti_compile_and_package(program, package_path=str(path)))
