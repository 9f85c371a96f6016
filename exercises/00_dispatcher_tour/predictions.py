"""Exercise 00 (notebook 00_dispatcher_tour): predict which kernel runs, before you look.

Checked by myops/exercises/ex00_dispatcher_tour.py. Each scenario is an operator with kernels on the keys
named, called once as described. Write, for each, the key that the first of those kernels to run was registered
for (an alias key included, even where it filled the key the kernel runs at), or "error" when the call raises
because no kernel of the operator serves it. Reason from the notebook: a call's key set
(the tensors' keys, plus the thread-local include set, minus its exclude set), the priority of keys, and what
alias keys fill.
Then check:  python -m myops.exercises check 00   (a wrong prediction gets a hint, not the answer)
"""

PREDICTIONS = {
    1: None,   # kernels on CPU and Meta; called with a CPU tensor
    2: None,   # kernels on CPU and Meta; called with a meta tensor
    3: None,   # kernels on CPU and AutogradCPU; a CPU tensor with requires_grad=True
    4: None,   # kernels on CPU and AutogradCPU; a CPU tensor with requires_grad=False
    5: None,   # kernels on CPU and AutogradCPU; a CPU tensor with requires_grad=True, under torch.no_grad()
    6: None,   # kernels on CPU and AutogradCPU; the same, under torch._C._AutoDispatchBelowAutograd()
    7: None,   # a kernel on CompositeImplicitAutograd only; a CPU tensor
    8: None,   # kernels on CPU and CompositeImplicitAutograd; a CPU tensor with requires_grad=True
    9: None,   # kernels on CPU and AutocastCPU; a CPU float tensor inside torch.autocast("cpu")
    10: None,  # kernels on CPU and AutocastCPU; the same tensor outside autocast
    11: None,  # kernels on CPU and CompositeExplicitAutograd; a meta tensor
    12: None,  # a kernel on CPU only; a meta tensor
}
