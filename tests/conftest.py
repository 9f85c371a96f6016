import os

import pytest
import torch

import myops
from myops.triton_interpreter import use_triton_interpreter

# The suite checks that timings run and are plotted, never their values: cap every measurement at 10 ms
# (myops/perf.py reads this), in this process and in the notebook kernels and commands it starts.
os.environ.setdefault("MYOPS_MAX_RUN_TIME", "0.01")

# Without a GPU, Triton kernels run through Triton's interpreter, which a process must choose before anything
# imports triton (myops/triton_interpreter.py): a test file imported earlier in the same worker does, through
# torch.distributed.tensor, so the choice is made here, before any test file is imported. Nothing but
# tests/test_triton_ops.py runs a Triton kernel in-process; child processes do not inherit the setting.
if not torch.cuda.is_available():
    use_triton_interpreter()


@pytest.fixture(scope="session")
def layers():
    """Every layer of the course, loaded once into the test process."""
    return myops.load()
