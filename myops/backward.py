"""What happens when a notebook backpropagates through an operator: a gradient, a warning or an error."""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch


@dataclass
class BackwardReport:
    grad_fn: str | None    # the name of the output's graph node, None when nothing was recorded
    warning: str | None    # the first warning raised during backward (first sentence)
    error: str | None      # the error raised by backward, if any
    missing_grads: int     # inputs that require grad but got no .grad

    def __str__(self) -> str:
        return "\n".join(f"{name:<14}{value}" for name, value in vars(self).items())


def backward_report(output: torch.Tensor, *inputs: torch.Tensor) -> BackwardReport:
    """Run output.sum().backward() and report what happened to the inputs' gradients."""
    grad_fn = output.grad_fn.name() if output.grad_fn is not None else None
    error = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            output.sum().backward()
        except RuntimeError as exc:
            error = str(exc).splitlines()[0]
    warning = str(caught[0].message).split(". ")[0] if caught else None
    missing = sum(t.grad is None for t in inputs if t.requires_grad)
    return BackwardReport(grad_fn, warning, error, missing)
