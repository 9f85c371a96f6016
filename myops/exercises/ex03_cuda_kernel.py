"""Exercise 03: a grid-stride CUDA kernel with device guard, current stream and launch check."""
import torch

from myops.exercises.expect import call, code, expect_close, layouts, randn, require_kernel, require_op
from myops.exercises.runner import Context, Unsolved

# Without a GPU nothing runs: the verdict says what was proven and what was not.
NOT_RUN = ("solved as far as a machine without a GPU can tell: compiled and registered on the CUDA key, its "
           "values unchecked; run the check where a GPU is present")


def check(context: Context) -> str | None:
    require_op("ex03", "mymul", f"keep the TORCH_LIBRARY block of {context.file('mymul.cu')}")
    require_kernel(context, "ex03::mymul", "CUDA", "register mymul_cuda in the TORCH_LIBRARY_IMPL(ex03, CUDA, m) "
                   "block")
    text = code(context, (".cu",))
    if "not solved yet" in text:
        raise Unsolved("mymul_cuda still ends in the stub's TORCH_CHECK(false, ...); replace it with the launch")
    for needed, why in (("__global__", "write the kernel as a __global__ function"),
                        ("CUDAGuard", "take a c10::cuda::CUDAGuard on the inputs' device before allocating"),
                        ("getCurrentCUDAStream", "launch on at::cuda::getCurrentCUDAStream(), the caller's stream"),
                        ("C10_CUDA_KERNEL_LAUNCH_CHECK", "check the launch with C10_CUDA_KERNEL_LAUNCH_CHECK()")):
        if needed not in text:
            raise Unsolved(f"{context.file('mymul.cu')} does not use {needed}: {why}")
    if not torch.cuda.is_available():
        return NOT_RUN
    op = torch.ops.ex03.mymul.default
    for dtype in (torch.float32, torch.float64):
        for layout, a, b in layouts(dtype, device="cuda"):
            expect_close(f"ex03::mymul on {layout} {dtype} CUDA inputs", call("ex03::mymul", op, a, b), a * b)
    # More elements than a grid of 65,535 blocks of 256 threads covers, and no multiple of a block: a kernel
    # that caps its grid and has no grid-stride loop leaves the tail unwritten.
    big = randn((1 << 25) + 3, seed=7, device="cuda")
    expect_close("ex03::mymul on 2^25+3 float32 CUDA elements (more than one grid: loop with a grid stride)",
                 call("ex03::mymul", op, big, big), big * big)
    torch.cuda.synchronize()
    return None
