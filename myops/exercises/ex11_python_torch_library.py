"""Exercise 11: custom_op, register_fake and register_autograd for ex11::myrmsnorm."""
import torch

from myops.exercises.expect import (call, expect_close, expect_grads, expect_raises, opcheck, randn, require_op,
                                    rmsnorm_reference)
from myops.exercises.runner import Context, Unsolved, one_line


def check(context: Context) -> None:
    context.load_python("myrmsnorm.py")
    op = require_op("ex11", "myrmsnorm", f"define it with torch.library.custom_op in {context.file('myrmsnorm.py')}")
    schema = op._schema
    found = ([(a.name, str(a.type), a.default_value) for a in schema.arguments], [str(r.type) for r in schema.returns])
    if found != ([("self", "Tensor", None), ("weight", "Tensor", None), ("eps", "float", 1e-6)], ["Tensor"]):
        raise Unsolved(f"the schema is {schema}, expected (Tensor self, Tensor weight, float eps=1e-06) -> Tensor "
                       "(it comes from the argument names, the type hints and the default)")
    w = randn(5, dtype=torch.float64, seed=1)
    for shape in ((3, 5), (5,), (2, 3, 5)):
        x = randn(*shape, dtype=torch.float64, seed=len(shape))
        for eps in (1e-6, 0.5):
            expect_close(f"ex11::myrmsnorm on shape {list(shape)} with eps={eps}",
                         call("ex11::myrmsnorm", op, x, w, eps), rmsnorm_reference(x, w, eps))
    try:
        with torch._subclasses.fake_tensor.FakeTensorMode():
            op(torch.empty(3, 5), torch.empty(5))
    except Exception as error:
        raise Unsolved(f"ex11::myrmsnorm on fake tensors raised {one_line(error)}: register a fake kernel "
                       "(@myrmsnorm.register_fake)") from None
    # The kernel and the fake kernel refuse the same inputs: a weight that would broadcast is a bug, not a shape.
    for shape in ((1,), (3, 5)):
        bad = f"ex11::myrmsnorm with x of shape [3, 5] and weight of shape {list(shape)}"
        expect_raises(bad, op, randn(3, 5), randn(*shape), errors=(Exception,),
                      hint="check in the kernel that weight has shape [self.shape[-1]] (torch._check), so it "
                      "never broadcasts, and in the fake kernel the same way")
        with torch._subclasses.fake_tensor.FakeTensorMode():
            expect_raises(f"{bad}, on fake tensors", op, torch.empty(3, 5), torch.empty(*shape),
                          errors=(Exception,),
                          hint="the fake kernel must refuse what the kernel refuses (torch._check the weight's shape)")
    for shape in ((3, 5), (5,), (2, 3, 5)):
        x = randn(*shape, dtype=torch.float64, seed=len(shape))
        for needs in ((True, True), (True, False), (False, True)):
            expect_grads(f"ex11::myrmsnorm on shape {list(shape)} with requires_grad={needs}",
                         lambda a, b: op(a, b, 0.5),
                         (x.clone().requires_grad_(needs[0]), w.clone().requires_grad_(needs[1])),
                         lambda a, b: rmsnorm_reference(a, b, 0.5))
    # A transposed x too: the real kernel's output keeps x's strides, so the fake one must (empty_like does).
    opcheck("ex11::myrmsnorm", op, [(randn(2, 4, requires_grad=True), randn(4, seed=2, requires_grad=True), 0.1),
                                    (randn(4, 3, seed=3).t().requires_grad_(), randn(4, seed=4), 0.1)])
