"""myops::mytranspose, the view operator: one composite kernel for every backend, a view of its input,
the bad-input message. (Version counters through ADInplaceOrView: tests/test_inplace_view.py.)"""
import pytest
import torch

import myops
from myops import dispatch
from helpers import DEVICES_AND_META, Randn


@pytest.mark.parametrize("device", DEVICES_AND_META)
def test_is_a_view_with_swapped_sizes_and_strides(layers, device):
    x = Randn(torch.float32, device)(3, 5)
    v = myops.mytranspose(x)
    assert v.shape == (5, 3) and v.stride() == (1, 5) and v.device == x.device
    assert v._is_view() and v._base is x
    if device != "meta":  # meta tensors have no memory to share
        assert v.data_ptr() == x.data_ptr() and torch.equal(v, x.t())


@pytest.mark.parametrize("device", DEVICES_AND_META)
@pytest.mark.parametrize("shape", [(), (3,), (2, 2, 2)], ids=["0-d", "1-d", "3-d"])
def test_bad_input_message(layers, device, shape):
    with pytest.raises(RuntimeError) as error:
        myops.mytranspose(torch.ones(shape, device=device))
    assert str(error.value).splitlines()[0] == (
        f"myops::mytranspose: expected a 2-d tensor, got {len(shape)}-d; use tensor.permute(...) for other ranks")


def test_one_composite_kernel_serves_every_backend(layers):
    table = {entry.key: entry for entry in dispatch.dispatch_table("myops::mytranspose")}
    for key in ("CPU", "CUDA", "Meta"):
        assert (table[key].kind, table[key].source) == ("kernel", "csrc/composite/mytranspose.cpp"), key
