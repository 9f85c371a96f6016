"""How csrc/stable is compiled: shared by setup.py (the wheel) and wheeltools.py (the build-time comparison)."""

# The oldest torch the library must load into, as the stable headers encode versions:
# [major][minor][patch] bytes, then five bytes of ABI tag. With it, the headers hide every API newer
# than 2.13, so nothing newer can be used by accident.
TORCH_TARGET_VERSION = "0x020d000000000000"  # 2.13.0
OLDEST_TORCH = "2.13"

# -fopenmp is not among them: torch::stable::parallel_for runs in libtorch, on its own thread pool.
# -g0 drops the debug information Python's default flags ask for (a 4x smaller library).
CXX_FLAGS = ["-O3", "-g0", f"-DTORCH_TARGET_VERSION={TORCH_TARGET_VERSION}"]
# The shared libstdc++ that torch's process already has, even where the compiler driver links a static copy (see
# LD_FLAGS in myops/build.py: a second libstdc++ crashes the first number written into a stream).
LD_FLAGS = ["-l:libstdc++.so.6"]
