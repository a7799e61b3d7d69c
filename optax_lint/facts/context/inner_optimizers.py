"""Optimizers of an inner optimisation: inside the loop that trains the model with
another optimizer, their state is started afresh on every pass, on values made earlier
in that pass (predictive coding's activities inferred for each batch, an adversarial
input for each batch). Their state lives one pass; they do not train the model the
file's architecture names, so advice about that model's training (clipping, warmup) is
not about them. A loop that restarts the only optimizer with fresh params is a sweep
of runs (over seeds or settings), not an inner optimisation."""

from __future__ import annotations

import libcst as cst

from optax_lint.facts.checkpoints.vocabulary import opt_name
from optax_lint.facts.state.walks import name_counts
from optax_lint.syntax.names import lookup


def restarted_each_pass(facts, pipeline) -> bool:
    """Every `init` of the pipeline sits in a loop that binds each of its arguments
    earlier in the same pass (`acts = init_activities(model, x)` then
    `activity_optim.init(acts)`), and another optimizer, initialised outside that loop,
    is used inside it."""
    inits = _inits(facts, pipeline)
    if not inits:
        return False
    sf = facts.state
    others = [p for p in facts.pipelines if p is not pipeline and p.name]
    for record in inits:
        names = [_root_name(arg.value) for arg in record.node.args if arg.keyword is None]
        loops = [sf.pass_binding(name, record.statement) if name is not None else None for name in names]
        if not loops or any(loop is None for loop in loops):
            return False
        loop = loops[0]
        if not any(_trained_across(facts, other, loop) for other in others) and not _state_carried(facts, record, loop):
            return False
    return True


def _state_carried(facts, init, loop: cst.CSTNode) -> bool:
    """Another optimizer state crosses the loop's passes: a name that says so (`param_opt_state`),
    bound before the loop and rebound in it (an optimizer built by a helper the file does
    not read, stepped by a library call)."""
    own = _assigned_name(init.statement)
    for name in name_counts(facts, loop):
        if name == own or not opt_name(name):
            continue
        _, bindings = lookup(name, init.scope)
        inside = [b for b in bindings if b.kind != "param" and (b.node is loop or facts.state.inside(b.node, loop))]
        if inside and len(inside) < len(bindings):
            return True
    return False


def _assigned_name(statement):
    body = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and statement.body else None
    if isinstance(body, cst.Assign) and len(body.targets) == 1 and isinstance(body.targets[0].target, cst.Name):
        return body.targets[0].target.value
    return None


def _trained_across(facts, other, loop: cst.CSTNode) -> bool:
    """`other` is used in `loop` and its state is not restarted there."""
    if not name_counts(facts, loop).get(other.name):
        return False
    return not any(facts.state.inside(record.statement, loop) for record in _inits(facts, other))


def _inits(facts, pipeline) -> list:
    return [
        record for record in facts.raw.calls
        if isinstance(record.node.func, cst.Attribute) and record.node.func.attr.value == "init"
        and facts.pipeline_for(record.node.func.value, record.scope) is pipeline
    ]


def _root_name(expr: cst.BaseExpression):
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def inner_step_calls(facts) -> set:
    """The calls that step an inner optimizer: its `update`, and the `apply_updates`
    onto the values its `init` was given (`activities = optax.apply_updates(activities,
    updates)`). The loop around them infers, it does not train the model."""
    inner = [p for p in facts.pipelines if restarted_each_pass(facts, p)]
    if not inner:
        return set()
    names = {_root_name(arg.value) for p in inner for record in _inits(facts, p) for arg in record.node.args}
    out = set()
    for site in facts.update_sites:
        if site.kind == "update" and any(site.pipeline is p for p in inner):
            out.add(site.call)
        elif site.kind == "apply_updates" and site.call.args and _root_name(site.call.args[0].value) in names:
            out.add(site.call)
    return out
