// The ADInplaceOrView kernel of myops::myadd_inplace, written by hand.
//
// The schema `myadd_inplace(Tensor(a!) self, Tensor other) -> ()` returns nothing, and the generic
// NotImplemented fallback only bumps the version of tensors that an operator *returns*: for this
// operator it would do nothing, and autograd could not notice that `self` changed. The bookkeeping is
// one line: run the kernel below this key, then bump the version counter of the written argument.
#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/library.h>

#include "myops.h"
#include "trace.h"

namespace {

// BEGIN kernel
void myadd_inplace_ad_inplace_or_view(c10::DispatchKeySet keys, at::Tensor& self, const at::Tensor& other) {
  MYOPS_TRACE(c10::DispatchKey::ADInplaceOrView);
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    myops::myadd_inplace_op().redispatch(keys & c10::after_ADInplaceOrView_keyset, self, other);
  }
  self.unsafeGetTensorImpl()->bump_version();  // `self` was written: saved copies of it are stale
}
// END kernel

}  // namespace

TORCH_LIBRARY_IMPL(myops, ADInplaceOrView, m) {
  m.impl("myadd_inplace", &myadd_inplace_ad_inplace_or_view);
}
