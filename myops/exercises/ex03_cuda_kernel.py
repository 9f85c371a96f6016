"""Exercise 03: a grid-stride CUDA kernel with device guard, current stream and launch check."""
import re

import torch

from myops.exercises.expect import call, code, expect_close, layouts, randn, require_kernel, require_op
from myops.exercises.runner import Context, Unsolved, one_line

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
                        ("CUDAGuard", "take a c10::cuda::CUDAGuard on the inputs' device before taking the stream and launching"),
                        ("getCurrentCUDAStream", "launch on at::cuda::getCurrentCUDAStream(), the caller's stream"),
                        ("C10_CUDA_KERNEL_LAUNCH_CHECK", "check the launch with C10_CUDA_KERNEL_LAUNCH_CHECK()")):
        if needed not in text:
            raise Unsolved(f"{context.file('mymul.cu')} does not use {needed}: {why}")
    for launch in re.findall(r"<<<(.*?)>>>", text, flags=re.S):
        if len(top_level_arguments(launch)) < 4:
            raise Unsolved(f"the launch <<<{' '.join(launch.split())}>>> names no stream, so it runs on the default "
                           "stream: launch with <<<blocks, threads, 0, stream>>>, stream = "
                           "at::cuda::getCurrentCUDAStream()")
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
    # A launch on any stream but the caller's races with the work queued before it. Torch's side streams
    # are created cudaStreamNonBlocking (c10/cuda/CUDAStream.cpp), so not even the legacy default stream
    # waits for this one: only a kernel queued behind the late fill_ reads the 3s.
    a, b = torch.zeros(1 << 20, device="cuda"), randn(1 << 20, seed=8, device="cuda")
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)  # tens of milliseconds of spinning on the side stream
        a.fill_(3.0)
        out = call("ex03::mymul", op, a, b)
    torch.cuda.synchronize()
    expect_close("ex03::mymul under torch.cuda.stream(side), after a fill_ queued there (launch on "
                 "at::cuda::getCurrentCUDAStream(), not on the default stream)", out, 3.0 * b)
    if torch.cuda.device_count() > 1:
        _expect_on_the_inputs_gpu(op)
    return None


def _expect_on_the_inputs_gpu(op) -> None:
    """Inputs on cuda:1 while cuda:0 is current. A stream taken before the CUDAGuard is cuda:0's
    (getCurrentCUDAStream() without an index reads the current device, c10/cuda/CUDAStream.h), and CUDA refuses to
    launch a kernel into a stream of a device that is not current. Only a second GPU shows it."""
    a, b = randn(1 << 20, seed=9, device="cuda:1"), randn(1 << 20, seed=10, device="cuda:1")
    what = "ex03::mymul on cuda:1 inputs while cuda:0 is current"
    hint = ("take the CUDAGuard on the inputs' device first, then the stream (at::cuda::getCurrentCUDAStream() is "
            "the current device's)")
    with torch.cuda.device(0):
        try:
            out = op(a, b)
            torch.cuda.synchronize(1)
        except Exception as error:
            raise Unsolved(f"{what} raised {one_line(error)}: {hint}") from None
    expect_close(f"{what} ({hint})", out, a * b)


def top_level_arguments(text: str) -> list[str]:
    """`text` split at the commas outside any brackets: "dim3(x, y), 256" is two arguments."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += char in "([{<"
        depth -= char in ")]}>"
        if char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return [*parts, text[start:]]
