// Exercise 12, part 1 (notebook 12_boxed_kernels_and_backends): one boxed kernel that serves three operators
// on the CPU; part 2, in on_device.cpp, brings them to the course's device. Checked by
// myops/exercises/ex12_boxed_kernels_and_backends.py.
//
// A boxed kernel has one signature for every operator, void(const c10::OperatorHandle&, torch::jit::Stack*): its
// arguments are the last N IValues of the stack, N = op.schema().arguments().size(); it pops them and pushes
// its results. The schemas of three operators are given:
//   ex12::sum2(Tensor a, Tensor b) -> Tensor                    a + b
//   ex12::sum3(Tensor a, Tensor b, Tensor c) -> Tensor          a + b + c
//   ex12::scaled_sum(Tensor a, Tensor b, float scale) -> Tensor (a + b) * scale
// Your part:
//   1. sum_boxed: read the arguments (torch::jit::last), add up every Tensor, multiply by every float
//      (IValue::isTensor / isDouble), pop them (torch::jit::drop) and push the result (torch::jit::push).
//      Tensors have the same shape and dtype; at::Tensor's add and mul methods do the arithmetic.
//   2. Register it for all three operators on the CPU key:
//      m.impl("sum2", torch::CppFunction::makeFromBoxedFunction<&sum_boxed>());  and the same for the others.
// Check your answer with:  python -m myops.exercises check 12
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch/library.h>

TORCH_LIBRARY(ex12, m) {
  m.def("sum2(Tensor a, Tensor b) -> Tensor");
  m.def("sum3(Tensor a, Tensor b, Tensor c) -> Tensor");
  m.def("scaled_sum(Tensor a, Tensor b, float scale) -> Tensor");
}

namespace {

void sum_boxed(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  // TODO
  TORCH_CHECK(false, "not solved yet: write sum_boxed in exercises/12_boxed_kernels_and_backends/sum_boxed.cpp");
}

}  // namespace

TORCH_LIBRARY_IMPL(ex12, CPU, m) {
  // TODO: register sum_boxed for sum2, sum3 and scaled_sum here.
}
