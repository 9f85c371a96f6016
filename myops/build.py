"""Build one dispatch-key layer of csrc/ into its own shared library and load it into this process.

A layer is `csrc/schema.cpp` (the `schema` layer) or every `.cpp`/`.cu` file of one folder of csrc/
(`csrc/cpu/` is the `cpu` layer), as `csrc/layers.json` lists them. Each becomes
`build/<layer>/myops_<layer>.so`, compiled by torch.utils.cpp_extension with ninja, and is loaded with
torch.ops.load_library: no pybind, the libraries only register kernels with the dispatcher.
"""
from __future__ import annotations

import contextlib
import fcntl
import dataclasses
import functools
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import torch

from myops import toolchain
from myops.paths import REPO_ROOT, relative_path  # re-exported: importers of myops.build use them

MANIFEST = "layers.json"  # in the csrc/ tree; CMake and the benchmarks read it too

# Without -fopenmp, at::parallel_for silently runs on one thread. A layer is compiled on the machine
# that runs it, so it may use every instruction that CPU has: -march=native lets cpu/vectorized.h pick
# AVX2 or AVX-512 for at::vec::Vectorized (portable builds, CMake and wheels, leave it out).
CXX_FLAGS = ("-O3", "-fopenmp") + (("-march=native",) if os.uname().machine == "x86_64" else ())
# A layer links the libstdc++ that torch's process already has (libstdc++.so.6), never a static copy: a
# compiler driver that links -static-libstdc++ (the GPU machine's $CXX does) puts a second libstdc++ into the
# layer, whose locale state the first one never set up, and the first number a layer writes into a stream
# (an error message, the call-path recording) crashes the process. An explicit -l: comes before the static
# archive the driver appends, so the shared library wins (tests/test_build.py).
LD_FLAGS = ("-fopenmp", "-l:libstdc++.so.6")
CUDA_FLAGS = ("-O3",)

# NOTE [ The precompiled header ]
# Every file of the course includes torch/library.h, and through it ~1,360 torch headers that take GCC
# 2-3 s to parse in each compile (half of a typical file's build). GCC compiles them once per build tree
# into build/pch/ and each C++ compile of a layer reads that image instead (`-include`). It is only that
# one header, which the files include anyway, so what a file must include itself stays as it is. GCC checks
# that the image was made with the same flags; if not, it parses the header as text: a mismatch costs
# time, never correctness (tests/test_build.py checks that the layers' own flags match). The image takes
# ~9 s and ~290 MB once; MYOPS_PRECOMPILED_HEADER=0 in the environment compiles without it.
PRECOMPILED_HEADER = "torch/library.h"
PRECOMPILED_HEADER_DIR = REPO_ROOT / "build" / "pch"


class LayerReloadError(RuntimeError):
    """A layer's C++ changed after this process loaded it; only a fresh process can load it."""


class LayerBuildError(RuntimeError):
    """The compiler rejected a layer's sources (or there is nothing to compile them with).

    `first_error` is the compiler's first error line, `log` the full build log's path: set when a compile ran.
    """

    def __init__(self, message: str, first_error: str | None = None, log: Path | None = None):
        super().__init__(message)
        self.first_error = first_error
        self.log = log


class LayerUnavailableError(RuntimeError):
    """A layer cannot be built on this machine (the CUDA layer without a CUDA toolchain); `reason` says why."""

    def __init__(self, message: str, reason: str = ""):
        super().__init__(message)
        self.reason = reason


@dataclasses.dataclass(frozen=True)
class Layer:
    """One entry of csrc/layers.json (or a folder of a tree without one)."""
    name: str
    sources: str  # a file or a folder of csrc/
    course: bool = True  # part of the extension: myops.load() and the CMake library
    cuda: bool = False
    needs: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class LoadResult:
    """What Builder.load did: the library it loaded, and whether (and how long) it compiled it."""
    layer: str
    library: Path
    built: bool
    seconds: float | None  # compile time when built

    def to_json(self) -> dict:
        return {**dataclasses.asdict(self), "library": str(self.library)}


def read_manifest(csrc_dir: Path) -> list[Layer]:
    """The layers of a csrc/ tree: its layers.json, or else `schema.cpp` and each folder with sources."""
    manifest = Path(csrc_dir) / MANIFEST
    if manifest.is_file():
        return [Layer(**{**entry, "needs": tuple(entry["needs"])})
                for entry in json.loads(manifest.read_text())["layers"]]
    folders = sorted(p.name for p in Path(csrc_dir).iterdir() if p.is_dir() and Builder._sources_in(p))
    return ([Layer("schema", "schema.cpp")] * (Path(csrc_dir) / "schema.cpp").is_file()
            + [Layer(name, name, cuda=any(f.suffix == ".cu" for f in (Path(csrc_dir) / name).iterdir()))
               for name in folders])


def _cpp_extension():
    from torch.utils import cpp_extension

    return cpp_extension


def _first_compiler_error(log: str) -> str:
    """The compiler's first error with its few lines of context, instead of a wall of ninja output."""
    lines = log.splitlines()
    for i, line in enumerate(lines):
        if re.search(r"\berror\b", line) and not line.startswith(("FAILED:", "ninja:", "subprocess")):
            return "\n".join(lines[i:i + 4])
    return "\n".join(lines[-10:])


@contextlib.contextmanager
def _locked(folder: Path):
    """Holds an exclusive lock on `folder` across processes; the kernel drops it when its holder dies."""
    with open(folder / ".myops.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class Builder:
    """Builds and loads the layers of one csrc/ tree into one build/ tree."""

    def __init__(self, csrc_dir: Path, build_dir: Path, prefix: str = "myops_"):
        self.csrc_dir = Path(csrc_dir)
        self.build_dir = Path(build_dir)
        self.prefix = prefix
        self.manifest = {layer.name: layer for layer in read_manifest(self.csrc_dir)}
        self._loaded: dict[str, str] = {}  # layer -> fingerprint of what this process loaded

    # -- what a layer is -------------------------------------------------------------------------
    def layers(self) -> list[str]:
        """Every layer of the tree, in load order."""
        return list(self.manifest)

    def course_layers(self) -> list[str]:
        """The layers that make up the extension, in load order."""
        return [name for name, layer in self.manifest.items() if layer.course]

    def layer(self, name: str) -> Layer:
        if name not in self.manifest:
            raise ValueError(f"myops: no layer named {name!r}; the layers are {self.layers()}")
        return self.manifest[name]

    def with_needs(self, names) -> list[str]:
        """`names` and every layer they need, each once, needs first."""
        ordered: list[str] = []

        def visit(name: str) -> None:
            for need in self.layer(name).needs:
                visit(need)
            if name not in ordered:
                ordered.append(name)

        for name in names:
            visit(name)
        return ordered

    @staticmethod
    def _sources_in(folder: Path) -> list[Path]:
        return sorted(p for p in folder.iterdir() if p.suffix in (".cpp", ".cu"))

    def sources(self, layer: str) -> list[Path]:
        path = self.csrc_dir / self.layer(layer).sources
        return self._sources_in(path) if path.is_dir() else [path]

    def is_cuda(self, layer: str) -> bool:
        return self.layer(layer).cuda

    def library_name(self, layer: str) -> str:
        return self.prefix + layer

    def library_path(self, layer: str) -> Path:
        return self.build_dir / layer / f"{self.library_name(layer)}.so"

    def loaded_layers(self) -> list[str]:
        return list(self._loaded)

    def fingerprint(self, layer: str) -> str:
        """Everything a build depends on: sources, the csrc/ headers they include, flags and the instruction set
        -march=native resolves to here, torch (and the GPU architectures of a CUDA layer)."""
        arch = toolchain.cuda_arch_list() if self.is_cuda(layer) else ""
        native = native_target(os.environ.get("CXX", "c++"))
        digest = hashlib.sha256(f"{torch.__version__}|{CXX_FLAGS}|{native}|{LD_FLAGS}|{CUDA_FLAGS}|{arch}".encode())
        for path in self.sources(layer) + self.headers(layer):
            digest.update(str(path.relative_to(self.csrc_dir)).encode())
            digest.update(path.read_bytes())
        return digest.hexdigest()

    def headers(self, layer: str) -> list[Path]:
        """The headers of csrc/ that the layer's sources include, directly or through one another."""
        found: set[Path] = set()
        pending = list(self.sources(layer))
        root = self.csrc_dir.resolve()
        while pending:
            including = pending.pop()
            for name in re.findall(r'^\s*#\s*include\s*"([^"]+)"', including.read_text(errors="replace"),
                                   flags=re.MULTILINE):
                # "..." is looked up beside the including file first, then on the include path (csrc/)
                header = next((h.resolve() for h in (including.parent / name, root / name) if h.is_file()), None)
                if header is not None and header not in found and header.is_relative_to(root):
                    found.add(header)
                    pending.append(header)
        return sorted(self.csrc_dir / h.relative_to(self.csrc_dir.resolve()) for h in found)

    # -- building and loading --------------------------------------------------------------------
    def load(self, layer: str) -> LoadResult:
        """Build `layer` if its sources changed, then load it; a no-op if this process has it already."""
        fingerprint = self.fingerprint(layer)
        if layer in self._loaded:
            if self._loaded[layer] == fingerprint:
                return LoadResult(layer, self.library_path(layer), built=False, seconds=None)
            raise LayerReloadError(
                f"myops: the C++ of layer {layer!r} changed after this process loaded it. A process "
                "cannot switch to a new build of a layer (loading the rebuilt file from the same path hands "
                "back the library already loaded, so the edit would be silently ignored; loading a copy from "
                "another path repeats its registrations, and a second definition aborts the process): restart "
                "the kernel (Kernel > Restart Kernel) and run the notebook again; the new build happens then.")
        cuda = self.is_cuda(layer)
        if cuda and (reason := toolchain.cuda_skip_reason()):
            raise LayerUnavailableError(f"myops: layer {layer!r} cannot be built here: {reason}", reason)
        if platform.system() != "Linux":
            raise LayerBuildError(
                f"myops: layer {layer!r} cannot be compiled on {platform.system()}: the course's build is made "
                "and tested on Linux only (on macOS, Apple clang has no OpenMP, which the kernels use to run "
                "on more than one thread); run the notebooks on Linux, e.g. in a Linux VM or container")
        compiler = os.environ.get("CXX", "c++")  # what cpp_extension compiles with
        if shutil.which(compiler) is None:
            raise LayerBuildError(f"myops: no C++ compiler {compiler!r} found to build layer {layer!r}; install "
                                  "g++ (or clang++), or point the CXX environment variable at one")

        out_dir = self.build_dir / layer
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise LayerBuildError(f"myops: cannot create the build directory {relative_path(out_dir)} for layer "
                                  f"{layer!r} ({error.strerror}); make it a writable folder, or remove it "
                                  "(make clean)") from None
        library = self.library_path(layer)
        # A stamp beside the library records the fingerprint it was built from: when it matches, the library
        # is loaded directly, sparing the import of cpp_extension and a ninja run (seconds per process).
        stamp = out_dir / "fingerprint"
        with self._exclusive(layer, out_dir):
            if library.is_file() and stamp.is_file() and stamp.read_text() == fingerprint:
                torch.ops.load_library(str(library))
                self._loaded[layer] = fingerprint
                return LoadResult(layer, library, built=False, seconds=None)
            stamp.unlink(missing_ok=True)
            built_before = library.stat().st_mtime_ns if library.exists() else None
            start = time.perf_counter()
            precompiling = self._compile_and_load(layer, out_dir, cuda)
            seconds = time.perf_counter() - start
            stamp.write_text(fingerprint)
        self._loaded[layer] = fingerprint
        built = library.stat().st_mtime_ns != built_before
        if built:
            first = f" ({precompiling:.1f} s of it precompiling {PRECOMPILED_HEADER})" if precompiling else ""
            print(f"myops: built layer {layer} in {seconds:.1f} s{first}", flush=True)
        return LoadResult(layer, library, built=built, seconds=seconds if built else None)

    def _compile_and_load(self, layer: str, out_dir: Path, cuda: bool) -> float | None:
        """Compiles and loads the layer; returns the seconds spent precompiling the header first, if any."""
        cpp_extension = _cpp_extension()
        includes = [str(self.csrc_dir)] + (toolchain.cuda_include_paths() if cuda else [])
        sources = self.sources(layer)
        has_cpp = any(source.suffix == ".cpp" for source in sources)  # nvcc compiles .cu files without it
        precompiled, precompiling = precompiled_header(cpp_extension, cuda) if has_cpp else ([], None)
        try:
            with self._cuda_environment(cpp_extension) if cuda else contextlib.nullcontext():
                cpp_extension.load(
                    name=self.library_name(layer),
                    sources=[str(p) for p in sources],
                    # fresh lists: cpp_extension appends to the lists it is given
                    extra_cflags=[*CXX_FLAGS, *precompiled],
                    extra_cuda_cflags=list(CUDA_FLAGS),
                    extra_ldflags=list(LD_FLAGS),
                    extra_include_paths=includes,
                    build_directory=str(out_dir),
                    is_python_module=False,
                    verbose=False,
                )
        except RuntimeError as error:
            if "Error building extension" not in str(error):
                raise
            log = out_dir / "build.log"
            log.write_text(str(error))
            first = _first_compiler_error(str(error))
            raise LayerBuildError(
                f"myops: layer {layer!r} failed to compile. First error:\n{first}\n(full log: {relative_path(log)})",
                first_error=first.splitlines()[0] if first else None, log=log) from None
        return precompiling

    @contextlib.contextmanager
    def _exclusive(self, layer: str, out_dir: Path):
        """One build of a layer at a time across processes, and recovery from a killed build.

        The lock can never go stale (see _locked). While holding it we know no other build is running:
        a leftover marker means the last build was killed, and cpp_extension's own `lock` file from then
        (torch <= 2.13 waits forever on it) is stale.
        """
        marker = out_dir / "BUILDING"
        with _locked(out_dir):
            if marker.exists():
                (out_dir / "lock").unlink(missing_ok=True)
                print(f"myops: layer {layer}: an earlier build was interrupted; removed its stale "
                      "lock and building again", flush=True)
            marker.write_text(str(os.getpid()))
            try:
                yield
            finally:
                marker.unlink(missing_ok=True)

    @staticmethod
    @contextlib.contextmanager
    def _cuda_environment(cpp_extension):
        """CUDA_HOME and TORCH_CUDA_ARCH_LIST as cpp_extension needs them, for this build only."""
        home = str(toolchain.find_cuda_home())
        saved_env = {k: os.environ.get(k) for k in ("CUDA_HOME", "TORCH_CUDA_ARCH_LIST")}
        saved_home = cpp_extension.CUDA_HOME
        os.environ["CUDA_HOME"] = home
        os.environ["TORCH_CUDA_ARCH_LIST"] = toolchain.cuda_arch_list()
        cpp_extension.CUDA_HOME = home
        try:
            yield
        finally:
            cpp_extension.CUDA_HOME = saved_home
            for key, value in saved_env.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


@functools.lru_cache(maxsize=None)
def _compiler_macros(compiler: str, flags: tuple[str, ...] = ()) -> str:
    """What the compiler predefines with `flags`: says which compiler it is, its version, its target."""
    try:
        result = subprocess.run([compiler, *flags, "-dM", "-E", "-x", "c++", os.devnull], capture_output=True,
                                text=True, timeout=60)
    except OSError:  # no such compiler: load() names it
        return ""
    return result.stdout if result.returncode == 0 else ""


def native_target(compiler: str) -> str:
    """What the compiler predefines with CXX_FLAGS' target flags: its own version and, for -march=native, the
    instruction sets of this CPU (__AVX2__, __AVX512F__, ...).

    CXX_FLAGS says "-march=native", the same string on every machine; a build/ made on an AVX-512 machine and
    loaded on one without (a copied checkout, a shared home directory) would die of SIGILL. Hashing what the
    flag resolves to, here and now, makes such a machine, or another compiler, rebuild instead.
    """
    return _compiler_macros(compiler, tuple(flag for flag in CXX_FLAGS if flag.startswith("-m")))


def precompiled_header(cpp_extension, cuda: bool = False,
                       directory: Path = PRECOMPILED_HEADER_DIR) -> tuple[list[str], float | None]:
    """The flags that make a layer's C++ compiles read the precompiled torch headers, and the seconds spent
    precompiling them when this torch, compiler and flag set had no image yet (see NOTE [ The precompiled
    header ]). GCC only: for another compiler, or with MYOPS_PRECOMPILED_HEADER=0, no flags."""
    if os.environ.get("MYOPS_PRECOMPILED_HEADER") == "0":
        return [], None
    compiler = os.environ.get("CXX", "c++")
    macros = _compiler_macros(compiler)
    if "__GNUC__" not in macros or "__clang__" in macros:
        return [], None
    # The flags cpp_extension gives every C++ file of a build (its name define aside: the header never reads
    # it), then ours.
    system_includes = cpp_extension.include_paths("cuda" if cuda else "cpu") + [
        sysconfig.get_path("include", scheme="posix_prefix")]
    flags = ["-DTORCH_API_INCLUDE_EXTENSION_H", *(f for p in system_includes for f in ("-isystem", p)),
             "-fPIC", "-std=c++20", *CXX_FLAGS]
    digest = hashlib.sha256(f"{torch.__version__}|{compiler}|{macros}|{native_target(compiler)}|{flags}".encode())
    digest = digest.hexdigest()[:16]
    out_dir = directory / digest  # one image per flag set: CPU and CUDA builds differ
    header = out_dir / "precompiled.h"
    image = out_dir / "precompiled.h.gch"
    out_dir.mkdir(parents=True, exist_ok=True)
    seconds = None
    with _locked(out_dir):  # a killed build leaves only a .tmp file behind
        if not image.is_file():
            start = time.perf_counter()
            header.write_text(f"#include <{PRECOMPILED_HEADER}>\n")
            partial = image.with_suffix(".tmp")
            result = subprocess.run([compiler, *flags, "-x", "c++-header", str(header), "-o", str(partial)],
                                    capture_output=True, text=True, timeout=600)
            if result.returncode != 0:  # not fatal: the layers then parse the header as text
                print(f"myops: could not precompile {PRECOMPILED_HEADER}; compiling without it:\n"
                      f"{_first_compiler_error(result.stderr)}", flush=True)
                return [], None
            partial.rename(image)
            seconds = time.perf_counter() - start
    return ["-include", str(header)], seconds


_BUILDER = Builder(REPO_ROOT / "csrc", REPO_ROOT / "build")
_skipped: set[str] = set()


def load_layer(layer: str) -> LoadResult:
    """Build (if needed) and load one layer of csrc/ into this process."""
    return _BUILDER.load(layer)


def load(*layers: str) -> list[str]:
    """Load the given layers (and the layers they need), or every layer of the course in stage order;
    returns the loaded ones.

    With no names, a layer this machine cannot build (the CUDA layer without a CUDA toolchain) is
    skipped, with the reason printed once; a layer named explicitly is built or raises.
    """
    for layer in _BUILDER.with_needs(layers or _BUILDER.course_layers()):
        try:
            _BUILDER.load(layer)
        except LayerUnavailableError as error:
            if layer in layers:
                raise
            if layer not in _skipped:
                _skipped.add(layer)
                print(f"{error}; skipping it", flush=True)
    return _BUILDER.loaded_layers()


def loaded_layers() -> list[str]:
    """The layers loaded into this process so far, in load order."""
    return _BUILDER.loaded_layers()


def main(argv: list[str] | None = None) -> int:
    """`python -m myops.build [LAYER ...]`: build and load layers in a fresh process (a prebuild).

    With no names it builds every layer of the course that this machine can build and names each
    skipped one with its reason (exit 0); a named layer that cannot be built is an error (exit 1).
    """
    import argparse

    parser = argparse.ArgumentParser(prog="python -m myops.build", description=main.__doc__.splitlines()[0])
    parser.add_argument("layers", nargs="*", help="layers to build (default: every layer of the course)")
    parser.add_argument("--csrc", type=Path, default=REPO_ROOT / "csrc", help="the C++ tree")
    parser.add_argument("--build", type=Path, default=REPO_ROOT / "build", help="where the libraries go")
    parser.add_argument("--prefix", default="myops_", help="library name prefix")
    parser.add_argument("--json", action="store_true", help="print one JSON object per layer instead of text")
    parser.add_argument("--jobs", "-j", type=int, default=1, metavar="N",
                        help="build up to N layers at once, each in a process of its own, a layer once the "
                             "layers it needs are built (default: 1, every layer in this process)")
    args = parser.parse_args(argv)
    builder = Builder(args.csrc, args.build, args.prefix)
    try:
        names = builder.with_needs(args.layers or builder.course_layers())
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    out = sys.stdout
    # In JSON mode the human-readable lines go to stderr, so stdout is JSON only.
    with contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext():
        if args.jobs > 1:
            return _build_in_parallel(builder, args, names, out)
        for layer in names:
            try:
                result = builder.load(layer).to_json()
            except LayerUnavailableError as error:
                if layer in args.layers:
                    print(error, file=sys.stderr)
                    return 1
                result = _skipped_layer(layer, error, args.json)
            except LayerBuildError as error:
                print(error, file=sys.stderr)
                return 1
            if args.json:
                print(json.dumps(result), file=out, flush=True)
    return 0


def _skipped_layer(layer: str, error: LayerUnavailableError, as_json: bool) -> dict:
    if not as_json:
        print(f"{error}; skipping it", flush=True)
    return {"layer": layer, "skipped": str(error)}


def _build_in_parallel(builder: Builder, args, names: list[str], out) -> int:
    """`main` with --jobs N: each layer built by a `python -m myops.build LAYER` of its own, N at a time.

    A child loads the layers its layer needs first; those are built already, so it only loads them. The per-layer
    locks (Builder._exclusive) and the precompiled header's keep children from building one thing twice.
    """
    pending, running, done, failed = list(names), {}, set(), False
    results: dict[str, dict] = {}
    common = ["--csrc", str(args.csrc), "--build", str(args.build), "--prefix", args.prefix, "--json"]
    while pending or running:
        for layer in [name for name in pending if set(builder.layer(name).needs) <= done]:
            if failed or len(running) >= args.jobs:
                break
            pending.remove(layer)
            if builder.is_cuda(layer) and (reason := toolchain.cuda_skip_reason()):
                error = LayerUnavailableError(f"myops: layer {layer!r} cannot be built here: {reason}")
                if layer in args.layers:
                    print(error, file=sys.stderr)
                    failed = True
                    continue
                results[layer] = _skipped_layer(layer, error, args.json)
                done.add(layer)
                continue
            running[layer] = subprocess.Popen([sys.executable, "-m", "myops.build", *common, layer],
                                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if failed and not running:
            break
        if not running:  # every pending layer waits on one that failed or was skipped
            break
        finished = _wait_for_any(running)
        child = running.pop(finished)
        stdout, stderr = child.communicate()
        if child.returncode != 0:
            print(stderr.rstrip(), file=sys.stderr, flush=True)
            failed = True
            continue
        print("".join(line + "\n" for line in stderr.splitlines() if line.startswith("myops: built layer")),
              end="", flush=True)
        results[finished] = next(r for r in map(json.loads, stdout.splitlines()) if r["layer"] == finished)
        done.add(finished)
    if args.json:
        for layer in names:
            if layer in results:
                print(json.dumps(results[layer]), file=out, flush=True)
    return 1 if failed or pending else 0


def _wait_for_any(running: dict[str, subprocess.Popen]) -> str:
    while True:
        for layer, child in running.items():
            if child.poll() is not None:
                return layer
        time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main())
