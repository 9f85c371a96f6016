// aten::add.Tensor and aten::add_.Tensor on the device: kernels for PyTorch's own operators,
// registered from outside PyTorch exactly like kernels for our own operators, only into the `aten`
// namespace.
//
// out = self + alpha * other, with broadcasting and type promotion as torch.add does them, for the
// floating dtypes. A Python number (x + 2) arrives as a 0-dim CPU tensor; it is allowed next to a
// device tensor, as on CUDA. The in-place form is what the autograd engine calls to add up the
// gradients of a tensor that was used more than once.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/Dispatch.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/result_type.h>
#include <c10/core/ScalarType.h>
#include <torch/library.h>

#include <vector>

#include "checks.h"

namespace {

// BEGIN kernel
// out = a + alpha * b elementwise, for three tensors of one shape and any strides (a stride of 0
// repeats an element: that is how a broadcast input looks). The device's memory is host memory, so
// the kernel reads and writes it directly. It is the plainest strided walk on purpose, one thread and
// one element at a time: this file is about registering kernels for aten operators, and the fast
// strided loop is the CPU kernel's (csrc/cpu/myadd.cpp).
template <typename scalar_t>
void add_kernel_impl(const at::Tensor& a, const at::Tensor& b, const c10::Scalar& alpha, const at::Tensor& out) {
  using opmath_t = at::opmath_type<scalar_t>;  // half and bfloat16 compute in float, like ATen
  const opmath_t alpha_value = alpha.to<opmath_t>();
  const scalar_t* pa = a.const_data_ptr<scalar_t>();
  const scalar_t* pb = b.const_data_ptr<scalar_t>();
  scalar_t* po = out.mutable_data_ptr<scalar_t>();
  const int64_t ndim = out.dim();
  const auto sizes = out.sizes();
  const auto sa = a.strides(), sb = b.strides(), so = out.strides();
  std::vector<int64_t> index(ndim, 0);  // the multi-index of the current element, last dimension fastest
  int64_t offset_a = 0, offset_b = 0, offset_o = 0;
  for (int64_t i = 0; i < out.numel(); ++i) {
    po[offset_o] = static_cast<scalar_t>(static_cast<opmath_t>(pa[offset_a]) +
                                         alpha_value * static_cast<opmath_t>(pb[offset_b]));
    for (int64_t d = ndim - 1; d >= 0; --d) {  // step the multi-index like an odometer
      if (++index[d] < sizes[d]) {
        offset_a += sa[d], offset_b += sb[d], offset_o += so[d];
        break;
      }
      offset_a -= (sizes[d] - 1) * sa[d], offset_b -= (sizes[d] - 1) * sb[d], offset_o -= (sizes[d] - 1) * so[d];
      index[d] = 0;
    }
  }
}

void run_add(const at::Tensor& a, const at::Tensor& b, const c10::Scalar& alpha, const at::Tensor& out) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "add_device", [&] {
    add_kernel_impl<scalar_t>(a, b, alpha, out);
  });
}
// END kernel

// The checks both forms share: where the inputs are, and which dtype the result has.
c10::Device check_devices(const char* op, const at::Tensor& self, const at::Tensor& other) {
  const c10::Device device = self.device().is_privateuseone() ? self.device() : other.device();
  for (const at::Tensor* t : {&self, &other}) {
    TORCH_CHECK(t->device() == device || (t->is_cpu() && t->dim() == 0), op, ": expected both tensors on ",
                device, " (or a 0-dim CPU tensor), got ", self.device(), " and ", other.device(),
                "; move one with .to(\"", device, "\")");
  }
  return device;
}

void check_floating(const char* op, at::ScalarType dtype) {
  TORCH_CHECK_NOT_IMPLEMENTED(myops::is_supported_float(dtype), op,
                              ": the demo device adds only float16, bfloat16, float32 and float64 tensors, got ",
                              dtype, "; convert with .float(), or add on the CPU");
}

// BEGIN entry
at::Tensor add_device(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  const c10::Device device = check_devices("aten::add.Tensor", self, other);
  const at::ScalarType dtype = at::result_type(self, other);  // the promotion torch.add does
  check_floating("aten::add.Tensor", dtype);
  const std::vector<int64_t> shape = at::infer_size(self.sizes(), other.sizes());  // ATen's broadcast error
  // Copies (to the device, to `dtype`) only where needed, then views with stride 0 where broadcast.
  const at::Tensor a = self.to(device, dtype).expand(shape);
  const at::Tensor b = other.to(device, dtype).expand(shape);
  at::Tensor out = at::empty(shape, a.options());
  run_add(a, b, alpha, out);
  return out;
}

at::Tensor& add__device(at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  TORCH_CHECK(self.device().is_privateuseone(), "aten::add_.Tensor: expected self on the device, got ",
              self.device(), "; add into a device tensor, or move other to ", self.device());
  const c10::Device device = check_devices("aten::add_.Tensor", self, other);
  check_floating("aten::add_.Tensor", self.scalar_type());
  const at::ScalarType dtype = at::result_type(self, other);
  TORCH_CHECK(c10::canCast(dtype, self.scalar_type()), "aten::add_.Tensor: result type ", dtype,
              " can't be cast to the desired output type ", self.scalar_type(), "; add out of place instead");
  const std::vector<int64_t> shape = at::infer_size(self.sizes(), other.sizes());
  TORCH_CHECK(c10::IntArrayRef(shape) == self.sizes(), "aten::add_.Tensor: output with shape ", self.sizes(),
              " doesn't match the broadcast shape ", c10::IntArrayRef(shape), "; add out of place instead");
  TORCH_CHECK(at::has_internal_overlap(self) != at::MemOverlap::Yes, "aten::add_.Tensor: self has elements ",
              "that share memory (e.g. it was expanded); write into self.clone() instead");
  run_add(self, other.to(device, self.scalar_type()).expand(self.sizes()), alpha, self);
  return self;
}
// END entry

}  // namespace

// BEGIN registration
// The same TORCH_LIBRARY_IMPL as for myops, for operators PyTorch defines: for PrivateUse1 only,
// these replace the generic kernels the two operators have there (which call aten::add.out).
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("add.Tensor", &add_device);
  m.impl("add_.Tensor", &add__device);
}
// END registration
