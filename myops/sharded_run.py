"""The course's operators sharded by DTensor on real processes, each result compared with one process.

Run it as a script, one process per rank:

    GLOO_SOCKET_IFNAME=lo torchrun --nproc-per-node 2 --master-addr 127.0.0.1 --master-port 29500 \\
        -m myops.sharded_run

or from Python with `launch()`, which picks a free port, bounds the time, and removes what torchrun leaves in
the temporary directory. Every connection goes to 127.0.0.1, but torchrun's rendezvous store (a TCPStore in the
torchrun process) listens on its port on every interface while the run lasts: no torchrun option binds it to one
address. `compare(mesh)` is the work itself; it runs as well on a simulated mesh
(`myops.mesh.simulated_mesh`). Every rank computes the one-process results from the same seed, so no rank needs
another's data to check its answer. With `--backend nccl` each rank uses the GPU of its local rank.
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
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
    parser.add_argument("--hang-rank", type=int, default=None,
                        help="this rank never joins and ignores SIGTERM (to see how launch() ends a hung run)")
    options = parser.parse_args(argv)

    import myops
    from myops import sharding
    from myops.mesh import init_process_group

    rank = int(os.environ.get("RANK", "0"))
    if options.crash_rank == rank:
        print(f"rank {rank}: exiting on purpose (--crash-rank)", file=sys.stderr, flush=True)
        return 3
    if options.hang_rank == rank:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print(f"rank {rank}: hanging on purpose, deaf to SIGTERM (--hang-rank)", file=sys.stderr, flush=True)
        while True:
            signal.pause()
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


LAUNCH_MARKER = "MYOPS_SHARDED_RUN"  # environment variable naming the launch a process belongs to
STOP_GRACE_S = 10.0  # each of _stop's two waits


def launch(nproc: int = 2, *, port: int | None = None, backend: str = "gloo", timeout_s: float = 180.0,
           extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """Run this module under torchrun with nproc ranks on 127.0.0.1; returns the finished process (text output).

    torchrun's logs (`torchelastic_*`) go into a temporary directory of this call, removed afterwards. A launch
    still running after timeout_s is stopped (`_stop`, at most 2 * STOP_GRACE_S more) and TimeoutError raised: a
    rendezvous that never completes cannot hang the caller.
    """
    scratch = tempfile.mkdtemp(prefix="myops_torchrun_")
    marker = f"{LAUNCH_MARKER}={os.path.basename(scratch)}"  # inherited by torchrun's ranks and their children
    env = {**os.environ, "TMPDIR": scratch, "GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo",
           "OMP_NUM_THREADS": "1", LAUNCH_MARKER: os.path.basename(scratch)}
    command = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}",
               f"--master-addr={LOOPBACK}", f"--master-port={port or free_port()}", f"--local-addr={LOOPBACK}",
               f"--log-dir={scratch}", "-m", "myops.sharded_run", f"--backend={backend}", *extra]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        said = _stop(process, marker)
        raise TimeoutError(f"myops.sharded_run: {nproc} ranks did not finish within {timeout_s:.0f} s; killed them "
                           "(a rank that never reached the rendezvous, or a collective one rank never joined). "
                           f"Their last output:\n{said[-2000:]}") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def _stop(process: subprocess.Popen, marker: str) -> str:
    """End a launch: SIGTERM to torchrun, which stops its ranks; then SIGKILL to every process still marked.
    Returns what the launch wrote to stderr.

    torchrun starts each rank in a session of its own (`SubprocessHandler._popen`, start_new_session=True), so
    killing torchrun or its process group leaves the ranks running, holding the output pipes open. Every process
    of the launch carries `marker` in its environment, found in /proc even once its parent is gone.
    """
    process.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.communicate(timeout=STOP_GRACE_S)
    for pid in _marked_processes(marker):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    try:
        return process.communicate(timeout=STOP_GRACE_S)[1]
    except subprocess.TimeoutExpired:  # a process outside the launch holds the pipes: stop reading them
        process.kill()
        process.wait(timeout=STOP_GRACE_S)
        return ""


def _marked_processes(marker: str) -> list[int]:
    """The ids of the processes of this user whose environment holds marker (a NAME=value entry)."""
    entry, found = b"\0" + marker.encode() + b"\0", []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        with contextlib.suppress(OSError):  # gone meanwhile, or another user's
            if entry in b"\0" + environ.read_bytes() + b"\0":
                found.append(int(environ.parent.name))
    return found


if __name__ == "__main__":
    sys.exit(main())
