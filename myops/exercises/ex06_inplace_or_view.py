"""Exercise 06: the version-counter bump of a `-> ()` mutating operator, on the ADInplaceOrView key."""
import torch

from myops.exercises.expect import call, expect_close, randn, require_kernel, require_op
from myops.exercises.runner import Context, Unsolved, one_line


def check(context: Context) -> None:
    require_op("ex06", "myscale_", f"keep the TORCH_LIBRARY block of {context.file('myscale.cpp')}")
    require_kernel(context, "ex06::myscale_", "ADInplaceOrView",
                   "register myscale__ad_inplace_or_view in a TORCH_LIBRARY_IMPL(ex06, ADInplaceOrView, m) block")
    op = torch.ops.ex06.myscale_.default
    x = randn(4, 3)
    before, version = x.clone(), x._version
    call("ex06::myscale_", op, x, 3.0)
    expect_close("ex06::myscale_(x, 3.0) (x afterwards)", x, before * 3.0)
    if x._version != version + 1:
        raise Unsolved(f"ex06::myscale_ moved x's version counter by {x._version - version}, expected exactly 1: "
                       "bump it once, after the redispatch")
    base = randn(6)
    view, expected, version = base[2:], base.clone(), base._version
    expected[2:] *= 2.0
    call("ex06::myscale_", op, view, 2.0)
    expect_close("ex06::myscale_ on a view (the base afterwards)", base, expected)
    if base._version != version + 1:
        raise Unsolved("writing a view with ex06::myscale_ did not move its base's version counter")
    # The given CPU kernel calls ATen's mul_, whose own ADInplaceOrView kernel bumps the counter unless this
    # operator's kernel has put ADInplaceOrView below the guard: a kernel that only redispatches passes the
    # count above by accident. A CPU kernel that writes without ATen's help (as myops::myadd_inplace's does)
    # leaves the bump to the learner's kernel alone.
    library = torch.library.Library("ex06", "IMPL")

    def writes_itself(self, factor):
        with torch._C._AutoDispatchBelowADInplaceOrView():
            self.mul_(factor)

    library.impl("myscale_", writes_itself, "CPU")
    x = randn(4, 3)
    version = x._version
    call("ex06::myscale_ with a CPU kernel that writes the data itself", op, x, 3.0)
    if x._version != version + 1:
        raise Unsolved(f"with a CPU kernel that writes the data itself (no ATen call that bumps for it), "
                       f"ex06::myscale_ moved x's version counter by {x._version - version}, expected exactly 1: the "
                       "bump is your ADInplaceOrView kernel's job, once, after redispatching under "
                       "at::AutoDispatchBelowADInplaceOrView")
    # What the counter is for: mul saved x for w's gradient; x is overwritten before backward.
    w, x = randn(3, requires_grad=True), randn(3, seed=1)
    y = w * x
    op(x, 2.0)
    try:
        y.sum().backward()
    except RuntimeError as error:
        if "modified by an inplace operation" not in str(error):
            raise Unsolved(f"backward after ex06::myscale_ failed for another reason: {one_line(error)}") from None
    else:
        raise Unsolved("backward used a tensor that ex06::myscale_ had overwritten, without an error: "
                       "the version counter did not record the write")
