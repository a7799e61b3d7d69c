"""A loop whose every pass is a separate fit of a new target: tracking an object's pose
frame by frame, each frame's fit warm-started from the last one's. The optimizer built
in such a loop is stepped only by an inner `for _ in range(n)` that draws no data, on an
argument the outer loop's variable picks (`results[t]`). A fresh optimizer state for each
new problem is the point; an epoch loop, whose inner loop draws batches, is not one."""

from __future__ import annotations

import libcst as cst

from optax_lint.facts.state.walks import name_uses
from optax_lint.syntax.names import lookup
from optax_lint.syntax.nodes import over_range
from optax_lint.syntax.walker import Scope, walk


def fits_per_pass(sf, loop: cst.CSTNode, scope: Scope, name: str) -> bool:
    """Every step of the optimizer bound to `name` inside `loop` is such a fit's step."""
    if not isinstance(loop, cst.For):
        return False
    outer = {n.value for n in walk(loop.target) if isinstance(n, cst.Name)}
    steps = []
    for record in sf.raw.calls:
        if record.scope is not scope or not sf.inside(record.statement, loop):
            continue
        func = record.node.func
        if (isinstance(func, cst.Attribute) and func.attr.value == "update" and isinstance(func.value, cst.Name) and func.value.value == name) or (
            _steps_it(sf, record, loop, name)
        ):
            steps.append(record)
    if not steps:
        return False
    for record in steps:
        inner, _ = sf.enclosing_loop(record.statement)
        if inner is None or inner is loop or not isinstance(inner, cst.For):
            return False
        counted = sf.values_bound_in(inner.iter.value, scope, loop) if isinstance(inner.iter, cst.Name) else [inner.iter]
        if len(counted) != 1 or counted[0] is None or not over_range(counted[0]):  # `pbar = tqdm(range(1000))`: its one value here
            return False
        if not any(_picked_by(arg.value, outer) for arg in record.node.args):
            return False
    return True


def _steps_it(sf, record, loop: cst.CSTNode, name: str) -> bool:
    """The call runs a function that updates with `name`: the module's own (jitted or
    not), or one defined in this very loop (a notebook that redefines `step` per pass)."""
    info = sf.callee(record.node, record.scope)
    func = record.node.func
    if not isinstance(func, cst.Name):
        return info is not None and bool(name_uses(info.node.body, name))
    _, bindings = lookup(func.value, record.scope)
    defs = [b.node for b in bindings if b.kind == "def" and sf.inside(b.node, loop)]
    if not defs and info is not None:
        return bool(name_uses(info.node.body, name))
    return len(defs) == 1 and bool(name_uses(defs[0].body, name))


def _picked_by(expr: cst.BaseExpression, names: set[str]) -> bool:
    """`results[t]`: a subscript whose index reads one of `names`."""
    return any(
        isinstance(node, cst.Subscript) and any(isinstance(n, cst.Name) and n.value in names for e in node.slice for n in walk(e))
        for node in walk(expr)
    )

