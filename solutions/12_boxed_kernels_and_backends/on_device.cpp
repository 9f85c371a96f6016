// Solution of exercise 12, part 2 (notebook 12_boxed_kernels_and_backends): the three operators on the
// course's device (PrivateUse1), through their CPU kernel, with one boxed kernel.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch/library.h>

#include <optional>

namespace {

void through_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& arguments = op.schema().arguments();
  const size_t first = stack->size() - arguments.size();
  // The call reached PrivateUse1, so one tensor argument at least is on the device: find which device.
  std::optional<c10::Device> device;
  for (size_t i = first; i < stack->size() && !device; ++i) {
    if ((*stack)[i].isTensor() && (*stack)[i].toTensor().device().is_privateuseone()) {
      device = (*stack)[i].toTensor().device();
    }
  }
  TORCH_INTERNAL_ASSERT(device.has_value(), op.schema().name(), ": reached PrivateUse1 without a device tensor");
  for (size_t i = first; i < stack->size(); ++i) {
    if (!(*stack)[i].isTensor()) {
      continue;
    }
    // Checked before copying: on the CPU, a mix of devices would no longer show.
    const at::Tensor& tensor = (*stack)[i].toTensor();
    TORCH_CHECK(tensor.device() == *device, op.schema().name(), ": argument '", arguments[i - first].name(),
                "' is on ", tensor.device(), ", the others on ", *device, "; move it there with .to(\"", *device,
                "\")");
    (*stack)[i] = tensor.cpu();
  }
  // Straight to the CPU kernel: a new call (op.callBoxed) would go through the whole table again.
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  for (size_t i = stack->size() - op.schema().returns().size(); i < stack->size(); ++i) {
    (*stack)[i] = (*stack)[i].toTensor().to(*device);
  }
}

}  // namespace

TORCH_LIBRARY_IMPL(ex12, PrivateUse1, m) {
  m.impl("sum2", torch::CppFunction::makeFromBoxedFunction<&through_cpu>());
  m.impl("sum3", torch::CppFunction::makeFromBoxedFunction<&through_cpu>());
  m.impl("scaled_sum", torch::CppFunction::makeFromBoxedFunction<&through_cpu>());
}
