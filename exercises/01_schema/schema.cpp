// Exercise 01 (notebook 01_schema): write operator schemas.
// Checked by myops/exercises/ex01_schema.py.
//
// In the TORCH_LIBRARY block below, define the schemas of two operators of the namespace `ex01`:
//
//   mylerp   takes two tensors `start` and `end`, and a keyword-only float `weight` that defaults to 0.5;
//            it returns a new tensor (what a kernel will compute: start + weight * (end - start)).
//   mylerp_  the in-place form: its first argument is named `self` and is written; `end` and the
//            keyword-only `weight=0.5` as in mylerp; it returns that same `self`. Annotate the alias.
//
// Schemas only, no kernels: calling the operators must still fail with the dispatcher's "Could not run".
// Check your answer with:  python -m myops.exercises check 01
#include <torch/library.h>

TORCH_LIBRARY(ex01, m) {
  // TODO: m.def("mylerp(...) -> ...");
  // TODO: m.def("mylerp_(...) -> ...");
}
