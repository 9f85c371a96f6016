"""myops.dispatch.record_path: the kernels of our layers that one call runs, in order, as csrc/trace.h records them."""
import threading

import pytest
import torch

import myops
from helpers import needs_gpu
from myops import dispatch, pictures

AUTOGRAD_GUARD = ("Autograd", "ADInplaceOrView")  # what at::AutoDispatchBelowADInplaceOrView excludes


def steps(path):
    return [(step.key, step.source, step.excluded, step.depth) for step in path.steps]


def test_plain_cpu_call(layers):
    a, b = torch.randn(3, 4), torch.randn(4, 2)
    with dispatch.record_path("mymatmul(a, b)") as path:
        myops.mymatmul(a, b)
    # Our autograd kernel runs for every CPU tensor; with nothing to record it goes straight below autograd.
    assert steps(path) == [
        ("Autograd", "csrc/autograd/mymatmul.cpp", (), 0),
        ("CPU", "csrc/cpu/mymatmul.cpp", AUTOGRAD_GUARD, 1),
    ]
    assert path.keys() == ["Autograd", "CPU"] and path.title == "mymatmul(a, b)"


def test_requires_grad_call(layers):
    a, b = torch.randn(3, 4, requires_grad=True), torch.randn(4, 2)
    with dispatch.record_path() as path:
        out = myops.mymatmul(a, b)
    assert steps(path) == [
        ("Autograd", "csrc/autograd/mymatmul.cpp", (), 0),
        ("CPU", "csrc/cpu/mymatmul.cpp", AUTOGRAD_GUARD, 1),
    ]
    assert out.grad_fn is not None


def test_autocast_and_requires_grad(layers):
    a, b = torch.randn(3, 4, requires_grad=True), torch.randn(4, 2)
    with torch.autocast("cpu", dtype=torch.bfloat16), dispatch.record_path() as path:
        out = myops.mymatmul(a, b)
    assert steps(path) == [
        ("AutocastCPU", "csrc/autocast/mymatmul.cpp", (), 0),
        ("Autograd", "csrc/autograd/mymatmul.cpp", ("AutocastCPU",), 1),
        ("CPU", "csrc/cpu/mymatmul.cpp", ("AutocastCPU",) + AUTOGRAD_GUARD, 2),
    ]
    assert out.dtype == torch.bfloat16


def test_in_place_through_ad_inplace_or_view(layers):
    x, y = torch.randn(5), torch.randn(5)
    version = x._version
    with torch.no_grad(), dispatch.record_path() as path:
        myops.myadd_inplace(x, y)
    # The autograd kernel redispatches with an explicit key set (nothing excluded), ADInplaceOrView then
    # calls below itself under AutoDispatchBelowADInplaceOrView and bumps the version counter.
    assert steps(path) == [
        ("Autograd", "csrc/autograd/myadd_inplace.cpp", (), 0),
        ("ADInplaceOrView", "csrc/inplace_or_view/myadd_inplace.cpp", (), 1),
        ("CPU", "csrc/cpu/myadd.cpp", AUTOGRAD_GUARD, 2),
    ]
    assert x._version == version + 1


def test_classic_in_place_form_runs_pytorch_kernels_above_ours(layers):
    x, y = torch.randn(5), torch.randn(5)
    with torch.no_grad(), dispatch.record_path() as path:
        myops.myadd_(x, y)
    # myadd_'s Autograd and ADInplaceOrView kernels are PyTorch's NotImplemented fallbacks (registered by
    # csrc/*/not_implemented.cpp), not recorded; their guard shows in what the CPU kernel finds excluded.
    assert steps(path) == [("CPU", "csrc/cpu/myadd.cpp", AUTOGRAD_GUARD, 0)]


def test_meta_call(layers):
    a, b = torch.empty(3, 4, device="meta"), torch.empty(4, 2, device="meta")
    with dispatch.record_path() as path:
        myops.mymatmul(a, b)
    assert path.keys() == ["Autograd", "Meta"]
    assert path.steps[1].source == "csrc/meta/mymatmul.cpp"


def test_backward_inside_the_recording(layers):
    a, b = torch.randn(3, 4, requires_grad=True), torch.randn(4, 2, requires_grad=True)
    with dispatch.record_path() as path:
        myops.mymatmul(a, b).sum().backward()
    # Forward, then the backward's two products, each through our autograd kernel (grad mode is off in a
    # backward without create_graph, so nothing is recorded there) and the CPU kernel.
    assert path.keys() == ["Autograd", "CPU"] * 3
    assert [step.depth for step in path.steps] == [0, 1] * 3  # the engine calls the backward's products


def test_phases_label_the_steps_recorded_after_them(layers):
    pytest.importorskip("matplotlib")
    a, b = torch.randn(3, 4, requires_grad=True), torch.randn(4, 2, requires_grad=True)
    with dispatch.record_path() as path:
        path.phase("forward")
        out = myops.mymatmul(a, b)
        path.phase("backward")
        out.sum().backward()
    assert path.phases == [(0, "forward"), (2, "backward")]
    assert [path.phase_of(i) for i in range(len(path.steps))] == ["forward"] * 2 + ["backward"] * 4
    lines = path.format().splitlines()
    assert lines[1] == "-- forward" and lines[4] == "-- backward" and lines[5].startswith("3. Autograd")
    texts = [text.get_text() for text in pictures.path(path).figure.axes[0].texts]
    assert "forward" in texts and "backward" in texts
    with pytest.raises(RuntimeError, match="inside record_path"):
        path.phase("after")  # the recording has ended


def test_an_unchanged_exclude_set_is_named_against_the_thread_outside_the_call(layers):
    pytest.importorskip("matplotlib")
    x = torch.randn(4)
    with dispatch.record_path() as path:
        myops.myadd(x, x)  # autocast off: the autocast keys are excluded before the call, and stay so
    assert "AutocastCPU" in path.excluded_before and path.steps[0].excluded == ()

    def first_label(recorded):
        return next(t.get_text() for t in pictures.path(recorded).figure.axes[0].texts if t.get_text().startswith("excl"))

    assert first_label(path) == "excluded on entry:\nnothing more than\noutside the call"
    bare = dispatch.CallPath(steps=path.steps, excluded_before=())  # a thread that excluded nothing at all
    assert first_label(bare) == "excluded on entry:\nnothing"


def test_forward_mode_tangent_is_a_second_call(layers):
    import torch.autograd.forward_ad as fwAD

    x, t = torch.randn(4), torch.randn(4)
    with fwAD.dual_level(), dispatch.record_path() as path:
        out = myops.myadd(fwAD.make_dual(x, t), x)
        tangent = fwAD.unpack_dual(out).tangent
    # The value below autograd, then (still inside the autograd kernel) the tangent: myadd(t, zeros).
    assert [(step.key, step.depth) for step in path.steps] == [("Autograd", 0), ("CPU", 1), ("Autograd", 1), ("CPU", 2)]
    assert path.parent(2) == 0 and path.parent(3) == 2
    assert torch.equal(tangent, t)


def test_nothing_is_recorded_when_off(layers):
    x = torch.randn(4)
    myops.myadd(x, x)  # before any recording
    with dispatch.record_path() as path:
        pass
    myops.myadd(x, x)  # after it
    assert path.steps == []
    with dispatch.record_path() as path:
        pass
    assert path.steps == [] and path.format().splitlines()[-1].startswith("   kernel for")


def test_other_threads_are_not_recorded(layers):
    x = torch.randn(4)
    with dispatch.record_path() as path:
        worker = threading.Thread(target=myops.myadd, args=(x, x))
        worker.start()
        worker.join()
    assert path.steps == []


def test_recordings_do_not_nest(layers):
    with dispatch.record_path():
        with pytest.raises(RuntimeError, match="a recording is already running"):
            with dispatch.record_path():
                pass


def test_text_form(layers):
    a = torch.randn(2, 2)
    with torch.autocast("cpu", dtype=torch.bfloat16), dispatch.record_path("mymatmul under autocast") as path:
        myops.mymatmul(a, a)
    assert path.format().splitlines() == [
        "mymatmul under autocast",
        "   kernel for      in                                  excluded on entry",
        "1. AutocastCPU     csrc/autocast/mymatmul.cpp          -",
        "2.   Autograd      csrc/autograd/mymatmul.cpp          AutocastCPU",
        "3.     CPU         csrc/cpu/mymatmul.cpp               AutocastCPU, Autograd, ADInplaceOrView",
    ]


def test_picture_has_one_box_per_kernel(layers):
    pytest.importorskip("matplotlib")
    a = torch.randn(2, 2)
    with dispatch.record_path("mymatmul(a, a)") as path:
        myops.mymatmul(a, a)
    picture = pictures.path(path)
    texts = [text.get_text() for text in picture.figure.axes[0].texts]
    assert "1. Autograd" in texts and "2. CPU" in texts and "csrc/cpu/mymatmul.cpp  (C++)" in texts
    assert "under a guard that excludes Autograd, ADInplaceOrView" in texts
    assert picture.data is path and pictures.hop(path, 1) == "guard" and pictures.hop(path, 0) is None


@needs_gpu
def test_cuda_call(layers):
    a, b = torch.randn(3, 4, device="cuda", requires_grad=True), torch.randn(4, 2, device="cuda")
    with torch.autocast("cuda", dtype=torch.float16), dispatch.record_path() as path:
        myops.mymatmul(a, b)
    assert steps(path) == [
        ("AutocastCUDA", "csrc/autocast/mymatmul.cpp", (), 0),
        ("Autograd", "csrc/autograd/mymatmul.cpp", ("AutocastCUDA",), 1),
        ("CUDA", "csrc/cuda/mymatmul.cu", ("AutocastCUDA",) + AUTOGRAD_GUARD, 2),
    ]


def test_sources_outside_csrc_are_named_by_their_repository_path():
    root = str(myops.build.REPO_ROOT)
    assert dispatch._source(f"{root}/solutions/02_cpu_kernel/mymul.cpp") == "solutions/02_cpu_kernel/mymul.cpp"
    assert dispatch._source(f"{root}/exercises/04_autograd/mymul.cpp") == "exercises/04_autograd/mymul.cpp"
    assert dispatch._source(f"{root}/csrc/cpu/myadd.cpp") == "csrc/cpu/myadd.cpp"
    assert dispatch._source("/build/pytorch/aten/src/ATen/core/VariableFallbackKernel.cpp") == "torch"
    assert dispatch._source(f"{root}/myops/python_library.py") == "Python (torch.library)"
