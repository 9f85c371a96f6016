"""DTensor: the sharding rules of myops/sharding.py on a simulated mesh and on two real processes (torchrun, gloo)."""
import socket
import tempfile
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch.distributed.tensor import Partial, Replicate, Shard

import myops
from myops import sharded_run, sharding
from myops.mesh import LOOPBACK, distribute, init_process_group, simulated_mesh

X = sharded_run.samples()  # made outside the simulation: one value for every rank


@pytest.fixture(scope="module", autouse=True)
def rules(layers):
    sharding.register()
    yield
    if dist.is_initialized():
        dist.destroy_process_group()  # leave no process group to the next test file of this worker


@pytest.fixture
def mesh():
    with simulated_mesh(2) as mesh:
        yield mesh


@pytest.fixture(scope="module")
def simulated(rules):
    with simulated_mesh(2) as mesh:
        return sharded_run.compare(mesh)


def by_call(results):
    return {(r.op, r.inputs): r for r in results}


def test_every_placement_combination_matches_one_process(simulated):
    assert len(simulated) == 9 + 9 + 6 + 9 + 3
    assert [str(r) for r in simulated if not r.matches] == []


@pytest.mark.parametrize("inputs, output", [
    ((Shard(0), Replicate()), Shard(0)),
    ((Replicate(), Shard(1)), Shard(1)),
    ((Shard(1), Shard(0)), Partial()),
])
def test_mymatmul_strategies_need_no_collective(simulated, inputs, output):
    result = by_call(simulated)[("mymatmul", inputs)]
    assert (result.output, result.collectives) == (output, 0)


def test_myrmsnorm_never_shards_the_normalized_dimension(simulated):
    outputs = {r.inputs[0]: r for r in simulated if r.op == "myrmsnorm" and r.inputs[1] == Replicate()}
    assert outputs[Shard(0)].output == Shard(0) and outputs[Shard(0)].collectives == 0
    # The last dimension sharded: DTensor gathers it (one collective) and normalizes whole rows.
    assert outputs[Shard(1)].output == Replicate() and outputs[Shard(1)].collectives == 1


def test_mytranspose_moves_the_sharded_dimension(simulated):
    calls = by_call(simulated)
    assert calls[("mytranspose", (Shard(0),))].output == Shard(1)
    assert calls[("mytranspose", (Shard(1),))].output == Shard(0)


def test_myadd_inplace_keeps_the_placement_of_self(simulated):
    for result in simulated:
        if result.op == "myadd_":
            assert result.output == result.inputs[0], result


def test_an_operator_without_a_rule_is_refused(mesh):
    a = distribute(torch.ones(4, 2), mesh, [Shard(0)])
    with pytest.raises(NotImplementedError,
                       match=r"^Operator myops.myadd_inplace.default does not have a sharding strategy registered.$"):
        torch.ops.myops.myadd_inplace.default(a, a)


def test_a_wrong_rule_gives_wrong_values(mesh):
    x, weight = X["a"], X["weight"]
    expected = torch.nn.functional.rms_norm(x, (6,), weight, 1e-6)
    wrong = lambda self, weight, eps=None: [([Shard(1)], [Shard(1), Shard(0), None])]  # noqa: E731
    try:
        sharding.install(torch.ops.myops.myrmsnorm.default, wrong)
        out = myops.myrmsnorm(distribute(x, mesh, [Shard(1)]), distribute(weight, mesh, [Shard(0)]))
        assert out.placements == (Shard(1),)
        assert not torch.allclose(out.full_tensor(), expected)
    finally:
        sharding.register()
    out = myops.myrmsnorm(distribute(x, mesh, [Shard(1)]), distribute(weight, mesh, [Shard(0)]))
    torch.testing.assert_close(out.full_tensor(), expected)


def test_a_rule_with_the_wrong_number_of_placements_is_named(mesh):
    x = distribute(torch.ones(4, 6), mesh, [Shard(0)])
    try:
        sharding.install(torch.ops.myops.myrmsnorm.default, lambda self, weight, eps=None: [([Shard(0)], [Shard(0)])])
        with pytest.raises(RuntimeError, match=(
                r"sharding rule for myops::myrmsnorm: the strategy \[Shard\(dim=0\)\] <- \[Shard\(dim=0\)\] gives 1 "
                r"output and 1 input placements; the schema has 1 output\(s\) and 3 arguments \(self, weight, eps\)")):
            myops.myrmsnorm(x, distribute(torch.ones(6), mesh, [Replicate()]))
    finally:
        sharding.register()


def test_gradients_through_the_autograd_kernel_on_sharded_inputs(mesh):
    x = X
    m = distribute(x["m"], mesh, [Shard(0)]).requires_grad_()
    n = distribute(x["n"], mesh, [Replicate()]).requires_grad_()
    myops.mymatmul(m, n).sum().backward()
    m_ref, n_ref = x["m"].clone().requires_grad_(), x["n"].clone().requires_grad_()
    (m_ref @ n_ref).sum().backward()
    torch.testing.assert_close(m.grad.full_tensor(), m_ref.grad)
    torch.testing.assert_close(n.grad.full_tensor(), n_ref.grad)
    assert n.grad.placements == (Partial(),)  # each rank's rows give a term of the sum: an all-reduce to come


@pytest.mark.parametrize("world_size", [1, 3, 4])
def test_other_mesh_sizes_match_one_process(world_size):
    """Sizes that do not divide 4 rows or 6 columns: DTensor shards unevenly, the values stay right."""
    with simulated_mesh(world_size) as mesh:
        results = sharded_run.compare(mesh)
    assert len(results) == 36 and [str(r) for r in results if not r.matches] == []


def test_reentering_the_simulation_reuses_the_process_group(mesh):
    group = dist.group.WORLD
    with simulated_mesh(2) as again:
        assert dist.group.WORLD is group and again.size() == 2


@pytest.fixture(scope="module")
def torchrun(layers):
    before = set(Path(tempfile.gettempdir()).glob("myops_torchrun_*"))
    run = sharded_run.launch(2)
    return run, set(Path(tempfile.gettempdir()).glob("myops_torchrun_*")) - before


def test_two_processes_match_one_process_and_the_simulation(torchrun, simulated):
    run, _ = torchrun
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert lines[0] == f"2 ranks, backend gloo, {len(simulated)} calls"
    assert lines[1:] == [str(r) for r in simulated]


def test_torchrun_leaves_nothing_behind(torchrun):
    _, left = torchrun
    assert left == set()


def test_a_rank_that_dies_ends_the_launch(layers):
    run = sharded_run.launch(2, extra=("--crash-rank", "1"), timeout_s=120)
    assert run.returncode != 0
    assert "rank 1: exiting on purpose" in run.stderr
    assert "ChildFailedError" in run.stderr and "exitcode  : 3" in run.stderr


def processes_running(argument: bytes) -> list[str]:
    """The ids of the processes whose command line holds argument."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if argument in cmdline.read_bytes().split(b"\0"):
                found.append(cmdline.parent.name)
        except OSError:  # ended meanwhile
            pass
    return found


def test_a_hung_rank_is_killed_and_nothing_is_left(layers):
    """Rank 1 never joins and ignores SIGTERM; torchrun starts it in a session of its own, so only finding every
    process of the launch ends it. launch() must return within its stop bound, leaving no process."""
    assert processes_running(b"--hang-rank") == []
    start, timeout_s = time.monotonic(), 30
    with pytest.raises(TimeoutError) as error:
        sharded_run.launch(2, extra=("--hang-rank", "1"), timeout_s=timeout_s)
    elapsed = time.monotonic() - start
    assert str(error.value).startswith("myops.sharded_run: 2 ranks did not finish within 30 s; killed them")
    assert "rank 1: hanging on purpose, deaf to SIGTERM (--hang-rank)" in str(error.value)  # it was past SIGTERM
    assert processes_running(b"--hang-rank") == []
    assert elapsed < timeout_s + 2 * sharded_run.STOP_GRACE_S + 30  # generous: without the stop it never returns


def test_the_rendezvous_store_listens_on_every_interface():
    """What sharded_run says of torchrun's store: a TCPStore server given 127.0.0.1 listens on all addresses."""
    store = dist.TCPStore(LOOPBACK, 0, is_master=True, wait_for_workers=False)
    listening = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:] if Path(table).exists() else []:
            local, state = row.split()[1], row.split()[3]
            address, port = local.rsplit(":", 1)
            if state == "0A" and int(port, 16) == store.port:  # 0A: LISTEN
                listening.append(address)
    del store
    assert listening and all(set(address) == {"0"} for address in listening), listening  # 0.0.0.0 or ::


def test_a_port_in_use_is_reported(layers):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        run = sharded_run.launch(2, port=taken.getsockname()[1], timeout_s=120)
    assert run.returncode != 0
    assert "EADDRINUSE" in run.stderr


@pytest.mark.parametrize("environment, message", [
    ({}, "init_process_group: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT not set; start the script with "
         "`torchrun --nproc-per-node 2 --master-addr 127.0.0.1 -m <module>`"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.7", "MASTER_PORT": "29500"},
     "init_process_group: MASTER_ADDR is '10.0.0.7'; this course contacts only 127.0.0.1 (pass --master-addr "
     "127.0.0.1 to torchrun)"),
])
def test_joining_a_launch_refuses_a_missing_or_remote_address(monkeypatch, environment, message):
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(RuntimeError) as error:
        init_process_group()
    assert str(error.value) == message


@pytest.mark.parametrize("world_size", [0, 2.0])
def test_a_simulated_mesh_needs_a_positive_whole_number_of_ranks(world_size):
    with pytest.raises(ValueError, match=rf"^simulated_mesh: world_size must be a positive int, got {world_size}$"):
        with simulated_mesh(world_size):
            pass
