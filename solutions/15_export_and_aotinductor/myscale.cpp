// Solution of exercise 15 (notebook 15_export_and_aotinductor): ex15's operators, ready for export and
// AOTInductor: Meta kernels for tracing, and the inplace tag on myscale_.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

TORCH_LIBRARY(ex15, m) {
  m.def("myscale(Tensor self, Tensor scale) -> Tensor");
  m.def("myscale_(Tensor(a!) self, Tensor scale) -> Tensor(a!)", {at::Tag::inplace});
}

namespace {

// self * scale, where scale is a 1-d tensor as long as self's last dimension.
void check_inputs(const at::Tensor& self, const at::Tensor& scale) {
  TORCH_CHECK(self.dim() >= 1 && scale.dim() == 1 && scale.sym_size(0) == self.sym_size(-1),
              "ex15::myscale: expected scale of shape [self.size(-1)], got self ", self.sym_sizes(), " and scale ",
              scale.sym_sizes());
  TORCH_CHECK(self.scalar_type() == scale.scalar_type(), "ex15::myscale: expected tensors of the same dtype, got ",
              self.scalar_type(), " and ", scale.scalar_type());
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "ex15::myscale: expected a floating dtype, got ",
              self.scalar_type());
}

// out[i, j] = self[i, j] * scale[j] over contiguous rows; `out` may be `self`.
void scale_rows(const at::Tensor& self, const at::Tensor& scale, const at::Tensor& out) {
  const at::Tensor x = self.contiguous(), s = scale.contiguous();
  const int64_t columns = s.numel(), rows = columns == 0 ? 0 : x.numel() / columns;
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "ex15::myscale", [&] {
    const scalar_t* xs = x.const_data_ptr<scalar_t>();
    const scalar_t* ss = s.const_data_ptr<scalar_t>();
    scalar_t* os = out.mutable_data_ptr<scalar_t>();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < columns; ++c) {
        os[r * columns + c] = xs[r * columns + c] * ss[c];
      }
    }
  });
}

at::Tensor myscale_cpu(const at::Tensor& self, const at::Tensor& scale) {
  check_inputs(self, scale);
  at::Tensor out = at::empty(self.sizes(), self.options().memory_format(at::MemoryFormat::Contiguous));
  scale_rows(self, scale, out);
  return out;
}

at::Tensor& myscale__cpu(at::Tensor& self, const at::Tensor& scale) {
  check_inputs(self, scale);
  TORCH_CHECK(self.is_contiguous(), "ex15::myscale_: expected a contiguous self, which it writes in place");
  scale_rows(self, scale, self);
  return self;
}

// Shapes and dtypes only, with the CPU kernels' checks: what torch.export traces with (fake tensors).
at::Tensor myscale_meta(const at::Tensor& self, const at::Tensor& scale) {
  check_inputs(self, scale);
  return at::empty_symint(self.sym_sizes(), self.options().memory_format(at::MemoryFormat::Contiguous));
}

at::Tensor& myscale__meta(at::Tensor& self, const at::Tensor& scale) {
  check_inputs(self, scale);
  return self;
}

}  // namespace

TORCH_LIBRARY_IMPL(ex15, CPU, m) {
  m.impl("myscale", &myscale_cpu);
  m.impl("myscale_", &myscale__cpu);
}

TORCH_LIBRARY_IMPL(ex15, Meta, m) {
  m.impl("myscale", &myscale_meta);
  m.impl("myscale_", &myscale__meta);
}
