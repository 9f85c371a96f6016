"""Run a command as on a learner's machine without a system CUDA toolkit: in a private mount namespace
where every /usr/local/cuda* folder is empty and no nvcc is on PATH."""
import functools
import os
import subprocess

HIDE = r"""
for folder in /usr/local/cuda*; do
  if [ -d "$folder" ] && [ ! -L "$folder" ]; then mount -t tmpfs none "$folder" || exit 97; fi
done
IFS=:
for folder in $PATH; do
  if [ -e "$folder/nvcc" ]; then mount --bind /dev/null "$folder/nvcc" || exit 97; fi
done
unset CUDA_HOME CUDA_PATH
if command -v nvcc >/dev/null || [ -e /usr/local/cuda/bin/nvcc ]; then exit 98; fi
exec "$@"
"""


def without_system_cuda(command: list[str]) -> list[str]:
    """`command` wrapped so that it runs with the system CUDA toolkit hidden."""
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", HIDE, "hide-cuda", *command]


@functools.cache
def without_system_cuda_reason() -> str | None:
    """Why the toolkit cannot be hidden here (no unshare, or no right to mount), or None."""
    if os.geteuid() != 0:
        return "hiding the system CUDA toolkit needs root (a private mount namespace)"
    try:
        probe = subprocess.run(without_system_cuda(["true"]), capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        return "unshare (util-linux) is not installed"
    if probe.returncode != 0:
        return f"cannot hide the system CUDA toolkit here (exit {probe.returncode}: {probe.stderr.strip()[:200]})"
    return None
