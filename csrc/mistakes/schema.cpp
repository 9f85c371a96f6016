// Classic mistakes in dispatcher kernels, kept runnable for the notebooks and the tests. They live in a
// namespace of their own, `mistakes`, so loading this layer never changes myops. Their kernels are in
// autograd.cpp, autocast.cpp and opcheck.cpp; below the broken key each is a plain myops operator.
#include <torch/library.h>

#include "myops.h"

TORCH_LIBRARY(mistakes, m) {
  m.def("add_without_guard(Tensor self, Tensor other) -> Tensor");
  m.def("add_indexed(Tensor self, Tensor other) -> Tensor");
  m.def("add_with_deprecated_guard(Tensor self, Tensor other) -> Tensor");
  m.def("add_inplace_with_functional_guard(Tensor(a!) self, Tensor other) -> ()");
  m.def("matmul_cast_without_device(Tensor self, Tensor other) -> Tensor");
  m.def("matmul_on_old_autocast_key(Tensor self, Tensor other) -> Tensor");
  // One broken operator per opcheck test; see opcheck.cpp.
  m.def("transpose_declared_fresh(Tensor self) -> Tensor");
  m.def("add_without_autograd_kernel(Tensor self, Tensor other) -> Tensor");
  m.def("add_meta_ignores_dtype(Tensor self, Tensor other) -> Tensor");
  m.def("twice(Tensor self) -> Tensor");
  m.def("twice_backward(Tensor grad) -> Tensor");
}

TORCH_LIBRARY_IMPL(mistakes, CPU, m) {
  m.impl("add_with_deprecated_guard", &myops::myadd);
  m.impl("add_without_guard", &myops::myadd);
  m.impl("add_indexed", &myops::myadd);
}
