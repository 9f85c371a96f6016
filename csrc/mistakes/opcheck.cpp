// One broken operator per test of torch.library.opcheck. Each works when called eagerly on ordinary
// tensors; opcheck's test named in brackets finds the defect (schemas in schema.cpp of this folder):
//
//   mistakes::transpose_declared_fresh   [test_schema] returns a view, but its schema `-> Tensor`
//                                        promises a new tensor.
//   mistakes::add_without_autograd_kernel [test_autograd_registration] registered on
//                                        CompositeExplicitAutograd, which is not an autograd key.
//   mistakes::add_meta_ignores_dtype     [test_faketensor] the Meta kernel hard-codes float32.
//   mistakes::twice                      [test_aot_dispatch_dynamic] its backward calls an operator
//                                        that has no Meta kernel (autograd.cpp).
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "checks.h"
#include "myops.h"

namespace {

// BEGIN schema
at::Tensor transpose_declared_fresh(const at::Tensor& self) {
  return self.t();  // BUG: a view of self, while the schema says the output aliases nothing
}
// END schema

// BEGIN meta
at::Tensor add_meta_ignores_dtype(const at::Tensor& self, const at::Tensor& other) {
  myops::check_myadd_inputs(self, other, "mistakes::add_meta_ignores_dtype");
  return at::empty_symint(self.sym_sizes(), self.options().dtype(at::kFloat));  // BUG: self's dtype
}
// END meta

at::Tensor twice(const at::Tensor& self) {
  return myops::myadd(self, self);
}

at::Tensor twice_backward(const at::Tensor& grad) {
  return myops::myadd(grad, grad);
}

}  // namespace

// BEGIN autograd_registration
TORCH_LIBRARY_IMPL(mistakes, CompositeExplicitAutograd, m) {
  // BUG: "Autograd" in the key's name means the kernel must handle autograd itself; nothing here does.
  // Eagerly it goes unnoticed: the autograd fallback skips autograd for this call only, the inner
  // myops::myadd dispatches through its own autograd kernel and records its node, and backward only warns.
  // torch.compile records add_without_autograd_kernel as one node and never looks inside: its compiled
  // backward returns no gradient for either input.
  m.impl("add_without_autograd_kernel", &myops::myadd);
  m.impl("transpose_declared_fresh", &transpose_declared_fresh);
  m.impl("twice", &twice);
}
// END autograd_registration

TORCH_LIBRARY_IMPL(mistakes, CPU, m) {
  m.impl("add_meta_ignores_dtype", &myops::myadd);
  m.impl("twice_backward", &twice_backward);  // BUG (for twice): CPU only, no Meta kernel
}

TORCH_LIBRARY_IMPL(mistakes, Meta, m) {
  m.impl("add_meta_ignores_dtype", &add_meta_ignores_dtype);
}
