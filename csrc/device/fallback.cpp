// What every operator without a kernel for the device gets: a fallback for the whole PrivateUse1
// key, written (like every fallback) as a boxed kernel, since it must accept any operator.
//
// The dispatcher consults a backend fallback last: a kernel registered for PrivateUse1 itself (the
// other files of this folder) comes first, then a composite kernel of the operator (for example
// aten::mul.Tensor's, which calls aten::mul.out), and only then the fallback. So the operator named
// in the error is the one that actually reached the device.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/DeviceType.h>
#include <torch/library.h>

namespace {

// BEGIN fallback
void device_fallback(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  // NotImplementedError in Python, like the dispatcher's own "Could not run ..." error, so code that
  // catches that still does.
  TORCH_CHECK_NOT_IMPLEMENTED(false, op.schema().operator_name(), ": no kernel for the ", c10::get_privateuse1_backend(),
                              " device, which has kernels only to create, copy and view tensors, for aten::add and "
                              "for the myops operators; move the tensors to the CPU with .cpu() and call it there");
}
// END fallback

}  // namespace

// BEGIN registration
// `_` instead of a namespace: every operator of every library, for this one dispatch key.
TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&device_fallback>());
}
// END registration
