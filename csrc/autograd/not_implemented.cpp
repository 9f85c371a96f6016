// Autograd for the operators whose derivative is not written yet: myrmsnorm, the in-place myadd_ and
// the view mytranspose. (myadd_inplace has a kernel of its own, see myadd_inplace.cpp.)
//
// Without any Autograd registration, PyTorch's default autograd fallback (mode "warn") runs each kernel
// below autograd with no guard; backward warns for all three, and the rest depends on the operator:
// - myrmsnorm (raw loops): its output gets a node that returns no gradient; x and weight get none.
// - myadd_ (raw loops writing into self): self keeps the history it had (a leaf that requires grad stays
//   a leaf, modified in place) as if the addition never happened, so other gets no gradient.
// - mytranspose (as_strided, called through the dispatcher): as_strided records its own node, so the
//   gradient is right; the fallback only adds the warning.
// The NotImplemented fallback makes backward fail loudly for all three (mytranspose too, whose gradient
// would have been right): outputs keep requires_grad, their grad_fn is a NotImplemented node, and
// backward() raises an error that names the operator.
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

// BEGIN registration
TORCH_LIBRARY_IMPL(myops, Autograd, m) {
  m.impl("myrmsnorm", torch::autograd::autogradNotImplementedFallback());
  m.impl("myadd_", torch::autograd::autogradNotImplementedFallback());
  m.impl("mytranspose", torch::autograd::autogradNotImplementedFallback());
}
// END registration
