"""The build helper: no-op when up to date, refuses stale reloads, recovers killed builds, clear errors."""
import os
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


def load_probe(csrc, build_dir, **kwargs):
    return subprocess.run(load_probe_command(csrc, build_dir), capture_output=True, text=True, **kwargs)


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
    builder.load("probe")
    builder.load("probe")  # unchanged: a no-op
    source = csrc / "probe" / "probe.cpp"
    source.write_text(source.read_text().replace("probe(Tensor self)", "probe(Tensor self, int n=1)"))
    with pytest.raises(build.LayerReloadError, match="restart the kernel"):
        builder.load("probe")
    assert builder.loaded_layers() == ["probe"]


def test_header_change_counts_as_a_change(tmp_path):
    csrc, build_dir = make_tree(tmp_path, "unused")
    builder = build.Builder(csrc, build_dir)
    before = builder._fingerprint("probe")
    (csrc / "shared.h").write_text("#pragma once\n")  # any layer may include any header of csrc/
    assert builder._fingerprint("probe") != before


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
    monkeypatch.setattr(toolchain, "find_cuda_home", lambda: None)
    assert toolchain.cuda_skip_reason().startswith("no CUDA toolkit found (nvcc and cuda_runtime.h)")


def test_toolkit_found_past_a_wrapper_script(tmp_path, monkeypatch):
    toolkit = tmp_path / "cuda"
    (toolkit / "bin").mkdir(parents=True)
    (toolkit / "include").mkdir()
    (toolkit / "bin" / "nvcc").write_text("")
    (toolkit / "include" / "cuda_runtime.h").write_text("")
    wrapper_dir = tmp_path / "wrappers" / "bin"
    wrapper_dir.mkdir(parents=True)
    wrapper = wrapper_dir / "nvcc"
    wrapper.write_text(f'#!/bin/sh\nexec {toolkit}/bin/nvcc "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.setenv("CUDA_PATH", str(toolkit))
    monkeypatch.setenv("PATH", str(wrapper_dir))
    assert toolchain.find_cuda_home() == toolkit


def test_arch_list_is_overridable(monkeypatch):
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    assert toolchain.cuda_arch_list() == "9.0"
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST")
    if not torch.cuda.is_available():
        assert toolchain.cuda_arch_list() == toolchain.DEFAULT_CUDA_ARCH_LIST


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
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0:
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
