// Objects through the dispatcher: a C++ class (torchbind) that operators take as an argument.
//
// A namespace of its own (myops_objects), in a layer of its own, like csrc/bench/. A schema that names the class
// is parsed when it is registered, and the class must exist by then; the course's schema layer (schema.cpp) is
// loaded first of all, before any layer could register a class. So the class and the schemas that name it are
// registered here, together, class first; the kernels follow. myops/objects.py loads this layer and then
// registers the Python fakes that torch.compile and torch.export need.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/cpu/Loops.h>
#include <ATen/ops/empty.h>
#include <torch/custom_class.h>
#include <torch/library.h>

#include <cmath>

#include "checks.h"
#include "objects/running_stats.h"

namespace {

using myops_objects::RunningStats;

// BEGIN standardize
void check_standardize_inputs(const RunningStats& stats, const at::Tensor& x, double eps) {
  TORCH_CHECK(myops::is_supported_float(x.scalar_type()), "myops_objects::standardize: unsupported dtype ",
              x.scalar_type(), "; supported are float16, bfloat16, float32 and float64, convert with .float()");
  TORCH_CHECK(stats.count > 0, "myops_objects::standardize: stats has seen no values yet; call stats.update(x) first");
  TORCH_CHECK(eps >= 0, "myops_objects::standardize: eps must be >= 0, got ", eps,
              "; pass a small positive eps such as 1e-5");
  TORCH_CHECK(stats.variance() + eps > 0, "myops_objects::standardize: the variance of stats is 0 (every value it "
              "has seen is equal) and eps is 0, so every output would be inf or nan; pass eps > 0");
}

// (x - mean) / sqrt(variance + eps), elementwise. TensorIterator walks x in whatever layout it has (no copy of a
// transposed or sliced x) and splits the elements over threads inside libtorch, so the parallelism does not
// depend on this library's own OpenMP flags; cpu_kernel calls the lambda once per element. The statistics are
// turned into the two numbers the lambda needs once, in double, and rounded to the accumulation type.
at::Tensor standardize_cpu(const c10::intrusive_ptr<RunningStats>& stats, const at::Tensor& x, double eps) {
  check_standardize_inputs(*stats, x, eps);
  // Contiguous whatever x's layout, so the fake kernel (myops/objects.py) can promise exactly that.
  at::Tensor out = at::empty(x.sizes(), x.options());
  at::TensorIterator iter = at::TensorIteratorConfig().add_output(out).add_const_input(x).build();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "standardize_cpu", [&] {
    using acc_t = at::opmath_type<scalar_t>;  // float for float16 and bfloat16
    const acc_t mean = static_cast<acc_t>(stats->mean);
    const acc_t inv_std = static_cast<acc_t>(1.0 / std::sqrt(stats->variance() + eps));
    at::native::cpu_kernel(iter, [mean, inv_std](scalar_t v) -> scalar_t {
      return static_cast<scalar_t>((static_cast<acc_t>(v) - mean) * inv_std);
    });
  });
  return out;
}
// END standardize

// BEGIN summary
// [count, mean, variance] as float64. The call has no tensor argument, so its dispatch key set is empty.
at::Tensor summary(const c10::intrusive_ptr<RunningStats>& stats) {
  at::Tensor out = at::empty({3}, at::TensorOptions().dtype(at::kDouble));
  double* values = out.mutable_data_ptr<double>();
  values[0] = static_cast<double>(stats->count);
  values[1] = stats->mean_or_nan();
  values[2] = stats->variance();
  return out;
}
// END summary

}  // namespace

// BEGIN library
TORCH_LIBRARY(myops_objects, m) {
  // The class first: a schema is parsed when it is registered, and the class type it names must exist then.
  // Registered later, or in a library loaded later, the parse throws inside this library's static initializer
  // and the process aborts (no Python exception). Hence not in schema.cpp's block: see the top of this file.
  m.class_<RunningStats>("RunningStats")
      .def(torch::init<>())
      .def("update", &RunningStats::update)
      .def("count", [](const c10::intrusive_ptr<RunningStats>& self) { return self->count; })
      .def("mean", [](const c10::intrusive_ptr<RunningStats>& self) { return self->mean_or_nan(); })
      .def("variance", [](const c10::intrusive_ptr<RunningStats>& self) { return self->variance(); })
      // What torch.compile guards on and torch.export records: see myops/objects.py's fake class.
      .def("__obj_flatten__", [](const c10::intrusive_ptr<RunningStats>& self) { return self->flatten(); })
      // pickle, copy.deepcopy, torch.save and torch.export.save store these three numbers.
      .def_pickle(
          [](const c10::intrusive_ptr<RunningStats>& self) {
            return std::make_tuple(self->count, self->mean, self->m2);
          },
          [](std::tuple<int64_t, double, double> state) {
            return c10::make_intrusive<RunningStats>(std::get<0>(state), std::get<1>(state), std::get<2>(state));
          });

  m.def("standardize(__torch__.torch.classes.myops_objects.RunningStats stats, Tensor x, float eps=1e-05) -> Tensor");
  m.def("summary(__torch__.torch.classes.myops_objects.RunningStats stats) -> Tensor");
}

TORCH_LIBRARY_IMPL(myops_objects, CPU, m) {
  m.impl("standardize", &standardize_cpu);
}

// No tensor argument, no dispatch key: the call reaches the table's Undefined entry, which only a kernel of a
// composite alias key fills (this one; a kernel registered with no key is a CompositeImplicitAutograd one). A CPU
// kernel would never be found.
TORCH_LIBRARY_IMPL(myops_objects, CompositeExplicitAutograd, m) {
  m.impl("summary", &summary);
}
// END library
