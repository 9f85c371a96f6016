// A dispatch function whose operator name is misspelled ("myops::myad"). Nothing checks the name when
// the library loads: the lookup is the initializer of a function-local static, so it runs, and throws,
// the first time the function is called (and again at every call, since the static never initializes).
// Notebook 02 shows it; the op below, mistakes::add_by_misspelled_name, is myops::myadd through it.
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

namespace {

// BEGIN misspelled
at::Tensor myadd_misspelled(const at::Tensor& self, const at::Tensor& other) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("myops::myad", /*overload_name=*/"")  // BUG: myadd
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
  return op.call(self, other);
}
// END misspelled

}  // namespace

// The namespace is defined in schema.cpp of this folder; a fragment adds to it.
TORCH_LIBRARY_FRAGMENT(mistakes, m) {
  m.def("add_by_misspelled_name(Tensor self, Tensor other) -> Tensor");
}

TORCH_LIBRARY_IMPL(mistakes, CompositeExplicitAutograd, m) {
  m.impl("add_by_misspelled_name", &myadd_misspelled);
}
