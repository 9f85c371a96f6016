import os

import pytest

import myops

# The suite checks that timings run and are plotted, never their values: cap every measurement at 10 ms
# (myops/perf.py reads this), in this process and in the notebook kernels and commands it starts.
os.environ.setdefault("MYOPS_MAX_RUN_TIME", "0.01")


@pytest.fixture(scope="session")
def layers():
    """Every layer of the course, loaded once into the test process."""
    return myops.load()
