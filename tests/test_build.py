"""The build helper: no-op when up to date, refuses stale reloads, recovers killed builds, clear errors."""
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
import torch

from myops import build, toolchain

PROBE = textwrap.dedent("""\
    #include <torch/library.h>
    TORCH_LIBRARY({namespace}, m) {{
      m.def("{op}(Tensor self) -> Tensor");
    }}
    """)


def make_tree(root, namespace, op="probe"):
    """A csrc/ tree with one layer, `probe`, that defines its own namespace."""
    csrc = root / "csrc"
    (csrc / "probe").mkdir(parents=True, exist_ok=True)
    (csrc / "probe" / "probe.cpp").write_text(PROBE.format(namespace=namespace, op=op))
    return csrc, root / "build"


def load_probe_command(csrc, build_dir):
    """Build and load the probe layer in a fresh interpreter (a layer can be loaded once per process)."""
    return [sys.executable, "-m", "myops.build", "--csrc", str(csrc), "--build", str(build_dir),
            "--prefix", "probe_", "probe"]


def load_probe(csrc, build_dir, timeout=600):
    return subprocess.run(load_probe_command(csrc, build_dir), capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def probe_tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("tree")
    return make_tree(root, f"probe_{uuid.uuid4().hex[:8]}")


def test_first_build_prints_one_line_then_up_to_date_is_silent(probe_tree):
    csrc, build_dir = probe_tree
    first = load_probe(csrc, build_dir)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("myops: built layer probe in ") and first.stdout.count("\n") == 1
    library = build_dir / "probe" / "probe_probe.so"
    built_at = library.stat().st_mtime_ns

    second = load_probe(csrc, build_dir)
    assert second.returncode == 0, second.stderr
    assert second.stdout == ""
    assert library.stat().st_mtime_ns == built_at


def test_changed_layer_is_refused_in_the_same_process(tmp_path):
    csrc, _ = make_tree(tmp_path, f"probe_{uuid.uuid4().hex[:8]}")
    builder = build.Builder(csrc, tmp_path / "build", prefix=f"probe_{uuid.uuid4().hex[:8]}_")
    first = builder.load("probe")
    assert first.built and first.seconds > 0 and first.library == tmp_path / "build" / "probe" / f"{builder.prefix}probe.so"
    again = builder.load("probe")  # unchanged: a no-op
    assert not again.built and again.seconds is None and again.library == first.library
    source = csrc / "probe" / "probe.cpp"
    source.write_text(source.read_text().replace("probe(Tensor self)", "probe(Tensor self, int n=1)"))
    with pytest.raises(build.LayerReloadError, match="restart the kernel"):
        builder.load("probe")
    assert builder.loaded_layers() == ["probe"]


def test_a_change_of_an_included_header_counts_and_no_other(tmp_path):
    csrc, build_dir = make_tree(tmp_path, "unused")
    source = csrc / "probe" / "probe.cpp"
    source.write_text('#include "shared.h"\n' + source.read_text())
    (csrc / "shared.h").write_text('#pragma once\n#include "probe/detail.h"\n')
    (csrc / "probe" / "detail.h").write_text("#pragma once\n")
    builder = build.Builder(csrc, build_dir)
    assert builder.headers("probe") == [csrc / "probe" / "detail.h", csrc / "shared.h"]
    before = builder.fingerprint("probe")
    (csrc / "unrelated.h").write_text("#pragma once\n")  # included by no source of the layer
    assert builder.fingerprint("probe") == before
    (csrc / "probe" / "detail.h").write_text("#pragma once\nint changed;\n")  # included through shared.h
    assert builder.fingerprint("probe") != before


def test_killed_build_is_recovered_with_a_message(tmp_path):
    csrc, build_dir = make_tree(tmp_path, f"probe_{uuid.uuid4().hex[:8]}")
    victim = subprocess.Popen(load_probe_command(csrc, build_dir), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    marker = build_dir / "probe" / "BUILDING"
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert time.monotonic() < deadline and victim.poll() is None, "the build never started"
        time.sleep(0.05)
    os.killpg(victim.pid, signal.SIGKILL)  # the interpreter, ninja and the compiler
    victim.wait()
    # What a killed build of torch <= 2.13 leaves behind, and what it then waits on forever.
    (build_dir / "probe" / "lock").touch()

    recovered = load_probe(csrc, build_dir, timeout=120)
    assert recovered.returncode == 0, recovered.stderr
    lines = recovered.stdout.splitlines()
    assert lines[0] == ("myops: layer probe: an earlier build was interrupted; "
                        "removed its stale lock and building again")
    assert lines[1].startswith("myops: built layer probe in ")
    assert not marker.exists()


def test_compile_error_shows_the_first_error(tmp_path):
    csrc, build_dir = make_tree(tmp_path, "never_loaded")
    source = csrc / "probe" / "probe.cpp"
    source.write_text(source.read_text() + "\nint broken( {\n")
    builder = build.Builder(csrc, build_dir, prefix="broken_")
    with pytest.raises(build.LayerBuildError) as error:
        builder.load("probe")
    message = str(error.value)
    assert message.startswith("myops: layer 'probe' failed to compile. First error:\n")
    assert "probe.cpp:6" in message and "error:" in message
    assert "full log:" in message and (build_dir / "probe" / "build.log").exists()
    assert "ninja" not in message.splitlines()[1]


def test_unknown_layer_names_the_layers(tmp_path):
    csrc, build_dir = make_tree(tmp_path, "unused")
    with pytest.raises(ValueError, match=r"no layer named 'cpuu'; the layers are \['probe'\]"):
        build.Builder(csrc, build_dir).load("cpuu")


def test_cuda_layer_skipped_with_the_reason(tmp_path, monkeypatch):
    csrc, build_dir = make_tree(tmp_path, "unused")
    (csrc / "gpu").mkdir()
    (csrc / "gpu" / "kernel.cu").write_text("// nothing\n")
    monkeypatch.setattr(torch.version, "cuda", None)
    with pytest.raises(build.LayerUnavailableError, match="layer 'gpu' cannot be built here: torch .* is a "
                       "CPU-only build; install a CUDA build of torch"):
        build.Builder(csrc, build_dir).load("gpu")


def test_missing_toolkit_reason(monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(toolchain, "pip_toolkit_root", lambda: None)
    monkeypatch.setattr(toolchain, "system_toolkit_root", lambda: None)
    assert toolchain.cuda_skip_reason() == (
        "no CUDA compiler for torch's CUDA 13.0 found (none from pip, none of CUDA 13 on PATH or in "
        "/usr/local/cuda); install the pinned CUDA compiler with "
        "`pip install -r requirements.txt` (nvidia-cuda-nvcc, nvidia-nvvm, nvidia-cuda-crt), "
        "or set CUDA_HOME to a CUDA toolkit")


def fake_toolkit(root):
    """The files of a toolkit that matter for finding it, laid out as pip installs them."""
    for folder in ("bin", "include", "lib", "nvvm"):
        (root / folder).mkdir(parents=True)
    (root / "bin" / "nvcc").write_text("nvcc")
    (root / "bin" / "ptxas").write_text("ptxas")
    (root / "include" / "cuda_runtime.h").write_text("")
    for name in ("libcudart.so.13", "libnvrtc.so.13", "libnvrtc.alt.so.13", "libcudart_static.a"):
        (root / "lib" / name).write_text(name)
    return root


def system_toolkit(root, cudart_version=13000):
    """A system toolkit's layout (bin/, include/, lib64/) of one CUDA release."""
    for folder in ("bin", "include", "lib64"):
        (root / folder).mkdir(parents=True)
    (root / "bin" / "nvcc").write_text("nvcc")
    (root / "include" / "cuda_runtime.h").write_text("")
    (root / "include" / "cuda_runtime_api.h").write_text(f"#define CUDART_VERSION {cudart_version}\n")
    return root


def test_without_pip_nvcc_the_system_toolkit_of_torchs_major_is_used(tmp_path, monkeypatch):
    """A GPU machine's own Python: no pip nvcc; the toolkit is found through PATH (links resolved), else
    /usr/local/cuda, and one of another CUDA major version is passed over."""
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    for name in ("CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(toolchain, "pip_toolkit_root", lambda: None)
    on_path = system_toolkit(tmp_path / "cuda-13.0")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "nvcc").symlink_to(on_path / "bin" / "nvcc")
    (on_path / "bin" / "nvcc").chmod(0o755)
    fallback = system_toolkit(tmp_path / "usr-local-cuda", cudart_version=13020)
    monkeypatch.setattr(toolchain, "SYSTEM_TOOLKIT", fallback)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert toolchain.toolkit_cuda_version(on_path) == "13.0" and toolchain.toolkit_cuda_version(fallback) == "13.2"
    assert toolchain.find_cuda_home() == on_path and toolchain.cuda_skip_reason() is None
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert toolchain.find_cuda_home() == fallback
    monkeypatch.setattr(torch.version, "cuda", "12.8")  # both toolkits are CUDA 13
    assert toolchain.find_cuda_home() is None and toolchain.cuda_skip_reason().startswith(
        "no CUDA compiler for torch's CUDA 12.8 found (none from pip, none of CUDA 12 on PATH or in ")


def test_cuda_home_names_the_toolkit(tmp_path, monkeypatch):
    toolkit = fake_toolkit(tmp_path / "cuda")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.setenv("CUDA_PATH", str(toolkit))
    assert toolchain.find_cuda_home() == toolkit
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "nowhere"))
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    assert toolchain.find_cuda_home() is None
    assert toolchain.cuda_skip_reason() == (
        f"CUDA_HOME={tmp_path / 'nowhere'} is not a CUDA toolkit (no bin/nvcc and include/cuda_runtime.h); "
        "point it at one, or unset it to use the pip toolkit")


def test_pip_toolkit_is_laid_out_as_nvcc_and_cpp_extension_expect(tmp_path):
    root = fake_toolkit(tmp_path / "site-packages" / "nvidia" / "cu13")
    layout = toolchain.toolkit_layout(root, tmp_path / "layout")
    # nvcc a real file (it resolves symbolic links to find its toolkit), the rest links
    assert not (layout / "bin" / "nvcc").is_symlink() and (layout / "bin" / "nvcc").read_text() == "nvcc"
    assert (layout / "bin" / "ptxas").resolve() == root / "bin" / "ptxas"
    assert (layout / "include").resolve() == root / "include"
    # the linker names cpp_extension (-lcudart) and CMake (nvrtc) look for, in lib64
    assert (layout / "lib64" / "libcudart.so").resolve() == root / "lib" / "libcudart.so.13"
    assert (layout / "lib64" / "libnvrtc.so").resolve() == root / "lib" / "libnvrtc.so.13"
    assert (layout / "lib64" / "libcudart_static.a").exists()
    assert not (layout / "lib64" / "libnvrtc.alt.so").exists()
    made = (layout / "STAMP").stat().st_mtime_ns
    assert toolchain.toolkit_layout(root, tmp_path / "layout") == layout
    assert (layout / "STAMP").stat().st_mtime_ns == made  # made once
    assert not any((root / "lib").glob("*.so"))  # site-packages untouched


CUDA_PROBE = textwrap.dedent("""\
    // The headers the CUDA layer uses, a kernel, and a CUDA registration.
    #include <ATen/core/Tensor.h>
    #include <ATen/cuda/CUDAContext.h>
    #include <ATen/ops/empty_like.h>
    #include <c10/cuda/CUDAException.h>
    #include <c10/cuda/CUDAGuard.h>
    #include <c10/util/Half.h>
    #include <torch/library.h>

    __global__ void twice(const float* x, float* out, int64_t n) {{
      int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
      if (i < n) out[i] = 2 * x[i];
    }}

    at::Tensor twice_cuda(const at::Tensor& x) {{
      c10::cuda::CUDAGuard guard(x.device());
      auto out = at::empty_like(x);
      twice<<<1, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      return out;
    }}

    TORCH_LIBRARY({namespace}, m) {{ m.def("twice(Tensor x) -> Tensor"); }}
    TORCH_LIBRARY_IMPL({namespace}, CUDA, m) {{ m.impl("twice", twice_cuda); }}
    """)


@pytest.mark.skipif(toolchain.cuda_skip_reason() is not None, reason=str(toolchain.cuda_skip_reason()))
def test_cuda_layer_builds_without_a_system_toolkit(tmp_path):
    from helpers import without_system_cuda, without_system_cuda_reason
    if without_system_cuda_reason():
        pytest.skip(without_system_cuda_reason())
    namespace = f"cuda_probe_{uuid.uuid4().hex[:8]}"
    csrc = tmp_path / "csrc"
    (csrc / "gpu").mkdir(parents=True)
    (csrc / "gpu" / "twice.cu").write_text(CUDA_PROBE.format(namespace=namespace))
    check = (f"import sys, torch; from myops import build; build.main(sys.argv[1:]); "
             f"assert torch._C._dispatch_has_kernel_for_dispatch_key('{namespace}::twice', 'CUDA'); print('registered')")
    result = subprocess.run(without_system_cuda([sys.executable, "-c", check, "--csrc", str(csrc), "--build",
                                                 str(tmp_path / "build"), "--prefix", "probe_", "gpu"]),
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("myops: built layer gpu in ") and result.stdout.endswith("registered\n")


def cli(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "myops.build", *args], capture_output=True, text=True,
                          timeout=600, **kwargs)


IMPL = textwrap.dedent("""\
    #include <torch/library.h>
    at::Tensor same(const at::Tensor& self) {{ return self; }}
    TORCH_LIBRARY_IMPL({namespace}, {key}, m) {{ m.impl("probe", same); }}
    """)


def test_jobs_build_layers_in_processes_of_their_own_needs_first(tmp_path):
    namespace = f"par_{uuid.uuid4().hex[:8]}"
    csrc = tmp_path / "csrc"
    layers = {"base": PROBE.format(namespace=namespace, op="probe"),
              "left": IMPL.format(namespace=namespace, key="CPU"), "right": IMPL.format(namespace=namespace, key="Meta"),
              "broken": "#include <torch/library.h>\nint broken = ;\n"}
    for name, text in layers.items():
        (csrc / name).mkdir(parents=True)
        (csrc / name / f"{name}.cpp").write_text(text)
    manifest = [{"name": "base", "sources": "base", "needs": []}, {"name": "left", "sources": "left", "needs": ["base"]},
                {"name": "right", "sources": "right", "needs": ["base"]},
                {"name": "broken", "sources": "broken", "course": False, "needs": ["base"]}]
    (csrc / "layers.json").write_text(json.dumps({"layers": manifest}))
    common = ("--csrc", str(csrc), "--build", str(tmp_path / "build"), "--prefix", "par_", "--jobs", "3")
    result = cli(*common, "--json")
    assert result.returncode == 0, result.stderr
    built = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["layer"] for r in built] == ["base", "left", "right"] and all(r["built"] for r in built)
    # base first: left and right start only once it is built, each in its own process
    assert sorted(re.findall(r"built layer (\w+)", result.stderr)) == ["base", "left", "right"]
    assert re.findall(r"built layer (\w+)", result.stderr)[0] == "base"
    failed = cli(*common, "broken", "left")
    assert failed.returncode == 1 and "myops: layer 'broken' failed to compile. First error:" in failed.stderr
    assert failed.stdout == ""  # left and base were up to date: nothing built


def test_cli_builds_what_it_can_and_names_what_it_skips(tmp_path):
    csrc, build_dir = make_tree(tmp_path, f"probe_{uuid.uuid4().hex[:8]}")
    (csrc / "gpu").mkdir()
    (csrc / "gpu" / "kernel.cu").write_text("// never compiled: no toolkit\n")
    env = {**os.environ, "CUDA_HOME": str(tmp_path / "no-toolkit")}  # what a machine without one reports
    skipped = cli("--csrc", str(csrc), "--build", str(build_dir), "--prefix", "cli_", env=env)
    assert skipped.returncode == 0, skipped.stderr
    lines = skipped.stdout.splitlines()
    assert lines[0] == "myops: layer 'gpu' cannot be built here: " + (
        f"CUDA_HOME={tmp_path / 'no-toolkit'} is not a CUDA toolkit (no bin/nvcc and include/cuda_runtime.h); "
        "point it at one, or unset it to use the pip toolkit; skipping it"
        if torch.version.cuda else f"torch {torch.__version__} is a CPU-only build; install a CUDA build of "
        "torch (the pinned torch==2.14.1 from PyPI is one) to compile CUDA kernels; skipping it")
    assert lines[1].startswith("myops: built layer probe in ")

    named = cli("--csrc", str(csrc), "--build", str(build_dir), "--prefix", "cli_", "gpu", env=env)
    assert named.returncode == 1 and named.stdout == ""
    assert named.stderr.strip().splitlines()[-1].startswith("myops: layer 'gpu' cannot be built here: ")
    assert "Traceback" not in named.stderr

    as_json = cli("--csrc", str(csrc), "--build", str(build_dir), "--prefix", "cli_", "--json", env=env)
    assert as_json.returncode == 0, as_json.stderr
    rows = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert rows[0]["layer"] == "gpu" and "cannot be built here" in rows[0]["skipped"]
    assert rows[1] == {"layer": "probe", "library": str(build_dir / "probe" / "cli_probe.so"), "built": False,
                       "seconds": None}


def test_cli_names_an_unknown_layer_without_a_traceback(tmp_path):
    csrc, build_dir = make_tree(tmp_path, "unused")
    result = cli("--csrc", str(csrc), "--build", str(build_dir), "cpuu")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == "myops: no layer named 'cpuu'; the layers are ['probe']"


def test_manifest_lists_every_folder_of_csrc():
    course = build.Builder(build.REPO_ROOT / "csrc", build.REPO_ROOT / "build")
    names = [layer.name for layer in build.read_manifest(build.REPO_ROOT / "csrc")]
    assert len(names) == len(set(names)), names
    listed = {course.layer(name).sources for name in course.layers()}
    folders = {p.name for p in (build.REPO_ROOT / "csrc").iterdir()
               if p.is_dir() and any(f.suffix in (".cpp", ".cu") for f in p.rglob("*"))}
    # Not layers: the stable-ABI operators are built into a wheel (stable/), and deploy/ is the C++ runner of
    # notebook 15, a program of its own (csrc/deploy/CMakeLists.txt).
    assert folders - listed == {"stable", "deploy"}
    assert course.course_layers()[0] == "schema"
    assert course.with_needs(["mistakes"]) == ["schema", "cpu", "mistakes"]
    assert [name for name in course.layers() if course.is_cuda(name)] == ["cuda"]  # the manifest's flag
    assert [name for name in course.layers() if any(p.suffix == ".cu" for p in course.sources(name))] == ["cuda"]


def test_what_march_native_resolves_to_is_part_of_the_fingerprint(tmp_path, monkeypatch):
    """A build/ made on another CPU (AVX-512 here, AVX2 there) or with another compiler is rebuilt, not loaded."""
    csrc, build_dir = make_tree(tmp_path, "unused")
    builder = build.Builder(csrc, build_dir)
    here = builder.fingerprint("probe")
    if "-march=native" in build.CXX_FLAGS:
        assert "__SSE2__" in build.native_target("c++")  # every x86-64 CPU has it: the CPU's features are in
    monkeypatch.setattr(build, "_compiler_macros", lambda compiler, flags=(): "#define __AVX2__ 1\n")
    avx2_only = builder.fingerprint("probe")
    monkeypatch.setattr(build, "_compiler_macros", lambda compiler, flags=(): "#define __AVX512F__ 1\n")
    assert len({here, avx2_only, builder.fingerprint("probe")}) == 3


def test_arch_list_is_overridable(monkeypatch):
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    assert toolchain.cuda_arch_list() == "9.0"
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST")
    if not torch.cuda.is_available():
        assert toolchain.cuda_arch_list() == toolchain.DEFAULT_CUDA_ARCH_LIST


def test_other_systems_get_one_clear_message(tmp_path, monkeypatch):
    csrc, build_dir = make_tree(tmp_path, "unused")
    monkeypatch.setattr(build.platform, "system", lambda: "Darwin")
    with pytest.raises(build.LayerBuildError, match=r"^myops: layer 'probe' cannot be compiled on Darwin: the "
                       r"course's build is made and tested on Linux only \(on macOS, Apple clang has no OpenMP"):
        build.Builder(csrc, build_dir).load("probe")


def test_missing_compiler_is_named(tmp_path, monkeypatch):
    csrc, build_dir = make_tree(tmp_path, "unused")
    monkeypatch.setenv("CXX", "no-such-c++")
    with pytest.raises(build.LayerBuildError, match=r"^myops: no C\+\+ compiler 'no-such-c\+\+' found to build "
                       r"layer 'probe'; install g\+\+ \(or clang\+\+\), or point the CXX environment variable"):
        build.Builder(csrc, build_dir).load("probe")


def test_unusable_build_directory_is_named(tmp_path):
    csrc, _ = make_tree(tmp_path, "unused")
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")  # a file where the build directory should be: not even root can create it
    with pytest.raises(build.LayerBuildError, match=r"^myops: cannot create the build directory .* for layer "
                       r"'probe' \(Not a directory\); make it a writable folder, or remove it"):
        build.Builder(csrc, blocker / "build").load("probe")


def test_builds_need_no_network(tmp_path):
    # A build in a network namespace of its own, which has no route anywhere: nothing is downloaded.
    if subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=60).returncode != 0:
        pytest.skip("unshare -n is not permitted here")
    csrc, build_dir = make_tree(tmp_path, f"probe_{uuid.uuid4().hex[:8]}")
    result = subprocess.run(["unshare", "-n", *load_probe_command(csrc, build_dir)], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("myops: built layer probe")


def test_libraries_load_only_from_the_build_directory(layers):
    mapped = {line.split()[-1] for line in open("/proc/self/maps") if "myops_" in line and line.endswith(".so\n")}
    assert mapped, "no myops library is mapped"
    assert all(Path(path).is_relative_to(build.REPO_ROOT / "build") for path in mapped), mapped


def test_layers_read_the_precompiled_header(layers):
    # GCC parses the header as text, silently, when its image was made with other flags than a compile's. With
    # a mismatch made an error, compile with exactly the flags cpp_extension gave a layer, and with one changed.
    ninja = (build.REPO_ROOT / "build" / "cpu" / "build.ninja").read_text()
    cflags = shlex.split(re.search(r"^cflags = (.*)$", ninja, flags=re.MULTILINE).group(1))
    flags, _ = build.precompiled_header(build._cpp_extension())
    if not flags:
        pytest.skip("the compiler is not GCC: layers compile without the precompiled header")
    assert flags[0] in cflags and cflags[cflags.index(flags[0]) + 1] == flags[1]

    def compile_with(*changed):
        return subprocess.run([os.environ.get("CXX", "c++"), *cflags, *changed, "-Werror=invalid-pch", "-fsyntax-only",
                               "-x", "c++", "-"], input="int f();\n", capture_output=True, text=True, timeout=120)

    assert compile_with().returncode == 0, compile_with().stderr
    refused = compile_with("-fno-PIC").stderr  # "...gch: created and used with different settings of -fpic"
    assert "precompiled.h.gch" in refused and "differen" in refused, refused


def test_two_processes_building_one_fresh_layer_build_it_once(tmp_path):
    csrc, build_dir = make_tree(tmp_path, f"probe_{uuid.uuid4().hex[:8]}")
    both = [subprocess.Popen(load_probe_command(csrc, build_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True) for _ in range(2)]
    outputs = [child.communicate(timeout=600) for child in both]
    assert [child.returncode for child in both] == [0, 0], outputs
    built = [line for out, _ in outputs for line in out.splitlines() if line.startswith("myops: built layer probe")]
    assert len(built) == 1, outputs  # the second waited on the lock, then loaded what the first built


def test_a_flag_change_is_refused_in_the_same_process_like_a_source_edit(tmp_path, monkeypatch):
    csrc, _ = make_tree(tmp_path, f"probe_{uuid.uuid4().hex[:8]}")
    builder = build.Builder(csrc, tmp_path / "build", prefix=f"probe_{uuid.uuid4().hex[:8]}_")
    builder.load("probe")
    monkeypatch.setattr(build, "CXX_FLAGS", (*build.CXX_FLAGS, "-DCHANGED"))
    with pytest.raises(build.LayerReloadError, match="restart the kernel"):
        builder.load("probe")


def test_a_header_change_is_refused_in_the_same_process(tmp_path):
    csrc, _ = make_tree(tmp_path, f"probe_{uuid.uuid4().hex[:8]}")
    source = csrc / "probe" / "probe.cpp"
    source.write_text('#include "shared.h"\n' + source.read_text())
    (csrc / "shared.h").write_text("#pragma once\n")
    builder = build.Builder(csrc, tmp_path / "build", prefix=f"probe_{uuid.uuid4().hex[:8]}_")
    builder.load("probe")
    (csrc / "shared.h").write_text("#pragma once\ninline int changed() { return 1; }\n")
    with pytest.raises(build.LayerReloadError, match="restart the kernel"):
        builder.load("probe")


def test_without_the_precompiled_header_no_include_flag(monkeypatch):
    monkeypatch.setenv("MYOPS_PRECOMPILED_HEADER", "0")
    assert build.precompiled_header(build._cpp_extension()) == ([], None)


def _gcc() -> bool:
    macros = build._compiler_macros(os.environ.get("CXX", "c++"))
    return "__GNUC__" in macros and "__clang__" not in macros


@pytest.mark.skipif(not _gcc(), reason="the precompiled header is made by GCC only")
def test_a_failing_precompile_is_not_fatal(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(build, "PRECOMPILED_HEADER", "no/such/header.h")
    assert build.precompiled_header(build._cpp_extension(), directory=tmp_path) == ([], None)
    assert "myops: could not precompile no/such/header.h; compiling without it:" in capsys.readouterr().out


@pytest.mark.skipif(not _gcc(), reason="the precompiled header is made by GCC only")
def test_an_interrupted_precompile_is_made_again(tmp_path, monkeypatch):
    # A small header: the recovery is the same, and precompiling torch/library.h twice took ~18 s of CPU.
    monkeypatch.setattr(build, "PRECOMPILED_HEADER", "c10/macros/Macros.h")
    flags, seconds = build.precompiled_header(build._cpp_extension(), directory=tmp_path)
    image = Path(flags[1] + ".gch")
    assert seconds is not None and image.is_file()
    image.unlink()  # what a killed precompile leaves: no image, a partial .tmp beside it
    image.with_suffix(".tmp").write_bytes(b"half an image")
    again, seconds = build.precompiled_header(build._cpp_extension(), directory=tmp_path)
    assert again == flags and seconds is not None and image.read_bytes()[:4] == b"gpch"
    assert build.precompiled_header(build._cpp_extension(), directory=tmp_path) == (flags, None)  # now up to date


@pytest.mark.skipif(toolchain.cuda_skip_reason() is not None, reason=str(toolchain.cuda_skip_reason()))
def test_a_cuda_compile_error_shows_its_first_error(tmp_path):
    csrc = tmp_path / "csrc"
    (csrc / "gpu").mkdir(parents=True)
    (csrc / "gpu" / "broken.cu").write_text("__global__ void kernel(float* x) { x[0] = undefined_name; }\n")
    with pytest.raises(build.LayerBuildError) as error:
        build.Builder(csrc, tmp_path / "build", prefix="broken_cu_").load("gpu")
    first = str(error.value).splitlines()
    assert first[0] == "myops: layer 'gpu' failed to compile. First error:"
    assert "broken.cu(1)" in first[1] and 'identifier "undefined_name" is undefined' in first[1], first


def test_the_pip_toolkit_layout_is_made_again_when_nvcc_changes(tmp_path):
    root = fake_toolkit(tmp_path / "site-packages" / "nvidia" / "cu13")
    layout = toolchain.toolkit_layout(root, tmp_path / "layout")
    (root / "bin" / "nvcc").write_text("nvcc 13.0.89, a longer file")  # an upgraded nvidia-cuda-nvcc
    assert toolchain.toolkit_layout(root, tmp_path / "layout") == layout
    assert (layout / "bin" / "nvcc").read_text() == "nvcc 13.0.89, a longer file"


def test_cuda_home_wins_over_cuda_path(tmp_path, monkeypatch):
    home, path = fake_toolkit(tmp_path / "home"), fake_toolkit(tmp_path / "path")
    monkeypatch.setenv("CUDA_HOME", str(home))
    monkeypatch.setenv("CUDA_PATH", str(path))
    assert toolchain.find_cuda_home() == home


def test_arch_list_from_the_local_gpus(monkeypatch):
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)
    capabilities = {0: (9, 0), 1: (8, 0), 2: (9, 0)}
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index: capabilities[index])
    assert toolchain.cuda_arch_list() == "8.0;9.0"


STREAM_A_NUMBER = textwrap.dedent("""\
    #include <cstring>
    #include <sstream>
    extern "C" void write_number(long x, char* out) {
      std::ostringstream stream;
      stream << x;
      std::strcpy(out, stream.str().c_str());
    }
    """)


def test_a_layer_links_the_shared_libstdcxx_even_where_the_driver_links_a_static_one(tmp_path):
    """A driver that adds -static-libstdc++ (the GPU machine's $CXX is one) gives a library its own libstdc++, and
    a number it streams is lost or crashes the process; build.LD_FLAGS makes such a driver link the shared one."""
    source = tmp_path / "stream.cpp"
    source.write_text(STREAM_A_NUMBER)
    compiler = os.environ.get("CXX", "c++")

    def library(name, *flags):
        path = tmp_path / name
        subprocess.run([compiler, "-O2", "-fPIC", "-shared", "-static-libstdc++", str(source), "-o", str(path),
                        *flags], check=True, capture_output=True, timeout=120)
        needed = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True).stdout
        return path, "[libstdc++.so.6]" in needed

    static, static_needs_shared = library("static.so")
    assert not static_needs_shared, "the driver's -static-libstdc++ did not take: this test proves nothing here"
    layer_like, needs_shared = library("layer_like.so", *build.LD_FLAGS)
    assert needs_shared
    written = subprocess.run(
        [sys.executable, "-c", "import ctypes, sys, torch; buffer = ctypes.create_string_buffer(32); "
         "ctypes.CDLL(sys.argv[1]).write_number(ctypes.c_long(12345), buffer); print(buffer.value.decode())",
         str(layer_like)], capture_output=True, text=True, timeout=120)
    assert written.returncode == 0 and written.stdout.strip() == "12345", written.stderr[-2000:]
