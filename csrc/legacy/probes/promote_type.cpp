// The autocast helper of the 2020 tutorial's text for an operator with several floating inputs: the execution
// dtype from promote_type, with no device type. PyTorch 2.14's promote_type takes the device type as its second
// argument (see csrc/autocast/myrmsnorm.cpp), so this no longer compiles. Notebook 13 compiles this file to show
// the error; no layer builds it.
#include <ATen/autocast_mode.h>
#include <ATen/core/Tensor.h>

// BEGIN exec_type
at::ScalarType exec_type_2020(const at::Tensor& t0, const at::Tensor& t1) {
  return at::autocast::promote_type(at::kHalf, t0, t1);
}
// END exec_type
