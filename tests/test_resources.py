"""Long runs and threads: memory stays flat over 100,000 calls, and concurrent calls stay correct."""
import os
import threading

import pytest
import torch

import myops

CALLS = 100_000
TOLERANCE_MB = 8  # allocator and interpreter noise; a leak of one 64-byte tensor per call would be 6 MB+


def resident_mb():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def small_call(op):
    x, y, w, m = torch.randn(4, 4), torch.randn(4, 4), torch.randn(4), torch.randn(4, 4)
    return {
        "myadd": lambda: myops.myadd(x, y),
        "mymatmul": lambda: myops.mymatmul(x, y),
        "myrmsnorm": lambda: myops.myrmsnorm(x, w),
        "myadd_": lambda: myops.myadd_(m, y),
        "myadd_inplace": lambda: myops.myadd_inplace(m, y),
        "mytranspose": lambda: myops.mytranspose(x),
    }[op]


@pytest.mark.parametrize("op", ["myadd", "mymatmul", "myrmsnorm", "myadd_", "myadd_inplace", "mytranspose"])
def test_memory_is_flat_over_many_calls(layers, op):
    call = small_call(op)
    for _ in range(CALLS // 10):  # warm up caches and the allocator
        call()
    before = resident_mb()
    for _ in range(CALLS):
        call()
    assert resident_mb() - before < TOLERANCE_MB


def test_concurrent_calls_from_threads(layers):
    failures = []

    def worker(seed):
        g = torch.Generator().manual_seed(seed)
        for _ in range(200):
            a, b = torch.randn(33, 65, generator=g), torch.randn(65, 17, generator=g)
            if not torch.equal(myops.myadd(a, a), a + a):
                failures.append("myadd")
            if not torch.allclose(myops.mymatmul(a, b), a @ b, rtol=1e-4, atol=1e-4):
                failures.append("mymatmul")

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads) and not failures


def test_a_large_product_gives_its_packing_memory_back(layers):
    """mymatmul packs `other` (as float for bfloat16) one block of columns at a time into a buffer each thread
    keeps (4 MiB): one large product does not leave a buffer of its size in the calling thread until it exits.

    The call runs in a fresh thread, whose kept buffers start empty, and memory is measured before that
    thread exits. All of 8192 x 8192 packed as float would be 256 MiB; the inputs are made before the first
    measurement.
    """
    a = torch.randn(13, 8192, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, dtype=torch.bfloat16)
    grown = []

    def call():
        before = resident_mb()
        myops.mymatmul(a, b)
        grown.append(resident_mb() - before)

    thread = threading.Thread(target=call)
    thread.start()
    thread.join(timeout=300)
    assert grown and grown[0] < 32, grown
