"""Inputs and references shared by the tests, built on any device.

Every builder takes the device and creates its tensors *there*: a layout made on the CPU and moved with
`.to(device)` or `.cuda()` arrives dense (a slice with gaps, an expanded or a permuted tensor all come
out contiguous), so it would never reach a device kernel's strided path. `tests/test_helpers.py` proves,
on the devices of the machine, that each layout is what its name claims.

Values are seeded per device, so a case is the same tensor every time it is built on one device.
"""
from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Iterator

import pytest
import torch

from myops import toolchain

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
DTYPE_IDS = [str(dtype).removeprefix("torch.") for dtype in FLOAT_DTYPES]

# -- where a test can run -----------------------------------------------------------------------------------------
# Every test that executes CUDA carries the `cuda` marker: `pytest -m cuda tests` is the GPU run
# (`python -m benchmarks.gpu`), and elsewhere such a test is reported as skipped with the reason.
NO_GPU = "no CUDA GPU on this machine"
GPU = (pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_GPU))
needs_cuda_toolchain = pytest.mark.skipif(toolchain.cuda_skip_reason() is not None,
                                          reason=str(toolchain.cuda_skip_reason()))

# The devices an operator's kernels are tested on: the CPU everywhere, the GPU where there is one, and meta
# for the shape-only kernels.
DEVICES = [pytest.param("cpu"), pytest.param("cuda", marks=GPU)]
DEVICES_AND_META = [*DEVICES, pytest.param("meta")]


def _with_marks(*marks):
    def decorate(test):
        for mark in marks:
            test = mark(test)
        return test
    return decorate


needs_gpu = _with_marks(*GPU)
needs_two_gpus = _with_marks(pytest.mark.cuda,
                             pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs"))


def needs_gpu_memory(gib: float):
    """Large-input tests: run only on a GPU with `gib` GiB free; marked `large` (no compute-sanitizer pass)."""
    if not torch.cuda.is_available():
        return _with_marks(pytest.mark.large, *GPU)
    free_gib = torch.cuda.mem_get_info()[0] / 2**30
    return _with_marks(pytest.mark.cuda, pytest.mark.large,
                       pytest.mark.skipif(free_gib < gib, reason=f"needs {gib} GiB of free GPU memory"))


# rtol, atol of a matrix product or a normalization against a float64 reference rounded to the dtype:
# a few units in the last place of the dtype.
TOLERANCES = {
    torch.float64: (1e-12, 1e-10),
    torch.float32: (1e-5, 1e-4),
    torch.bfloat16: (2 * 2**-8, 1e-4),
    torch.float16: (2 * 2**-11, 1e-3),
}

VECTOR_BYTES = 16  # the widest load a GPU thread issues; alignment to it decides myadd's vectorized path


class Randn:
    """torch.randn on one device, seeded; tensors of the meta device have shapes and strides only."""

    def __init__(self, dtype: torch.dtype, device: str | torch.device, seed: int = 0):
        self.dtype, self.device = dtype, torch.device(device)
        self.generator = None if self.device.type == "meta" else torch.Generator(self.device).manual_seed(seed)

    def __call__(self, *shape: int) -> torch.Tensor:
        if self.generator is None:
            return torch.empty(shape, dtype=self.dtype, device=self.device)
        return torch.randn(shape, dtype=self.dtype, device=self.device, generator=self.generator)


def offset_view(randn: Randn, numel: int, offset_bytes: int) -> torch.Tensor:
    """A 1-d tensor of `numel` elements starting `offset_bytes` into a fresh storage."""
    itemsize = torch.empty(0, dtype=randn.dtype).element_size()
    assert offset_bytes % itemsize == 0, "offset must be a whole number of elements"
    offset = offset_bytes // itemsize
    return randn(offset + numel)[offset:]


def layouts(dtype: torch.dtype, device: str | torch.device) -> Iterator[tuple[str, torch.Tensor, torch.Tensor]]:
    """(name, self, other) pairs of one shape, each pair a memory layout an elementwise kernel must handle.

    Sizes are odd (not multiples of any vector width) and large enough for several blocks of threads.
    """
    randn = Randn(dtype, device)
    itemsize = torch.empty(0, dtype=dtype).element_size()
    n = 4099
    yield "contiguous", randn(37, 129), randn(37, 129)
    yield "transposed", randn(129, 37).t(), randn(129, 37).t()
    yield "transposed_and_contiguous", randn(129, 37).t(), randn(37, 129)
    yield "sliced_with_gaps", randn(80, 300)[3:40, 5:263:2], randn(41, 140)[1:38, 2:131]
    yield "expanded", randn(1, 129).expand(37, 129), randn(37, 1).expand(37, 129)
    yield "channels_last", randn(2, 17, 19, 3).permute(0, 3, 1, 2), randn(2, 17, 19, 3).permute(0, 3, 1, 2)
    yield "channels_last_and_contiguous", randn(2, 17, 19, 3).permute(0, 3, 1, 2), randn(2, 3, 17, 19)
    yield "offset_aligned", offset_view(randn, n, VECTOR_BYTES), offset_view(randn, n, 2 * VECTOR_BYTES)
    yield "offset_unaligned", offset_view(randn, n, itemsize), offset_view(randn, n, 3 * itemsize)
    yield "offset_mixed", offset_view(randn, n, VECTOR_BYTES), offset_view(randn, n, itemsize)
    # Dimensions in reverse memory order against the contiguous output: no two of them can be merged.
    yield "permuted_12d", randn(*[2] * 11, 3).permute(*reversed(range(12))), randn(3, *[2] * 11)
    yield "permuted_20d", randn(*[2] * 19, 3).permute(*reversed(range(20))), randn(3, *[2] * 19)
    yield "large", randn(300_000), randn(300_000)  # above the CPU grain size: split across threads
    yield "0-dim", randn(), randn()
    yield "empty", randn(0, 129), randn(0, 129)


def layout(name: str, dtype: torch.dtype, device: str | torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The (self, other) pair of one named layout."""
    for case, a, b in layouts(dtype, device):
        if case == name:
            return a, b
    raise KeyError(f"no layout named {name!r}; the layouts are {layout_names()}")


def layout_names() -> list[str]:
    return [name for name, _, _ in layouts(torch.float32, "meta")]


def matmul_layouts(dtype: torch.dtype, device: str | torch.device) -> Iterator[tuple[str, torch.Tensor, torch.Tensor]]:
    """(name, self, other) pairs of a matrix product, built on `device`."""
    randn = Randn(dtype, device)
    itemsize = torch.empty(0, dtype=dtype).element_size()
    yield "square", randn(64, 64), randn(64, 64)
    yield "ragged", randn(67, 301), randn(301, 129)  # no dimension a multiple of the tile
    yield "transposed", randn(40, 30).t(), randn(50, 40).t()
    yield "transposed_self", randn(301, 67).t(), randn(301, 129)
    yield "transposed_other", randn(67, 301), randn(129, 301).t()
    yield "sliced_with_gaps", randn(50, 80)[::2, 1::2], randn(60, 33)[:40, 1:]
    yield "expanded", randn(1, 20).expand(9, 20), randn(20, 1).expand(20, 7)
    yield "offset_unaligned", offset_view(randn, 33 * 65, itemsize).view(33, 65)[:, 1:], randn(64, 17)
    yield "vector-like", randn(1, 300), randn(300, 1)
    yield "empty rows", randn(0, 5), randn(5, 3)
    yield "empty inner", randn(4, 0), randn(0, 3)
    yield "many tiles", randn(300, 257), randn(257, 515)


def rmsnorm_layouts(dtype: torch.dtype, device: str | torch.device) -> Iterator[tuple[str, torch.Tensor, torch.Tensor]]:
    """(name, self, weight) inputs of a normalization over the last dimension, built on `device`."""
    randn = Randn(dtype, device)
    yield "contiguous", randn(37, 129), randn(129)
    yield "3d", randn(3, 5, 64), randn(64)
    yield "transposed", randn(129, 37).t(), randn(129)
    yield "sliced_weight", randn(37, 129), randn(258)[::2]
    yield "one_column", randn(50, 1), randn(1)
    yield "short_rows", randn(3001, 7), randn(7)  # many rows: more than one row per warp in the grid
    yield "long_row", randn(2, 40_000), randn(40_000)  # each lane sums many elements
    yield "1d", randn(4097), randn(4097)
    yield "empty", randn(0, 16), randn(16)


def rmsnorm_reference(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """myrmsnorm in float64, rounded once to the input's dtype."""
    x64 = x.double()
    scale = torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps)
    return (x64 * scale * weight.double()).to(x.dtype)


def storage_tensor(t: torch.Tensor) -> torch.Tensor:
    """Every element of t's storage as a 1-d tensor of t's dtype: shows writes outside t's own elements."""
    return torch.empty(0, dtype=t.dtype, device=t.device).set_(t.untyped_storage())


def element_offset_bytes(t: torch.Tensor) -> int:
    """Where t starts in its storage, in bytes (storages themselves start at least 16-byte aligned)."""
    return t.storage_offset() * t.element_size()


# -- inputs of the layouts every CPU kernel is tested on ------------------------------------------------------------
def sample_inputs(dtype: torch.dtype, device: str | torch.device = "cpu"):
    """(name, self, other) pairs covering the layouts a kernel must handle, including 0-dim and empty."""
    randn = Randn(dtype, device)
    yield "contiguous", randn(5, 7), randn(5, 7)
    yield "transposed", randn(7, 5).t(), randn(7, 5).t()
    yield "sliced", randn(10, 9)[1:6, ::2][:, :4], randn(5, 8)[:, 1:5]
    yield "expanded", randn(1, 7).expand(5, 7), randn(5, 1).expand(5, 7)
    yield "channels_last", randn(2, 3, 4, 5).to(memory_format=torch.channels_last), randn(2, 3, 4, 5)
    yield "3d_permuted", randn(3, 4, 5).permute(2, 0, 1), randn(5, 3, 4)
    yield "0-dim", randn(), randn()
    yield "empty", randn(0, 4), randn(0, 4)
    yield "large", randn(300_000), randn(300_000)  # above the grain size: split across threads


# -- a machine without a system CUDA toolkit --------------------------------------------------------------------------
# Commands run as on a learner's machine: in a private mount namespace where every /usr/local/cuda* folder is
# empty and no nvcc is on PATH.
HIDE = r"""
for folder in /usr/local/cuda*; do
  if [ -d "$folder" ] && [ ! -L "$folder" ]; then mount -t tmpfs none "$folder" || exit 97; fi
done
IFS=:
for folder in $PATH; do
  if [ -e "$folder/nvcc" ]; then mount --bind /dev/null "$folder/nvcc" || exit 97; fi
done
unset CUDA_HOME CUDA_PATH
if command -v nvcc >/dev/null || [ -e /usr/local/cuda/bin/nvcc ]; then exit 98; fi
exec "$@"
"""


def without_system_cuda(command: list[str]) -> list[str]:
    """`command` wrapped so that it runs with the system CUDA toolkit hidden."""
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", HIDE, "hide-cuda", *command]


@functools.cache
def without_system_cuda_reason() -> str | None:
    """Why the toolkit cannot be hidden here (no unshare, or no right to mount), or None."""
    if os.geteuid() != 0:
        return "hiding the system CUDA toolkit needs root (a private mount namespace)"
    try:
        probe = subprocess.run(without_system_cuda(["true"]), capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        return "unshare (util-linux) is not installed"
    if probe.returncode != 0:
        return f"cannot hide the system CUDA toolkit here (exit {probe.returncode}: {probe.stderr.strip()[:200]})"
    return None


# -- a real browser -----------------------------------------------------------------------------------------------
def chromium() -> str | None:
    """The system Chromium (Debian's package), or None: Playwright's own browser download is not used."""
    import shutil

    return next((path for name in ("chromium", "chromium-browser") if (path := shutil.which(name))), None)


def launch_chromium(playwright):
    """Headless system Chromium through Playwright."""
    return playwright.chromium.launch(
        executable_path=chromium(),
        # root needs --no-sandbox; the rest keeps Chromium off a network this machine does not have
        args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
              "--no-first-run", "--disable-sync"])
