"""Solution of exercise 00 (notebook 00_dispatcher_tour): which kernel runs, and why."""

PREDICTIONS = {
    1: "CPU",
    2: "Meta",
    3: "AutogradCPU",
    4: "AutogradCPU",   # every CPU tensor's key set holds AutogradCPU; requires_grad only decides what it records
    5: "AutogradCPU",   # no_grad turns recording off (grad mode), it excludes no key
    6: "CPU",           # the guard excludes the autograd keys for the calls inside it
    7: "CompositeImplicitAutograd",
    8: "CPU",           # AutogradCPU gets no composite kernel when CPU has its own (PythonDispatcher shows its
                        # backend fallback there), and that fallback goes on to CPU
    9: "AutocastCPU",
    10: "CPU",          # autocast keys are excluded unless autocast is on
    11: "CompositeExplicitAutograd",
    12: "error",        # Meta's backend fallback raises NotImplementedError: no Meta kernel and no fake impl
}
