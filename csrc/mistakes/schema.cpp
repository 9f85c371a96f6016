// Classic mistakes in dispatcher kernels, kept runnable for the notebooks and the tests. They live in a
// namespace of their own, `mistakes`, so loading this layer never changes myops. Their kernels are in
// autograd.cpp and autocast.cpp; below the broken key each is a plain myops operator.
#include <torch/library.h>

#include "myops.h"

TORCH_LIBRARY(mistakes, m) {
  m.def("add_without_guard(Tensor self, Tensor other) -> Tensor");
  m.def("add_indexed(Tensor self, Tensor other) -> Tensor");
  m.def("matmul_cast_without_device(Tensor self, Tensor other) -> Tensor");
  m.def("matmul_on_old_autocast_key(Tensor self, Tensor other) -> Tensor");
}

TORCH_LIBRARY_IMPL(mistakes, CPU, m) {
  m.impl("add_without_guard", &myops::myadd);
  m.impl("add_indexed", &myops::myadd);
}
