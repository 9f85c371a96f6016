// Meta kernels of the myadd family: shapes, dtypes and errors only, no data. torch.compile, opcheck
// and FakeTensor run these to learn what an operator returns without running it. They make the same
// checks as the real kernels, so tracing fails exactly where running would.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "checks.h"
#include "trace.h"

namespace {

// BEGIN kernels
at::Tensor myadd_meta(const at::Tensor& self, const at::Tensor& other) {
  MYOPS_TRACE(c10::DispatchKey::Meta);
  myops::check_myadd_inputs(self, other);
  return at::empty_symint(self.sym_sizes(), self.options().memory_format(at::MemoryFormat::Contiguous));
}

at::Tensor& myadd__meta(at::Tensor& self, const at::Tensor& other) {
  MYOPS_TRACE(c10::DispatchKey::Meta);
  myops::check_myadd_inplace_inputs(self, other, "myops::myadd_");
  return self;
}

void myadd_inplace_meta(at::Tensor& self, const at::Tensor& other) {
  MYOPS_TRACE(c10::DispatchKey::Meta);
  myops::check_myadd_inplace_inputs(self, other, "myops::myadd_inplace");
}
// END kernels

}  // namespace

TORCH_LIBRARY_IMPL(myops, Meta, m) {
  m.impl("myadd", &myadd_meta);
  m.impl("myadd_", &myadd__meta);
  m.impl("myadd_inplace", &myadd_inplace_meta);
}
