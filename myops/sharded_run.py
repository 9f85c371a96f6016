"""The course's operators sharded by DTensor on real processes, each result compared with one process.

Run it as a script, one process per rank:

    GLOO_SOCKET_IFNAME=lo torchrun --nproc-per-node 2 --master-addr 127.0.0.1 --master-port 29500 \\
        -m myops.sharded_run

or from Python with `launch()`, which picks a free port, bounds the time, and removes what torchrun leaves in
the temporary directory. `compare(mesh)` is the work itself; it runs as well on a simulated mesh
(`myops.mesh.simulated_mesh`). Every rank computes the one-process results from the same seed, so no rank needs
another's data to check its answer. With `--backend nccl` each rank uses the GPU of its local rank.
"""
from __future__ import annotations

import argparse
import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Callable

import torch
from torch.distributed.tensor import DeviceMesh, Placement, Replicate, Shard
from torch.distributed.tensor.debug import CommDebugMode

from myops.mesh import LOOPBACK, distribute, one_process

LAYOUTS = (Replicate(), Shard(0), Shard(1))


@dataclass(frozen=True)
class Result:
    """One operator call on DTensors: the input and output placements, collectives run, and the verdict."""
    op: str
    inputs: tuple[Placement, ...]
    output: Placement
    collectives: int
    matches: bool

    def __str__(self) -> str:
        inputs = ", ".join(str(p) for p in self.inputs)
        verdict = "matches one process" if self.matches else "DIFFERS from one process"
        return f"{self.op}({inputs}) -> {self.output}, {self.collectives} collective(s): {verdict}"


def samples(device: str = "cpu") -> dict[str, torch.Tensor]:
    """The inputs every rank and the one-process reference start from (seeded: the same in every process)."""
    generator = torch.Generator().manual_seed(0)
    shapes = {"a": (4, 6), "b": (4, 6), "weight": (6,), "m": (4, 6), "n": (6, 8)}
    return {name: torch.randn(shape, generator=generator).to(device) for name, shape in shapes.items()}


def cases(x: dict[str, torch.Tensor]) -> list[tuple[str, Callable, tuple[torch.Tensor, ...], Callable]]:
    """Each operator, its tensor arguments, and its one-process reference (ATen)."""
    ops = torch.ops.myops
    rms = lambda t, w: torch.nn.functional.rms_norm(t, (t.shape[-1],), w, 1e-6)  # noqa: E731
    return [
        ("myadd", ops.myadd.default, (x["a"], x["b"]), torch.add),
        ("myadd_", ops.myadd_.default, (x["a"], x["b"]), torch.add),
        ("myrmsnorm", ops.myrmsnorm.default, (x["a"], x["weight"]), rms),
        ("mymatmul", ops.mymatmul.default, (x["m"], x["n"]), torch.mm),
        ("mytranspose", ops.mytranspose.default, (x["a"],), torch.t),
    ]


def placements_for(args: tuple[torch.Tensor, ...]) -> list[tuple[Placement, ...]]:
    """Every combination of replicated, row-sharded and column-sharded inputs (a 1-d tensor: its one dim)."""
    choices = [[p for p in LAYOUTS if not isinstance(p, Shard) or p.dim < t.ndim] for t in args]
    return list(itertools.product(*choices))


def compare(mesh: DeviceMesh, device: str = "cpu") -> list[Result]:
    """Run every operator on DTensors in every input placement; compare each full result with one process."""
    results = []
    with one_process():
        references = [(name, op, args, reference(*args)) for name, op, args, reference in cases(samples(device))]
    for name, op, args, expected in references:
        for placements in placements_for(args):
            dtensors = [distribute(t, mesh, [p]) for t, p in zip(args, placements)]
            with CommDebugMode() as comms:
                out = op(*dtensors)
            if name == "myadd_":
                # In place: the result is self, and self keeps the placement it had.
                assert out is dtensors[0] and out.placements == (placements[0],), f"myadd_ moved self: {out}"
            matches = torch.allclose(out.full_tensor(), expected, atol=1e-5)
            results.append(Result(name, placements, out.placements[0], comms.get_total_counts(), matches))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    parser.add_argument("--crash-rank", type=int, default=None,
                        help="this rank exits at once (to see how a launch ends when a rank dies)")
    options = parser.parse_args(argv)

    import myops
    from myops import sharding
    from myops.mesh import init_process_group

    rank = int(os.environ.get("RANK", "0"))
    if options.crash_rank == rank:
        print(f"rank {rank}: exiting on purpose (--crash-rank)", file=sys.stderr, flush=True)
        return 3
    mesh = init_process_group(options.backend)
    myops.load()
    sharding.register()
    device = "cuda" if options.backend == "nccl" else "cpu"
    results = compare(mesh, device)
    if rank == 0:
        print(f"{mesh.size()} ranks, backend {options.backend}, {len(results)} calls")
        for result in results:
            print(result)
    torch.distributed.destroy_process_group()
    return 0 if all(result.matches for result in results) else 1


def free_port() -> int:
    """A TCP port on the loopback interface that nothing listens on at this moment."""
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def launch(nproc: int = 2, *, port: int | None = None, backend: str = "gloo", timeout_s: float = 180.0,
           extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """Run this module under torchrun with nproc ranks on 127.0.0.1; returns the finished process (text output).

    torchrun's logs (`torchelastic_*`) go into a temporary directory of this call, removed afterwards. The whole
    launch is killed after timeout_s: a rendezvous that never completes cannot hang the caller.
    """
    scratch = tempfile.mkdtemp(prefix="myops_torchrun_")
    env = {**os.environ, "TMPDIR": scratch, "GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo",
           "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}",
               f"--master-addr={LOOPBACK}", f"--master-port={port or free_port()}", f"--local-addr={LOOPBACK}",
               f"--log-dir={scratch}", "-m", "myops.sharded_run", f"--backend={backend}", *extra]
    # A session of its own: on a timeout the whole group (torchrun and every rank) is killed, not torchrun alone.
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise TimeoutError(f"myops.sharded_run: {nproc} ranks did not finish within {timeout_s:.0f} s; killed them "
                           "(a rank that never reached the rendezvous, or a collective one rank never joined)")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)

if __name__ == "__main__":
    sys.exit(main())
