"""`make test-next`: the wheel built against the pinned torch, tried on the next torch release.

    python stable/test_next.py [version]     # default NEXT_TORCH

1. build/test-next/wheels/: that torch and the test tools, downloaded from PyPI once (the CUDA build: GBs);
2. build/test-next/venv/: a fresh environment installed from that folder only;
3. the wheel of dist/ (`make wheel`) installed there, stable/check_install.py run in it;
4. the tests marked `pytorch_pin` (what a torch release does, not our code) run there, from a copy of the
   committed tree in build/test-next/tree/, so that the course layers compiled for the new torch land in that
   copy's build/ and never replace the pinned ones of build/.

The machine's pip configuration may cap torch at the pinned release (a `constraint` file). This script leaves
that file alone: pip runs here with PIP_CONFIG_FILE=/dev/null (pip then reads no configuration file at all;
--isolated alone still reads the site-wide one) and --isolated (no PIP_* variable either), and the environment
gets its own pip.conf that empties the constraint, for the wheel's install. Not part of `make test`: it needs the network once.
"""
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import wheeltools

NEXT_TORCH = "2.15.0"
ROOT = wheeltools.REPO / "build" / "test-next"
WHEELS, VENV, TREE = ROOT / "wheels", ROOT / "venv", ROOT / "tree"
# Besides torch: what the pytorch_pin tests import or need, at requirements.txt's pins where it has them.
TOOLS = ("numpy", "ninja", "pytest", "pytest-xdist", "hypothesis")


def _pins() -> list[str]:
    pinned = {}
    for line in (wheeltools.REPO / "requirements.txt").read_text().splitlines():
        name, _, version = line.split(";")[0].strip().partition("==")
        pinned[name] = f"{name}=={version}" if version else name
    return [pinned.get(name, name) for name in TOOLS] + ["ipython"]


def _step(what: str, command: list, **kwargs) -> float:
    start = time.perf_counter()
    wheeltools._run(command, 3600, what, **kwargs)
    return time.perf_counter() - start


def environment(version: str) -> Path:
    """The python of build/test-next/venv/, holding torch `version` (made once, remade for another version)."""
    python = VENV / "bin" / "python"
    ready = VENV / ".ready"
    if ready.is_file() and ready.read_text() == version:
        return python
    no_config = {**os.environ, "PIP_CONFIG_FILE": os.devnull}
    seconds = _step(f"downloading torch {version}", [sys.executable, "-m", "pip", "download", "--isolated",
                    "--quiet", "--progress-bar", "off", "-d", WHEELS, f"torch=={version}", *_pins()], env=no_config)
    print(f"download: {seconds:.0f} s, {_size(WHEELS) / 2**30:.1f} GiB in {WHEELS.relative_to(wheeltools.REPO)}")
    shutil.rmtree(VENV, ignore_errors=True)
    wheeltools._run([sys.executable, "-m", "venv", VENV], 120, "creating the environment")
    # A site configuration is read after the machine's: it empties the constraint for install_into's pip.
    (VENV / "pip.conf").write_text("[global]\nconstraint =\n")
    seconds = _step(f"installing torch {version}", [python, "-m", "pip", "install", "--isolated", "--quiet",
                    "--no-index", "--find-links", WHEELS, f"torch=={version}", *_pins()], env=no_config)
    print(f"install: {seconds:.0f} s, {_size(VENV) / 2**30:.1f} GiB in {VENV.relative_to(wheeltools.REPO)}")
    ready.write_text(version)
    return python


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def committed_tree() -> Path:
    """build/test-next/tree/: the committed sources (git archive HEAD), with the build/ of their own."""
    for old in TREE.glob("*"):  # all but build/, where the layers compiled for this torch stay
        if old.name != "build":
            shutil.rmtree(old) if old.is_dir() else old.unlink()
    TREE.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=wheeltools.REPO, capture_output=True, check=True,
                             timeout=120).stdout
    subprocess.run(["tar", "-x", "-C", TREE], input=archive, check=True, timeout=120)
    return TREE


def main(version: str) -> int:
    python = environment(version)
    (wheel,) = wheeltools.DIST.glob("myops_stable-*.whl")  # `make wheel` made it, against the pinned torch
    wheeltools.install_into(python, wheel)
    print(f"{wheel.name} on torch {version}:")
    print(wheeltools.run(python, wheeltools.CHECK_INSTALL).rstrip())
    tree = committed_tree()
    print(f"tests marked pytorch_pin on torch {version} (layers compiled into {tree.relative_to(wheeltools.REPO)}/build):",
          flush=True)
    # No CUDA layer: the toolkit this machine has is the pinned torch's CUDA release, not the next one's (a newer
    # torch build may need a newer nvcc). CUDA_HOME naming no toolkit makes the course skip that layer.
    env = {**os.environ, "PYTHONPATH": str(tree), "CUDA_HOME": str(ROOT / "no-cuda")}
    marked = sorted(str(p.relative_to(tree)) for p in (tree / "tests").glob("test_*.py")
                    if "mark.pytorch_pin" in p.read_text())
    return subprocess.run([python, "-m", "pytest", "-q", "-n", "0", "-m", "pytorch_pin", "-rfE", *marked],
                          cwd=tree, env=env, timeout=3600).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else NEXT_TORCH))
