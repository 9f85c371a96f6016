// A probe, not part of the library: a kernel that uses an API newer than torch 2.13.
// torch::stable::Tensor::has_storage() arrived in torch 2.14. Compiled with the library's
// -DTORCH_TARGET_VERSION (2.13) the stable headers hide it and this file does not compile; with a 2.14
// target it compiles, and the library would then fail to load into torch 2.13 (a missing shim function).
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>

namespace {

// BEGIN probe
bool has_storage(const torch::stable::Tensor& t) {
  return t.has_storage();
}
// END probe

}  // namespace

STABLE_TORCH_LIBRARY_FRAGMENT(stableops_probe, m) {
  m.def("has_storage(Tensor t) -> bool");
}

STABLE_TORCH_LIBRARY_IMPL(stableops_probe, CompositeExplicitAutograd, m) {
  m.impl("has_storage", TORCH_BOX(&has_storage));
}
