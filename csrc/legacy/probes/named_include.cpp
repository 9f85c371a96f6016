// The include at the top of the 2020 tutorial's op.cpp, outside the `#if 0` that disables its Named kernel:
// the only line of that file, besides its C++14 flag, that PyTorch 2.14 refuses (the header is gone with named
// tensors). Notebook 13 compiles this file to show the error; no layer builds it.
// BEGIN include
#include <ATen/NamedTensorUtils.h>
// END include
