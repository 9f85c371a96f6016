// Exercise 14 (notebook 14_stable_abi_and_wheels): exercise 02's mymul on the LibTorch stable ABI.
// Checked by myops/exercises/ex14_stable_abi_and_wheels.py.
//
// The checker compiles this file with -DTORCH_TARGET_VERSION for torch 2.13 (stable/flags.py), so only what
// 2.13's stable ABI offers compiles, and reads the library's imports with nm: no mangled c10::/at::/torch::
// symbol may be among them, only the C shim. Your part:
//   1. The body of mymul_cpu: a new contiguous tensor out = self * other, elementwise, for float32 and
//      float64 (THO_DISPATCH_V2 with AT_FLOATING_TYPES), inputs of any strides (torch::stable::contiguous),
//      0-dim and empty tensors; the arithmetic yourself, through data pointers. Include only headers of
//      torch/csrc/stable/ and torch/headeronly/.
//   2. Register it for the CPU key: m.impl("mymul", TORCH_BOX(&mymul_cpu)) in the STABLE_TORCH_LIBRARY_IMPL
//      block at the end.
// Check your answer with:  python -m myops.exercises check 14
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/Dispatch_v2.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include <cstdint>

STABLE_TORCH_LIBRARY(ex14, m) {
  m.def("mymul(Tensor self, Tensor other) -> Tensor");
}

namespace {

using torch::stable::Tensor;

Tensor mymul_cpu(const Tensor& self, const Tensor& other) {
  STD_TORCH_CHECK(self.sizes().equals(other.sizes()), "ex14::mymul: expected tensors of the same shape");
  STD_TORCH_CHECK(self.scalar_type() == other.scalar_type(), "ex14::mymul: expected tensors of the same dtype");
  // TODO: replace this line with the kernel.
  STD_TORCH_CHECK(false, "not solved yet: write the body of mymul_cpu in exercises/14_stable_abi_and_wheels/mymul.cpp");
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(ex14, CPU, m) {
  // TODO: register mymul_cpu as the kernel of "mymul" here.
}
