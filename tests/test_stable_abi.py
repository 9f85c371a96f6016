"""The stable-ABI operators (csrc/stable, packaged by stable/): one wheel that runs on two torch releases.

(a) the compiled library needs no C++ symbol of libtorch/libc10, only the stable C shim;
(b) the wheel installs into a fresh environment with torch 2.13.0 and gives ATen's values there;
(c) it installs and runs with the pinned torch too (pip install --target, run by this environment's python);
and in this process, from that install: values against ATen over dtypes x layouts, the bad-input matrix with
exact messages (the C++ checks and the Python fake kernels alike), opcheck, gradients, autocast, dispatch rows.

The wheel, its install folder and the torch 2.13.0 environment are made once under build/stable/ and reused
while csrc/stable and stable/ are unchanged (stable/wheeltools.py); every child process has a timeout.
"""
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from myops import dispatch, toolchain
from myops.build import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "stable"))
import check_install  # noqa: E402
import wheeltools  # noqa: E402
from wheeltools import OLDEST_TORCH, TORCH_TARGET_VERSION  # noqa: E402

sys.path.remove(str(REPO_ROOT / "stable"))  # its myops_stable is the source folder, not the installed package

from helpers import needs_gpu  # noqa: E402

# The operators are compiled for the stable ABI of OLDEST_TORCH (TORCH_TARGET_VERSION): an older torch lacks
# the shim functions they call, so nothing of this file can build there (a GPU machine's torch may be older).
if tuple(map(int, torch.__version__.split("+")[0].split(".")[:2])) < tuple(map(int, OLDEST_TORCH.split(".")[:2])):
    pytest.skip(f"the stable-ABI operators need torch >= {OLDEST_TORCH}; this is torch {torch.__version__}",
                allow_module_level=True)

FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


@pytest.fixture(scope="module")
def wheel():
    return wheeltools.wheel()


@pytest.fixture(scope="module")
def site(wheel):
    return wheeltools.install(wheel)


@pytest.fixture(scope="module")
def stable(site):
    """myops_stable imported into this process from the installed wheel."""
    sys.path.insert(0, str(site))
    import myops_stable

    assert myops_stable.__file__.startswith(str(site))
    return myops_stable


# -- the wheel -------------------------------------------------------------------------------------------
def test_wheel_is_abi3_and_declares_the_tested_torch_range(wheel):
    import zipfile

    assert re.fullmatch(r"myops_stable-0\.1\.0-cp310-abi3-manylinux_2_\d+_x86_64\.whl", wheel.name), wheel.name
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read("myops_stable-0.1.0.dist-info/METADATA").decode()
    assert "myops_stable/_C.abi3.so" in names and "myops_stable/ops.py" in names
    # A lower bound only: the stable ABI promises that later releases load the library (`make test-next` tries one).
    assert [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")] == [
        f"Requires-Dist: torch>={OLDEST_TORCH}"]
    assert "License-Expression: BSD-3-Clause" in metadata
    assert "Requires-Python: >=3.10" in metadata


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_make_wheel_runs_the_command_the_helper_runs():
    """`make -n` prints the commands make would run, variables expanded, and runs none of them."""
    dry = subprocess.run(["make", "-n", "wheel"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    lines = [shlex.split(line) for line in dry.stdout.splitlines()]
    assert [".venv/bin/python", *wheeltools.WHEEL_COMMAND] in lines, dry.stdout
    repair = [".venv/bin/python", *wheeltools.REPAIR_COMMAND, f"{wheeltools.LINUX_WHEEL_DIR}/myops_stable-*.whl"]
    assert any(line[1:] == repair for line in lines if line and line[0].startswith("PATH=")), dry.stdout


def test_the_wheel_is_manylinux_within_its_baseline_and_bundles_no_torch(wheel, site):
    """auditwheel tagged it with the oldest manylinux policy its symbol versions allow; nothing was grafted."""
    import json
    import zipfile

    import auditwheel

    tag = re.search(r"(manylinux_2_\d+)_x86_64", wheel.name).group(1)
    shown = subprocess.run([sys.executable, "-m", "auditwheel", "show", wheel], capture_output=True, text=True,
                           timeout=120)
    assert f'constrains the platform tag to "{tag}_x86_64"' in " ".join(shown.stdout.split()), shown.stdout
    with zipfile.ZipFile(wheel) as archive:
        libraries = [name for name in archive.namelist() if ".so" in name]
    assert libraries == ["myops_stable/_C.abi3.so"]  # no myops_stable.libs/: libc10, libtorch come with torch
    policies = json.loads((Path(auditwheel.__file__).parent / "policy" / "manylinux-policy.json").read_text())
    allowed = next(p for p in policies if p["name"] == tag)["symbol_versions"]["x86_64"]
    nm = subprocess.run(["nm", "-D", "--undefined-only", wheeltools.library(site)], capture_output=True, text=True,
                        timeout=60, check=True).stdout
    needed = set(re.findall(r"@(GLIBC|GLIBCXX|CXXABI|GCC)_([\d.]+)", nm))
    assert {"GLIBC", "GLIBCXX"} <= {kind for kind, _ in needed}
    assert not [f"{kind}_{version}" for kind, version in needed if version not in allowed[kind]]


@pytest.fixture
def wheel_workshop(tmp_path, monkeypatch):
    """wheeltools over a copy of the wheel's sources, with a stand-in for pip that counts what it is asked."""
    repo = tmp_path / "repo"
    shutil.copytree(REPO_ROOT / "csrc" / "stable", repo / "csrc" / "stable")
    shutil.copytree(REPO_ROOT / "stable", repo / "stable", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    calls = []

    def pip(command, timeout, what, **kwargs):
        calls.append(what)
        if "--target" in command:
            target = Path(command[command.index("--target") + 1])
            target.mkdir(parents=True)
            (target / "myops_stable").mkdir()
        elif "repair" in command:
            (repo / "dist").mkdir(exist_ok=True)
            builds = calls.count("building the wheel (make wheel)")
            (repo / "dist" / "myops_stable-0.1.0-cp310-abi3-manylinux_2_34_x86_64.whl").write_text(f"build {builds}")
        else:
            (repo / wheeltools.LINUX_WHEEL_DIR).mkdir(parents=True)
            (repo / wheeltools.LINUX_WHEEL_DIR / "myops_stable-0.1.0-cp310-abi3-linux_x86_64.whl").write_text("")

    for name, value in {"REPO": repo, "HERE": repo / "stable", "BUILD": repo / "build" / "stable",
                        "DIST": repo / "dist", "_run": pip}.items():
        monkeypatch.setattr(wheeltools, name, value)
    return repo, calls


def test_the_wheel_is_rebuilt_when_a_source_changes_and_only_then(wheel_workshop):
    repo, calls = wheel_workshop
    first = wheeltools.wheel()
    assert wheeltools.wheel() == first  # nothing changed: the wheel is reused
    assert calls.count("building the wheel (make wheel)") == 1
    (repo / "stable" / "myops_stable.egg-info").mkdir()  # an earlier build's manifest
    kernel = repo / "csrc" / "stable" / "cpu" / "myadd.cpp"
    kernel.write_text(kernel.read_text() + "\n// edited\n")
    rebuilt = wheeltools.wheel()
    assert calls.count("building the wheel (make wheel)") == 2 and rebuilt.read_text() == "build 2"
    assert sorted((repo / "dist").iterdir()) == [rebuilt]
    assert not (repo / "stable" / "myops_stable.egg-info").exists()
    (repo / "stable" / "myops_stable" / "ops.py").write_text("# edited\n")
    wheeltools.wheel()
    assert calls.count("building the wheel (make wheel)") == 3


def test_installing_a_new_wheel_removes_the_folders_of_earlier_ones(wheel_workshop):
    repo, calls = wheel_workshop
    old = wheeltools.install(wheeltools.wheel())
    assert wheeltools.install(wheeltools.wheel()) == old  # the same wheel: unpacked once
    assert calls.count("installing the wheel into a folder") == 1
    kernel = repo / "csrc" / "stable" / "cpu" / "myadd.cpp"
    kernel.write_text(kernel.read_text() + "\n// edited\n")
    new = wheeltools.install(wheeltools.wheel())
    assert new != old and new.is_dir() and not old.exists()
    assert sorted(p.name for p in (repo / "build" / "stable").glob("site-*")) == [new.name]


def test_the_sdist_carries_its_sources_and_builds_a_wheel_away_from_the_repository(tmp_path):
    """stable/setup.py's Sdist copies csrc/stable in; the unpacked sdist compiles without the repository."""
    import tarfile
    import zipfile

    build_sdist = "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))"
    made = subprocess.run([sys.executable, "-c", build_sdist, tmp_path], cwd=REPO_ROOT / "stable", capture_output=True,
                          text=True, timeout=300)
    shutil.rmtree(REPO_ROOT / "stable" / "myops_stable.egg-info", ignore_errors=True)  # the wheel's manifest-to-be
    assert made.returncode == 0, made.stderr
    away = tmp_path / "away"
    with tarfile.open(tmp_path / made.stdout.split()[-1]) as archive:
        names = archive.getnames()
        archive.extractall(away, filter="data")
    assert {"myops_stable-0.1.0/csrc/stable/schema.cpp", "myops_stable-0.1.0/csrc/stable/cpu/myadd.cpp",
            "myops_stable-0.1.0/flags.py"} <= set(names)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                            "--wheel-dir", tmp_path / "wheels", away / "myops_stable-0.1.0"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "wheels").glob("*.whl")
    assert "myops_stable/_C.abi3.so" in zipfile.ZipFile(wheel).namelist()
    assert not (tmp_path / "build").exists()  # nothing written next to the unpacked folder


# -- (a) symbols -----------------------------------------------------------------------------------------
def test_library_needs_only_the_c_shim_of_torch(site):
    library = wheeltools.library(site)
    kinds = wheeltools.symbols(library)
    assert kinds["torch C++"] == []
    assert {"aoti_torch_library_init_def", "torch_library_impl", "torch_parallel_for"} <= set(kinds["torch C shim"])
    # Whatever the library takes from torch's own libraries is a C function of the shim, nothing else.
    from_torch = set(wheeltools.undefined_symbols(library)) & wheeltools.torch_library_symbols()
    assert from_torch and from_torch <= set(kinds["torch C shim"])
    # Of torch's libraries only the two every build has; no Python, no CUDA runtime.
    needed = wheeltools.needed_libraries(library)
    assert {"libc10.so", "libtorch_cpu.so"} <= set(needed)
    assert not [name for name in needed if re.match(r"lib(torch_python|python|cudart|c10_cuda|torch_cuda)", name)]


def test_the_wheel_links_the_shared_libstdcxx_as_the_layers_do():
    """The layers' protection against a driver that links libstdc++ statically (myops.build.LD_FLAGS, proved by
    tests/test_build.py) reaches the wheel's link line."""
    import ast

    from myops import build

    sys.path.insert(0, str(REPO_ROOT / "stable"))
    import flags

    assert "-l:libstdc++.so.6" in flags.LD_FLAGS and "-l:libstdc++.so.6" in build.LD_FLAGS
    setup = ast.parse((REPO_ROOT / "stable" / "setup.py").read_text())
    links = [ast.unparse(k.value) for n in ast.walk(setup) if isinstance(n, ast.Call) and ast.unparse(n.func) ==
             "CppExtension" for k in n.keywords if k.arg == "extra_link_args"]
    assert links == ["LD_FLAGS"]


def test_symbol_check_catches_a_library_that_uses_aten():
    """The check can fail: the course's myadd.cpp, written with ATen, needs mangled c10/ATen symbols."""
    kinds = wheeltools.symbols(wheeltools.aten_probe(REPO_ROOT / "csrc" / "cpu" / "myadd.cpp"))
    assert any(name.startswith(("at::", "c10::")) for name in kinds["torch C++"])


def test_target_version_hides_newer_apis():
    probe = REPO_ROOT / "csrc" / "stable" / "probes" / "newer_api.cpp"
    ok, error = wheeltools.compiles(probe, TORCH_TARGET_VERSION)
    assert not ok and "has no member named 'has_storage'" in error
    assert wheeltools.compiles(probe, "0x020e000000000000") == (True, "")  # 2.14.0


# -- (b) and (c): fresh installs, child processes -----------------------------------------------------
def test_runs_on_torch_2_13_in_a_fresh_environment(wheel):
    python = wheeltools.torch_environment("2.13.0")
    wheeltools.install_into(python, wheel)
    out = wheeltools.run(python, wheeltools.CHECK_INSTALL)
    # What TORCH_TARGET_VERSION guards against: a shim function of 2.14 that 2.13 does not export.
    assert "torch_has_storage" in wheeltools.torch_library_symbols()
    assert "torch_has_storage" not in wheeltools.torch_library_symbols(python)
    # The release, not the build: pip may take a CPU or a CUDA build of 2.13.0, depending on where it looks.
    assert out.splitlines()[0].split("+")[0] == "torch 2.13.0"
    assert out.splitlines()[1:] == ["values equal ATen's: 52 cases (myadd and mymatmul, 4 dtypes)",
                                "exact error messages: 2 cases",
                                "opcheck: both operators pass"]


def test_runs_on_the_pinned_torch_from_a_plain_install(site):
    out = wheeltools.run(sys.executable, wheeltools.CHECK_INSTALL, pythonpath=site)
    assert out.splitlines()[0] == f"torch {torch.__version__}"
    assert out.splitlines()[1:] == ["values equal ATen's: 52 cases (myadd and mymatmul, 4 dtypes)",
                                    "exact error messages: 2 cases", "opcheck: both operators pass"]


# -- in this process: values, errors, the Python half ---------------------------------------------------
def add_layouts(dtype):
    from helpers import sample_inputs

    return list(sample_inputs(dtype))


def matmul_layouts(dtype):
    g = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(shape, generator=g, dtype=dtype)

    return [("contiguous", randn(70, 300), randn(300, 150)),
            ("transposed", randn(9, 5).t(), randn(7, 9).t()),
            ("sliced", randn(10, 12)[::2, 1:7], randn(12, 8)[:6, ::2]),
            ("expanded", randn(5, 1).expand(5, 6), randn(1, 3).expand(6, 3)),
            ("inner 0", randn(4, 0), randn(0, 3)),
            ("empty", randn(0, 4), randn(4, 3))]


class TestMyadd:
    @pytest.mark.parametrize("dtype", FLOAT_DTYPES)
    def test_matches_aten_bit_for_bit(self, stable, dtype):
        for name, x, y in add_layouts(dtype):
            result = stable.myadd(x, y)
            assert result.is_contiguous() and result.dtype == dtype, name
            # Half types add in float and round once, like ATen: identical, not merely close.
            torch.testing.assert_close(result, torch.add(x, y), rtol=0, atol=0, msg=name)

    def test_gradients(self, stable):
        x, y = (torch.randn(4, 5, dtype=torch.float64, requires_grad=True) for _ in range(2))
        assert torch.autograd.gradcheck(stable.myadd, (x, y))

    def test_autocast_keeps_the_dtype(self, stable):
        x, y = torch.randn(3, 4), torch.randn(3, 4)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert stable.myadd(x, y).dtype == torch.float32

    def test_opcheck(self, stable):
        x, y = torch.randn(3, 4, requires_grad=True), torch.randn(4, 3).t()
        results = torch.library.opcheck(torch.ops.stableops.myadd.default, (x, y))
        assert set(results.values()) == {"SUCCESS"}, results


class TestMymatmul:
    @pytest.mark.parametrize("dtype", FLOAT_DTYPES)
    def test_matches_aten(self, stable, dtype):
        for name, x, y in matmul_layouts(dtype):
            result = stable.mymatmul(x, y)
            assert result.dtype == dtype, name
            check_install.assert_product_close(result, x, y, name)

    @pytest.mark.parametrize("dtype", FLOAT_DTYPES)
    def test_the_value_check_refuses_a_product_one_percent_off(self, stable, dtype):
        x, y = torch.randn(64, 300, dtype=dtype), torch.randn(300, 32, dtype=dtype)
        result = stable.mymatmul(x, y)
        check_install.assert_product_close(result, x, y, "as computed")
        with pytest.raises(AssertionError, match="1 percent off: off by up to"):
            check_install.assert_product_close((result.double() * 1.01).to(dtype), x, y, "1 percent off")

    def test_gradients_first_and_second_order(self, stable):
        x = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
        y = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
        assert torch.autograd.gradcheck(stable.mymatmul, (x, y))
        assert torch.autograd.gradgradcheck(stable.mymatmul, (x, y))

    @pytest.mark.parametrize("needs", [(True, False), (False, True), (True, True)], ids=["self", "other", "both"])
    def test_backward_computes_only_the_gradients_asked_for(self, stable, monkeypatch, needs):
        """mymatmul's backward (stable/myops_stable/ops.py) skips a product whose input needs no gradient."""
        x = torch.randn(4, 6, dtype=torch.float64, requires_grad=needs[0])
        y = torch.randn(6, 3, dtype=torch.float64, requires_grad=needs[1])
        out = stable.mymatmul(x, y)
        products = []
        counted = stable.ops.mymatmul
        monkeypatch.setattr(stable.ops, "mymatmul", lambda a, b: products.append(a.shape) or counted(a, b))
        out.backward(torch.ones_like(out))
        assert len(products) == sum(needs), products
        for tensor, expected in ((x, torch.ones(4, 3, dtype=torch.float64) @ y.t()),
                                 (y, x.t() @ torch.ones(4, 3, dtype=torch.float64))):
            if tensor.requires_grad:
                torch.testing.assert_close(tensor.grad, expected.detach())

    def test_autocast_runs_in_bfloat16_on_cpu(self, stable):
        x, y = torch.randn(8, 16), torch.randn(16, 4)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            result = stable.mymatmul(x, y)
        assert result.dtype == torch.bfloat16
        torch.testing.assert_close(result, x.bfloat16() @ y.bfloat16(), rtol=2e-2, atol=2e-2)

    def test_opcheck(self, stable):
        x, y = torch.randn(3, 4, requires_grad=True), torch.randn(5, 4, requires_grad=True).t()
        results = torch.library.opcheck(torch.ops.stableops.mymatmul.default, (x, y))
        assert set(results.values()) == {"SUCCESS"}, results


# -- the bad-input matrix: (op, case) -> the exact message, from C++ (cpu) and from the fake kernel (meta) --
def _t(shape, dtype=torch.float32, device="cpu"):
    return torch.ones(shape, dtype=dtype, device=device)


DTYPE_NAMES = {torch.int32: "Int", torch.int64: "Long", torch.bool: "Bool", torch.complex64: "ComplexFloat"}
BAD = {
    **{("myadd", f"{dtype}"): (lambda d, dtype=dtype: (_t((4, 6), dtype, d), _t((4, 6), dtype, d)),
                               f"stableops::myadd: unsupported dtype {name}; supported are float16, bfloat16, "
                               "float32 and float64, convert with .float()")
       for dtype, name in DTYPE_NAMES.items()},
    **{("mymatmul", f"{dtype}"): (lambda d, dtype=dtype: (_t((4, 6), dtype, d), _t((6, 3), dtype, d)),
                                  f"stableops::mymatmul: unsupported dtype {name}; supported are float16, "
                                  "bfloat16, float32 and float64, convert with .float()")
       for dtype, name in DTYPE_NAMES.items()},
    ("myadd", "mixed dtypes"): (lambda d: (_t((4, 6), device=d), _t((4, 6), torch.float64, d)),
                                "stableops::myadd: expected tensors of the same dtype, got Float and Double; "
                                "convert one with .to(dtype)"),
    ("mymatmul", "mixed dtypes"): (lambda d: (_t((4, 6), torch.bfloat16, d), _t((6, 3), device=d)),
                                   "stableops::mymatmul: expected tensors of the same dtype, got BFloat16 and "
                                   "Float; convert one with .to(dtype)"),
    ("myadd", "mismatched shapes"): (lambda d: (_t((4, 6), device=d), _t((5, 7), device=d)),
                                     "stableops::myadd: expected tensors of the same shape, got [4, 6] and "
                                     "[5, 7]; broadcast them first, e.g. with torch.broadcast_tensors"),
    ("mymatmul", "mismatched shapes"): (lambda d: (_t((4, 6), device=d), _t((7, 3), device=d)),
                                        "stableops::mymatmul: inner dimensions differ: self is [4, 6] and other "
                                        "is [7, 3]; self.shape[1] must equal other.shape[0]"),
    ("mymatmul", "1-d"): (lambda d: (_t((6,), device=d), _t((6, 3), device=d)),
                          "stableops::mymatmul: expected two 2-d tensors, got 1-d and 2-d; reshape them to "
                          "matrices, or use torch.matmul for batched products"),
    ("mymatmul", "0-dim"): (lambda d: (_t((), device=d), _t((), device=d)),
                            "stableops::mymatmul: expected two 2-d tensors, got 0-d and 0-d; reshape them to "
                            "matrices, or use torch.matmul for batched products"),
}
# Mixed devices exist only with a second device: the meta tensor sends the call to the fake kernel.
MIXED = {("myadd", "mixed devices"): (lambda: (_t((4, 6)), _t((4, 6), device="meta")),
                                      "stableops::myadd: expected both tensors on the same device, got cpu and "
                                      "meta; move one with .to(device)"),
         ("mymatmul", "mixed devices"): (lambda: (_t((4, 6)), _t((6, 3), device="meta")),
                                         "stableops::mymatmul: expected both tensors on the same device, got cpu "
                                         "and meta; move one with .to(device)")}


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("op, case", list(BAD), ids=[f"{op}-{case}" for op, case in BAD])
def test_bad_input_has_the_exact_message(stable, op, case, device):
    build, message = BAD[op, case]
    with pytest.raises(RuntimeError) as error:
        getattr(stable, op)(*build(device))
    assert str(error.value) == message


@pytest.mark.parametrize("op, case", list(MIXED), ids=[f"{op}-{case}" for op, case in MIXED])
def test_mixed_devices_have_the_exact_message(stable, op, case):
    build, message = MIXED[op, case]
    with pytest.raises(RuntimeError) as error:
        getattr(stable, op)(*build())
    assert str(error.value) == message


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_fake_kernels_accept_what_the_cpu_kernels_accept(stable, dtype):
    x = torch.empty(6, 4, dtype=dtype, device="meta").t()  # any strides
    out = stable.myadd(x, torch.empty(4, 6, dtype=dtype, device="meta"))
    assert (out.shape, out.dtype, out.is_contiguous()) == ((4, 6), dtype, True)
    out = stable.mymatmul(x, torch.empty(6, 3, dtype=dtype, device="meta"))
    assert (out.shape, out.dtype, out.is_contiguous()) == ((4, 3), dtype, True)


LIBRARY_ALONE_CHILD = """
import torch
torch.ops.load_library({library!r})
try:
    torch.ops.stableops.myadd(torch.empty(2, 3, device="meta"), torch.empty(2, 3, device="meta"))
except NotImplementedError as error:
    print(str(error).splitlines()[0])
"""


def test_the_library_alone_names_the_module_with_its_fake_kernels(site, stable):
    """m.set_python_module in csrc/stable/schema.cpp: a meta call on the library loaded without myops_stable
    tells the user which module to import; register_fake in that module checks it names the module it is in."""
    out = wheeltools.run(sys.executable, LIBRARY_ALONE_CHILD.format(library=str(wheeltools.library(site))))
    assert out.strip() == ("stableops::myadd: We could not find the fake impl for this operator. The operator "
                           "specified that you may need to import the 'myops_stable.ops' Python module to load the "
                           "fake impl.")
    assert torch._C._dispatch_pystub("stableops::myadd", "")[0] == stable.ops.__name__


# -- the dispatch table ----------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["myadd", "mymatmul"])
def test_dispatch_table_rows(stable, op):
    table = {e.key: e for e in dispatch.dispatch_table(f"stableops::{op}")}
    assert (table["CPU"].kind, table["CPU"].source) == ("kernel", f"csrc/stable/cpu/{op}.cpp")
    for key in ("Meta", "AutogradCPU", "AutogradCUDA"):
        assert (table[key].kind, table[key].source) == ("kernel", "Python (torch.library)"), key
    assert table["CUDA"].kind == "none"  # the wheel is CPU-only: see csrc/stable/cuda
    autocast = ("kernel", "Python (torch.library)") if op == "mymatmul" else ("fallthrough", "torch")
    for key in ("AutocastCPU", "AutocastCUDA"):  # the CUDA rule is registered on every machine
        assert (table[key].kind, table[key].source) == autocast, key


# -- CUDA: csrc/stable/cuda, compiled where a toolkit exists (not in the wheel: see wheeltools.build_cuda) --
CUDA_CHILD = """
import sys, torch, myops_stable
from myops import dispatch
sys.path.insert(0, {stable!r})
from check_install import assert_product_close
torch.ops.load_library({library!r})
for op in ("myadd", "mymatmul"):
    entry = {{e.key: e for e in dispatch.dispatch_table("stableops::" + op)}}["CUDA"]
    print(op, entry.kind, entry.source)
if {on_gpu}:
    cases = 0
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        x, y = torch.randn(300, 200, dtype=dtype, device="cuda"), torch.randn(200, 300, dtype=dtype, device="cuda")
        for a, b in ((x, y.t()), (x[:, ::2], y.t()[:, 1::2]), (x[:1].expand(300, 200), y.t()), (x[:0], y.t()[:0])):
            torch.testing.assert_close(myops_stable.myadd(a, b), a + b, rtol=0, atol=0)
            cases += 1
        for a, b in ((x, y), (x.t().contiguous().t(), y[:, :7]), (x[:, :0], y[:0]), (x[:5], y.t().contiguous().t())):
            assert_product_close(myops_stable.mymatmul(a, b), a, b, f"mymatmul {{dtype}} on the GPU")
            cases += 1
    try:
        myops_stable.myadd(x, y.cpu())
    except RuntimeError as error:
        print(error)
    x = torch.randn(20, 30, dtype=torch.float64, device="cuda", requires_grad=True)
    w = torch.randn(30, 10, dtype=torch.float64, device="cuda", requires_grad=True)
    assert torch.autograd.gradcheck(myops_stable.mymatmul, (x, w))
    print("gpu cases equal to ATen:", cases)
    x, w = torch.randn(64, 32, device="cuda"), torch.randn(32, 16, device="cuda")
    with torch.autocast("cuda"):  # the rule of stable/myops_stable/ops.py: float16, as torch.matmul
        out = myops_stable.mymatmul(x, w)
    assert_product_close(out, x.half(), w.half(), "mymatmul under CUDA autocast")
    print("under CUDA autocast:", out.dtype)
"""


def cuda_child(library, on_gpu: bool) -> str:
    return CUDA_CHILD.format(library=str(library), stable=str(REPO_ROOT / "stable"), on_gpu=on_gpu)


@pytest.fixture(scope="module")
def cuda_library():
    if toolchain.cuda_skip_reason() is not None:
        pytest.skip(str(toolchain.cuda_skip_reason()))
    return wheeltools.build_cuda()


def test_cuda_kernels_compile_and_register(site, cuda_library):
    """Anywhere a toolkit exists: the CUDA library is stable-ABI only and fills the CUDA row."""
    assert wheeltools.symbols(cuda_library)["torch C++"] == []
    # ...but bound to one CUDA runtime major version: why the wheel leaves it out.
    assert f"libcudart.so.{torch.version.cuda.split('.')[0]}" in wheeltools.needed_libraries(cuda_library)
    out = wheeltools.run(sys.executable, cuda_child(cuda_library, on_gpu=False),
                         pythonpath=site).splitlines()
    assert out == ["myadd kernel csrc/stable/cuda/myadd.cu", "mymatmul kernel csrc/stable/cuda/mymatmul.cu"]


@needs_gpu
def test_cuda_kernels_match_aten_on_a_gpu(site, cuda_library):
    out = wheeltools.run(sys.executable, cuda_child(cuda_library, on_gpu=True),
                         pythonpath=site).splitlines()
    assert out[2:] == ["stableops::myadd: expected both tensors on the same device, got cuda:0 and cpu; "
                       "move one with .to(device)", "gpu cases equal to ATen: 32",
                       "under CUDA autocast: torch.float16"]


# More row tiles than gridDim.y holds (65535 tiles of 16 rows: 1,048,560 rows), then as many columns.
LARGE_ROWS_CHILD = """
import torch, myops_stable
torch.ops.load_library({library!r})
rows = 65535 * 16 + 17
x, w = torch.randn(rows, 3, device="cuda"), torch.randn(3, 5, device="cuda")
for a, b in ((x, w), (w.t(), x.t())):
    expected = (a.double() @ b.double()).float()
    torch.testing.assert_close(myops_stable.mymatmul(a, b), expected, rtol=1e-5, atol=1e-4)
print("rows", rows, "equal to ATen")
"""


def test_cuda_mymatmul_has_no_row_limit_to_refuse(cuda_library):
    """csrc/stable/cuda/mymatmul.cu loops over its output tiles along gridDim.x, as csrc/cuda/mymatmul.cu does,
    instead of putting tiles of rows on gridDim.y: the library no longer carries the refusal of more rows."""
    assert b"more than the CUDA kernel's limit" not in cuda_library.read_bytes()


@needs_gpu
def test_cuda_mymatmul_beyond_65535_row_tiles(site, cuda_library):
    out = wheeltools.run(sys.executable, LARGE_ROWS_CHILD.format(library=str(cuda_library)), pythonpath=site)
    assert out.splitlines() == [f"rows {65535 * 16 + 17} equal to ATen"]
