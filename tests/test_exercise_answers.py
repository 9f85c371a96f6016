"""The checker as a test suite: answers a learner might write, each with the verdict it must get.

Each answer is a reference solution (or an untouched stub) with a few edits: right ones written another way
than solutions/ must be "solved", wrong ones must be "not solved yet: <what is wrong and what to do>". A
checker that passes a wrong answer, or refuses a right one, fails here. Libraries are built under
build/test-exercise-answers/, one folder per answer's content: a warm run compiles nothing.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest
import torch

from helpers import needs_gpu
from myops import exercises
from myops.exercises.ex03_cuda_kernel import NOT_RUN
from myops.paths import BUILD_DIR, REPO_ROOT
from myops.toolchain import cuda_skip_reason


@dataclass(frozen=True)
class Answer:
    number: str
    name: str
    edits: tuple[tuple[str, str, str], ...]  # (file, old, new): each `old` must occur in the file
    verdict: str  # the message, exactly, or a regular expression when it starts with "re:"
    base: str = "solutions"  # the tree the answer is edited from
    without_gpu: str | None = None  # the verdict where no GPU runs the kernel, when it is another one
    with_one_gpu: str | None = None  # the verdict where one GPU runs it (no second one to put inputs on)

    def __str__(self) -> str:
        return f"{self.number}-{self.name}"


def answer(number, name, *edits, verdict, base="solutions", without_gpu=None, with_one_gpu=None):
    return Answer(number, name, tuple(edits), verdict, base, without_gpu, with_one_gpu)


SOLVED = "solved"
CUDA_SKIP = cuda_skip_reason()
# Exercise 03's kernel body as one thread per element, no grid-stride loop: right only with an uncapped grid.
ONE_THREAD_PER_ELEMENT = ("mymul.cu", "  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;\n"
                          "  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; "
                          "i += step) {\n"
                          "    out[i] = a[i] * b[i];\n  }",
                          "  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;\n"
                          "  if (i < n) {\n    out[i] = a[i] * b[i];\n  }")


def timing_verdict(said: str, calls: int) -> str:
    """Exercise 08's refusal of a timing that is not the median of one call."""
    return (f"not solved yet: seconds_per_call said {said} after {calls} call(s) of a function that takes 2 ms per "
            "call, except 0.6 s for the first and 42 ms for one call in 20: expected 0.002 (seconds per call, not per "
            "block of calls, not microseconds; the median of many calls or blocks, which the few slow ones do not "
            "move, not the mean nor a single call)")


# Exercise 19's QuantSpec as the solution writes it, and the two methods answers leave out.
_SPEC_CLASS = ('class QuantSpec:\n    """The integer grid [qmin, qmax] values are rounded onto: fixed for a run."""\n\n'
               '    def __init__(self, qmin: int, qmax: int):\n        self.qmin, self.qmax = qmin, qmax\n\n'
               '    def __eq__(self, other):\n        return isinstance(other, QuantSpec) and (self.qmin, self.qmax) == '
               '(other.qmin, other.qmax)\n\n    def __hash__(self):\n        return hash((self.qmin, self.qmax))\n')
_HASH = "    def __hash__(self):\n        return hash((self.qmin, self.qmax))\n\n"
_FX_REPR = ('    def __fx_repr__(self):\n        return f"QuantSpec({self.qmin!r}, {self.qmax!r})", '
            '{"QuantSpec": QuantSpec}\n')
_EX19_FILE = "answer/19_objects_through_the_dispatcher/fake_quant.py"


ANSWERS = [
    # -- 00: predictions ------------------------------------------------------------------------------------
    answer("00", "requires-grad-decides", ("predictions.py", '4: "AutogradCPU",', '4: "CPU",'),
           verdict="not solved yet: scenario 4: the dispatcher does not run 'CPU'; is AutogradCPU in the key set "
           "of a tensor that does not require grad? (torch._C._dispatch_keys)"),
    answer("00", "no-grad-excludes", ("predictions.py", '5: "AutogradCPU",', '5: "CPU",'),
           verdict="not solved yet: scenario 5: the dispatcher does not run 'CPU'; does torch.no_grad() exclude a "
           "dispatch key, or only stop recording?"),
    answer("00", "a-key-without-a-kernel", ("predictions.py", '12: "error",', '12: "Meta",'),
           verdict="not solved yet: scenario 12: 'Meta' is none of the keys with a kernel there (CPU); predict one "
           "of them, or \"error\""),
    answer("00", "one-left-out", ("predictions.py", '    11: "CompositeExplicitAutograd",\n', ""),
           verdict="not solved yet: write your prediction for scenario 11 in answer/00_dispatcher_tour/predictions.py "
           "(a key name, or \"error\")"),
    # -- 01: schemas ----------------------------------------------------------------------------------------
    answer("01", "other-alias-set-and-order", ("schema.cpp", "Tensor(a!) self, Tensor end, *, float weight=0.5) -> "
           "Tensor(a!)", "Tensor(b!) self, Tensor end, *, float weight=0.5) -> Tensor(b!)"), verdict=SOLVED),
    answer("01", "return-not-written", ("schema.cpp", "float weight=0.5) -> Tensor(a!)", "float weight=0.5) -> Tensor(a)"),
           verdict="not solved yet: ex01::mylerp_ returns `self`: annotate the return with the same alias set, "
           "Tensor(a!)"),
    answer("01", "self-not-written", ("schema.cpp", "Tensor(a!) self", "Tensor(a) self"),
           verdict="not solved yet: ex01::mylerp_ writes `self`: annotate it as Tensor(a!)"),
    answer("01", "overload-name", ("schema.cpp", 'm.def("mylerp(', 'm.def("mylerp.Tensor('),
           verdict="not solved yet: ex01::mylerp is defined only with an overload name (ex01::mylerp.Tensor); name "
           "the schema `mylerp(...)`, without `.Tensor`"),
    answer("01", "weight-positional", ("schema.cpp", "Tensor end, *, float weight=0.5) -> Tensor\"",
                                       "Tensor end, float weight=0.5) -> Tensor\""),
           verdict="not solved yet: ex01::mylerp: only `weight` must be keyword-only (put `*,` before it)"),
    # -- 02: a CPU kernel -----------------------------------------------------------------------------------
    answer("02", "parallel-for", ("mymul.cpp", "#include <ATen/Dispatch.h>", "#include <ATen/Dispatch.h>\n"
                                  "#include <ATen/Parallel.h>"),
           ("mymul.cpp", "  for (int64_t i = 0; i < out.numel(); ++i) {\n    o[i] = a[i] * b[i];\n  }",
            "  at::parallel_for(0, out.numel(), 4096, [&](int64_t begin, int64_t end) {\n"
            "    for (int64_t i = begin; i < end; ++i) o[i] = a[i] * b[i];\n  });"), verdict=SOLVED),
    answer("02", "half-too", ("mymul.cpp", "AT_DISPATCH_FLOATING_TYPES(", "AT_DISPATCH_FLOATING_TYPES_AND_HALF("),
           verdict=SOLVED),
    answer("02", "calls-mul", ("mymul.cpp", "  const at::Tensor a = self.contiguous();", "  return self.mul(other);\n"
                               "  const at::Tensor a = self.contiguous();"),
           verdict="not solved yet: ex02::mymul's kernel called aten::mul: do the arithmetic yourself, through data "
           "pointers and a loop (or at::parallel_for), not with another operator"),
    answer("02", "ignores-strides", ("mymul.cpp", "self.contiguous();", "self;"),
           verdict=r"re:not solved yet: ex02::mymul on transposed torch\.float32 inputs returned wrong values: at "
           r"index \[\d+, \d+\] expected \S+, got \S+"),
    answer("02", "only-self-made-contiguous", ("mymul.cpp", "const at::Tensor b = other.contiguous();",
                                               "const at::Tensor& b = other;"),
           verdict=r"re:not solved yet: ex02::mymul on transposed other torch\.float32 inputs returned wrong values: "
           r"at index \[\d+, \d+\] expected \S+, got \S+"),
    answer("02", "catch-all", ("mymul.cpp", "TORCH_LIBRARY_IMPL(ex02, CPU, m)",
                               "TORCH_LIBRARY_IMPL(ex02, CompositeImplicitAutograd, m)"),
           verdict="not solved yet: ex02::mymul has a catch-all kernel (CompositeImplicitAutograd): register the "
           "kernel for the CPU key only"),
    # -- 03: a CUDA kernel (without a GPU only what compiles and registers is proven: NOT_RUN) ------------
    answer("03", "one-thread-per-element", ONE_THREAD_PER_ELEMENT,
           ("mymul.cu", "std::min<int64_t>((n + kThreads - 1) / kThreads, 65535)", "(n + kThreads - 1) / kThreads"),
           verdict=SOLVED, without_gpu=NOT_RUN),
    answer("03", "optional-guard-and-half",
           ("mymul.cu", "#include <ATen/Dispatch.h>", "#include <ATen/DeviceGuard.h>\n#include <ATen/Dispatch.h>"),
           ("mymul.cu", "const c10::cuda::CUDAGuard device_guard(a.device());",
            "const c10::cuda::OptionalCUDAGuard device_guard(at::device_of(self));"),
           ("mymul.cu", "AT_DISPATCH_FLOATING_TYPES(", "AT_DISPATCH_FLOATING_TYPES_AND_HALF("),
           verdict=SOLVED, without_gpu=NOT_RUN),
    answer("03", "no-guard", ("mymul.cu", "const c10::cuda::CUDAGuard device_guard(a.device());", ""),
           verdict="not solved yet: answer/03_cuda_kernel/mymul.cu does not use CUDAGuard: take a c10::cuda::CUDAGuard "
           "on the inputs' device before taking the stream and launching"),
    answer("03", "default-stream", ("mymul.cu", "<<<blocks, kThreads, 0, stream>>>", "<<<blocks, kThreads>>>"),
           verdict="not solved yet: the launch <<<blocks, kThreads>>> names no stream, so it runs on the default "
           "stream: launch with <<<blocks, threads, 0, stream>>>, stream = at::cuda::getCurrentCUDAStream()"),
    answer("03", "registered-on-cpu", ("mymul.cu", "TORCH_LIBRARY_IMPL(ex03, CUDA, m)", "TORCH_LIBRARY_IMPL(ex03, CPU, m)"),
           verdict="not solved yet: ex03::mymul has no kernel on the CUDA key (the dispatch table shows nothing "
           "there); register mymul_cuda in the TORCH_LIBRARY_IMPL(ex03, CUDA, m) block"),
    answer("03", "capped-grid-without-stride", ONE_THREAD_PER_ELEMENT,
           verdict=r"re:not solved yet: ex03::mymul on 2\^25\+3 float32 CUDA elements \(more than one grid: loop "
           r"with a grid stride\) returned wrong values: at index \[\d+\] expected \S+, got \S+", without_gpu=NOT_RUN),
    answer("03", "ignores-strides", ("mymul.cu", "const at::Tensor a = self.contiguous();\n  const at::Tensor b = "
                                     "other.contiguous();", "const at::Tensor& a = self;\n  const at::Tensor& b = other;"),
           verdict=r"re:not solved yet: ex03::mymul on transposed torch\.float32 CUDA inputs returned wrong values: at "
           r"index \[\d+, \d+\] expected \S+, got \S+", without_gpu=NOT_RUN),
    answer("03", "stream-zero", ("mymul.cu", "<<<blocks, kThreads, 0, stream>>>", "<<<blocks, kThreads, 0, 0>>>"),
           verdict=r"re:not solved yet: ex03::mymul under torch\.cuda\.stream\(side\), after a fill_ queued there "
           r"\(launch on at::cuda::getCurrentCUDAStream\(\), not on the default stream\) returned wrong values: at "
           r"index \[\d+\] expected \S+, got \S+", without_gpu=NOT_RUN),
    # The current device's stream, taken before the guard: wrong only for inputs on a GPU that is not current.
    answer("03", "stream-before-guard", ("mymul.cu", "  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();\n", ""),
           ("mymul.cu", "  const c10::cuda::CUDAGuard device_guard(", "  const cudaStream_t stream = "
            "at::cuda::getCurrentCUDAStream();\n  const c10::cuda::CUDAGuard device_guard("),
           verdict=r"re:not solved yet: ex03::mymul on cuda:1 inputs while cuda:0 is current .*take the CUDAGuard on "
           r"the inputs' device first, then the stream \(at::cuda::getCurrentCUDAStream\(\) is the current device's\)"
           r".*", without_gpu=NOT_RUN, with_one_gpu=SOLVED),
    # -- 04: an autograd kernel -----------------------------------------------------------------------------
    answer("04", "backward-with-aten", ("mymul.cpp", "return {ex04::mymul(grad, saved[1]), ex04::mymul(grad, saved[0])};",
                                        "return {at::mul(grad, saved[1]), at::mul(saved[0], grad)};"), verdict=SOLVED),
    answer("04", "exclude-guard", ("mymul.cpp", "at::AutoDispatchBelowADInplaceOrView guard;",
                                   "c10::impl::ExcludeDispatchKeyGuard guard(c10::autograd_dispatch_keyset);"),
           verdict=SOLVED),
    answer("04", "no-function", ("mymul.cpp", "return MyMulFunction::apply(self, other);", "return at::mul(self, other);"),
           verdict="not solved yet: ex04::mymul with requires_grad: the output's grad_fn is MulBackward0, not a "
           "node of your torch::autograd::Function (torch::autograd::CppNode<...>): return "
           "MyMulFunction::apply(self, other) from mymul_autograd"),
    answer("04", "forward-computes-itself", ("mymul.cpp", "return ex04::mymul(self, other);\n  }",
                                             "return at::mul(self, other);\n  }"),
           verdict="not solved yet: ex04::mymul with requires_grad on shapes [3, 4] and [4] did not raise; the "
           "forward must call ex04::mymul under the guard, which runs the given CPU kernel, not compute the "
           "product another way"),
    answer("04", "backward-under-guard", ("mymul.cpp", "const auto saved = ctx->get_saved_variables();\n    const at::Tensor& grad",
                                          "const auto saved = ctx->get_saved_variables();\n"
                                          "    at::AutoDispatchBelowADInplaceOrView guard;\n    const at::Tensor& grad"),
           verdict="not solved yet: double backward of ex04::mymul fails (torch.autograd.gradgradcheck): write "
           "backward with differentiable operations (ex04::mymul or at::mul), outside any guard"),
    answer("04", "no-guard", ("mymul.cpp", "at::AutoDispatchBelowADInplaceOrView guard;", ""),
           verdict="not solved yet: the check crashed with SIGSEGV (most likely a stack overflow: "
           "MyMulFunction::forward calls ex04::mymul again without leaving the autograd keys, forever: call it "
           "under at::AutoDispatchBelowADInplaceOrView)"),
    answer("04", "autograd-cpu-only", ("mymul.cpp", "TORCH_LIBRARY_IMPL(ex04, Autograd, m)",
                                       "TORCH_LIBRARY_IMPL(ex04, AutogradCPU, m)"),
           verdict="not solved yet: ex04::mymul has no kernel on the AutogradCUDA key (the dispatch table shows a "
           "backend fallback from PyTorch there); register it on the Autograd alias key, which serves every "
           "backend, not on AutogradCPU alone"),
    # -- 05: a backward instead of the NotImplemented fallback ----------------------------------------------
    answer("05", "weight-grad-by-reshape", ("myrmsnorm.cpp", "rows.empty() ? per_row : at::sum(per_row, rows)",
                                            "at::sum(per_row.reshape({-1, x.size(-1)}), {0})"), verdict=SOLVED),
    # On a 1-d input the list of dimensions to sum is empty, and at::sum over no dimension sums them all.
    answer("05", "weight-grad-summed-on-1d", ("myrmsnorm.cpp", "rows.empty() ? per_row : at::sum(per_row, rows)",
                                              "at::sum(per_row, rows)"),
           verdict=r"re:not solved yet: backward of ex05::myrmsnorm on shape \[5\] with eps=1e-06 and "
           r"requires_grad=\(True, True\) raised RuntimeError: Function torch::autograd::CppNode<.*MyRMSNormFunction> "
           r"returned an invalid gradient at index 1 - got \[\] but expected shape compatible with \[5\]: a 1-d self "
           r"has no dimension but the last, and at::sum over an empty list of dimensions sums every element; return "
           r"g \* self \* r as it is there"),
    answer("05", "fallthrough", ("myrmsnorm.cpp", 'm.impl("myrmsnorm", &myrmsnorm_autograd);',
                                 'm.impl("myrmsnorm", torch::CppFunction::makeFallthrough());'),
           verdict="not solved yet: ex05::myrmsnorm has a fallthrough on the AutogradCPU key, which skips the key "
           "instead of running a kernel; register myrmsnorm_autograd in a TORCH_LIBRARY_IMPL(ex05, Autograd, m) "
           "block"),
    answer("05", "aten-forward", ("myrmsnorm.cpp", "return MyRMSNormFunction::apply(self, weight, eps);",
                                  "return at::mul(at::mul(self, inverse_rms(self, eps)), weight);"),
           verdict="not solved yet: ex05::myrmsnorm with requires_grad: the output's grad_fn is MulBackward0, not "
           "a node of your torch::autograd::Function (torch::autograd::CppNode<...>): return "
           "MyRMSNormFunction::apply(self, weight, eps) from myrmsnorm_autograd, with the backward written out"),
    answer("05", "eps-forgotten", ("myrmsnorm.cpp", 'inverse_rms(x, ctx->saved_data["eps"].toDouble())',
                                   "inverse_rms(x, 1e-6)"),
           verdict=r"re:not solved yet: the gradient of ex05::myrmsnorm on shape \[3, 5\] with eps=0\.5 and "
           r"requires_grad=\(True, True\) for input 0 returned wrong values: .*"),
    # -- 06: ADInplaceOrView --------------------------------------------------------------------------------
    answer("06", "increment-version", ("myscale.cpp", "self.unsafeGetTensorImpl()->bump_version();",
                                       "torch::autograd::increment_version(self);"),
           ("myscale.cpp", "#include <torch/library.h>",
            "#include <torch/csrc/autograd/VariableTypeUtils.h>\n#include <torch/library.h>"), verdict=SOLVED),
    # ATen's mul_ in the given CPU kernel bumps for a kernel that has neither guard nor bump of its own.
    answer("06", "redispatch-only", ("myscale.cpp", "    at::AutoDispatchBelowADInplaceOrView guard;\n", ""),
           ("myscale.cpp", "  self.unsafeGetTensorImpl()->bump_version();\n", ""),
           verdict="not solved yet: with a CPU kernel that writes the data itself (no ATen call that bumps for it), "
           "ex06::myscale_ moved x's version counter by 0, expected exactly 1: the bump is your ADInplaceOrView "
           "kernel's job, once, after redispatching under at::AutoDispatchBelowADInplaceOrView"),
    answer("06", "bump-without-guard", ("myscale.cpp", "    at::AutoDispatchBelowADInplaceOrView guard;\n", ""),
           verdict="not solved yet: ex06::myscale_ moved x's version counter by 2, expected exactly 1: bump it once, "
           "after the redispatch"),
    answer("06", "mask-below-autograd-only", ("myscale.cpp", "keys & c10::after_ADInplaceOrView_keyset",
                                              "keys & c10::after_autograd_keyset"),
           verdict="not solved yet: the check crashed with SIGSEGV (most likely a stack overflow: the ADInplaceOrView "
           "kernel calls ex06::myscale_ again without leaving its key, forever: redispatch with keys & "
           "c10::after_ADInplaceOrView_keyset (redispatch follows the key set it is given, not the thread's "
           "guards), under at::AutoDispatchBelowADInplaceOrView)"),
    # -- 07: autocast ---------------------------------------------------------------------------------------
    answer("07", "cast-by-hand", ("mynorm.cpp", "return ex07::mynorm(at::autocast::cached_cast(at::kFloat, self, "
                                  "c10::DeviceType::CPU));", "return ex07::mynorm(c10::isReducedFloatingType("
                                  "self.scalar_type()) ? self.to(at::kFloat) : self);"), verdict=SOLVED),
    answer("07", "cached-cast-for-cuda", ("mynorm.cpp", "cached_cast(at::kFloat, self, c10::DeviceType::CPU)",
                                          "cached_cast(at::kFloat, self)"),
           verdict="not solved yet: under torch.autocast('cpu', dtype=torch.bfloat16), the AutocastCPU kernel passed "
           "torch.bfloat16 to ex07::mynorm, expected torch.float32 (the fp32 policy): cast with "
           "at::autocast::cached_cast(at::kFloat, self, c10::DeviceType::CPU) (its device type defaults to CUDA, "
           "which leaves a CPU tensor as it is)"),
    # A sum of squares over 10 takes float16 to inf: a wrapper that casts only the autocast dtype leaves it there.
    answer("07", "casts-only-the-autocast-dtype", ("mynorm.cpp", "return ex07::mynorm(at::autocast::cached_cast(at::kFloat, "
                                                   "self, c10::DeviceType::CPU));", "return ex07::mynorm(self.scalar_type() "
                                                   "== at::autocast::get_autocast_dtype(at::kCPU) ? self.to(at::kFloat) : "
                                                   "self);"),
           verdict="not solved yet: ex07::mynorm on torch.float16 under torch.autocast('cpu', dtype=torch.bfloat16): "
           "the AutocastCPU kernel passed torch.float16 to ex07::mynorm, expected torch.float32: the fp32 policy casts "
           "every floating input but float64, not only one of the autocast dtype (at::autocast::cached_cast("
           "at::kFloat, self, c10::DeviceType::CPU) does)"),
    answer("07", "casts-floating-but-double", ("mynorm.cpp", "return ex07::mynorm(at::autocast::cached_cast(at::kFloat, "
                                               "self, c10::DeviceType::CPU));", "return ex07::mynorm(self.is_floating_"
                                               "point() && self.scalar_type() != at::kDouble ? self.to(at::kFloat) : "
                                               "self);"), verdict=SOLVED),
    answer("07", "calls-the-cpu-kernel", ("mynorm.cpp", "return ex07::mynorm(at::autocast::cached_cast(", "return "
                                          "mynorm_cpu(at::autocast::cached_cast("),
           verdict="not solved yet: under CPU autocast, ex07::mynorm's AutocastCPU kernel did not call ex07::mynorm "
           "(the keys below it saw aten._to_copy.default, aten.mul.Tensor, aten.sum.default, aten.sqrt.default): "
           "call the dispatch function ex07::mynorm under the guard, not the CPU kernel or ATen operators"),
    answer("07", "casts-the-result-back", ("mynorm.cpp", "c10::DeviceType::CPU));\n}", "c10::DeviceType::CPU))"
                                           ".to(self.scalar_type());\n}"), ("mynorm.cpp", "#include <ATen/ops/sum.h>",
                                           "#include <ATen/ops/sum.h>\n#include <ATen/ops/to.h>"),
           verdict="not solved yet: under torch.autocast('cpu', dtype=torch.bfloat16), ex07::mynorm returned "
           "torch.bfloat16, expected torch.float32: return what ex07::mynorm computed in float32, not cast back"),
    answer("07", "excludes-autocast-cuda", ("mynorm.cpp", "no_autocast(c10::DispatchKey::AutocastCPU)",
                                            "no_autocast(c10::DispatchKey::Autocast)"),
           verdict="not solved yet: the check crashed with SIGSEGV (most likely a stack overflow: the autocast "
           "wrapper calls ex07::mynorm again without leaving AutocastCPU, forever: take "
           "c10::impl::ExcludeDispatchKeyGuard(c10::DispatchKey::AutocastCPU) first (the key named Autocast is "
           "AutocastCUDA))"),
    # -- 08: timing (on the check's scripted clock: 0.6 s first, then 2 ms, and 42 ms on calls 2, 22, 42, ...) -
    answer("08", "median-of-a-loop", ("timing.py", "    timer = torch.utils.benchmark.Timer(",
                                      "    import statistics, time\n    times = []\n    for _ in range(30):\n"
                                      "        start = time.perf_counter()\n        fn(*args)\n"
                                      "        times.append(time.perf_counter() - start)\n"
                                      "    return statistics.median(times)\n    timer = torch.utils.benchmark.Timer("),
           verdict=SOLVED),
    answer("08", "adaptive-autorange", ("timing.py", "blocked_autorange(min_run_time=0.2)", "adaptive_autorange()"),
           verdict=SOLVED),
    answer("08", "mean-of-a-loop", ("timing.py", "    timer = torch.utils.benchmark.Timer(",
                                    "    import time\n    start = time.perf_counter()\n    for _ in range(30):\n"
                                    "        fn(*args)\n    return (time.perf_counter() - start) / 30\n"
                                    "    timer = torch.utils.benchmark.Timer("),
           verdict=timing_verdict("0.0246", 30)),
    answer("08", "warm-up-then-mean", ("timing.py", "    timer = torch.utils.benchmark.Timer(",
                                       "    import time\n    fn(*args)\n    start = time.perf_counter()\n"
                                       "    for _ in range(30):\n        fn(*args)\n"
                                       "    return (time.perf_counter() - start) / 30\n    timer = torch.utils.benchmark.Timer("),
           verdict=timing_verdict("0.004667", 31)),
    answer("08", "mean-of-blocks", ("timing.py", "min_run_time=0.2).median", "min_run_time=0.2).mean"),
           verdict=timing_verdict("0.004927", 42)),
    answer("08", "one-block", ("timing.py", "blocked_autorange(min_run_time=0.2).median", "timeit(100).median"),
           verdict=timing_verdict("0.004", 102)),
    answer("08", "one-call-after-a-warm-up", ("timing.py", "    timer = torch.utils.benchmark.Timer(",
                                              "    import time\n    fn(*args)\n    start = time.perf_counter()\n"
                                              "    fn(*args)\n    return time.perf_counter() - start\n"
                                              "    timer = torch.utils.benchmark.Timer("),
           verdict=timing_verdict("0.042", 2)),
    answer("08", "microseconds", ("timing.py", "min_run_time=0.2).median", "min_run_time=0.2).median * 1e6"),
           verdict=timing_verdict("2000", 42)),
    # -- 09: a Meta kernel ----------------------------------------------------------------------------------
    answer("09", "plain-sizes", ("mymatmul.cpp", "at::empty_symint({self.sym_size(0), other.sym_size(1)}, self.options())",
                                 "at::empty({self.size(0), other.size(1)}, self.options())"),
           verdict="not solved yet: on fake tensors of shapes [3, 4] and [4, 5], every size symbolic, ex09::mymatmul returned "
           "the fixed shape [3, 5]: read the sizes as SymInts (sym_size, at::empty_symint), or "
           "torch.compile(dynamic=True) recompiles for every shape"),
    answer("09", "sym-sizes-array", ("mymatmul.cpp", "at::empty_symint({self.sym_size(0), other.sym_size(1)}, self.options())",
                                     "at::empty_symint({self.sym_sizes()[0], other.sym_sizes()[1]}, self.options())"),
           verdict=SOLVED),
    answer("09", "new-empty-symint", ("mymatmul.cpp", "at::empty_symint({self.sym_size(0), other.sym_size(1)}, self.options())",
                                      "self.new_empty_symint({self.sym_size(0), other.sym_size(1)})"),
           verdict=SOLVED),
    answer("09", "meta-without-checks", ("mymatmul.cpp", "  check_inputs(self, other);\n  // SymInts", "  // SymInts"),
           verdict="not solved yet: ex09::mymatmul on meta tensors of shapes [[3, 4], [5, 6]] did not raise; the "
           "CPU kernel rejects them: make the Meta kernel run the same checks"),
    answer("09", "transposed-shape", ("mymatmul.cpp", "at::empty_symint({self.sym_size(0), other.sym_size(1)}, self.options())",
                                      "at::empty_symint({other.sym_size(1), self.sym_size(0)}, self.options())"),
           verdict="not solved yet: ex09::mymatmul on meta torch.float32 tensors of shapes [3, 4] and [4, 5] "
           "returned shape [5, 3], expected [3, 5]"),
    answer("09", "on-composite-explicit", ("mymatmul.cpp", "TORCH_LIBRARY_IMPL(ex09, Meta, m)",
                                           "TORCH_LIBRARY_IMPL(ex09, CompositeExplicitAutograd, m)"),
           verdict="not solved yet: ex09::mymatmul has no kernel on the Meta key (the dispatch table shows a "
           "default backend kernel there); register mymatmul_meta in a TORCH_LIBRARY_IMPL(ex09, Meta, m) "
           "block"),
    # -- 10: a batching rule --------------------------------------------------------------------------------
    answer("10", "aten-for-a-batched-weight", ("rule.py", "    normalized = torch.ops.ex10.myrmsnorm(x, torch.ones_like(weight[0]), eps)\n",
                                               "    normalized = x * torch.rsqrt(x.square().mean(-1, keepdim=True) + eps)\n"),
           verdict=SOLVED),
    answer("10", "x-always-batched", ("rule.py", "x.movedim(x_dim, 0) if x_dim is not None else x.expand(info.batch_size, *x.shape)",
                                      "x.movedim(x_dim, 0)"),
           verdict=r"re:not solved yet: vmap\(ex10::myrmsnorm, in_dims=\(None, 0\)\) on x of shape \[4, 8\] and "
           r"weight of shape \[6, 8\], eps=0\.5 raised TypeError: .*"),
    answer("10", "weight-for-one-dimensional-examples", ("rule.py", "weight.reshape(weight.shape[0], *[1] * (x.dim() "
                                                         "- 2), weight.shape[-1])", "weight.unsqueeze(1)"),
           verdict="not solved yet: vmap(ex10::myrmsnorm, in_dims=(0, 0)) on x of shape [6, 8] and weight of shape "
           "[6, 8], eps=1e-06 returned shape [6, 6, 8], expected [6, 8]"),
    # in_dims has no entry for an eps left out or passed equal to its default: only eps=0.5 makes three.
    answer("10", "three-in-dims", ("rule.py", "x_dim, weight_dim = in_dims[:2]", "x_dim, weight_dim, _ = in_dims"),
           verdict="not solved yet: vmap(ex10::myrmsnorm, in_dims=(0, None)) on x of shape [6, 4, 8] raised "
           "ValueError: not enough values to unpack (expected 3, got 2)"),
    answer("10", "rule-default-eps-differs", ("rule.py", "def myrmsnorm_batch_rule(info, in_dims, x, weight, eps=1e-6)",
                                              "def myrmsnorm_batch_rule(info, in_dims, x, weight, eps=0.1)"),
           verdict="not solved yet: vmap(ex10::myrmsnorm, in_dims=(0, None)) on x of shape [6, 4, 8] returned wrong "
           "values: at index [1, 0, 6] expected -2.25864, got -1.82256"),
    answer("10", "one-call-per-example", ("rule.py", "        return torch.ops.ex10.myrmsnorm(x, weight, eps), 0",
                                          "        return torch.stack([torch.ops.ex10.myrmsnorm(xi, weight, eps) "
                                          "for xi in x]), 0"),
           verdict="not solved yet: vmap(ex10::myrmsnorm, in_dims=(0, None)) on x of shape [6, 4, 8] called the "
           "operator 6 times for 6 examples, expected once: register the batching rule with "
           "torch.library.register_vmap, and call the operator once on the whole batch, not once per example"),
    # -- 12: boxed kernels, on the CPU and on the device ------------------------------------------------
    answer("12", "unboxed-for-one", ("sum_boxed.cpp", 'm.impl("sum2", torch::CppFunction::makeFromBoxedFunction<&sum_boxed>());',
                                     'm.impl("sum2", [](const at::Tensor& a, const at::Tensor& b) { return a.add(b); });'
                                     "  // not makeFromBoxedFunction"),
           verdict="not solved yet: ex12::sum2's CPU kernel is not a boxed function (the dispatcher lists it as boxed "
           "and unboxed): register sum_boxed with torch::CppFunction::makeFromBoxedFunction"),
    answer("12", "parts-one-by-one", ("sum_boxed.cpp", "for (const c10::IValue& argument : torch::jit::last(*stack, num_arguments)) {",
                                      "for (size_t i = stack->size() - num_arguments; i < stack->size(); ++i) {\n"
                                      "    const c10::IValue& argument = (*stack)[i];"), verdict=SOLVED),
    answer("12", "adds-into-the-first", ("sum_boxed.cpp", "sum = sum ? sum->add(argument.toTensor()) : "
                                         "argument.toTensor().clone();", "if (sum) {\n        sum->add_(argument.toTensor());"
                                         "\n      } else {\n        sum = argument.toTensor();\n      }"),
           verdict="not solved yet: ex12::sum2 on CPU tensors changed its first argument: add into a new tensor, not "
           "into the input"),
    answer("12", "adds-into-a-copy", ("sum_boxed.cpp", "sum = sum ? sum->add(argument.toTensor()) : "
                                      "argument.toTensor().clone();", "if (sum) {\n        sum->add_(argument.toTensor());"
                                      "\n      } else {\n        sum = argument.toTensor().clone();\n      }"),
           verdict=SOLVED),
    answer("12", "device-with-cpu-fallback", ("on_device.cpp", "#include <torch/library.h>\n",
                                              "#include <torch/library.h>\n#include <ATen/native/CPUFallback.h>\n"),
           ("on_device.cpp", "    (*stack)[i] = tensor.cpu();\n", ""),
           ("on_device.cpp", "  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);\n"
            "  for (size_t i = stack->size() - op.schema().returns().size(); i < stack->size(); ++i) {\n"
            "    (*stack)[i] = (*stack)[i].toTensor().to(*device);\n  }\n",
            "  at::native::cpu_fallback(op, stack);  // copies, redispatches to CPU, copies back\n"),
           verdict=SOLVED),
    answer("12", "device-starts-anew", ("on_device.cpp", "op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);",
                                        "op.callBoxed(stack);"),
           verdict="not solved yet: one call of ex12::sum2 on mydevice tensors made 2 calls of it: through_cpu starts "
           "the operator anew (op.callBoxed) instead of going straight to its CPU kernel with "
           "op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack)"),
    answer("12", "device-unchecked", ("on_device.cpp", "TORCH_CHECK(tensor.device() == *device,", "TORCH_CHECK(true,"),
           verdict="not solved yet: ex12::sum2 on a mydevice tensor and a CPU tensor did not raise; through_cpu must "
           "check that every tensor is on the call's device before it copies them to the CPU, where a mix no "
           "longer shows"),
    answer("12", "device-check-unnamed", ("on_device.cpp", "TORCH_CHECK(tensor.device() == *device, op.schema().name(), \": argument '\",",
                                          "TORCH_CHECK(tensor.device() == *device, \"argument '\","),
           verdict="not solved yet: ex12::sum2 on a mydevice tensor and a CPU tensor raised \"argument 'b' is on cpu, "
           "the others on mydevice:0; move it there with .to(\"mydevice:0\")\", which does not say which operator "
           "refused: name it, op.schema().name()"),
    answer("12", "result-left-on-cpu", ("on_device.cpp", "    (*stack)[i] = (*stack)[i].toTensor().to(*device);\n", ""),
           verdict="not solved yet: ex12::sum2 on mydevice torch.float32 returned a tensor on cpu, expected mydevice:0: "
           "move the result back"),
    answer("12", "sum2-left-to-the-fallback", ("on_device.cpp", 'm.impl("sum2", torch::CppFunction::makeFromBoxedFunction<&through_cpu>());',
                                               "// sum2 is left to the device's fallback"),
           verdict="not solved yet: ex12::sum2 has no kernel on the PrivateUse1 key (the dispatch table shows a "
           "backend fallback from csrc/device/fallback.cpp there); register through_cpu for sum2 in the "
           "TORCH_LIBRARY_IMPL(ex12, PrivateUse1, m) block of answer/12_boxed_kernels_and_backends/on_device.cpp"),
    # -- 13: the 2020 tutorial, updated ---------------------------------------------------------------------
    answer("13", "autocast-guard-on-autocast-cuda", ("mymul.cpp", "no_autocast(kAutocastKey)",
                                                     "no_autocast(c10::DispatchKey::Autocast)"),
           verdict="not solved yet: the check crashed with SIGSEGV (most likely a stack overflow: a kernel calls "
           "ex13::mymul again without leaving its own key, forever: the autograd kernel needs "
           "at::AutoDispatchBelowADInplaceOrView, the autocast wrapper c10::impl::ExcludeDispatchKeyGuard on "
           "AutocastCPU (Autocast is a name of AutocastCUDA, which excludes nothing on CPU))"),
    answer("13", "mul-in-the-kernel-twice", ("mymul.cpp", "return {mymul(grad_outputs[0], saved[1]), mymul(grad_outputs[0], saved[0])};",
                                             "return {grad_outputs[0] * saved[1], grad_outputs[0] * saved[0]};"),
           verdict=SOLVED),
    answer("13", "non-variable-type-mode", ("mymul.cpp", "at::AutoDispatchBelowADInplaceOrView guard;",
                                            "at::AutoNonVariableTypeMode guard;"), verdict="not solved yet: ex13::mymul's autograd kernel uses at::AutoNonVariableTypeMode, which is "
           "deprecated and warns at run time: use at::AutoDispatchBelowADInplaceOrView"),
    answer("13", "row-zero", ("mymul.cpp", "return MyMulFunction::apply(self, other);  // 3.",
                              "return MyMulFunction::apply(self, other)[0];  // 3."), verdict="not solved yet: ex13::mymul with requires_grad returned shape [3] for inputs of shape [2, 3]: "
           "apply() returns a Tensor, and [0] selects its first row"),
    answer("13", "cached-cast-default-device", ("mymul.cpp", "return mymul(at::autocast::cached_cast(dtype, self, kDevice), at::autocast::cached_cast(dtype, other, kDevice));",
                                                "return mymul(at::autocast::cached_cast(dtype, self), at::autocast::cached_cast(dtype, other));"),
           verdict="not solved yet: under torch.autocast('cpu', dtype=torch.bfloat16), ex13::mymul returned "
           "torch.float32, expected torch.bfloat16: give cached_cast the device type (its default is CUDA)"),
    answer("13", "bfloat16-fixed", ("mymul.cpp", "at::autocast::get_lower_precision_fp_from_device_type(kDevice)",
                                     "at::kBFloat16"),
           verdict="not solved yet: under torch.autocast('cpu', dtype=torch.float16), ex13::mymul returned "
           "torch.bfloat16, expected torch.float16: cast to the dtype the caller's autocast asks for, "
           "at::autocast::get_lower_precision_fp_from_device_type(device type), not a fixed one"),
    answer("13", "get-autocast-dtype", ("mymul.cpp", "at::autocast::get_lower_precision_fp_from_device_type(kDevice)",
                                        "at::autocast::get_autocast_dtype(kDevice)"), verdict=SOLVED),
    answer("13", "catch-all-kept", ("mymul.cpp", 'm.def("mymul(Tensor self, Tensor other) -> Tensor");',
                                    'm.def("mymul(Tensor self, Tensor other) -> Tensor", &mymul_cpu);'),
           ("mymul.cpp", 'TORCH_LIBRARY_IMPL(ex13, CPU, m) {\n  m.impl("mymul", &mymul_cpu);\n}', ""), verdict="not solved yet: ex13::mymul's kernel is still a catch-all (def(schema, fn) files it under "
           "CompositeImplicitAutograd, for every backend): define the schema alone and register mymul_cpu "
           "in a TORCH_LIBRARY_IMPL(ex13, CPU, m) block"),
    # -- 11: torch.library in Python ------------------------------------------------------------------------
    answer("11", "fake-output-contiguous", ("myrmsnorm.py", "return torch.empty_like(self)",
                                            "return self.new_empty(self.shape)"),
           verdict="not solved yet: opcheck's test_faketensor fails for ex11::myrmsnorm: MetadataMismatchError: When "
           "comparing the output of ex11.myrmsnorm.default on FakeTensor and concrete Tensors, found mismatched "
           "tensor metadata: Stride mismatch! Strides are (1, 3) and (4, 1) (mismatched at 0)! (the fake kernel "
           "must return what the real one returns: the same shape, dtype and strides; torch.empty_like(self) keeps "
           "self's strides)"),
    answer("11", "kernel-broadcasts", ("myrmsnorm.py", "    _check_weight(self, weight)  # a weight", "    # a weight"),
           verdict="not solved yet: ex11::myrmsnorm with x of shape [3, 5] and weight of shape [1] did not raise; "
           "check in the kernel that weight has shape [self.shape[-1]] (torch._check), so it never broadcasts, "
           "and in the fake kernel the same way"),
    answer("11", "fake-accepts-anything", ("myrmsnorm.py", "    _check_weight(self, weight)  # the fake", "    # the fake"),
           verdict="not solved yet: ex11::myrmsnorm with x of shape [3, 5] and weight of shape [1], on fake tensors "
           "did not raise; the fake kernel must refuse what the kernel refuses (torch._check the weight's shape)"),
    answer("11", "no-fake", ("myrmsnorm.py", "@myrmsnorm.register_fake\n", ""),
           verdict=r"re:not solved yet: ex11::myrmsnorm on fake tensors raised .*: register a fake kernel "
           r"\(@myrmsnorm\.register_fake\)"),
    answer("11", "weight-grad-over-dims", ("myrmsnorm.py", "(grad * x * r).reshape(-1, x.shape[-1]).sum(0)",
                                           "(grad * x * r).sum(dim=tuple(range(x.dim() - 1))) if x.dim() > 1 else "
                                           "grad * x * r"), verdict=SOLVED),
    # sum over no dimensions reduces them all: a 1-d input's weight gradient collapses to a scalar.
    answer("11", "weight-grad-of-1d-input", ("myrmsnorm.py", "(grad * x * r).reshape(-1, x.shape[-1]).sum(0)",
                                             "(grad * x * r).sum(dim=tuple(range(x.dim() - 1)))"),
           verdict=r"re:not solved yet: backward of ex11::myrmsnorm on shape \[5\] with requires_grad=\(True, True\) "
           r"raised RuntimeError: Function \w+ returned an invalid gradient at index 1 - got \[\] but expected shape "
           r"compatible with \[5\]"),
]


# What exercise 15's Meta kernel for myscale returns, and what the check says of a fake result unlike the real one.
_MYSCALE_META_RESULT = "at::empty_symint(self.sym_sizes(), self.options().memory_format(at::MemoryFormat::Contiguous))"
_MYSCALE_FAKE_HINT = ("(the fake kernel must return what the CPU kernel returns: the same shape, dtype, device and "
                      "strides, and for myscale_ self itself; myscale_cpu's output is contiguous whatever self's layout)")

# -- 14: the stable ABI ------------------------------------------------------------------------------------
ANSWERS += [
    answer("14", "parallel-for", ("mymul.cpp", "  for (int64_t i = 0; i < out.numel(); ++i) {\n    o[i] = a[i] * b[i];\n  }",
                                  "  torch::stable::parallel_for(0, out.numel(), 4096, [&](int64_t begin, int64_t end) {\n"
                                  "    for (int64_t i = begin; i < end; ++i) o[i] = a[i] * b[i];\n  });"), verdict=SOLVED),
    # torch's non-stable headers refuse to be compiled for a target version,
    answer("14", "only-self-made-contiguous", ("mymul.cpp", "const Tensor b = torch::stable::contiguous(other);",
                                               "const Tensor& b = other;"),
           verdict=r"re:not solved yet: ex14::mymul on transposed other torch\.float32 inputs returned wrong values: "
           r"at index \[\d+, \d+\] expected \S+, got \S+"),
    answer("14", "c10-header", ("mymul.cpp", "#include <cstdint>", "#include <cstdint>\n#include <c10/util/Exception.h>"),
           verdict="does not compile: answer/14_stable_abi_and_wheels/mymul.cpp (for torch 2.13's stable ABI): "
           "#error \"This file should not be included when either TORCH_STABLE_ONLY or TORCH_TARGET_VERSION is "
           "defined.\""),
    # and a C++ function of libc10 declared by hand is found by nm.
    answer("14", "c10-symbol", ("mymul.cpp", "namespace {\n", "namespace c10 {\nvoid* alloc_cpu(size_t nbytes);\n"
                                "void free_cpu(void* data);\n}  // namespace c10\n\nnamespace {\n"),
           ("mymul.cpp", "  const Tensor a = torch::stable::contiguous(self);",
            "  c10::free_cpu(c10::alloc_cpu(16));\n  const Tensor a = torch::stable::contiguous(self);"),
           verdict="not solved yet: the library of answer/14_stable_abi_and_wheels/mymul.cpp imports 2 C++ "
           "symbol(s) of libtorch or libc10 (such as c10::alloc_cpu(unsigned long)), which change between "
           "releases: include only headers of torch/csrc/stable/ and torch/headeronly/, whose calls go through the "
           "C shim"),
    answer("14", "api-newer-than-2.13", ("mymul.cpp", "  const Tensor a = torch::stable::contiguous(self);",
                                         "  STD_TORCH_CHECK(self.has_storage(), \"ex14::mymul: no storage\");\n"
                                         "  const Tensor a = torch::stable::contiguous(self);"),
           verdict=r"re:does not compile: answer/14_stable_abi_and_wheels/mymul\.cpp \(for torch 2\.13's stable "
           r"ABI\): .*has_storage.*"),
    answer("14", "ignores-strides", ("mymul.cpp", "torch::stable::contiguous(self)", "self"),
           verdict=r"re:not solved yet: ex14::mymul on transposed torch\.float32 inputs returned wrong values: .*"),
    answer("14", "not-registered", ("mymul.cpp", '  m.impl("mymul", TORCH_BOX(&mymul_cpu));\n', ""),
           verdict='not solved yet: ex14::mymul has no kernel on the CPU key (the dispatch table shows nothing '
           'there); register mymul_cpu with m.impl("mymul", TORCH_BOX(&mymul_cpu)) in the '
           'STABLE_TORCH_LIBRARY_IMPL(ex14, CPU, m) block'),
    # -- 15: export and AOTInductor -------------------------------------------------------------------------
    answer("15", "fake-kernels-in-python",
           ("myscale.cpp", 'TORCH_LIBRARY_IMPL(ex15, Meta, m) {\n  m.impl("myscale", &myscale_meta);\n'
            '  m.impl("myscale_", &myscale__meta);\n}\n', ""),
           ("model.py", "\n\nclass Scaled", '''


def _check(x, scale):
    torch._check(scale.dim() == 1 and scale.shape[0] == x.shape[-1], lambda: "ex15::myscale: bad scale")


@torch.library.register_fake("ex15::myscale")
def _(x, scale):
    _check(x, scale)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.register_fake("ex15::myscale_")
def _(x, scale):
    _check(x, scale)
    return x


class Scaled'''), verdict=SOLVED),
    answer("15", "returns-nothing",
           ("myscale.cpp", '"myscale_(Tensor(a!) self, Tensor scale) -> Tensor(a!)", {at::Tag::inplace}',
            '"myscale_(Tensor(a!) self, Tensor scale) -> ()"'),
           ("myscale.cpp", "at::Tensor& myscale__cpu(at::Tensor& self, const at::Tensor& scale) {",
            "void myscale__cpu(const at::Tensor& self, const at::Tensor& scale) {"),
           ("myscale.cpp", "  scale_rows(self, scale, self);\n  return self;", "  scale_rows(self, scale, self);"),
           ("myscale.cpp", "at::Tensor& myscale__meta(at::Tensor& self, const at::Tensor& scale) {\n"
            "  check_inputs(self, scale);\n  return self;",
            "void myscale__meta(const at::Tensor& self, const at::Tensor& scale) {\n  check_inputs(self, scale);"),
           verdict=SOLVED),
    answer("15", "no-meta-kernels",
           ("myscale.cpp", 'TORCH_LIBRARY_IMPL(ex15, Meta, m) {\n  m.impl("myscale", &myscale_meta);\n'
            '  m.impl("myscale_", &myscale__meta);\n}\n', ""),
           verdict="not solved yet: ex15::myscale on fake tensors (what torch.export traces with) raised "
           "UnsupportedOperatorException: ex15.myscale.default: give it a Meta kernel (TORCH_LIBRARY_IMPL(ex15, "
           "Meta, m) in answer/15_export_and_aotinductor/myscale.cpp) or a fake kernel"),
    answer("15", "meta-without-checks",
           ("myscale.cpp", "at::Tensor myscale_meta(const at::Tensor& self, const at::Tensor& scale) {\n"
            "  check_inputs(self, scale);", "at::Tensor myscale_meta(const at::Tensor& self, const at::Tensor& scale) {"),
           verdict="not solved yet: ex15::myscale on fake tensors of shapes [3, 8] and [5] did not raise: the fake "
           "kernel must refuse what the CPU kernel refuses (the same check_inputs)"),
    answer("15", "meta-keeps-strides", ("myscale.cpp", _MYSCALE_META_RESULT, "at::empty_like(self)"),
           ("myscale.cpp", "#include <ATen/ops/empty.h>", "#include <ATen/ops/empty.h>\n#include <ATen/ops/empty_like.h>"),
           verdict="not solved yet: opcheck's test_faketensor fails for ex15::myscale on a transposed float32 x: "
           "MetadataMismatchError: When comparing the output of ex15.myscale.default on FakeTensor and concrete "
           "Tensors, found mismatched tensor metadata: Stride mismatch! Strides are (8, 1) and (1, 3) (mismatched at "
           "0)! " + _MYSCALE_FAKE_HINT),
    answer("15", "meta-in-float32", ("myscale.cpp", _MYSCALE_META_RESULT, "at::empty_symint(self.sym_sizes(), "
                                     "self.options().dtype(at::kFloat).memory_format(at::MemoryFormat::Contiguous))"),
           verdict="not solved yet: opcheck's test_faketensor fails for ex15::myscale on a 3-d float64 x: "
           "MetadataMismatchError: When comparing the output of ex15.myscale.default on FakeTensor and concrete "
           "Tensors, found mismatched tensor metadata: Dtypes torch.float64 and torch.float32 are not equal! "
           + _MYSCALE_FAKE_HINT),
    answer("15", "meta-on-the-cpu", ("myscale.cpp", _MYSCALE_META_RESULT, "at::empty_symint(self.sym_sizes(), "
                                     "self.options().device(at::kCPU).memory_format(at::MemoryFormat::Contiguous))"),
           verdict="not solved yet: ex15::myscale on fake tensors (what torch.export traces with) raised "
           "AssertionError: tensor's device must be `meta`, got cpu instead: its Meta kernel must make its result "
           "where its inputs are, on the meta device (with self's options, changing no more than the memory format)"),
    answer("15", "meta-new-empty", ("myscale.cpp", _MYSCALE_META_RESULT, "self.new_empty_symint(self.sym_sizes())"),
           verdict=SOLVED),
    # The dispatcher refuses the registration while the library loads, and std::terminate prints why.
    answer("15", "meta-signature-differs", ("myscale.cpp", "at::Tensor myscale_meta(const at::Tensor& self, const "
                                            "at::Tensor& scale) {\n  check_inputs(self, scale);", "at::Tensor "
                                            "myscale_meta(const at::Tensor& self, double scale) {"),
           verdict=r"re:not solved yet: the check crashed with SIGABRT on a C\+\+ exception nothing caught: Mismatch "
           r"in kernel C\+\+ signatures: operator: ex15::myscale\(Tensor self, Tensor scale\) -> Tensor; registered "
           r"at answer/15_export_and_aotinductor/myscale\.cpp:\d+; kernel 1: at::Tensor \(at::Tensor const&, "
           r"at::Tensor const&\); dispatch key: CPU; registered at answer/15_export_and_aotinductor/myscale\.cpp:\d+; "
           r"kernel 2: at::Tensor \(at::Tensor const&, double\); dispatch key: Meta; registered at "
           r"answer/15_export_and_aotinductor/myscale\.cpp:\d+"),
    answer("15", "no-inplace-tag", ("myscale.cpp", ", {at::Tag::inplace});", ");"),
           verdict="not solved yet: ex15::myscale_ returns the tensor it writes (-> Tensor(a!)) and has no inplace "
           "tag, so export's functionalization refuses it: define it with m.def(..., {at::Tag::inplace})"),
    answer("15", "exports-another-model", ("model.py", "torch.export.export(model, example_inputs)",
                                           "torch.export.export(torch.nn.Identity(), example_inputs)"),
           verdict="not solved yet: the exported graph does not call ex15::myscale, ex15::myscale_: export the model "
           "it was given, whose forward calls both operators"),
    answer("15", "model-on-aten", ("model.py", "        y = torch.ops.ex15.myscale(x, self.scale)\n"
                                   "        torch.ops.ex15.myscale_(y, x[0])", "        y = x * self.scale\n        y.mul_(x[0])"),
           verdict="not solved yet: the exported graph does not call ex15::myscale, ex15::myscale_: export the model "
           "it was given, whose forward calls both operators"),
    answer("15", "not-the-package", ("model.py", "return Path(torch._inductor.aoti_compile_and_package(program, "
                                     "package_path=str(path)))", "return path.with_suffix('.txt')"),
           verdict=r"re:not solved yet: compile_package returned \S+/model\.txt, which is no \.pt2 package: return "
           r"the path that torch\._inductor\.aoti_compile_and_package wrote"),
]


# -- 16: a sharding rule ----------------------------------------------------------------------------------
# Lines of solutions/16_python_key_and_dtensor/rule.py that the answers change: the strategies of independent
# rows, of the summed dimension, and of a partial input.
_ROWS = "    strategies += [([Shard(dim)], [Shard(dim), Replicate()]) for dim in range(last)]\n"
_SUMMED = "    strategies.append(([Partial()], [Shard(last), Shard(0)]))\n"
_PARTIALS = ("    strategies.append(([Partial()], [Partial(), Replicate()]))\n"
             "    strategies.append(([Partial()], [Replicate(), Partial()]))\n")


def _rows(strategy: str) -> tuple[str, str, str]:
    """The edit that lists `strategy` (an expression of `dim`) for every dimension but the summed one."""
    return ("rule.py", _ROWS, f"    strategies += [{strategy} for dim in range(last)]\n")


ANSWERS += [
    answer("16", "registered-not-written", ("rule.py", "def rowdot_sharding(x, w):",
                                            "@register_sharding(torch.ops.ex16.rowdot.default)\n"
                                            "def rowdot_sharding(x, w):"), base="exercises",
           verdict="not solved yet: write rowdot_sharding in exercises/16_python_key_and_dtensor/rule.py"),
    answer("16", "one-loop-over-dimensions",
           ("rule.py", _ROWS, "    for dim in range(x.ndim):\n        if dim == last:\n"
            "            strategies.append(([Partial()], [Shard(dim), Shard(0)]))\n        else:\n"
            "            strategies.append(([Shard(dim)], [Shard(dim), Replicate()]))\n"),
           ("rule.py", _SUMMED, ""), verdict=SOLVED),
    answer("16", "tuples-and-a-named-sum",
           ("rule.py", "    strategies = [([Replicate()], [Replicate(), Replicate()])]\n",
            "    strategies = [((Replicate(),), (Replicate(), Replicate()))]\n"),
           ("rule.py", _SUMMED, "    strategies.append(((Partial(\"sum\"),), (Shard(last), Shard(0))))\n"),
           verdict=SOLVED),
    answer("16", "summed-dimension-replicated",
           ("rule.py", _SUMMED, "    strategies.append(([Replicate()], [Shard(last), Shard(0)]))\n"),
           verdict="not solved yet: the strategy ([Replicate()], [Shard(1), Shard(0)]) (for x of shape [4, 6]) "
           "claims the output is Replicate(), but after each rank runs the kernel on its parts of x and w (x is "
           "split along its last dimension, the one the dot product sums over), the ranks hold Partial(): each "
           "rank holds a partial sum, and the result is their sum across the ranks"),
    answer("16", "rows-claim-partial", _rows("([Partial()], [Shard(dim), Replicate()])"),
           verdict="not solved yet: the strategy ([Partial()], [Shard(0), Replicate()]) (for x of shape [4, 6]) "
           "claims the output is Partial(), but after each rank runs the kernel on its parts of x and w, the "
           "ranks hold Shard(0): each rank holds its block of that dimension of the result"),
    answer("16", "w-forgotten", _rows("([Shard(dim)], [Shard(dim)])"),
           verdict="not solved yet: the strategy ([Shard(0)], [Shard(0)]) gives 1 input placement(s); ex16::rowdot "
           "takes two tensors, x and w: give one placement for each, in that order"),
    answer("16", "none-for-w", _rows("([Shard(dim)], [Shard(dim), None])"),
           verdict="not solved yet: the strategy ([Shard(0)], [Shard(0), None]) gives None for w, a tensor: None "
           "stands for an argument that is not a tensor; give every tensor a placement"),
    answer("16", "w-split-with-the-rows", _rows("([Shard(dim)], [Shard(dim), Shard(0)])"),
           verdict="not solved yet: the strategy ([Shard(0)], [Shard(0), Shard(0)]) (for x of shape [4, 6]) has "
           "every rank call ex16::rowdot on its part of x (shape [2, 6]) and of w (shape [3]), which raised "
           "RuntimeError: ex16::rowdot: expected w of shape [6] (x's last dimension), got [3]: the parts a rank "
           "holds must still fit together"),
    answer("16", "both-partial", ("rule.py", _PARTIALS,
                                  _PARTIALS + "    strategies.append(([Partial()], [Partial(), Partial()]))\n"),
           verdict="not solved yet: the strategy ([Partial()], [Partial(), Partial()]) (for x of shape [4, 6]) is "
           "wrong: after each rank runs the kernel on its parts of x and w, what the ranks hold is no placement of "
           "the result at all, Partial() or any other: leave it out (DTensor redistributes inputs to a strategy "
           "you list)"),
    answer("16", "output-not-a-list", ("rule.py", "    strategies = [([Replicate()], [Replicate(), Replicate()])]\n",
                                       "    strategies = [(Replicate(), [Replicate(), Replicate()])]\n"),
           verdict="not solved yet: rowdot_sharding for x Replicate() of 2 dimensions and w Replicate() returned "
           "(Replicate(), [Replicate(), Replicate()]) as a strategy: each is a pair of lists, ([output placement], "
           "[x's placement, w's placement])"),
    answer("16", "negative-dimension", ("rule.py", "[Shard(last), Shard(0)]", "[Shard(-1), Shard(0)]"),
           verdict="not solved yet: the strategy ([Partial()], [Shard(-1), Shard(0)]) gives x Shard(-1): DTensor "
           "counts dimensions from 0 and refuses a negative one; write Shard(x.ndim - 1) for x's last dimension"),
    # Right values, but DTensor communicates where the ranks need nothing from each other:
    answer("16", "no-partial-inputs", ("rule.py", _PARTIALS, ""),
           verdict="not solved yet: with x Replicate() (of 2 dimensions) and w Partial(), DTensor ran collectives "
           "(reduce_scatter_tensor x1) to move the inputs to a strategy your rule lists: no strategy of yours fits "
           "these placements, yet the dot product is linear in w: a partial w gives a partial result: list it"),
    # Right for some numbers of dimensions only: the stub promises x of any shape [..., n].
    answer("16", "a-row-even-in-one-dimension",
           ("rule.py", _ROWS, "    strategies += [([Shard(dim)], [Shard(dim), Replicate()])\n"
            "                   for dim in range(max(last, 1))]\n"),
           verdict="not solved yet: the strategy ([Shard(0)], [Shard(0), Replicate()]) (for x of shape [6]) has every "
           "rank call ex16::rowdot on its part of x (shape [3]) and of w (shape [6]), which raised RuntimeError: "
           "ex16::rowdot: expected w of shape [3] (x's last dimension), got [6]: the parts a rank holds must still "
           "fit together"),
    answer("16", "rows-of-at-most-three-dimensions",
           ("rule.py", _ROWS, "    strategies += [([Shard(dim)], [Shard(dim), Replicate()])\n"
            "                   for dim in range(min(last, 2))]\n"),
           verdict="not solved yet: with x Shard(2) (of 4 dimensions) and w Replicate(), DTensor ran collectives "
           "(all_gather_into_tensor x1) to move the inputs to a strategy your rule lists: no strategy of yours "
           "fits these placements, yet rows are independent: each rank can compute the output of its own rows: "
           "list it"),
    answer("16", "negative-output-dimension", _rows("([Shard(dim - last)], [Shard(dim), Replicate()])"),
           verdict="not solved yet: the strategy ([Shard(-1)], [Shard(0), Replicate()]) gives the output Shard(-1): "
           "DTensor counts dimensions from 0 and refuses a negative one; write Shard(x.ndim - 2) for the output's "
           "last dimension"),
    answer("16", "only-the-first-dimension",
           ("rule.py", _ROWS, "    strategies.append(([Shard(0)], [Shard(0), Replicate()]))\n"),
           verdict="not solved yet: the strategy ([Shard(0)], [Shard(0), Replicate()]) (for x of shape [6]) has every "
           "rank call ex16::rowdot on its part of x (shape [3]) and of w (shape [6]), which raised RuntimeError: "
           "ex16::rowdot: expected w of shape [3] (x's last dimension), got [6]: the parts a rank holds must still "
           "fit together"),
]


# -- 17: a Triton kernel as an operator, run by Triton's interpreter and then without it --------------------
NO_DECOMPOSITION = ("torch.compile decomposes a triton_op into its Triton kernel whatever the inputs' device, and "
                    "Triton cannot run it on CPU tensors (nor the interpreter on fake ones), GPU or not: keep "
                    "ex17::myaxpy whole with a FunctionalTensorMode rule of its own (myaxpy.register_torch_dispatch) "
                    "that returns mode.__torch_dispatch__(func, types, args, kwargs), or set "
                    "torch._functorch.config.decompose_custom_triton_ops = False, which keeps every triton_op of the "
                    "process whole")
KEEP_WHOLE = ("@myaxpy.register_torch_dispatch(FunctionalTensorMode)\ndef _(mode, func, types, args, kwargs):\n"
              "    return mode.__torch_dispatch__(func, types, args, kwargs)")
INTERPRETED_CPU_KERNEL = ("not solved yet: ex17::myaxpy has a kernel of its own on the CPU key although its Triton "
                          "kernel is interpreted here, so CPU tensors never reach the Triton kernel: register the "
                          "PyTorch fallback only where isinstance(axpy_kernel, InterpretedFunction) is False (the "
                          "interpreter, switched on as notebook 17 does, leaves no TRITON_INTERPRET variable to read)")
NO_CPU_FALLBACK = ('register a fallback written in PyTorch for CPU tensors, myaxpy.register_kernel("cpu"), used when '
                   'the interpreter is off')
ANSWERS += [
    answer("17", "contiguous-copies",
           ("myaxpy.py", "def axpy_kernel(x_ptr, y_ptr, out_ptr, alpha, n, cols, x_stride0, x_stride1, y_stride0, "
            "y_stride1,\n                FP64: tl.constexpr, BLOCK: tl.constexpr):", "def axpy_kernel(x_ptr, y_ptr, out_ptr, "
            "alpha, n, FP64: tl.constexpr, BLOCK: tl.constexpr):"),
           ("myaxpy.py", "    row, col = offsets // cols, offsets % cols\n", ""),
           ("myaxpy.py", "x_ptr + row * x_stride0 + col * x_stride1", "x_ptr + offsets"),
           ("myaxpy.py", "y_ptr + row * y_stride0 + col * y_stride1", "y_ptr + offsets"),
           ("myaxpy.py", "(x, y, out, alpha, n, x.shape[1], x.stride(0), x.stride(1),\n"
            "                                                        y.stride(0), y.stride(1), FP64=",
            "(x.contiguous(), y.contiguous(), out, alpha, n, FP64="), verdict=SOLVED),
    answer("17", "backward-through-the-op",
           ("myaxpy.py", "return ctx.alpha * grad, grad, None", "return myaxpy(grad, torch.zeros_like(grad), "
            "ctx.alpha), grad, None"), verdict=SOLVED),
    # 37 x 41 = 1517 elements in blocks of 128: the last block reaches 19 elements past the end.
    answer("17", "no-tail-mask", ("myaxpy.py", "x_stride1, mask=inside)", "x_stride1)"),
           ("myaxpy.py", "y_stride1, mask=inside)", "y_stride1)"),
           ("myaxpy.py", ".to(out_ptr.dtype.element_ty), mask=inside)", ".to(out_ptr.dtype.element_ty))"),
           verdict="not solved yet: ex17::myaxpy on contiguous torch.float32 inputs of shape [37, 41]: the kernel "
           "read 19 element(s) outside the tensors it was given; mask the tail of the last block (offsets < n) in "
           "every tl.load and tl.store"),
    answer("17", "only-the-store-masked", ("myaxpy.py", "x_stride1, mask=inside)", "x_stride1)"),
           ("myaxpy.py", "y_stride1, mask=inside)", "y_stride1)"),
           verdict="not solved yet: ex17::myaxpy on contiguous torch.float32 inputs of shape [37, 41]: the kernel "
           "read 19 element(s) outside the tensors it was given; mask the tail of the last block (offsets < n) in "
           "every tl.load and tl.store"),
    answer("17", "ignores-strides", ("myaxpy.py", "x_ptr + row * x_stride0 + col * x_stride1", "x_ptr + offsets"),
           verdict=r"re:not solved yet: ex17::myaxpy on transposed torch\.float32 inputs returned wrong values: at "
           r"index \[\d+, \d+\] expected \S+, got \S+"),
    answer("17", "a-custom-op", ("myaxpy.py", '@triton_op("ex17::myaxpy", mutates_args=())',
                                 '@torch.library.custom_op("ex17::myaxpy", mutates_args=())'),
           verdict="not solved yet: ex17::myaxpy is not a triton_op: define it with @torch.library.triton_op, whose "
           "kernels torch.compile can see (a custom_op hides them)"),
    answer("17", "no-fake-kernel", ("myaxpy.py", "@myaxpy.register_fake\ndef _(x, y, alpha):\n    check_inputs(x, y)\n"
                                    "    return torch.empty(x.shape, dtype=x.dtype, device=x.device)\n", ""),
           verdict="not solved yet: ex17::myaxpy on fake tensors raised RuntimeError: Attempted to set the storage "
           "of a tensor on device \"meta\" to a storage on different device \"cpu\".  This is no longer allowed; the "
           "devices must match.: triton_op's own fake kernel is the operator's body, which under the interpreter "
           "reads the tensors' data; give it a fake kernel (@myaxpy.register_fake) that only makes the output"),
    answer("17", "fake-kernel-without-checks", ("myaxpy.py", "def _(x, y, alpha):\n    check_inputs(x, y)\n"
                                                "    return torch.empty(", "def _(x, y, alpha):\n    return torch.empty("),
           verdict="not solved yet: ex17::myaxpy with x of shape [3, 5] and y of shape [5, 3], on fake tensors did "
           "not raise; refuse it with an error that names ex17::myaxpy (torch._check in the kernel and the fake "
           "kernel)"),
    answer("17", "fallback-always", ("myaxpy.py", "if not INTERPRETED:\n", "if True:\n"),
           verdict=INTERPRETED_CPU_KERNEL),
    # The interpreter is switched on as notebook 17 does it, which removes the variable once triton is imported.
    answer("17", "interpreted-read-from-the-environment",
           ("myaxpy.py", "INTERPRETED = isinstance(axpy_kernel, InterpretedFunction)",
            'INTERPRETED = __import__("os").environ.get("TRITON_INTERPRET") == "1"'), verdict=INTERPRETED_CPU_KERNEL),
    answer("17", "interpreted-read-from-the-knob",
           ("myaxpy.py", "INTERPRETED = isinstance(axpy_kernel, InterpretedFunction)",
            "INTERPRETED = triton.knobs.runtime.interpret"), verdict=SOLVED),
    answer("17", "no-launch", ("myaxpy.py", "    wrap_triton(axpy_kernel)[(triton.cdiv(n, BLOCK),)](", "    return "
                               "(alpha * x.to(torch.float64) + y.to(torch.float64)).to(x.dtype)\n    "
                               "wrap_triton(axpy_kernel)[(triton.cdiv(n, BLOCK),)]("),
           verdict="not solved yet: ex17::myaxpy on contiguous torch.float32 inputs of shape [37, 41] launched no "
           "Triton kernel under Triton's interpreter: the operator must run axpy_kernel through wrap_triton"),
    answer("17", "fallback-on-cuda", ("myaxpy.py", '@myaxpy.register_kernel("cpu")', '@myaxpy.register_kernel("cuda")'),
           verdict="not solved yet: without TRITON_INTERPRET, ex17::myaxpy has no kernel of its own on the CPU key: "
           "the dispatch table shows the default backend kernel there (triton_op's body, which launches the Triton "
           "kernel); yours is on CUDA; " + NO_CPU_FALLBACK),
    answer("17", "no-fallback", ("myaxpy.py", "if not INTERPRETED:\n    # No interpreter: Triton cannot run CPU tensors, "
                                 "so they take the same arithmetic written in PyTorch.\n    @myaxpy.register_kernel(\"cpu\")\n"
                                 "    def _(x, y, alpha):\n        check_inputs(x, y)\n"
                                 "        acc = torch.float64 if x.dtype == torch.float64 else torch.float32\n"
                                 "        # contiguous, as the fake kernel says and the Triton kernel writes it, whatever "
                                 "the inputs' strides\n"
                                 "        return (alpha * x.to(acc) + y.to(acc)).to(x.dtype).contiguous()\n", ""),
           verdict="not solved yet: without TRITON_INTERPRET, ex17::myaxpy has no kernel of its own on the CPU key: "
           "the dispatch table shows the default backend kernel there (triton_op's body, which launches the Triton "
           "kernel); " + NO_CPU_FALLBACK),
    # The fallback answers for the kernel in every dtype and layout:
    answer("17", "fallback-keeps-the-inputs-layout", ("myaxpy.py", ".to(x.dtype).contiguous()", ".to(x.dtype)"),
           verdict="not solved yet: without TRITON_INTERPRET (Triton cannot run CPU tensors), ex17::myaxpy on "
           "transposed torch.float32 inputs returned a tensor of strides [1, 5], but the fake kernel and the Triton "
           "kernel make it contiguous: torch.compile plans with the fake's layout; return the fallback's result "
           ".contiguous()"),
    answer("17", "fallback-returns-float32", ("myaxpy.py", ".to(x.dtype).contiguous()", ".contiguous()"),
           verdict="not solved yet: without TRITON_INTERPRET (Triton cannot run CPU tensors), ex17::myaxpy on "
           "contiguous torch.float16 inputs returned dtype torch.float32, expected torch.float16"),
    answer("17", "no-decomposition-anywhere", ("myaxpy.py", KEEP_WHOLE, "import torch._functorch.config\n\n"
                                               "torch._functorch.config.decompose_custom_triton_ops = False"),
           verdict=SOLVED),
    answer("17", "decomposed-on-cpu", ("myaxpy.py", KEEP_WHOLE, ""),
           verdict="not solved yet: opcheck's test_aot_dispatch_dynamic fails for ex17::myaxpy: RuntimeError: "
           "Attempted to access the data pointer on an invalid python storage.: " + NO_DECOMPOSITION),
    # Decomposed where a GPU is: CPU tensors still reach the Triton kernel (the check loads the answer as if a GPU
    # were present), which Triton cannot run on them.
    answer("17", "decomposed-where-a-gpu-is", ("myaxpy.py", KEEP_WHOLE, KEEP_WHOLE.replace(
        "@myaxpy.register_torch_dispatch(FunctionalTensorMode)\ndef _(", "def _keep_whole(") + "\n\n\nif not "
        "torch.cuda.is_available() or INTERPRETED:\n    myaxpy.register_torch_dispatch(FunctionalTensorMode, "
        "_keep_whole)\n"),
           verdict="not solved yet: opcheck's test_aot_dispatch_dynamic fails for ex17::myaxpy without "
           "TRITON_INTERPRET: RuntimeError: 0 active drivers ([]). There should only be one.: " + NO_DECOMPOSITION),
]


# -- 18: a call's key set and a computed table entry, against PyTorch's dispatcher on generated cases ------
_SOLUTION_18 = (REPO_ROOT / "solutions" / "18_build_the_dispatcher" / "dispatcher.py").read_text()


def _between(first: str, last: str) -> str:
    """The lines of solutions/18's dispatcher.py from the one that starts with `first` to the one that starts with
    `last`, both included."""
    start = _SOLUTION_18.index(first)
    end = _SOLUTION_18.index("\n", _SOLUTION_18.index(last, start)) + 1
    return _SOLUTION_18[start:end]


_KEY_SET = _between("    keys = tls.included", "    return keys - tls.excluded")  # the body of call_key_set
_ENTRY = _SOLUTION_18[_SOLUTION_18.index("# The alias keys in the order"):]  # ALIASES, COMPOSITES, computed_entry
_RULE_BY_RULE = """def computed_entry(op: Operator, key: str) -> Entry:
    kernels = op.kernels
    if key in kernels:
        return Entry(key, kernels[key], key, "kernel")
    functionality, backend = split_key(key)
    undefined = key == "Undefined"
    for alias in ("CompositeExplicitAutogradNonFunctional", "CompositeExplicitAutograd"):
        if alias in kernels and (undefined or alias_covers(alias, key)):
            return Entry(key, kernels[alias], alias, "default backend kernel")
    backend_has_kernel = (functionality == "AutogradFunctionality" and runtime_key("Dense", backend) in kernels) \\
        or "CompositeExplicitAutograd" in kernels
    if "CompositeImplicitAutograd" in kernels and (undefined or alias_covers("CompositeImplicitAutograd", key)) \\
            and not backend_has_kernel:
        return Entry(key, kernels["CompositeImplicitAutograd"], "CompositeImplicitAutograd", "math kernel")
    if "Autograd" in kernels and not undefined and alias_covers("Autograd", key):
        return Entry(key, kernels["Autograd"], "Autograd", "autograd kernel")
    if key in op.fallbacks:
        return Entry(key, op.fallbacks[key], "fallback", "backend fallback")
    return Entry(key, None, "", "missing")
"""
_IMPLICIT_CHECK = _between('        if alias == "CompositeImplicitAutograd"', "                continue")
_CPU_CALL = "not solved yet: For an operator with no kernels, called on a CPU tensor"
_NO_TENSORS = ("PyTorch raises NotImplementedError: There were no tensor arguments to this function (e.g., you passed "
               "an empty list of Tensors), but no fallback function is registered for schema op")
_IMPLICIT_HIDES = ("not solved yet: For an operator with kernels at CompositeExplicitAutograd and "
                   "CompositeImplicitAutograd, called on a CPU tensor, PyTorch runs the CompositeExplicitAutograd "
                   "kernel; yours runs the CompositeImplicitAutograd kernel: your computed_entry gives AutogradCPU the "
                   "kernel registered at CompositeImplicitAutograd where PyTorch's table holds PyTorch's fallback")
ANSWERS += [
    answer("18", "untouched-stub", base="exercises",
           verdict="not solved yet: write call_key_set in exercises/18_build_the_dispatcher/dispatcher.py"),
    # Right, written otherwise than solutions/: a fold over the tensors, and one if per rule of the table.
    answer("18", "key-set-with-reduce",
           ("dispatcher.py", _KEY_SET,
            "    return functools.reduce(operator.or_, tensors, tls.included) - tls.excluded\n"),
           ("dispatcher.py", "from myops.toy_dispatcher import", "import functools\nimport operator\n\n"
                                                                 "from myops.toy_dispatcher import"),
           verdict=SOLVED),
    answer("18", "entry-rule-by-rule", ("dispatcher.py", _ENTRY, _RULE_BY_RULE), verdict=SOLVED),
    # Wrong key sets: the exclude set, the include set, the order of the two, and what removing keys removes.
    answer("18", "exclude-set-ignored", ("dispatcher.py", "    return keys - tls.excluded\n", "    return keys\n"),
           verdict="not solved yet: For an operator with a kernel at CompositeImplicitAutograd, called on a CPU "
           "tensor of a __torch_dispatch__ subclass, under inference_mode, PyTorch runs the Python fallback, which "
           "calls __torch_dispatch__; yours runs the CompositeImplicitAutograd kernel: your call_key_set gives "
           "KeySet(CPU, BackendSelect, Python, ADInplaceOrView, AutogradCPU, AutocastCPU, PythonTLSSnapshot) where "
           "PyTorch's key set is KeySet(CPU, BackendSelect, Python, ADInplaceOrView, PythonTLSSnapshot)"),
    answer("18", "include-set-ignored", ("dispatcher.py", "    keys = tls.included\n", "    keys = KeySet()\n"),
           verdict=f"{_CPU_CALL}, including Meta, PyTorch raises NotImplementedError: op: attempted to run this "
           "operator with Meta tensors, but there was no fake impl or Meta kernel registered; yours raises "
           "NotImplementedError: Could not run 'op' with arguments from the 'CPU' backend: your call_key_set gives "
           "KeySet(CPU, ADInplaceOrView, AutogradCPU) where PyTorch's key set is KeySet(CPU, Meta, BackendSelect, "
           "ADInplaceOrView, AutogradCPU, AutogradMeta)"),
    answer("18", "backend-bits-excluded",
           ("dispatcher.py", "    return keys - tls.excluded\n",
            "    return KeySet(keys.functionalities - tls.excluded.functionalities, keys.backends - "
            "tls.excluded.backends)\n"),
           verdict=f"{_CPU_CALL}, excluding CPU, {_NO_TENSORS}; yours raises NotImplementedError: Could not run 'op': "
           "the key set holds AutogradFunctionality but no backend bit, so it names no runtime key (no call of "
           "PyTorch's holds such a key set): your call_key_set gives KeySet(BackendSelect, ADInplaceOrView, "
           "AutogradFunctionality(no backend)) where PyTorch's key set is KeySet(BackendSelect, ADInplaceOrView, "
           "AutogradCPU)"),
    answer("18", "exclude-before-include",
           ("dispatcher.py", _KEY_SET, "    keys = KeySet()\n    for tensor in tensors:\n        keys = keys | tensor\n"
                                       "    return (keys - tls.excluded) | tls.included\n"),
           verdict=f"{_CPU_CALL}, excluding CPU, including CPU, {_NO_TENSORS}; yours raises NotImplementedError: "
           "Could not run 'op' with arguments from the 'CPU' backend: your call_key_set gives KeySet(CPU, "
           "BackendSelect, ADInplaceOrView, AutogradCPU) where PyTorch's key set is KeySet(BackendSelect, "
           "ADInplaceOrView, AutogradCPU)"),
    # Wrong entries: the alias precedence, CompositeImplicitAutograd at an autograd key, Undefined, fallthroughs.
    answer("18", "autograd-before-implicit",
           ("dispatcher.py", '           ("CompositeImplicitAutograd", "math kernel"),\n'
                             '           ("Autograd", "autograd kernel"))',
            '           ("Autograd", "autograd kernel"),\n           ("CompositeImplicitAutograd", "math kernel"))'),
           verdict="not solved yet: For an operator with kernels at Autograd and CompositeImplicitAutograd, called on "
           "a CPU tensor, PyTorch runs the CompositeImplicitAutograd kernel; yours runs the Autograd kernel: your "
           "computed_entry gives AutogradCPU the kernel registered at Autograd where PyTorch's table holds the "
           "kernel registered at CompositeImplicitAutograd"),
    answer("18", "explicit-before-nonfunctional",
           ("dispatcher.py", 'ALIASES = (("CompositeExplicitAutogradNonFunctional", "default backend kernel"),\n'
                             '           ("CompositeExplicitAutograd", "default backend kernel"),',
            'ALIASES = (("CompositeExplicitAutograd", "default backend kernel"),\n'
            '           ("CompositeExplicitAutogradNonFunctional", "default backend kernel"),'),
           verdict="not solved yet: For an operator with kernels at CompositeExplicitAutogradNonFunctional and "
           "CompositeExplicitAutograd, called on a CPU tensor, PyTorch runs the CompositeExplicitAutogradNonFunctional "
           "kernel; yours runs the CompositeExplicitAutograd kernel: your computed_entry gives CPU the kernel "
           "registered at CompositeExplicitAutograd where PyTorch's table holds the kernel registered at "
           "CompositeExplicitAutogradNonFunctional"),
    answer("18", "implicit-fills-every-autograd-key", ("dispatcher.py", _IMPLICIT_CHECK, ""), verdict=_IMPLICIT_HIDES),
    answer("18", "implicit-yields-to-the-backend-only",
           ("dispatcher.py", ' or "CompositeExplicitAutograd" in op.kernels:', ":"), verdict=_IMPLICIT_HIDES),
    answer("18", "undefined-left-empty",
           ("dispatcher.py", 'covered = alias in COMPOSITES if key == "Undefined" else alias_covers(alias, key)',
            'covered = key != "Undefined" and alias_covers(alias, key)'),
           verdict="not solved yet: For an operator with a kernel at CompositeExplicitAutograd, called on a CPU "
           "tensor, excluding CPU, PyTorch runs the CompositeExplicitAutograd kernel; yours raises "
           "NotImplementedError: There were no tensor arguments to this function (e.g., you passed an empty list of "
           "Tensors), but no fallback function is registered for schema op: your computed_entry gives Undefined "
           "nothing where PyTorch's table holds the kernel registered at CompositeExplicitAutograd"),
    answer("18", "fallthrough-made-a-kernel",
           ("dispatcher.py", '        return Entry(key, op.kernels[key], key, "kernel")',
            '        return Entry(key, Kernel(op.kernels[key].name), key, "kernel")'),
           ("dispatcher.py", "from myops.toy_dispatcher import", "from myops.toy_dispatcher import Kernel\n"
                                                                 "from myops.toy_dispatcher import"),
           verdict="not solved yet: For an operator with a fallthrough at ADInplaceOrView, called on a CPU tensor, "
           "PyTorch raises NotImplementedError: Could not run 'op' with arguments from the 'CPU' backend; yours runs "
           "the ADInplaceOrView kernel: your computed_entry gives ADInplaceOrView the kernel registered at "
           "ADInplaceOrView where PyTorch's table holds a fallthrough registered at ADInplaceOrView"),
    answer("18", "fallthrough-registration-skipped",
           ("dispatcher.py", "    if key in op.kernels:",
            "    if key in op.kernels and not op.kernels[key].fallthrough:"),
           verdict=f"not solved yet: For an operator with a fallthrough at CPU, called on a CPU tensor, {_NO_TENSORS}; "
           "yours raises NotImplementedError: Could not run 'op' with arguments from the 'CPU' backend: your "
           "computed_entry gives CPU nothing where PyTorch's table holds a fallthrough registered at CPU"),
    # Right kernels, wrong words: no call reads an entry's `why`; the tables' comparison does.
    answer("18", "why-ignored",
           ("dispatcher.py", '        return Entry(key, op.kernels[key], key, "kernel")',
            '        return Entry(key, op.kernels[key], key, "whatever")'),
           verdict="not solved yet: every generated call runs what PyTorch runs, but the table of myops::myadd "
           'differs at CPU: PyTorch\'s entry is "kernel" from myadd.cpp, yours "whatever" from myadd.cpp'),
    answer("18", "the-toys-own-imported",
           ("dispatcher.py", "from myops.toy_dispatcher import", "from myops.toy_dispatcher import computed_entry as "
                                                                 "toys_entry\nfrom myops.toy_dispatcher import"),
           ("dispatcher.py", '    """What `op`\'s dispatch table holds at runtime key `key`."""\n',
            '    """What `op`\'s dispatch table holds at runtime key `key`."""\n    return toys_entry(op, key)\n'),
           verdict="not solved yet: your answer calls the toy's own computed_entry "
           "(myops.toy_dispatcher.computed_entry), which the check switches off: write the rule yourself"),
    # -- 19: a fake quantizer's two Python objects, compiled, exported and saved --------------------------------
    answer("19", "untouched-stub", base="exercises",
           verdict="not solved yet: QuantSpec is not registered as an opaque type: register_custom_class(QuantSpec, "
           "typ=\"constant\") (fixed for a run, so compiled code may bake it in)"),
    # A frozen dataclass writes __eq__ and __hash__ over its fields.
    answer("19", "spec-a-frozen-dataclass",
           ("fake_quant.py", _SPEC_CLASS, "@dataclass(frozen=True)\nclass QuantSpec:\n    qmin: int\n    qmax: int\n"),
           ("fake_quant.py", "import torch\n", "from dataclasses import dataclass\n\nimport torch\n"), verdict=SOLVED),
    answer("19", "observe-in-place-ops",
           ("fake_quant.py", "amax.copy_(torch.maximum(amax * observer.decay, x.abs().amax().to(amax.dtype)))",
            "amax.mul_(observer.decay).clamp_min_(x.abs().amax().to(amax.dtype))"),
           ("fake_quant.py", "return torch.empty_like(x)", "return x.new_empty_strided(x.shape, x.stride())"),
           verdict=SOLVED),
    answer("19", "no-fake", ("fake_quant.py", "@fake_quantize.register_fake\n", ""),
           verdict="not solved yet: ex19::fake_quantize has no fake kernel, which torch.compile and torch.export "
           "trace with: register one (@fake_quantize.register_fake) that returns an empty output like the real one"),
    answer("19", "fake-always-float32", ("fake_quant.py", "return torch.empty_like(x)", "return torch.empty(x.shape)"),
           verdict="not solved yet: on a transposed float64 [3, 8], ex19::fake_quantize's fake kernel returns dtype "
           "torch.float32 where the real one returns torch.float64: the fake must return what the kernel returns "
           "(torch.empty_like(x) keeps x's shape, dtype, device and strides)"),
    answer("19", "spec-without-hash", ("fake_quant.py", _HASH, ""),
           verdict=f"not solved yet: importing {_EX19_FILE} failed: register_custom_class refused QuantSpec: a "
           "constant class needs __hash__ (compile's fake-tensor cache keys on it), and defining __eq__ sets "
           "__hash__ to None: hash the fields __eq__ compares"),
    answer("19", "spec-without-fx-repr", ("fake_quant.py", "\n" + _FX_REPR, ""),
           verdict=f"not solved yet: importing {_EX19_FILE} failed: register_custom_class refused QuantSpec: a "
           "constant class needs __fx_repr__, which writes it into the graph: return (\"QuantSpec(...)\", "
           "{\"QuantSpec\": QuantSpec}), source that builds an equal object and the names it uses"),
    answer("19", "fx-repr-swaps-the-bounds", ("fake_quant.py", 'f"QuantSpec({self.qmin!r}, {self.qmax!r})"',
                                              'f"QuantSpec({self.qmax!r}, {self.qmin!r})"'),
           verdict="not solved yet: QuantSpec(-8, 7).__fx_repr__() gives 'QuantSpec(7, -8)', which builds another "
           "QuantSpec: the graph would round onto another grid"),
    answer("19", "state-written-undeclared", ("fake_quant.py", 'mutates_args=("amax",)', "mutates_args=()"),
           verdict="not solved yet: ex19::observe_ writes amax but does not declare it: torch.compile and "
           "torch.export would take amax for unchanged; custom_op(..., mutates_args=(\"amax\",))"),
    answer("19", "observer-without-base", ("fake_quant.py", "class Observer(CustomClassBase):", "class Observer:"),
           verdict=f"not solved yet: importing {_EX19_FILE} failed: register_custom_class refused Observer: a "
           "symbolic class must subclass torch._custom_class_base.CustomClassBase (the fake object compile and "
           "export trace with passes isinstance through it): class Observer(CustomClassBase)"),
    answer("19", "decay-guarded", ("fake_quant.py", 'register_custom_class(Observer, typ="symbolic")',
                                   'register_custom_class(Observer, typ="symbolic", guard_fn=lambda o: [o.decay])'),
           verdict="not solved yet: torch.compile(fullgraph=True, backend=\"aot_eager\") of observe_ then "
           "fake_quantize, after observer.decay = 0.9: 2 compiles so far, expected 1; a new decay compiled again, "
           "though a symbolic object is read when the graph runs and only what its guard_fn returns recompiles: "
           "register Observer without a guard_fn"),
    answer("19", "spec-symbolic", ("fake_quant.py", "class QuantSpec:", "class QuantSpec(CustomClassBase):"),
           ("fake_quant.py", 'register_custom_class(QuantSpec, typ="constant")',
            'register_custom_class(QuantSpec, typ="symbolic")'),
           verdict="not solved yet: QuantSpec is registered as symbolic, but it is fixed for a run, so compiled code "
           "may bake it in: register it typ=\"constant\""),
    # The second call's range is half the first's: values beyond it must clamp to the grid's ends.
    answer("19", "no-clamp", ("fake_quant.py", ".round().clamp(spec.qmin, spec.qmax) * scale", ".round() * scale"),
           verdict="not solved yet: ex19::fake_quantize on a float32 [4, 5] with QuantSpec(-8, 7) returned wrong "
           "values: at index [2, 0] expected 0.883714, got 1.76743"),
]


def answer_tree(tmp_path, number: str, edits, base: str = "solutions"):
    """Exercise `number`'s folder of `base`, edited by `edits` ((file, old, new): each `old` must occur in the
    file exactly once), in a tree of its own; returns the tree and a build folder named after its content, so
    that a warm run compiles nothing (tests/test_exercises.py's broken answers are made here too)."""
    folder = exercises.folder(number)
    root = tmp_path / "answer"
    shutil.copytree(REPO_ROOT / base / folder, root / folder)
    for file, old, new in edits:
        path = root / folder / file
        text = path.read_text()
        assert text.count(old) == 1, f"{number}: {old!r} is not in {base}/{folder}/{file} exactly once"
        path.write_text(text.replace(old, new))
    content = b"".join(p.read_bytes() for p in sorted((root / folder).iterdir()))
    return root, BUILD_DIR / "test-exercise-answers" / hashlib.sha256(content).hexdigest()[:12]


def judge(case: Answer, result: exercises.Verdict) -> None:
    """`result` is the verdict `case` must get on this machine."""
    if case.number == "03" and CUDA_SKIP:  # no CUDA toolkit: nothing is built, the checker says so
        assert result.status == "skipped" and result.message.startswith("cannot be checked here:"), result.message
        return
    expected = case.verdict
    if not torch.cuda.is_available():
        expected = case.without_gpu or expected
    elif torch.cuda.device_count() == 1:
        expected = case.with_one_gpu or expected
    if expected.startswith("re:"):
        assert re.fullmatch(expected[3:], result.message), result.message
    else:
        assert result.message == expected
    assert (result.status == "solved") == (expected in (SOLVED, NOT_RUN))


# Exercise 03's answers whose verdict a GPU decides, and the reference solution: judged by the GPU run
# (`python -m benchmarks.gpu` runs the tests marked cuda) wherever a GPU is present, here without one.
ON_A_GPU = [case for case in ANSWERS if case.without_gpu] + [answer("03", "reference-solution", verdict=SOLVED)]


@pytest.mark.parametrize("case", ANSWERS, ids=str)
def test_each_answer_gets_its_verdict(tmp_path, case):
    if case in ON_A_GPU and torch.cuda.is_available():
        pytest.skip("judged on the GPU by test_exercise_03_on_a_gpu")
    root, build = answer_tree(tmp_path, case.number, case.edits, case.base)
    judge(case, exercises.verdict(case.number, root=root, build_dir=build))


@pytest.fixture(scope="module")
def verdicts_on_a_gpu(tmp_path_factory):
    """Every case of ON_A_GPU judged at once: each is a .cu build of its own (about half a minute), side by side."""
    def verdict(case):
        root, build = answer_tree(tmp_path_factory.mktemp(str(case)), case.number, case.edits, case.base)
        return exercises.verdict(case.number, root=root, build_dir=build)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return dict(zip(map(str, ON_A_GPU), pool.map(verdict, ON_A_GPU)))


@needs_gpu
@pytest.mark.parametrize("case", ON_A_GPU, ids=str)
def test_exercise_03_on_a_gpu(verdicts_on_a_gpu, case):
    judge(case, verdicts_on_a_gpu[str(case)])


def test_the_gpu_run_judges_exercise_03():
    """`python -m benchmarks.gpu` runs the tests marked cuda: exercise 03's check on the reference solution, on a
    capped grid without a grid-stride loop and on a stream taken before the device guard among them."""
    from benchmarks import gpu

    assert gpu.CUDA_TESTS == ("-m", "cuda", "tests")
    assert "cuda" in {mark.name for mark in test_exercise_03_on_a_gpu.pytestmark}
    assert {"03-reference-solution", "03-capped-grid-without-stride", "03-stream-before-guard"} <= {
        str(case) for case in ON_A_GPU}


def test_a_wrong_value_is_shown_with_the_digits_that_tell_it_apart():
    import torch

    from myops.exercises.expect import expect_close
    from myops.exercises.runner import Unsolved

    expected = torch.tensor([1.0, 1.1611000001], dtype=torch.float64)
    with pytest.raises(Unsolved, match=r"at index \[1\] expected 1\.1611000001, got 1\.1611$"):
        expect_close("op", torch.tensor([1.0, 1.1611], dtype=torch.float64), expected, rtol=0, atol=0)
    with pytest.raises(Unsolved, match=r"expected 2, got 2\.5$"):  # six digits where they suffice
        expect_close("op", torch.tensor([2.5]), torch.tensor([2.0]))
