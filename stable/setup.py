"""Build the myops-stable wheel: csrc/stable compiled against the LibTorch stable ABI, for CPython >= 3.10.

    make wheel      # = python -m pip wheel --no-deps --no-build-isolation --wheel-dir dist ./stable

The C++ stays in the course's csrc/stable (the single source of truth); this folder holds only the
packaging and the Python half of the operators (myops_stable/ops.py). An sdist carries its own copy of
csrc/stable, made as the sdist is made, so it builds a wheel away from the repository:

    python -c "from setuptools import build_meta; build_meta.build_sdist('../dist')"   # from stable/
"""
import os
import shutil
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from flags import CXX_FLAGS, LD_FLAGS  # noqa: E402

from torch.utils.cpp_extension import BuildExtension, CppExtension  # noqa: E402

# In the repository: ../csrc. In an unpacked sdist: its own csrc/ (see Sdist).
IN_SDIST = (HERE / "csrc").is_dir()
CSRC = HERE / "csrc" if IN_SDIST else REPO / "csrc"
# setuptools wants source paths relative to this folder.
SOURCES = [os.path.relpath(p, HERE) for p in [CSRC / "stable" / "schema.cpp",
                                              *sorted((CSRC / "stable" / "cpu").glob("*.cpp"))]]



class Sdist(sdist):
    """Puts csrc/stable into the sdist, instead of the ../csrc paths no archive can hold."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, [f for f in files if not f.startswith("..")])
        shutil.copytree(CSRC / "stable", Path(base_dir) / "csrc" / "stable",
                        ignore=shutil.ignore_patterns("probes", "cuda"))  # what the wheel compiles, no more


setup(
    packages=["myops_stable"],
    ext_modules=[
        CppExtension(
            "myops_stable._C",
            SOURCES,
            include_dirs=[str(CSRC)],
            extra_compile_args={"cxx": CXX_FLAGS},
            extra_link_args=LD_FLAGS,
            # abi3: the library includes no Python header at all (it is loaded with
            # torch.ops.load_library, not imported), so one build serves every CPython >= 3.10.
            py_limited_api=True,
        )
    ],
    cmdclass={"build_ext": BuildExtension, "sdist": Sdist},
    options={
        "bdist_wheel": {"py_limited_api": "cp310"},
        # Build products go to the repository's build/, not next to the sources (an sdist keeps the default).
        **({} if IN_SDIST else {"build": {"build_base": str(REPO / "build" / "stable" / "setuptools")}}),
    },
)
