// Exercise 15 (notebook 15_export_and_aotinductor): make ex15's operators exportable and compile a model on
// them with AOTInductor. Checked by myops/exercises/ex15_export_and_aotinductor.py.
//
// The CPU kernels below work. torch.export cannot trace a model on them yet. Your part in this file:
//   1. Meta kernels for myscale and myscale_ (shapes and dtypes only, with the CPU kernels' checks), registered
//      in a TORCH_LIBRARY_IMPL(ex15, Meta, m) block: export runs the model on fake tensors, which dispatch to
//      Meta (a Python fake kernel, torch.library.register_fake, would do as well).
//   2. myscale_ returns the tensor it writes (-> Tensor(a!)). Export's functionalization takes a custom operator
//      whose return aliases an argument only when it is tagged in place (at::Tag::inplace) or out=
//      (at::Tag::out), or has a Functionalize kernel of its own. myscale_ writes self and returns it: give its
//      m.def the tag {at::Tag::inplace}.
// Then write export_model and compile_package in model.py.
// Check your answer with:  python -m myops.exercises check 15
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

TORCH_LIBRARY(ex15, m) {
  m.def("myscale(Tensor self, Tensor scale) -> Tensor");
  m.def("myscale_(Tensor(a!) self, Tensor scale) -> Tensor(a!)");  // TODO: the inplace tag
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

// TODO: myscale_meta and myscale__meta.

}  // namespace

TORCH_LIBRARY_IMPL(ex15, CPU, m) {
  m.impl("myscale", &myscale_cpu);
  m.impl("myscale_", &myscale__cpu);
}

// TODO: register the Meta kernels.
