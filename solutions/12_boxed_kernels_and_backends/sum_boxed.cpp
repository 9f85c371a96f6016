// Solution of exercise 12, part 1 (notebook 12_boxed_kernels_and_backends): one boxed kernel, three operators.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch/library.h>

#include <optional>

TORCH_LIBRARY(ex12, m) {
  m.def("sum2(Tensor a, Tensor b) -> Tensor");
  m.def("sum3(Tensor a, Tensor b, Tensor c) -> Tensor");
  m.def("scaled_sum(Tensor a, Tensor b, float scale) -> Tensor");
}

namespace {

void sum_boxed(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  // The schema says how many of the stack's last values are this call's arguments.
  const size_t num_arguments = op.schema().arguments().size();
  std::optional<at::Tensor> sum;
  double scale = 1.0;
  for (const c10::IValue& argument : torch::jit::last(*stack, num_arguments)) {
    if (argument.isTensor()) {
      sum = sum ? sum->add(argument.toTensor()) : argument.toTensor().clone();
    } else if (argument.isDouble()) {
      scale *= argument.toDouble();
    } else {
      TORCH_CHECK(false, op.schema().name(), ": sum_boxed handles Tensor and float arguments, got ", argument.tagKind());
    }
  }
  TORCH_CHECK(sum.has_value(), op.schema().name(), ": sum_boxed needs at least one Tensor argument");
  torch::jit::drop(*stack, num_arguments);  // the arguments are consumed ...
  torch::jit::push(*stack, scale == 1.0 ? *sum : sum->mul(scale));  // ... and the one return takes their place
}

}  // namespace

TORCH_LIBRARY_IMPL(ex12, CPU, m) {
  m.impl("sum2", torch::CppFunction::makeFromBoxedFunction<&sum_boxed>());
  m.impl("sum3", torch::CppFunction::makeFromBoxedFunction<&sum_boxed>());
  m.impl("scaled_sum", torch::CppFunction::makeFromBoxedFunction<&sum_boxed>());
}
