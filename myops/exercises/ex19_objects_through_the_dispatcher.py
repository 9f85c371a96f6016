"""Exercise 19: a fake quantizer's two Python objects through the dispatcher, compiled and exported.

QuantSpec (the grid) must be a constant opaque class, Observer (the decay of the running range) a symbolic one;
ex19::observe_ writes the running range amax, ex19::fake_quantize rounds onto the grid. The check runs them
eagerly, on fake tensors, under torch.compile (counting its compiles as the objects change) and through
torch.export; an exported program holding the observer is saved and then loaded and run in a fresh process.

That saved program calls observe_ alone: torch.export.save drops a constant object baked into a graph (the
program saves, and torch.export.load then fails with KeyError: '_custom_obj_0'; torch 2.14.1), so a program
that calls fake_quantize is checked in this process only.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import torch

from myops.exercises.expect import call, expect_close, randn, require_op
from myops.exercises.runner import Context, Unsolved, one_line
from myops.paths import REPO_ROOT, temp_dir_in_build

FILE = "fake_quant.py"
GRIDS = ((-8, 7), (-128, 127), (0, 15))  # (qmin, qmax)
_RESULT_TAG = "@@ex19-fresh-process "


# -- what the learner wrote ----------------------------------------------------------------------------------

# register_custom_class's refusals (torch/_library/opaque_object.py), by a phrase of each, and the fix.
_REFUSALS = (
    ("must subclass torch._custom_class_base.CustomClassBase",
     "a symbolic class must subclass torch._custom_class_base.CustomClassBase (the fake object compile and "
     "export trace with passes isinstance through it): class {name}(CustomClassBase)"),
    ("non-default `__eq__`", "a constant class needs __eq__ (compiled code guards on it): compare qmin and qmax"),
    ("non-default `__hash__`", "a constant class needs __hash__ (compile's fake-tensor cache keys on it), and "
     "defining __eq__ sets __hash__ to None: hash the fields __eq__ compares"),
    ("`__fx_repr__`", "a constant class needs __fx_repr__, which writes it into the graph: return "
     "(\"{name}(...)\", {{\"{name}\": {name}}}), source that builds an equal object and the names it uses"),
    ("No need to specify `guard_fn`", "a constant is guarded by its __eq__: drop guard_fn"),
)


def _load(context: Context):
    """The learner's module, importable by its name (pickle finds the classes of a saved program there)."""
    try:
        module = context.load_python(FILE)
    except Unsolved as unsolved:
        found = re.search(r"<class '[\w.]*?(\w+)'>", str(unsolved))
        for phrase, fix in _REFUSALS:
            if phrase in str(unsolved) and found:
                name = found.group(1)
                raise Unsolved(f"importing {context.file(FILE)} failed: register_custom_class refused {name}: "
                               + fix.format(name=name)) from None
        raise
    sys.modules[module.__name__] = module
    return module


def _require_classes(context: Context, module):
    from torch._library.opaque_object import is_opaque_constant_type, is_opaque_symbolic_type, is_opaque_type

    classes = []
    for name, kind, why in (("QuantSpec", "constant", "fixed for a run, so compiled code may bake it in"),
                            ("Observer", "symbolic", "retuned while the model runs, so compiled code must read "
                                                     "it when it runs")):
        cls = getattr(module, name, None)
        if not isinstance(cls, type):
            raise Unsolved(f"{context.file(FILE)} defines no class {name}")
        if not is_opaque_type(cls):
            raise Unsolved(f"{name} is not registered as an opaque type: register_custom_class({name}, "
                           f"typ=\"{kind}\") ({why})")
        other = "symbolic" if kind == "constant" else "constant"
        if not (is_opaque_constant_type if kind == "constant" else is_opaque_symbolic_type)(cls):
            raise Unsolved(f"{name} is registered as {other}, but it is {why}: register it typ=\"{kind}\"")
        classes.append(cls)
    spec_class = classes[0]
    a, b, c = call("QuantSpec(-8, 7)", spec_class, -8, 7), spec_class(-8, 7), spec_class(-128, 127)
    if not (a == b and hash(a) == hash(b)):
        raise Unsolved("two QuantSpec(-8, 7) are not equal or hash differently: compiled code would compile "
                       "again for each new object; __eq__ and __hash__ must compare qmin and qmax")
    if a == c:
        raise Unsolved("QuantSpec(-8, 7) == QuantSpec(-128, 127): compiled code would run the graph of one grid "
                       "for the other; __eq__ must compare qmin and qmax")
    for qmin, qmax in GRIDS:
        spec = spec_class(qmin, qmax)
        source, names = call(f"QuantSpec({qmin}, {qmax}).__fx_repr__()", spec.__fx_repr__)
        try:
            rebuilt = eval(source, dict(names))  # what the graph's code runs
        except Exception as error:
            raise Unsolved(f"QuantSpec({qmin}, {qmax}).__fx_repr__() gives {source!r}, which raises "
                           f"{one_line(error)} with the names it gives: return the source and every name it "
                           "uses") from None
        if rebuilt != spec:
            raise Unsolved(f"QuantSpec({qmin}, {qmax}).__fx_repr__() gives {source!r}, which builds another "
                           "QuantSpec: the graph would round onto another grid")
    return classes


def _require_schemas(context: Context):
    observe_ = require_op("ex19", "observe_", f"define it with torch.library.custom_op in {context.file(FILE)}")
    quantize = require_op("ex19", "fake_quantize", f"define it with torch.library.custom_op in {context.file(FILE)}")
    for op, names, returns in ((observe_, ("x", "amax", "observer"), []),
                               (quantize, ("x", "amax", "spec"), ["Tensor"])):
        args = op._schema.arguments
        found = ([(a.name, str(a.type)) for a in args], [str(r.type) for r in op._schema.returns])
        wanted = ([(n, "Tensor" if n in ("x", "amax") else "PyObject") for n in names], returns)
        if found != wanted:
            hints = "(x: Tensor, amax: Tensor, observer: Observer) -> None" if op is observe_ else \
                "(x: Tensor, amax: Tensor, spec: QuantSpec) -> Tensor"
            raise Unsolved(f"the schema is {op._schema}: write the signature {hints} (an opaque class shows "
                           "as PyObject)")
    written = {op: [a.name for a in op._schema.arguments if a.alias_info is not None and a.alias_info.is_write]
               for op in (observe_, quantize)}
    if written[quantize]:
        raise Unsolved(f"ex19::fake_quantize declares {', '.join(written[quantize])} written (mutates_args), but "
                       "it writes nothing: mutates_args=()")
    # The state observe_ changes: written, it must be declared, or compile and export drop the write.
    amax = torch.zeros(())
    call("ex19::observe_", observe_, randn(4, 5), amax, _observer(context, 0.5))
    if amax.item() != 0 and "amax" not in written[observe_]:
        raise Unsolved("ex19::observe_ writes amax but does not declare it: torch.compile and torch.export "
                       "would take amax for unchanged; custom_op(..., mutates_args=(\"amax\",))")
    if "x" in written[observe_]:
        raise Unsolved("ex19::observe_ declares x written, but it writes only amax: mutates_args=(\"amax\",)")
    return observe_, quantize


def _observer(context: Context, decay: float):
    return sys.modules[_module_name(context)].Observer(decay)


def _module_name(context: Context) -> str:
    return f"exercise_{context.folder.name}"


# -- references ------------------------------------------------------------------------------------------------

def observed(x, amax, decay):
    return torch.maximum(amax * decay, x.abs().amax().to(amax.dtype))


def quantized(x, amax, qmin, qmax):
    scale = amax.clamp_min(1e-12) / qmax
    return ((x / scale).round().clamp(qmin, qmax) * scale).to(x.dtype)


def _inputs():
    """(what, x) in three dtypes and two layouts; the second of each pair has a smaller range than the first."""
    yield "a float32 [4, 5]", randn(4, 5, seed=1)
    yield "a transposed float64 [3, 8]", randn(8, 3, dtype=torch.float64, seed=2).t()
    yield "a bfloat16 [2, 3, 4]", randn(2, 3, 4, dtype=torch.bfloat16, seed=3)


# -- the check -------------------------------------------------------------------------------------------------

def check(context: Context) -> None:
    temp_dir_in_build("ex19")  # the saved program and anything torch writes stay out of /tmp
    module = _load(context)
    spec_class, observer_class = _require_classes(context, module)
    observe_, quantize = _require_schemas(context)
    _check_eager(observe_, quantize, spec_class, observer_class)
    _check_fakes(observe_, quantize, spec_class, observer_class)
    _check_compile(observe_, quantize, spec_class, observer_class)
    _check_export(context, spec_class, observer_class)


def _check_eager(observe_, quantize, spec_class, observer_class) -> None:
    for what, x in _inputs():
        amax, observer = torch.zeros(()), observer_class(0.5)
        for step, sample in enumerate((x, x * 0.25)):
            expected = observed(sample, amax, 0.5)
            call("ex19::observe_", observe_, sample, amax, observer)
            expect_close(f"amax after ex19::observe_ on {what}{' and then a quarter of it' if step else ''} "
                         "with decay 0.5 (max(decay * amax, max |x|))", amax, expected)
        for qmin, qmax in GRIDS:
            expect_close(f"ex19::fake_quantize on {what} with QuantSpec({qmin}, {qmax})",
                         call("ex19::fake_quantize", quantize, x, amax, spec_class(qmin, qmax)),
                         quantized(x, amax, qmin, qmax))


def _check_fakes(observe_, quantize, spec_class, observer_class) -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    for what, x in _inputs():
        amax = observed(x, torch.zeros(()), 0.5)
        real = quantize(x, amax, spec_class(-8, 7))
        with FakeTensorMode() as mode:
            fx, famax = mode.from_tensor(x), mode.from_tensor(amax)
            try:
                observe_(fx, famax, observer_class(0.5))
            except Exception as error:
                raise Unsolved(f"ex19::observe_ on fake tensors raised {one_line(error)}: an operator that returns "
                               "nothing and declares what it writes needs no fake kernel") from None
            try:
                fake = quantize(fx, famax, spec_class(-8, 7))
            except Exception as error:
                if "no fake impl" in str(error):
                    raise Unsolved("ex19::fake_quantize has no fake kernel, which torch.compile and torch.export "
                                   "trace with: register one (@fake_quantize.register_fake) that returns an empty "
                                   "output like the real one") from None
                raise Unsolved(f"ex19::fake_quantize on fake tensors raised {one_line(error)}: the fake kernel must "
                               "only make the output, reading no data") from None
        for field in ("shape", "dtype", "device", "stride"):
            got, wanted = getattr(fake, field), getattr(real, field)
            got, wanted = (got(), wanted()) if callable(got) else (got, wanted)
            if got != wanted:
                shown = (list(got), list(wanted)) if field in ("shape", "stride") else (got, wanted)
                raise Unsolved(f"on {what}, ex19::fake_quantize's fake kernel returns {field} {shown[0]} where the "
                               f"real one returns {shown[1]}: the fake must return what the kernel returns "
                               "(torch.empty_like(x) keeps x's shape, dtype, device and strides)")


def _check_compile(observe_, quantize, spec_class, observer_class) -> None:
    from torch._dynamo.testing import CompileCounterWithBackend

    def fake_quant(x, amax, spec, observer):
        observe_(x, amax, observer)
        return quantize(x, amax, spec)

    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(fake_quant, backend=counter, fullgraph=True)
    torch._dynamo.reset()
    amax, eager_amax = torch.zeros(()), torch.zeros(())
    observer = observer_class(0.5)
    steps = (  # (what changed, QuantSpec, observer, compiles expected by then, what a wrong count means)
        ("the first call", (-8, 7), observer, 1, ""),
        ("observer.decay = 0.9", (-8, 7), observer, 1,
         "a new decay compiled again, though a symbolic object is read when the graph runs and only what its "
         "guard_fn returns recompiles: register Observer without a guard_fn"),
        ("a new Observer(0.25)", (-8, 7), observer_class(0.25), 1,
         "a new Observer compiled again, though a symbolic object is a graph input: guard nothing of it"),
        ("a new, equal QuantSpec(-8, 7)", (-8, 7), None, 1,
         "an equal QuantSpec compiled again, though a constant is guarded by == alone"),
        ("QuantSpec(-128, 127)", (-128, 127), None, 2,
         "another grid reused the graph baked with QuantSpec(-8, 7): register QuantSpec typ=\"constant\""),
        ("QuantSpec(-8, 7) again", (-8, 7), None, 2, "a grid whose graph is cached compiled again"),
    )
    for step, (change, grid, obs, compiles, wrong) in enumerate(steps):
        if change == "observer.decay = 0.9":
            observer.decay = 0.9
        obs = obs or observer
        x = randn(4, 5, seed=10 + step) * (0.5 if step % 2 else 2.0)
        what = (f"torch.compile(fullgraph=True, backend=\"aot_eager\") of observe_ then fake_quantize, after "
                f"{change}")
        out = call(what, compiled, x, amax, spec_class(*grid), obs)
        expected = fake_quant(x, eager_amax, spec_class(*grid), obs)
        expect_close(f"amax after {what}", amax, eager_amax)
        expect_close(what, out, expected)
        if counter.frame_count != compiles:
            raise Unsolved(f"{what}: {counter.frame_count} compiles so far, expected {compiles}; {wrong}")


class _FakeQuant(torch.nn.Module):
    """A fake quantizer: the grid and the observer as attributes, the running range a buffer."""

    def __init__(self, spec, observer):
        super().__init__()
        self.spec, self.observer = spec, observer
        self.register_buffer("amax", torch.zeros(()))

    def forward(self, x):
        torch.ops.ex19.observe_.default(x, self.amax, self.observer)
        return torch.ops.ex19.fake_quantize.default(x, self.amax, self.spec)


class Observe(torch.nn.Module):
    """The observer alone: what a program may save (see the module's docstring)."""

    def __init__(self, observer):
        super().__init__()
        self.observer = observer
        self.register_buffer("amax", torch.zeros(()))

    def forward(self, x):
        torch.ops.ex19.observe_.default(x, self.amax, self.observer)
        return self.amax * 1


def _export(what, module, x):
    try:
        return torch.export.export(module, (x,))
    except Exception as error:
        raise Unsolved(f"torch.export.export of {what} raised {one_line(error)}") from None


def _check_export(context: Context, spec_class, observer_class) -> None:
    xs = [randn(4, 5, seed=20), randn(4, 5, seed=21) * 0.25, randn(4, 5, seed=22)]
    what = "a module holding QuantSpec(-8, 7), Observer(0.5) and the buffer amax"
    program = _export(what, _FakeQuant(spec_class(-8, 7), observer_class(0.5)), xs[0])
    exported, eager = call("ExportedProgram.module()", program.module), \
        _FakeQuant(spec_class(-8, 7), observer_class(0.5))
    for step, x in enumerate(xs):
        expect_close(f"the exported program of {what}, call {step + 1}", call(f"the exported {what}", exported, x),
                     eager(x))

    what = "a module holding Observer(0.5) and the buffer amax"
    program = _export(what, Observe(observer_class(0.5)), xs[0])
    saved = context.build_dir / context.folder.name / "observe.pt2"
    saved.parent.mkdir(parents=True, exist_ok=True)
    call(f"torch.export.save of the exported {what}", torch.export.save, program, saved)
    inputs = saved.with_name("inputs.pt")
    torch.save(xs, inputs)
    command = [sys.executable, "-m", "myops.exercises.ex19_objects_through_the_dispatcher", str(context.folder),
               context.display, str(saved)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    except subprocess.TimeoutExpired:
        raise Unsolved("loading the saved program in a fresh process did not finish within 300 s") from None
    found = [json.loads(line[len(_RESULT_TAG):]) for line in done.stdout.splitlines() if line.startswith(_RESULT_TAG)]
    if not found:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise Unsolved(f"the fresh process that loads the saved program stopped without a verdict: {last}")
    if found[-1]:
        raise Unsolved(found[-1])
    outputs = torch.load(saved.with_name("outputs.pt"))
    reference = Observe(observer_class(0.5))
    for step, (x, out) in enumerate(zip(xs, outputs)):
        expect_close(f"the saved program of {what}, loaded in a fresh process, call {step + 1}", out, reference(x))


def _fresh_process(folder: str, display: str, saved: str) -> str:
    """'' when the saved program loads and runs in this new process, once the learner's module is imported
    (which registers the classes and the operators again), else what is wrong. Its outputs go beside it."""
    context = Context(Path(folder), display, Path(saved).parent)
    try:
        _load(context)
        try:
            program = torch.export.load(saved)
        except Exception as error:
            return (f"torch.export.load of the saved program, in a fresh process that imported {context.file(FILE)}, "
                    f"raised {one_line(error)}")
        xs = torch.load(Path(saved).with_name("inputs.pt"))
        module = call("the loaded program's module()", program.module)
        outputs = [call("the loaded program, in a fresh process", module, x) for x in xs]
        torch.save(outputs, Path(saved).with_name("outputs.pt"))
    except Unsolved as unsolved:
        return str(unsolved)
    return ""


if __name__ == "__main__":  # the fresh process: python -m myops.exercises.ex19_objects_through_the_dispatcher ...
    temp_dir_in_build("ex19")
    print("\n" + _RESULT_TAG + json.dumps(_fresh_process(*sys.argv[1:4])), flush=True)
