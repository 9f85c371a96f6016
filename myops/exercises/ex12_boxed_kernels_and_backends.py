"""Exercise 12: one boxed kernel serving three operators on the CPU, and one bringing them to the course's
device (PrivateUse1) by redispatching to their CPU kernel."""
import torch

from myops.dispatch import kernel_forms
from myops.exercises.expect import call, expect_close, expect_raises, randn, require_kernel, require_op
from myops.exercises.runner import Context, Unsolved

OPERATORS = ("sum2", "sum3", "scaled_sum")


def _require_boxed(context: Context, key: str, kernel: str, file: str) -> None:
    for name in OPERATORS:
        op = f"ex12::{name}"
        require_kernel(context, op, key, f"register {kernel} for {name} in the TORCH_LIBRARY_IMPL(ex12, {key}, m) "
                       f"block of {context.file(file)}")
        # A kernel made from a boxed function has no unboxed entry: the dispatcher's own record says which.
        forms = kernel_forms(op, key)
        if forms != {"boxed"}:
            raise Unsolved(f"{op}'s {key} kernel is not a boxed function (the dispatcher lists it as "
                           f"{' and '.join(sorted(forms))}): register {kernel} with "
                           "torch::CppFunction::makeFromBoxedFunction")


def _expect_sum(what: str, device: torch.device, out, expected) -> None:
    if isinstance(out, torch.Tensor) and out.device != device:
        raise Unsolved(f"{what} returned a tensor on {out.device}, expected {device}: move the result back")
    # Compared on the CPU: the device has no kernels for the comparisons.
    expect_close(what, out.cpu() if isinstance(out, torch.Tensor) else out, expected)


def _expect_sums(where: str, device: torch.device, dtypes) -> None:
    ops = torch.ops.ex12
    for dtype in dtypes:
        a, b, c = (randn(4, 3, dtype=dtype, seed=seed) for seed in range(3))
        # Copies: on the CPU, .to(device) returns the tensor itself, which a kernel that adds in place would change.
        on = [t.clone().to(device) for t in (a, b, c)]
        _expect_sum(f"ex12::sum2 on {where} {dtype}", device, call("ex12::sum2", ops.sum2, on[0], on[1]), a + b)
        if not torch.equal(on[0].cpu(), a):
            raise Unsolved(f"ex12::sum2 on {where} tensors changed its first argument: add into a new tensor, "
                           "not into the input")
        _expect_sum(f"ex12::sum3 on {where} {dtype}", device, call("ex12::sum3", ops.sum3, *on), a + b + c)
        _expect_sum(f"ex12::scaled_sum(a, b, 2.5) on {where} {dtype}", device,
                    call("ex12::scaled_sum", ops.scaled_sum, on[0], on[1], 2.5), (a + b) * 2.5)


def check(context: Context) -> None:
    for name in OPERATORS:
        require_op("ex12", name, f"keep the TORCH_LIBRARY block of {context.file('sum_boxed.cpp')}")
    _require_boxed(context, "CPU", "sum_boxed", "sum_boxed.cpp")
    _expect_sums("CPU", torch.device("cpu"), (torch.float32, torch.float64))

    import myops.device

    device = myops.device.load()
    _require_boxed(context, "PrivateUse1", "through_cpu", "on_device.cpp")
    _expect_sums("mydevice", device, (torch.float32,))
    a, b = randn(4, 3).to(device), randn(4, 3, seed=1)
    message = expect_raises("ex12::sum2 on a mydevice tensor and a CPU tensor", torch.ops.ex12.sum2, a, b,
                            hint="through_cpu must check that every tensor is on the call's device before it "
                            "copies them to the CPU, where a mix no longer shows")
    if "ex12::sum2" not in message:
        raise Unsolved(f"ex12::sum2 on a mydevice tensor and a CPU tensor raised \"{message.splitlines()[0]}\", "
                       "which does not say which operator refused: name it, op.schema().name()")
    # The profiler records each call of an operator that starts at the top of the dispatch table; a redispatch
    # (Dispatcher::redispatchBoxed) records nothing.
    from torch.autograd.profiler import profile

    with profile() as prof:
        torch.ops.ex12.sum2(a, b.to(device))
    calls = sum(event.name == "ex12::sum2" for event in prof.function_events)
    if calls != 1:
        raise Unsolved(f"one call of ex12::sum2 on mydevice tensors made {calls} calls of it: through_cpu starts "
                       "the operator anew (op.callBoxed) instead of going straight to its CPU kernel with "
                       "op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack)")
