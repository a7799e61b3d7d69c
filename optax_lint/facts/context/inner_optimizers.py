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
from optax_lint.syntax.nodes import base_name


def inner_pipelines(facts) -> frozenset[int]:
    """ids of the pipelines every `init` of which sits in a loop that binds each of its
    arguments earlier in the same pass (`acts = init_activities(model, x)` then
    `activity_optim.init(acts)`), while another optimizer, initialised outside that
    loop, is used inside it (ModuleFacts.inner_pipelines caches this)."""
    inits = _inits(facts)
    out = set()
    for pipeline in facts.pipelines:
        records = inits.get(id(pipeline))
        if records and all(_restarted_in_pass(facts, pipeline, record, inits) for record in records):
            out.add(id(pipeline))
    return frozenset(out)


def _restarted_in_pass(facts, pipeline, record, inits: dict) -> bool:
    names = [base_name(arg.value) for arg in record.node.args if arg.keyword is None]
    loops = [facts.state.pass_binding(name, record.statement) if name is not None else None for name in names]
    if not loops or any(loop is None for loop in loops):
        return False
    loop = loops[0]
    # Another optimizer, by another name: the same name rebound (a notebook's next cell
    # repeating the sweep) is this optimizer again, not one trained beside it.
    others = [p for p in facts.pipelines if p is not pipeline and p.name and p.name != pipeline.name]
    return any(_trained_across(facts, other, loop, inits) for other in others) or _state_carried(facts, record, loop)


def _state_carried(facts, init, loop: cst.CSTNode) -> bool:
    """Another optimizer state crosses the loop's passes: a name that says so (`param_opt_state`),
    bound before the loop and rebound in it (an optimizer built by a helper the file does
    not read, stepped by a library call)."""
    own = init.assigned_to.value if isinstance(init.assigned_to, cst.Name) else None
    return any(name != own and opt_name(name) and facts.state.carried(name, loop, init.scope)
               for name in name_counts(facts, loop))


def _trained_across(facts, other, loop: cst.CSTNode, inits: dict) -> bool:
    """`other` is used in `loop` and its state is not restarted there."""
    if not name_counts(facts, loop).get(other.name):
        return False
    return not any(facts.state.inside(record.statement, loop) for record in inits.get(id(other), ()))


def _inits(facts) -> dict[int, list]:
    """Pipeline id -> the calls of its `init`."""
    out: dict[int, list] = {}
    for record in facts.raw.calls:
        func = record.node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "init":
            pipeline = facts.pipeline_for(func.value, record.scope)
            if pipeline is not None:
                out.setdefault(id(pipeline), []).append(record)
    return out


def inner_step_calls(facts) -> set:
    """The calls that step an inner optimizer: its `update`, and the `apply_updates`
    onto the values its `init` was given (`activities = optax.apply_updates(activities,
    updates)`). The loop around them infers, it does not train the model."""
    inner = facts.inner_pipelines
    if not inner:
        return set()
    inits = _inits(facts)
    names = {base_name(arg.value) for key in inner for record in inits.get(key, ()) for arg in record.node.args}
    out = set()
    for site in facts.update_sites:
        if site.kind == "update" and id(site.pipeline) in inner:
            out.add(site.call)
        elif site.kind == "apply_updates" and site.call.args and base_name(site.call.args[0].value) in names:
            out.add(site.call)
    return out
