// Exercise 12, part 2 (notebook 12_boxed_kernels_and_backends): the same three operators on the course's
// device, the PrivateUse1 key of csrc/device/ (the check loads that layer), through their CPU kernel.
// Checked by myops/exercises/ex12_boxed_kernels_and_backends.py, after part 1 (sum_boxed.cpp).
//
// Without a kernel of its own on PrivateUse1, ex12::sum2 on device tensors reaches the device's fallback for
// the whole key, which refuses every operator it does not know. Your part:
//   1. through_cpu, one boxed kernel for all three operators:
//      a. every tensor argument must be on the device of the call; otherwise raise an error (TORCH_CHECK)
//         that names the operator (op.schema().name()) and the argument, and says how to fix the call;
//      b. replace each tensor argument on the stack by a CPU copy (tensor.cpu());
//      c. run the operator's CPU kernel, sum_boxed, with a *redispatch*:
//         op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack). A new call (op.callBoxed)
//         would start again at the top of the dispatch table, which this call has been through already;
//      d. move the result(s), the last op.schema().returns().size() values of the stack, back to the device.
//   2. Register it for all three operators in the TORCH_LIBRARY_IMPL(ex12, PrivateUse1, m) block, with
//      torch::CppFunction::makeFromBoxedFunction.
// Check your answer with:  python -m myops.exercises check 12
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch/library.h>

namespace {

[[maybe_unused]] void through_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  // TODO
  TORCH_CHECK(false, "not solved yet: write through_cpu in exercises/12_boxed_kernels_and_backends/on_device.cpp");
}

}  // namespace

TORCH_LIBRARY_IMPL(ex12, PrivateUse1, m) {
  // TODO: register through_cpu for sum2, sum3 and scaled_sum here.
}
