"""Exercise 00: predict which kernel the dispatcher runs, then let the dispatcher answer.

Each scenario defines a toy operator with kernels on a few keys, each kernel recording its key, and calls it
once: the truth is what this torch does, not a table typed in here."""
from __future__ import annotations

import torch

from myops.exercises.runner import Context, Unsolved

# The prediction for a call that no kernel of the operator serves (a fallback or the dispatcher raises
# NotImplementedError).
ERROR = "error"


def _cpu(requires_grad: bool = False):
    return torch.ones(2, requires_grad=requires_grad)


def _meta():
    return torch.ones(2, device="meta")


def _no_grad(op):
    with torch.no_grad():
        op(_cpu(requires_grad=True))


def _below_autograd(op):
    with torch._C._AutoDispatchBelowAutograd():
        op(_cpu(requires_grad=True))


def _autocast(op):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        op(_cpu())


# number -> (keys with a kernel, the call, what to think about when the prediction is wrong)
SCENARIOS = {
    1: (("CPU", "Meta"), lambda op: op(_cpu()), "the backend key comes from the tensor's device"),
    2: (("CPU", "Meta"), lambda op: op(_meta()), "the backend key comes from the tensor's device"),
    3: (("CPU", "AutogradCPU"), lambda op: op(_cpu(requires_grad=True)),
        "autograd keys rank above backend keys"),
    4: (("CPU", "AutogradCPU"), lambda op: op(_cpu()),
        "is AutogradCPU in the key set of a tensor that does not require grad? (torch._C._dispatch_keys)"),
    5: (("CPU", "AutogradCPU"), _no_grad, "does torch.no_grad() exclude a dispatch key, or only stop recording?"),
    6: (("CPU", "AutogradCPU"), _below_autograd, "this guard puts the autograd keys in the thread-local exclude set"),
    7: (("CompositeImplicitAutograd",), lambda op: op(_cpu()), "an alias key's kernel fills the keys it stands for"),
    8: (("CPU", "CompositeImplicitAutograd"), lambda op: op(_cpu(requires_grad=True)),
        "a kernel of the backend's own key keeps CompositeImplicitAutograd off that backend's autograd key too"),
    9: (("CPU", "AutocastCPU"), _autocast,
        "the tensor carries AutocastCPU; the thread excludes it by default, and torch.autocast lifts the exclusion"),
    10: (("CPU", "AutocastCPU"), lambda op: op(_cpu()), "outside torch.autocast, is AutocastCPU in the key set?"),
    11: (("CPU", "CompositeExplicitAutograd"), lambda op: op(_meta()),
         "CompositeExplicitAutograd serves every backend that has no kernel of its own"),
    12: (("CPU",), lambda op: op(_meta()), "what runs for the Meta key when the operator registers nothing there? "
         "(torch._C._dispatch_dump_table)"),
}


def _what_runs(library, number: int) -> str:
    keys, run, _ = SCENARIOS[number]
    name = f"scenario{number}"
    library.define(f"{name}(Tensor x) -> Tensor")
    ran: list[str] = []
    for key in keys:
        def kernel(x, key=key):
            ran.append(key)
            return torch.empty_like(x)
        library.impl(name, kernel, key)
    try:
        run(getattr(torch.ops.ex00, name).default)
    except NotImplementedError:
        return ERROR
    return ran[0]  # the key the first kernel to run was registered for: an alias key where one filled the key


def check(context: Context) -> None:
    predictions = getattr(context.load_python("predictions.py"), "PREDICTIONS", None)
    if not isinstance(predictions, dict):
        raise Unsolved(f"{context.file('predictions.py')} defines no dict PREDICTIONS")
    library = torch.library.Library("ex00", "DEF")
    for number, (keys, _, hint) in SCENARIOS.items():
        guess = predictions.get(number)
        if guess is None:
            raise Unsolved(f"write your prediction for scenario {number} in {context.file('predictions.py')} "
                           f"(a key name, or \"{ERROR}\")")
        if guess not in (*keys, ERROR):
            raise Unsolved(f"scenario {number}: {guess!r} is none of the keys with a kernel there "
                           f"({', '.join(keys)}); predict one of them, or \"{ERROR}\"")
        if guess != _what_runs(library, number):
            raise Unsolved(f"scenario {number}: the dispatcher does not run {guess!r}; {hint}")
