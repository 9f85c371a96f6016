"""The shared inputs of tests/helpers.py are what their names claim, on every device this machine has (CPU
and meta everywhere, the GPU where there is one): a layout test that silently ran on dense tensors would
prove nothing about a strided kernel."""
import pytest
import torch

from helpers import (DEVICES_AND_META, DTYPE_IDS, FLOAT_DTYPES, VECTOR_BYTES, element_offset_bytes, layout,
                     layout_names, matmul_layouts, rmsnorm_layouts)


def _span(t: torch.Tensor) -> int:
    """Elements from t's first to its last element in memory."""
    return sum((size - 1) * stride for size, stride in zip(t.shape, t.stride())) + 1


def _has_gaps(t: torch.Tensor) -> bool:
    return 0 not in t.stride() and _span(t) > t.numel()


def _aligned(t: torch.Tensor) -> bool:
    return element_offset_bytes(t) % VECTOR_BYTES == 0


def _reversed_is_contiguous(t: torch.Tensor) -> bool:
    return t.permute(*reversed(range(t.dim()))).is_contiguous()


CHANNELS_LAST = torch.channels_last
LAYOUT_CLAIMS = {
    "contiguous": lambda a, b: a.is_contiguous() and b.is_contiguous(),
    "transposed": lambda a, b: (not a.is_contiguous() and a.t().is_contiguous()
                                and not b.is_contiguous() and b.t().is_contiguous()),
    "transposed_and_contiguous": lambda a, b: not a.is_contiguous() and a.t().is_contiguous() and b.is_contiguous(),
    "sliced_with_gaps": lambda a, b: (_has_gaps(a) and _has_gaps(b) and a.storage_offset() > 0
                                      and b.storage_offset() > 0),
    "expanded": lambda a, b: a.stride(0) == 0 and a.stride(1) != 0 and b.stride(1) == 0 and b.stride(0) != 0,
    "channels_last": lambda a, b: all(t.is_contiguous(memory_format=CHANNELS_LAST) and not t.is_contiguous()
                                      for t in (a, b)),
    "channels_last_and_contiguous": lambda a, b: (a.is_contiguous(memory_format=CHANNELS_LAST)
                                                  and not a.is_contiguous() and b.is_contiguous()),
    "offset_aligned": lambda a, b: (a.is_contiguous() and b.is_contiguous() and a.storage_offset() > 0
                                    and b.storage_offset() > 0 and _aligned(a) and _aligned(b)),
    "offset_unaligned": lambda a, b: (a.is_contiguous() and b.is_contiguous()
                                      and not _aligned(a) and not _aligned(b)),
    "offset_mixed": lambda a, b: (a.is_contiguous() and b.is_contiguous() and a.storage_offset() > 0
                                  and _aligned(a) and not _aligned(b)),
    "permuted_12d": lambda a, b: (a.dim() == 12 and not a.is_contiguous() and _reversed_is_contiguous(a)
                                  and b.is_contiguous()),
    "permuted_20d": lambda a, b: (a.dim() == 20 and not a.is_contiguous() and _reversed_is_contiguous(a)
                                  and b.is_contiguous()),
    "large": lambda a, b: a.is_contiguous() and b.is_contiguous() and a.numel() >= 2**18,
    "0-dim": lambda a, b: a.dim() == 0 and b.dim() == 0,
    "empty": lambda a, b: a.numel() == 0 and b.numel() == 0,
}


def test_every_layout_states_a_claim():
    assert list(LAYOUT_CLAIMS) == layout_names()


@pytest.mark.parametrize("device", DEVICES_AND_META)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name", layout_names())
def test_layout_is_what_it_claims(name, dtype, device):
    a, b = layout(name, dtype, device)
    assert a.device.type == b.device.type == device and a.dtype == b.dtype == dtype
    assert a.shape == b.shape
    assert LAYOUT_CLAIMS[name](a, b), f"{name}: sizes {tuple(a.shape)}, strides {a.stride()} and {b.stride()}"
    if device != "meta":  # meta tensors have no memory; their data_ptr is not an address
        for t in (a, b):
            assert (t.data_ptr() % VECTOR_BYTES == 0) == _aligned(t), name


@pytest.mark.parametrize("device", DEVICES_AND_META)
def test_matmul_and_rmsnorm_inputs_keep_their_layout_on_the_device(device):
    cases = dict((name, (a, b)) for name, a, b in matmul_layouts(torch.float32, device))
    a, b = cases["transposed"]
    assert a.device.type == device and a.t().is_contiguous() and not a.is_contiguous() and b.t().is_contiguous()
    a, _ = cases["sliced_with_gaps"]
    assert _has_gaps(a)
    a, b = cases["expanded"]
    assert a.stride(0) == 0 and b.stride(1) == 0
    a, _ = cases["offset_unaligned"]
    assert not _aligned(a) and not a.is_contiguous()
    norms = dict((name, (x, w)) for name, x, w in rmsnorm_layouts(torch.float32, device))
    assert not norms["transposed"][0].is_contiguous() and norms["sliced_weight"][1].stride() == (2,)


def test_layouts_built_on_cpu_and_moved_lose_their_strides():
    """Why the helpers build on the device: moving a strided tensor makes it dense (shown CPU -> meta)."""
    sliced, _ = layout("sliced_with_gaps", torch.float32, "cpu")
    expanded, _ = layout("expanded", torch.float32, "cpu")
    assert _has_gaps(sliced) and 0 in expanded.stride()
    assert sliced.to("meta").is_contiguous() and expanded.to("meta").is_contiguous()
