"""myops.pictures: each picture's data is what PyTorch does (the key that runs is the kernel that runs, a table cell
is the dispatcher's entry), its SVG is stable text, and every notebook shows pictures of its own mechanism, each
drawn by a cell that asserts what it draws."""
import json
import re
from pathlib import Path

import pytest
import torch
from torch.library import Library

import myops
from myops import dispatch, pictures
from myops.build import REPO_ROOT

pytest.importorskip("matplotlib")

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
MARK = re.compile(r"<title>myops picture: ([a-z ]+)</title>")

# The kinds of picture each notebook must show at least once: its own mechanism.
KINDS_OF = {
    "00": {"key set", "table"}, "01": {"table"}, "02": {"table"}, "03": {"table"}, "04": {"path"},
    "05": {"table"}, "06": {"path"}, "07": {"path"}, "08": {"path"}, "09": {"table"}, "10": {"key set"},
    "11": {"table"}, "12": {"table"}, "13": {"table"}, "14": {"table"}, "15": {"table"},
    "16": {"key set", "placement"}, "17": {"grid"}, "18": {"key set", "table", "path"}, "19": {"key set", "table"},
}


# -- key sets: the key the picture says runs is the kernel that runs ------------------------------------------
@pytest.fixture(scope="module")
def probe():
    """An operator with a Python kernel on several keys, each noting its key, so a call shows which one ran."""
    lib = Library("pictures_probe", "FRAGMENT")
    lib.define("f(Tensor x) -> Tensor")
    ran = []
    for key in ("CPU", "Meta", "AutogradCPU", "AutogradMeta", "AutocastCPU"):
        def kernel(x, key=key):
            ran.append(key)
            return x.clone()
        lib.impl("f", kernel, key)
    yield ran
    lib._destroy()


STATES = {
    "plain": lambda: torch.enable_grad(),
    "no_grad": lambda: torch.no_grad(),
    "inference_mode": lambda: torch.inference_mode(),
    "autocast": lambda: torch.autocast("cpu", dtype=torch.bfloat16),
    "below autograd": lambda: torch._C._AutoDispatchBelowAutograd(),
}


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("state", STATES)
def test_the_key_that_runs_is_the_kernel_that_runs(probe, state, device):
    x = torch.ones(2, device=device, requires_grad=True)
    with STATES[state]():
        data = pictures.key_set(x, op="pictures_probe::f").data
        probe.clear()
        torch.ops.pictures_probe.f(x)
    assert data.runs == probe[0], (state, device, data)


def test_key_set_rows_are_the_dispatchers_sets():
    x = torch.ones(2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        data = pictures.key_set(x, x, op="aten::add.Tensor").data
        assert data.call == pictures.key_names(dispatch.call_key_set(x, x))
        assert data.exclude == pictures.key_names(torch._C._dispatch_tls_local_exclude_set())
    assert data.tensors == ("CPU", "ADInplaceOrView", "AutogradCPU", "AutocastCPU")
    assert (data.runs, data.skipped) == ("AutogradCPU", ("AutocastCPU",))  # add falls through autocast
    with torch.inference_mode():  # autograd gone; add falls through ADInplaceOrView and BackendSelect too
        data = pictures.key_set(x, x, op="aten::add.Tensor").data
    assert (data.runs, data.skipped) == ("CPU", ("ADInplaceOrView", "BackendSelect"))


def test_bit_names_follow_the_header_and_the_backends():
    names = pictures.functionality_names()
    assert len(names) == 46 and names[0] == "Dense" and "Tracer" in names  # Python has no name for Tracer
    backends = pictures.backend_names()
    assert backends[0] == "CPU" and backends[1] == "CUDA" and backends[15] == "Meta" and len(backends) == 16
    assert pictures.bit_name(torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU).raw_repr().bit_length() - 1) \
        == "AutocastCPU"


# -- tables: each cell is the dispatcher's entry, and names the alias key it came from -----------------------
@pytest.mark.parametrize("alias, key, word", [
    ("CompositeImplicitAutograd", "AutogradCPU", "math kernel"),
    ("CompositeExplicitAutograd", "Meta", "default backend kernel"),
    ("CompositeExplicitAutogradNonFunctional", "Meta", "default backend kernel"),
    ("Autograd", "AutogradCPU", "autograd kernel"),
])
def test_a_table_cell_filled_from_an_alias_key_names_it(alias, key, word):
    lib = Library("pictures_alias", "FRAGMENT")
    name = alias.lower()
    lib.define(f"{name}(Tensor x) -> Tensor")
    lib.impl(name, lambda x: x, alias)
    try:
        op = f"pictures_alias::{name}"
        assert dispatch.registrations(op)[key].kind == word
        cell = pictures.table([op]).data[op][key]
        assert (cell.kind, cell.alias, cell.source) == ("kernel", alias, "Python (torch.library)")
    finally:
        lib._destroy()


def test_a_kernel_of_the_key_itself_names_no_alias(layers):
    cells = pictures.table(["myops::myadd", "aten::add.Tensor"]).data
    assert cells["myops::myadd"]["CPU"] == dispatch.Entry("CPU", "kernel", "csrc/cpu/myadd.cpp", "")
    assert cells["myops::myadd"]["AutogradCPU"].alias == "Autograd"  # csrc/autograd registers on the alias key
    assert cells["aten::add.Tensor"]["AutocastCPU"].kind == "fallthrough"


# -- paths: a redispatch and a fresh call under a guard are told apart -----------------------------------------
def test_path_hops(layers):
    x, y = torch.randn(5), torch.randn(5)
    with torch.no_grad(), dispatch.record_path("myadd_inplace(x, y)") as path:
        myops.myadd_inplace(x, y)
    assert path.keys() == ["Autograd", "ADInplaceOrView", "CPU"]
    # Autograd passes a masked key set on (nothing newly excluded); ADInplaceOrView goes on under a guard.
    assert [pictures.hop(path, i) for i in range(3)] == [None, "redispatch", "guard"]
    assert pictures.path(path).data is path


# -- DTensor and Triton ----------------------------------------------------------------------------------------
def test_placements_are_dtensors_own_pieces(layers):
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.debug import CommDebugMode

    from myops import sharding
    from myops.mesh import distribute, simulated_mesh

    sharding.register()
    with simulated_mesh(2) as mesh:
        m = distribute(torch.randn(4, 6), mesh, [Shard(0)])
        n = distribute(torch.randn(6, 8), mesh, [Shard(1)])
        with CommDebugMode() as comms:
            out = torch.ops.myops.mymatmul(m, n)
        data = pictures.placements("mymatmul", {"m": m, "n": n}, out, comms.get_comm_counts()).data
    assert [piece.placement for piece in data.inputs] == ["S(0)", "S(1)"]
    assert data.inputs[0].ranks == (((0, 2), (0, 6)), ((2, 4), (0, 6)))  # rows 0-1 on rank 0, 2-3 on rank 1
    assert data.output.placement == str(out.placements[0])
    assert sum(data.collectives.values()) == comms.get_total_counts() > 0


@pytest.mark.parametrize("cols, block, slices, masked", [(1500, 1024, 2, 548), (96, 128, 1, 32), (256, 256, 1, 0)])
def test_triton_grid_is_the_launchers_own(cols, block, slices, masked):
    data = pictures.triton_grid(torch.randn(3, cols), torch.randn(cols)).data
    assert (data.grid, data.cols, data.block, data.slices, data.masked) == ((3,), cols, block, slices, masked)


# -- SVG: stable text, real text, marked with its kind --------------------------------------------------------
def test_svg_is_stable_text_marked_with_its_kind():
    x = torch.ones(2)
    first, second = pictures.key_set(x).svg(), pictures.key_set(x).svg()
    assert first == second and first.startswith("<svg")
    assert MARK.findall(first) == ["key set"]
    assert "<text" in first and "AutogradFunctionality" in first  # labels as text, not glyph outlines
    assert repr(pictures.key_set(x)) == "<myops picture: key set>"


# -- the notebooks ---------------------------------------------------------------------------------------------
def stored_pictures(notebook: Path) -> list[tuple[str, str]]:
    """(kind, source of the cell that drew it) for each picture of myops.pictures stored in the notebook."""
    found = []
    for cell in json.loads(notebook.read_text())["cells"]:
        for output in cell.get("outputs", []):
            svg = "".join(output.get("data", {}).get("image/svg+xml", ""))
            found += [(kind, "".join(cell["source"])) for kind in MARK.findall(svg)]
    return found


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_shows_its_own_mechanism(notebook):
    drawn = stored_pictures(notebook)
    kinds = {kind for kind, _ in drawn}
    assert KINDS_OF[notebook.stem[:2]] <= kinds, f"{notebook.stem} draws {sorted(kinds)}"
    assert len(drawn) >= (3 if notebook.stem.startswith("00") else 1)
    for kind, source in drawn:  # a cell that draws also asserts the data it draws
        assert "pictures." in source and re.search(r"^\s*assert\b", source, re.MULTILINE), (notebook.stem, source)
