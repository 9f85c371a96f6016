// myops::mytranspose for every backend: the transpose of a 2-d tensor, as a view sharing its storage.
//
// A view kernel moves no data: it returns a tensor with the same storage and swapped sizes and
// strides. That works the same for CPU, CUDA and Meta tensors, so it is registered once on the
// CompositeExplicitAutograd alias key, which fills every backend key (but not the autograd keys).
// Recording that the result is a view of `self` (for autograd and the version counter) is not this
// kernel's job: the ADInplaceOrView kernel does it (csrc/inplace_or_view/).
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <torch/library.h>

namespace {

// BEGIN kernel
at::Tensor mytranspose(const at::Tensor& self) {
  TORCH_CHECK(self.dim() == 2, "myops::mytranspose: expected a 2-d tensor, got ", self.dim(),
              "-d; use tensor.permute(...) for other ranks");
  return self.as_strided({self.size(1), self.size(0)}, {self.stride(1), self.stride(0)},
                         self.storage_offset());
}
// END kernel

}  // namespace

// BEGIN registration
TORCH_LIBRARY_IMPL(myops, CompositeExplicitAutograd, m) {
  m.impl("mytranspose", &mytranspose);
}
// END registration
