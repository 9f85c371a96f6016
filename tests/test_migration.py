"""The 2020 tutorial on today's PyTorch: each break the migration notebook (13) lists, proved here as well."""
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

import myops
from myops import dispatch


@pytest.fixture(scope="module")
def include_dir(layers):
    from torch.utils.cpp_extension import include_paths  # after myops: see build.py

    return Path(include_paths()[0])


@pytest.mark.pytorch_pin
def test_cpp14_no_longer_compiles(include_dir, tmp_path):
    source = tmp_path / "op.cpp"
    source.write_text("#include <ATen/ATen.h>\n")
    command = [os.environ.get("CXX", "c++"), "-std=c++14", "-fsyntax-only", "-Wfatal-errors", f"-I{include_dir}",
               str(source)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "#error C++20 or later compatible compiler is required to use ATen." in result.stderr


def test_catch_all_def_serves_every_key(layers):
    myops.load("legacy")
    table = dispatch.dispatch_table("myops2020::myadd", keys=("AutogradCPU", "Meta", "CUDA", "CPU"))
    assert [(entry.kind, entry.source) for entry in table] == [("kernel", "csrc/legacy/myadd_2020.cpp")] * 4


DEPRECATED_GUARD = """
import torch, myops
myops.load("schema", "cpu", "mistakes")
x = torch.randn(3)
print(torch.equal(torch.ops.mistakes.add_with_deprecated_guard(x, x), x + x))
"""


@pytest.mark.pytorch_pin
def test_deprecated_guard_still_works_and_warns(layers):
    child = subprocess.run([sys.executable, "-c", DEPRECATED_GUARD], capture_output=True, text=True, timeout=120)
    assert child.stdout.split() == ["True"], child.stderr
    assert "AutoNonVariableTypeMode is deprecated" in child.stderr


@pytest.mark.pytorch_pin
def test_legacy_batched_key_is_not_what_vmap_uses(layers):
    lib = torch.library.Library("migration_test", "DEF")
    try:
        lib.define("double(Tensor x) -> Tensor")
        lib.impl("double", lambda x: x * 2, "CompositeExplicitAutograd")
        calls = []
        lib.impl("double", lambda x: calls.append(x) or x * 2, "Batched")
        x = torch.randn(4, 3)
        assert torch.equal(torch.vmap(torch.ops.migration_test.double)(x), x * 2)
        assert calls == []
    finally:
        lib._destroy()


@pytest.mark.pytorch_pin
def test_tracer_fallback_records_custom_ops(layers):
    assert dispatch.dispatch_table("myops::myadd", keys=("Tracer",))[0].kind == "fallback"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        traced = torch.jit.trace(lambda a, b: myops.myadd(a, b), (torch.randn(3), torch.randn(3)))
    assert [node.kind() for node in traced.graph.nodes()] == ["myops::myadd"]
    assert any("`torch.jit.trace` is deprecated" in str(w.message) for w in caught)
    x, y = torch.randn(5), torch.randn(5)
    assert torch.equal(traced(x, y), x + y)


@pytest.mark.pytorch_pin
def test_export_records_custom_ops(layers):
    class Linear(torch.nn.Module):
        def forward(self, x, w, b):
            return myops.myadd(myops.mymatmul(x, w), b)

    example = (torch.randn(4, 3), torch.randn(3, 2), torch.randn(4, 2))
    exported = torch.export.export(Linear(), example)
    calls = [str(node.target) for node in exported.graph.nodes if node.op == "call_function"]
    assert calls == ["myops.mymatmul.default", "myops.myadd.default"]
    torch.testing.assert_close(exported.module()(*example), Linear()(*example))


@pytest.mark.pytorch_pin
def test_named_tensors_are_gone(include_dir):
    assert not (include_dir / "ATen" / "NamedTensorUtils.h").exists()
    assert not any(line.startswith("Named:") for line in torch._C._dispatch_dump_table("aten::add.Tensor").splitlines())
    assert not hasattr(torch.Tensor, "refine_names")
    with pytest.raises(TypeError, match="names"):
        torch.zeros(2, 3, names=("N", "C"))
