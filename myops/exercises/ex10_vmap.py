"""Exercise 10: a batching rule for ex10::myrmsnorm with torch.library.register_vmap."""
import torch

from myops.dispatch import CallCounter
from myops.exercises.expect import call, expect_close, randn, require_op, rmsnorm_reference
from myops.exercises.runner import Context, Unsolved


def check(context: Context) -> None:
    context.load_python("rule.py")
    op = require_op("ex10", "myrmsnorm", f"keep the given operator in {context.file('rule.py')}")
    weight, batched_weight = randn(8, seed=1), randn(6, 8, seed=2)
    # (in_dims of x and weight, x, weight, eps). The rule's in_dims has one entry per argument it receives: three
    # for eps=0.5, two when eps is left out (None here) and two when it is passed equal to its default, 1e-6.
    cases = [
        ((0, None), randn(6, 4, 8), weight, None),
        ((0, None), randn(6, 4, 8, seed=10), weight, 1e-6),
        ((1, None), randn(4, 6, 8, seed=3), weight, 0.5),
        ((0, None), randn(6, 8, seed=4), weight, 1e-6),
        ((0, 0), randn(6, 4, 8, seed=5), batched_weight, 1e-6),
        ((None, 0), randn(4, 8, seed=6), batched_weight, 0.5),
        ((0, 0), randn(6, 8, seed=8), batched_weight, 1e-6),  # examples of one dimension, and of three
        ((0, 0), randn(6, 2, 3, 8, seed=9), batched_weight, 1e-6),
        ((2, 1), randn(4, 8, 6, seed=7).movedim(2, 2), batched_weight.t(), 1e-6),
    ]
    for in_dims, x, w, eps in cases:
        what = f"vmap(ex10::myrmsnorm, in_dims={in_dims}) on x of shape {list(x.shape)}"
        if in_dims[1] is not None:
            what += f" and weight of shape {list(w.shape)}"
        if eps is not None:
            what += f", eps={eps}"
        with CallCounter() as counter:
            out = call(what, torch.vmap(lambda a, b: op(a, b) if eps is None else op(a, b, eps), in_dims=in_dims), x, w)
        size = (x.shape[in_dims[0]] if in_dims[0] is not None else w.shape[in_dims[1]])
        xs = x.movedim(in_dims[0], 0) if in_dims[0] is not None else x.expand(size, *x.shape)
        ws = w.movedim(in_dims[1], 0) if in_dims[1] is not None else w.expand(size, *w.shape)
        expected = torch.stack([rmsnorm_reference(xi, wi, 1e-6 if eps is None else eps) for xi, wi in zip(xs, ws)])
        made = counter.calls.get("ex10::myrmsnorm", 0)
        # An unbatched weight is the operator's own case: one call. A batched one may be applied around it.
        if (made != 1) if in_dims[1] is None else (made > 1):
            raise Unsolved(f"{what} called the operator {made} times for {size} examples, expected once: "
                           "register the batching rule with torch.library.register_vmap, and call the operator once "
                           "on the whole batch, not once per example")
        expect_close(what, out, expected)
