// RunningStats: a C++ object that lives between operator calls. It holds the count, the mean and M2 (the
// sum of squared deviations from the mean) of every element of every tensor it has been fed, in double.
//
// The state is updated by Welford's method in the pairwise form of Chan, Golub and LeVeque: a tensor's own
// count, mean and M2 are computed first (two passes over it, in double), then merged into the running ones
// (merge below). Merging one value at a time is Welford's original update; merging a whole tensor at once
// gives the same numbers up to rounding, with one division per tensor instead of one per element.
//
// The class is registered with the dispatcher (torch::class_) in running_stats.cpp. Kernels in other
// libraries may use it through this header, but only once running_stats.cpp's library is loaded: a library
// whose kernel signatures name an unregistered class aborts the process when it is loaded.
//
// Like a Python list, an object is not safe to update from two threads at once.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch/custom_class.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>

namespace myops_objects {

struct RunningStats : torch::CustomClassHolder {
  int64_t count = 0;  // how many values it has seen
  double mean = 0.0;  // their mean (0 while count is 0: the state is (0, 0, 0), never NaN)
  double m2 = 0.0;    // the sum of their squared deviations from the mean

  RunningStats() = default;

  // A state read back (pickle, torch.load): checked, since a file can hold anything.
  RunningStats(int64_t count_, double mean_, double m2_) : count(count_), mean(mean_), m2(m2_) {
    TORCH_CHECK(count >= 0 && std::isfinite(mean) && std::isfinite(m2) && m2 >= 0 && (count > 0 || (mean == 0 && m2 == 0)),
                "RunningStats.__setstate__: not a valid state (count ", count, ", mean ", mean, ", m2 ", m2,
                "): expected count >= 0, a finite mean and a finite m2 >= 0 (both 0 when count is 0); the saved "
                "object is damaged: save it again");
  }

  // Population variance, M2 / count (what torch.var(x, unbiased=False) computes); NaN before any value,
  // like the mean (torch.mean of an empty tensor is NaN too).
  double variance() const {
    return count > 0 ? m2 / static_cast<double>(count) : std::numeric_limits<double>::quiet_NaN();
  }

  double mean_or_nan() const { return count > 0 ? mean : std::numeric_limits<double>::quiet_NaN(); }

  // Adds n values whose own mean and M2 are batch_mean and batch_m2 (Chan et al.): the means move towards
  // each other by their share of the values, and M2 gains the spread between the two means.
  void merge(int64_t n, double batch_mean, double batch_m2) {
    const int64_t total = count + n;
    const double delta = batch_mean - mean;
    const double share = static_cast<double>(n) / static_cast<double>(total);
    const double new_mean = mean + delta * share;
    // delta^2 * count * n / total, in an order that gives 0, not inf * 0, for the first tensor of a huge mean.
    const double new_m2 = m2 + batch_m2 + (delta * share) * (delta * static_cast<double>(count));
    // Checked before anything changes: an update that fails leaves the object as it was.
    TORCH_CHECK(std::isfinite(new_mean) && std::isfinite(new_m2),
                "RunningStats.update: the values are too large to accumulate in float64 (the sum of their squared "
                "deviations overflows); scale x down first, e.g. x / x.abs().max()");
    count = total;
    mean = new_mean;
    m2 = new_m2;
  }

  // BEGIN update
  void update(const at::Tensor& x) {
    TORCH_CHECK(x.is_floating_point(), "RunningStats.update: expected a floating-point tensor, got ",
                x.scalar_type(), "; convert it with x.double()");
    TORCH_CHECK(x.device().is_cpu(), "RunningStats.update: expected a CPU tensor, got one on ", x.device(),
                "; the object keeps its statistics on the CPU: pass x.cpu()");
    TORCH_CHECK(x.layout() == at::kStrided,
                "RunningStats.update: expected a dense (strided) tensor; convert sparse inputs with .to_dense()");
    const int64_t n = x.numel();
    if (n == 0) {
      return;
    }
    // detach: the statistics are data, not part of any autograd graph. Every element in double, in any layout
    // (a copy when x is not float64 already; a strided float64 x is read where it is).
    const at::Tensor values = x.detach().to(at::kDouble);
    const double batch_mean = values.mean().item<double>();
    const double batch_m2 = values.sub(batch_mean).square().sum().item<double>();
    if (!std::isfinite(batch_mean) || !std::isfinite(batch_m2)) {
      TORCH_CHECK(values.isfinite().all().item<bool>(),
                  "RunningStats.update: x holds non-finite values (nan or inf), which would make every later mean "
                  "and variance nan; drop them first, e.g. x[x.isfinite()]");
    }
    merge(n, batch_mean, batch_m2);  // also refuses a finite x whose squares overflow
  }
  // END update

  // The state as Dynamo and torch.export read it: (name, value) pairs, the raw fields (a mean of 0, not NaN,
  // before any value: Dynamo guards on these values, and NaN == NaN is false, so a NaN would recompile on
  // every call).
  std::tuple<std::tuple<std::string, int64_t>, std::tuple<std::string, double>, std::tuple<std::string, double>>
  flatten() const {
    return {{"count", count}, {"mean", mean}, {"m2", m2}};
  }
};

}  // namespace myops_objects
