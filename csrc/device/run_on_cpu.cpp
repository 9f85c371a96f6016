// One kernel for three operators: myops::myadd, myops::mymatmul and myops::myrmsnorm on the device
// run on the CPU. The kernel is written against the *boxed* calling convention, so it knows nothing
// about any one operator's signature.
//
// BEGIN note
// NOTE [ Unboxed and boxed kernels ]
// An unboxed kernel is a C++ function with the operator's own signature,
// at::Tensor(const at::Tensor&, const at::Tensor&): fast, but one function per signature. A boxed
// kernel has one signature for every operator: void(const c10::OperatorHandle&, torch::jit::Stack*).
// The arguments arrive on the stack as IValues (a tagged union: Tensor, double, int, list, None, ...),
// the handle's schema says what they are, and the kernel leaves the results on the stack in their
// place. That is how one function can serve every operator: PyTorch's own fallbacks (autograd's
// NotImplemented fallback, the CPU fallback of out-of-tree backends) are boxed for this reason.
// END note
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch/library.h>

namespace {

// True if no argument or result of the operator aliases another (no Tensor(a) or Tensor(a!)).
bool is_functional(const c10::FunctionSchema& schema) {
  for (const auto& list : {schema.arguments(), schema.returns()}) {
    for (const auto& argument : list) {
      if (argument.alias_info() != nullptr) {
        return false;
      }
    }
  }
  return true;
}

// Moves the tensors inside one IValue (a Tensor, or a list of them) to `device`, in place.
void move_tensors(c10::IValue& value, c10::Device device) {
  if (value.isTensor()) {
    value = value.toTensor().to(device);
  } else if (value.isTensorList()) {
    c10::List<at::Tensor> tensors = value.toTensorList();
    for (size_t i = 0; i < tensors.size(); ++i) {
      tensors.set(i, tensors.get(i).to(device));
    }
    value = std::move(tensors);
  }
}

// BEGIN kernel
void run_on_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  // A copy would take the writes of an in-place operator and the aliasing of a view.
  TORCH_CHECK(is_functional(schema), schema.operator_name(),
              ": writes into or returns a view of its arguments, which the device's run-on-CPU kernel "
              "cannot do on copies; give the operator a kernel of its own for PrivateUse1");

  // The arguments are the last arguments().size() entries of the stack, in schema order.
  const size_t num_arguments = schema.arguments().size();
  const size_t first = stack->size() - num_arguments;
  std::optional<c10::Device> device;
  for (size_t i = 0; i < num_arguments; ++i) {
    const c10::IValue& value = (*stack)[first + i];
    if (value.isTensor() && value.toTensor().device().is_privateuseone()) {
      device = value.toTensor().device();
      break;
    }
  }
  TORCH_INTERNAL_ASSERT(device.has_value(), schema.operator_name(), ": no tensor argument on the device");
  // Copying every tensor to the CPU would also make a mix of devices look fine to the CPU kernel.
  for (size_t i = 0; i < num_arguments; ++i) {
    const c10::IValue& value = (*stack)[first + i];
    TORCH_CHECK(!value.isTensor() || !value.toTensor().defined() || value.toTensor().device() == *device,
                schema.operator_name(), ": expected every tensor on ", *device, ", got argument '",
                schema.arguments()[i].name(), "' on ", value.toTensor().device(), "; move it with .to(\"",
                *device, "\")");
  }

  for (size_t i = 0; i < num_arguments; ++i) {
    move_tensors((*stack)[first + i], c10::kCPU);
  }
  // Run the operator's CPU kernel. A redispatch goes straight to the given key; a fresh call
  // (op.callBoxed) would start again at the top of the table (autocast, autograd) for a call that
  // has already been through it.
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);

  // The CPU kernel replaced the arguments by returns().size() results.
  const size_t num_returns = schema.returns().size();
  for (size_t i = stack->size() - num_returns; i < stack->size(); ++i) {
    move_tensors((*stack)[i], *device);
  }
}
// END kernel

}  // namespace

// BEGIN registration
// makeFromBoxedFunction wraps the boxed kernel. A call from Python through torch.ops arrives on a
// stack already; a typed call from C++ (myops::myadd) is pushed onto one by the dispatcher first.
TORCH_LIBRARY_IMPL(myops, PrivateUse1, m) {
  m.impl("myadd", torch::CppFunction::makeFromBoxedFunction<&run_on_cpu>());
  m.impl("mymatmul", torch::CppFunction::makeFromBoxedFunction<&run_on_cpu>());
  m.impl("myrmsnorm", torch::CppFunction::makeFromBoxedFunction<&run_on_cpu>());
}
// END registration
