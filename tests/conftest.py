import os

import pytest
import torch

import myops

# The suite checks that timings run and are plotted, never their values: cap every measurement at 10 ms
# (myops/perf.py reads this), in this process and in the notebook kernels and commands it starts.
os.environ.setdefault("MYOPS_MAX_RUN_TIME", "0.01")


@pytest.fixture(scope="session")
def layers():
    """Every layer of the course, loaded once into the test process."""
    return myops.load()


def sample_inputs(dtype):
    """(name, self, other) pairs covering the layouts a kernel must handle."""
    g = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(shape, generator=g, dtype=dtype)

    yield "contiguous", randn(5, 7), randn(5, 7)
    yield "transposed", randn(7, 5).t(), randn(7, 5).t()
    yield "sliced", randn(10, 9)[1:6, ::2][:, :4], randn(5, 8)[:, 1:5]
    yield "expanded", randn(1, 7).expand(5, 7), randn(5, 1).expand(5, 7)
    yield "channels_last", randn(2, 3, 4, 5).to(memory_format=torch.channels_last), randn(2, 3, 4, 5)
    yield "3d_permuted", randn(3, 4, 5).permute(2, 0, 1), randn(5, 3, 4)
    yield "0-dim", randn(), randn()
    yield "empty", randn(0, 4), randn(0, 4)
    yield "large", randn(300_000), randn(300_000)  # above the grain size: split across threads
