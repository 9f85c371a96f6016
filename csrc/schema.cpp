// The operator schemas of the `myops` namespace, and nothing else.
//
// NOTE [ One TORCH_LIBRARY per namespace ]
// A namespace is defined by exactly one TORCH_LIBRARY block in the whole process; a second one (for
// example a rebuilt copy of this file loaded next to the old one) aborts the process from a static
// initializer. So every schema lives here, in the `schema` layer, and every other layer holds only
// TORCH_LIBRARY_IMPL blocks that attach kernels to these schemas for one dispatch key.
#include <torch/library.h>
#include <torch/version.h>

TORCH_LIBRARY(myops, m) {
  // BEGIN myadd
  // Elementwise sum of two tensors of the same shape and floating dtype.
  m.def("myadd(Tensor self, Tensor other) -> Tensor");
  // END myadd

  // BEGIN mymatmul
  // Matrix product of two 2-d tensors of the same floating dtype: [n, k] x [k, m] -> [n, m].
  m.def("mymatmul(Tensor self, Tensor other) -> Tensor");
  // END mymatmul

  // BEGIN myrmsnorm
  // Root-mean-square normalization over the last dimension, scaled by `weight`:
  // out = self / sqrt(mean(self^2, -1) + eps) * weight. Its backward is not written yet.
  m.def("myrmsnorm(Tensor self, Tensor weight, float eps=1e-6) -> Tensor");
  // END myrmsnorm

  // BEGIN inplace
  // In place: self += other. `Tensor(a!)` says the argument is written and the output is that same
  // tensor. This is the classic ATen form (like add_); the `inplace` tag says so to torch.compile and
  // export, whose functionalization refuses an aliasing return of a custom operator without it.
  #if TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < 13
  // at::Tag::inplace is in torch 2.13 and later, not in 2.11: before 2.13 the op is defined untagged.
  m.def("myadd_(Tensor(a!) self, Tensor other) -> Tensor(a!)");
  #else
  m.def("myadd_(Tensor(a!) self, Tensor other) -> Tensor(a!)", {at::Tag::inplace});
  #endif
  // The same mutation in the form torch.compile and opcheck accept for any custom operator, tag or not:
  // the mutated argument is annotated and nothing is returned (so no `inplace` tag: it returns nothing).
  m.def("myadd_inplace(Tensor(a!) self, Tensor other) -> ()");
  // END inplace

  // BEGIN view
  // A view: the transpose of a 2-d tensor, sharing its storage. `Tensor(a)` on both sides says the
  // output aliases `self` (without `!`: nothing is written).
  m.def("mytranspose(Tensor(a) self) -> Tensor(a)");
  // END view
}
