// Two classic mistakes in autograd kernels (schemas in schema.cpp of this folder):
//
//   mistakes::add_without_guard  the forward calls the operator again without excluding autograd:
//                                the call re-enters this autograd kernel until the stack overflows.
//   mistakes::add_indexed        the 2020 tutorial's `apply(...)[0]`: apply() returns a Tensor, so [0]
//                                selects its first row and the caller silently gets the wrong shape.
//   mistakes::add_with_deprecated_guard  the 2020 tutorial's at::AutoNonVariableTypeMode: it still
//                                compiles and excludes autograd, and warns at run time (once per process).
//   mistakes::add_inplace_with_functional_guard  an in-place operator's autograd kernel with the guard of
//                                a functional one: AutoDispatchBelowADInplaceOrView skips ADInplaceOrView too,
//                                so nothing bumps the version counter of the written tensor.
//   mistakes::twice              (for opcheck, see opcheck.cpp) the backward calls an operator that
//                                has no Meta kernel: eager autograd works, tracing the backward cannot.
#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include "myops.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor add_without_guard(const at::Tensor& self, const at::Tensor& other) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("mistakes::add_without_guard", "")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
  return op.call(self, other);  // BUG: autograd is still in the key set, so this re-enters below
}

at::Tensor add_below_autograd(const at::Tensor& self, const at::Tensor& other) {
  at::AutoDispatchBelowADInplaceOrView guard;
  return myops::myadd(self, other);
}

// An addition whose forward is `kForward`; the backward is right in both cases.
template <at::Tensor (*kForward)(const at::Tensor&, const at::Tensor&)>
class AddFunction : public torch::autograd::Function<AddFunction<kForward>> {
 public:
  static at::Tensor forward(AutogradContext* /*ctx*/, const at::Tensor& self, const at::Tensor& other) {
    return kForward(self, other);
  }
  static variable_list backward(AutogradContext* /*ctx*/, variable_list grad_outputs) {
    return {grad_outputs[0], grad_outputs[0]};
  }
};

// BEGIN without_guard
at::Tensor add_without_guard_autograd(const at::Tensor& self, const at::Tensor& other) {
  return AddFunction<add_without_guard>::apply(self, other);
}
// END without_guard

// BEGIN indexed
at::Tensor add_indexed_autograd(const at::Tensor& self, const at::Tensor& other) {
  return AddFunction<add_below_autograd>::apply(self, other)[0];  // BUG: row 0 of the result
}
// END indexed

// BEGIN deprecated_guard
at::Tensor add_with_deprecated_guard_autograd(const at::Tensor& self, const at::Tensor& other) {
  at::AutoNonVariableTypeMode guard;  // 2020; today: at::AutoDispatchBelowADInplaceOrView
  return myops::myadd(self, other);
}
// END deprecated_guard

// BEGIN functional_guard_in_place
void add_inplace_with_functional_guard_autograd(at::Tensor& self, const at::Tensor& other) {
  // BUG: right for a functional operator (its autograd kernel did all autograd's bookkeeping), wrong for an
  // in-place one: the ADInplaceOrView kernel below, which bumps self's version, is skipped as well.
  at::AutoDispatchBelowADInplaceOrView guard;
  myops::myadd_inplace(self, other);
}
// END functional_guard_in_place

class TwiceFunction : public torch::autograd::Function<TwiceFunction> {
 public:
  static at::Tensor forward(AutogradContext* /*ctx*/, const at::Tensor& self) {
    at::AutoDispatchBelowADInplaceOrView guard;
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("mistakes::twice", "")
                               .typed<at::Tensor(const at::Tensor&)>();
    return op.call(self);
  }
  // BEGIN twice_backward
  static variable_list backward(AutogradContext* /*ctx*/, variable_list grad_outputs) {
    static const auto twice_backward = c10::Dispatcher::singleton()
                                           .findSchemaOrThrow("mistakes::twice_backward", "")
                                           .typed<at::Tensor(const at::Tensor&)>();
    return {twice_backward.call(grad_outputs[0])};  // BUG: twice_backward has no Meta kernel
  }
  // END twice_backward
};

at::Tensor twice_autograd(const at::Tensor& self) {
  return TwiceFunction::apply(self);
}

}  // namespace

TORCH_LIBRARY_IMPL(mistakes, Autograd, m) {
  m.impl("twice", &twice_autograd);
  m.impl("add_with_deprecated_guard", &add_with_deprecated_guard_autograd);
  m.impl("add_without_guard", &add_without_guard_autograd);
  m.impl("add_indexed", &add_indexed_autograd);
  m.impl("add_inplace_with_functional_guard", &add_inplace_with_functional_guard_autograd);
}
