"""Exercise 01: the schemas of mylerp and its in-place form mylerp_ (keyword-only default, alias annotation)."""
import torch

from myops.exercises.expect import expect_raises, require_op
from myops.exercises.runner import Context, Unsolved


def check(context: Context) -> None:
    where = f"define it with m.def(...) in {context.file('schema.cpp')}"
    for name in ("mylerp", "mylerp_"):
        schema = require_op("ex01", name, where)._schema
        args = schema.arguments
        first = "self" if name == "mylerp_" else "start"
        if [a.name for a in args] != [first, "end", "weight"]:
            raise Unsolved(f"ex01::{name} has the arguments {[a.name for a in args]}, expected "
                           f"{[first, 'end', 'weight']}")
        if [str(a.type) for a in args] != ["Tensor", "Tensor", "float"]:
            raise Unsolved(f"ex01::{name} has argument types {[str(a.type) for a in args]}, expected "
                           "['Tensor', 'Tensor', 'float']")
        if not args[2].kwarg_only or args[0].kwarg_only or args[1].kwarg_only:
            raise Unsolved(f"ex01::{name}: only `weight` must be keyword-only (put `*,` before it)")
        if args[2].default_value != 0.5:
            raise Unsolved(f"ex01::{name}: `weight` defaults to {args[2].default_value}, expected 0.5")
        if len(schema.returns) != 1 or str(schema.returns[0].type) != "Tensor":
            raise Unsolved(f"ex01::{name} returns {[str(r.type) for r in schema.returns]}, expected one Tensor")
        written = args[0].alias_info
        returned = schema.returns[0].alias_info
        if name == "mylerp":
            if written is not None or returned is not None:
                raise Unsolved("ex01::mylerp writes nothing and returns a new tensor: it needs no alias annotation")
        else:
            if written is None or not written.is_write:
                raise Unsolved("ex01::mylerp_ writes `self`: annotate it as Tensor(a!)")
            # Tensor(a) without `!` would declare a read-only alias (a view) of self, not self written.
            if returned is None or returned.after_set != written.after_set or not returned.is_write:
                raise Unsolved("ex01::mylerp_ returns `self`: annotate the return with the same alias set, "
                               "Tensor(a!)")
            if any(a.alias_info is not None for a in args[1:]):
                raise Unsolved("ex01::mylerp_: only `self` is written and aliased; `end` needs no annotation")
    # A schema without a kernel: the dispatcher's "Could not run".
    expect_raises("ex01::mylerp", torch.ops.ex01.mylerp, torch.zeros(2), torch.ones(2), errors=(NotImplementedError,),
                  hint="this exercise is about schemas only, register no kernel")
