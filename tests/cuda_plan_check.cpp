// The CUDA layer's iteration plan (csrc/cuda/plan.h) run on the CPU: the same path choice, dimension
// ordering, merging and index arithmetic as the strided myadd kernel, checked on a machine without a GPU.
// Built and used by tests/test_cuda_layer.py into a namespace of its own.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <torch/library.h>

#include <cstdint>
#include <vector>

#include "cuda/plan.h"

namespace {

using myops::cuda::Path;

template <typename scalar_t, typename index_t>
void add_through_plan(const at::Tensor& out, const at::Tensor& self, const at::Tensor& other,
                      const myops::cuda::Plan& plan) {
  using opmath_t = at::opmath_type<scalar_t>;
  const scalar_t* a = self.const_data_ptr<scalar_t>();
  const scalar_t* b = other.const_data_ptr<scalar_t>();
  scalar_t* o = out.mutable_data_ptr<scalar_t>();
  for (int64_t i = 0; i < out.numel(); ++i) {  // what the GPU's threads do, one element after another
    const auto where = myops::cuda::offsets_of(plan, static_cast<index_t>(i));
    o[where.out] = static_cast<scalar_t>(static_cast<opmath_t>(a[where.self]) + static_cast<opmath_t>(b[where.other]));
  }
}

// out = self + other through the strided kernel's plan (also for layouts the GPU runs on its dense path:
// a plan of one dense dimension must address them just as well).
void plan_add(const at::Tensor& out, const at::Tensor& self, const at::Tensor& other) {
  const std::vector<myops::cuda::Dim> dims = myops::cuda::iteration_dims(out, self, other);
  TORCH_CHECK(dims.size() <= static_cast<size_t>(myops::cuda::kMaxDims),
              "plan_add: more merged dimensions than a Plan holds");
  const myops::cuda::Plan plan = myops::cuda::Plan::of(dims);
  const bool narrow = myops::cuda::choose_path(out.numel(), dims) != Path::kStrided64;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, self.scalar_type(), "plan_add", [&] {
    if (narrow) {
      add_through_plan<scalar_t, int32_t>(out, self, other, plan);
    } else {
      add_through_plan<scalar_t, int64_t>(out, self, other, plan);
    }
  });
}

// [path, merged dims, then size and the three strides of each merged dimension, innermost first].
std::vector<int64_t> plan_of(const at::Tensor& out, const at::Tensor& self, const at::Tensor& other) {
  const std::vector<myops::cuda::Dim> dims = myops::cuda::iteration_dims(out, self, other);
  std::vector<int64_t> summary = {static_cast<int64_t>(myops::cuda::choose_path(out.numel(), dims)),
                                  static_cast<int64_t>(dims.size())};
  for (const auto& d : dims) {
    summary.insert(summary.end(), {d.size, d.stride[0], d.stride[1], d.stride[2]});
  }
  return summary;
}

}  // namespace

TORCH_LIBRARY(myops_plan_check, m) {
  m.def("plan_add(Tensor(a!) out, Tensor self, Tensor other) -> ()", &plan_add);
  m.def("plan_of(Tensor out, Tensor self, Tensor other) -> int[]", &plan_of);
}
