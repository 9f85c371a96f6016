"""torch.compile(fullgraph=True) traces the ops (through their Meta kernels) forward and backward."""
import pytest
import torch

import myops


def chain(x, w, b, g):
    hidden = myops.myadd(myops.mymatmul(x, w), b)
    with torch.no_grad():  # myrmsnorm has no derivative yet
        scale = myops.myrmsnorm(hidden.detach(), g)
    return (hidden * scale).sum()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_chain_matches_eager(layers, backend):
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(0)
    inputs = [torch.randn(shape, generator=g, requires_grad=requires_grad)
              for shape, requires_grad in (((8, 16), True), ((16, 4), True), ((8, 4), True), ((4,), False))]
    compiled = torch.compile(chain, fullgraph=True, backend=backend)
    out = compiled(*inputs)
    grads = torch.autograd.grad(out, inputs[:3])
    expected_out = chain(*inputs)
    expected_grads = torch.autograd.grad(expected_out, inputs[:3])
    torch.testing.assert_close(out, expected_out, rtol=1e-4, atol=1e-4)
    for got, expected in zip(grads, expected_grads):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


def test_dynamic_shapes_compile_once(layers):
    # The Meta kernels and checks work on SymInts: new sizes reuse the graph instead of recompiling.
    from torch._dynamo.testing import CompileCounter

    torch._dynamo.reset()
    counter = CompileCounter()
    compiled = torch.compile(chain, fullgraph=True, backend=counter, dynamic=True)
    for rows, inner in ((8, 16), (5, 7), (11, 3)):
        inputs = (torch.randn(rows, inner), torch.randn(inner, 4), torch.randn(rows, 4), torch.randn(4))
        torch.testing.assert_close(compiled(*inputs), chain(*inputs), rtol=1e-4, atol=1e-4)
    assert counter.frame_count == 1
