// The operator schemas of the `myops` namespace, and nothing else.
//
// NOTE [ One TORCH_LIBRARY per namespace ]
// A namespace is defined by exactly one TORCH_LIBRARY block in the whole process; a second one (for
// example a rebuilt copy of this file loaded next to the old one) aborts the process from a static
// initializer. So every schema lives here, in the `schema` layer, and every other layer holds only
// TORCH_LIBRARY_IMPL blocks that attach kernels to these schemas for one dispatch key.
#include <torch/library.h>

TORCH_LIBRARY(myops, m) {
  // BEGIN myadd
  // Elementwise sum of two tensors of the same shape and floating dtype.
  m.def("myadd(Tensor self, Tensor other) -> Tensor");
  // END myadd

  // BEGIN mymatmul
  // Matrix product of two 2-d tensors of the same floating dtype: [n, k] x [k, m] -> [n, m].
  m.def("mymatmul(Tensor self, Tensor other) -> Tensor");
  // END mymatmul
}
