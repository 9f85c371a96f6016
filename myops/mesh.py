"""Device meshes for the course's distributed examples: N simulated ranks in one process, or real processes.

`simulated_mesh(n)` runs every rank inside the calling process. Two private pieces of the pinned torch do it:
the `fake` process group (`torch.testing._internal.distributed.fake_pg`: a group whose collectives do nothing)
gives DTensor a world of n ranks, and `torch.distributed._local_tensor.LocalTensorMode` makes every tensor hold
one value per rank and performs the collectives on those values. The fake group alone would give wrong values
(`full_tensor()` would gather nothing); with the mode, each rank's shard is real and the results are exact.

`init_process_group()` is the real thing for a script started by `torchrun`: one process per rank, gloo over the
loopback interface only (or NCCL, one GPU per rank).
"""
from __future__ import annotations

import contextlib
import os
from datetime import timedelta
from typing import Iterator

import torch.distributed as dist
from torch import Tensor
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor import DTensor, Placement, distribute_tensor

LOOPBACK = "127.0.0.1"


def _fake_group(world_size: int) -> None:
    """The default process group as a fake one of world_size ranks, created at most once per size.

    `dist.init_process_group` raises when called a second time in a process, which is what re-running a
    notebook cell does; this keeps an existing fake group of the right size and replaces one of another size.
    """
    from torch.testing._internal.distributed.fake_pg import FakeStore  # registers the "fake" backend

    if dist.is_initialized():
        backend = dist.get_backend()
        if backend != "fake":
            raise RuntimeError(
                f"simulated_mesh: this process already runs a real '{backend}' process group; simulate ranks in "
                "a process of their own (a fresh kernel or script), not inside a distributed run")
        if dist.get_world_size() == world_size:
            return
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world_size)


@contextlib.contextmanager
def simulated_mesh(world_size: int = 2) -> Iterator[DeviceMesh]:
    """A 1-D cpu DeviceMesh of world_size ranks, all simulated in this process; safe to enter again and again.

    Inside the block, DTensors hold one real shard per rank and collectives move real values between them.
    """
    from torch.distributed._local_tensor import LocalTensorMode

    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"simulated_mesh: world_size must be a positive int, got {world_size!r}")
    _fake_group(world_size)
    with LocalTensorMode(world_size):
        yield init_device_mesh("cpu", (world_size,))


def simulating() -> bool:
    """Whether this process simulates its ranks (simulated_mesh) rather than being one rank of a real group."""
    return dist.is_initialized() and dist.get_backend() == "fake"


def distribute(tensor: Tensor, mesh: DeviceMesh, placements: list[Placement]) -> DTensor:
    """tensor on mesh with placements, every rank holding a copy of its own, in a simulation as in real processes.

    `distribute_tensor` keeps the caller's tensor as the local value of a replica (`tensor.detach()`, no copy).
    With real processes each rank has its own; in a simulation that one tensor would stand for every rank, and an
    in-place operator given per-rank values would update it once per rank. `rank_map` makes one copy per
    simulated rank.
    """
    if not simulating():
        return distribute_tensor(tensor.clone(), mesh, placements)
    from torch.distributed._local_tensor import rank_map

    return distribute_tensor(rank_map(lambda rank: tensor.clone()), mesh, placements)


def one_process() -> contextlib.AbstractContextManager:
    """A block whose tensors are plain ones, as one process has them, even inside a simulation.

    Inside `simulated_mesh`, every new tensor gets one value per rank (a random one is drawn once per rank).
    """
    if not simulating():
        return contextlib.nullcontext()
    from torch.distributed._local_tensor import maybe_disable_local_tensor_mode

    return maybe_disable_local_tensor_mode()


def init_process_group(backend: str = "gloo", timeout_s: float = 60.0) -> DeviceMesh:
    """Join the process group of a torchrun launch on this host; returns the 1-D mesh of all its ranks.

    torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT. The address must be loopback, so every
    connection goes to this machine; gloo's sockets go on the loopback interface unless GLOO_SOCKET_IFNAME is set
    already (torchrun's own rendezvous store listens on every interface: see myops.sharded_run). gloo meshes are on
    the CPU; nccl needs one GPU per rank, the one of its local rank. A rank that dies ends torchrun's launch at
    once. One that lives but never joins makes the others fail timeout_s after they joined (DistStoreError "wait
    timeout"); torchrun then sends SIGTERM to the ranks left and kills them 30 s later if they are still running
    (`LocalElasticAgent._shutdown`).
    """
    missing = [name for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if name not in os.environ]
    if missing:
        raise RuntimeError(f"init_process_group: {', '.join(missing)} not set; start the script with "
                           f"`torchrun --nproc-per-node 2 --master-addr {LOOPBACK} -m <module>`")
    if os.environ["MASTER_ADDR"] != LOOPBACK:
        raise RuntimeError(f"init_process_group: MASTER_ADDR is {os.environ['MASTER_ADDR']!r}; this course "
                           f"contacts only {LOOPBACK} (pass --master-addr {LOOPBACK} to torchrun)")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    device = "cpu"
    if backend == "nccl":
        import torch

        device = "cuda"
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    if not dist.is_initialized():
        dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s))
    return init_device_mesh(device, (dist.get_world_size(),))
