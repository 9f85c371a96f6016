// ADInplaceOrView kernels for the operators that write their inputs or return views.
//
// ADInplaceOrView sits between Autograd and the backends. For an operator that mutates an argument it
// bumps that tensor's version counter, which is how autograd detects that a tensor saved for backward
// was changed afterwards. For a view it records the output as a view of its base, so that in-place
// changes to either are seen through the other by autograd. Ordinary operators skip this key (it is
// a fallthrough), so an operator that needs the bookkeeping must register a kernel here. The
// NotImplemented variant does the bookkeeping from the schema's alias annotations: it bumps the version
// of each return marked written (myadd_ returns Tensor(a!)) and records return 0 as a view of argument
// 0 when both are marked Tensor(a) (mytranspose). For myadd_inplace, which returns nothing, it would
// pass the call on and bump nothing (see myadd_inplace.cpp).
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

// BEGIN registration
TORCH_LIBRARY_IMPL(myops, ADInplaceOrView, m) {
  m.impl("myadd_", torch::autograd::autogradNotImplementedInplaceOrViewFallback());
  m.impl("mytranspose", torch::autograd::autogradNotImplementedInplaceOrViewFallback());
}
// END registration
