// The operator schemas of the `stableops` namespace: the course's myadd and mymatmul, compiled against
// the LibTorch stable ABI only, so that one binary loads into every torch release from 2.13 on.
//
// STABLE_TORCH_LIBRARY is TORCH_LIBRARY behind a C interface: the block below becomes calls of
// aoti_torch_library_init_def, torch_library_set_python_module (new in 2.13) and aoti_torch_library_def,
// functions exported by libtorch with C linkage, whose signatures stay fixed across releases. As with TORCH_LIBRARY, one block per namespace and
// process (see NOTE [ One TORCH_LIBRARY per namespace ] in csrc/schema.cpp).
#include <torch/csrc/stable/library.h>

// BEGIN schema
STABLE_TORCH_LIBRARY(stableops, m) {
  // The fake kernels, autograd and autocast rules are registered in Python (stable/myops_stable/ops.py):
  // a fake or meta call of an operator loaded without that module raises an error that says to import it.
  m.set_python_module("myops_stable.ops");
  // Elementwise sum of two tensors of the same shape and floating dtype.
  m.def("myadd(Tensor self, Tensor other) -> Tensor");
  // Matrix product of two 2-d tensors of the same floating dtype: [n, k] x [k, m] -> [n, m].
  m.def("mymatmul(Tensor self, Tensor other) -> Tensor");
}
// END schema
