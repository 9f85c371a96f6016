"""Run Triton kernels through Triton's interpreter in this process, on CPU tensors, where no GPU compiles them.

Triton decides once per process: `triton.jit` reads the setting when it decorates a function, and triton's own
library functions (`tl.sum`, ...) are decorated when triton is imported. So the setting must come before the first
`import triton`; a process that imported triton without it cannot switch (a kernel decorated later then fails with
"Cannot call @triton.jit'd outside of the scope of a kernel"), nor can one switch back.
"""
from __future__ import annotations

import os
import sys


def use_triton_interpreter() -> None:
    """Interpret every Triton kernel of this process from now on; child processes do not inherit the setting."""
    if "triton" in sys.modules:
        import triton

        if not triton.knobs.runtime.interpret:
            raise RuntimeError("myops.triton_interpreter: triton was imported before its interpreter was turned on; "
                               "call use_triton_interpreter() before anything imports triton (restart the kernel)")
        return
    os.environ["TRITON_INTERPRET"] = "1"  # read while `import triton` decorates triton's own functions
    import triton

    triton.knobs.runtime.interpret = True  # kept by the knob (writing it sets the variable again) ...
    del os.environ["TRITON_INTERPRET"]  # ... and gone from the environment that child processes copy
