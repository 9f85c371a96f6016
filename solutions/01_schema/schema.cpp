// Solution of exercise 01 (notebook 01_schema): the schemas of mylerp and its in-place form.
#include <torch/library.h>

TORCH_LIBRARY(ex01, m) {
  // `*` makes every argument after it keyword-only.
  m.def("mylerp(Tensor start, Tensor end, *, float weight=0.5) -> Tensor");
  // `Tensor(a!)`: `self` is written, and the returned tensor is that same `self` (alias set a).
  m.def("mylerp_(Tensor(a!) self, Tensor end, *, float weight=0.5) -> Tensor(a!)");
}
