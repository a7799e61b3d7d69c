"""OPX607 opt-state-not-threaded: The new optimizer state is computed but dropped, or the
loop keeps passing the initial state."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.pipelines.build import Pipeline
from optax_lint.facts.state.access import FunctionInfo, StateFacts
from optax_lint.facts.state.walks import name_uses
from optax_lint.rules.base import Context, Rule
from optax_lint.rules.state.call_args import keyword_arg
from optax_lint.rules.state.loop_carry import carried_arg, owner_scope
from optax_lint.rules.state.optax_states import STATELESS_PRIMITIVES
from optax_lint.rules.state.pipelines import update_pipeline
from optax_lint.rules.state.wording import call_text
from optax_lint.syntax.nodes import node_text
from optax_lint.syntax.walker import CallRecord, Scope


def stateful(pipeline: Pipeline) -> Optional[bool]:
    """Whether the pipeline's state changes on update: True, False, or None (unknown)."""
    for node in pipeline.nodes():
        if node.short in ("inject_hyperparams", "inject_stateful_hyperparams", "MultiSteps", "apply_if_finite"):
            return True
    unknown = False
    for sequence in pipeline.sequences():
        for step in sequence:
            if step.primitive == "<unknown>":
                unknown = True
                continue
            if step.primitive == "scale_by_learning_rate":
                lr = step.arg_value("learning_rate")
                if isinstance(lr, (int, float)) or lr is None:
                    continue
                expr = step.origin.args.expr(step.passed.get("learning_rate", "learning_rate")) if step.origin.args is not None else None
                if expr is not None and step.schedules is not None and step.schedules(expr, step.origin.scope) is not None:
                    return True
                unknown = True
                continue
            if step.primitive in STATELESS_PRIMITIVES:
                continue
            return True
    return None if unknown else False


def _threaded_state(sf: StateFacts, info: FunctionInfo) -> Optional[tuple[str, Optional[int], str, Optional[Pipeline]]]:
    """(param, return index, what, pipeline) when the function returns a new version of
    one of its parameters: the optimizer state (from tx.update) or a TrainState."""
    found = None
    for ret in info.scope.returns:
        value = ret.node.value
        if value is None:
            return None
        elements = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
        for index, element in enumerate(elements):
            hit = _new_version_of(sf, info, element)
            if hit is not None:
                param, what, pipeline = hit
                candidate = (param, index if isinstance(value, cst.Tuple) else None, what, pipeline)
                if found is not None and found[:2] != candidate[:2]:
                    return None
                found = candidate
    return found


def _new_version_of(sf: StateFacts, info: FunctionInfo, expr: cst.BaseExpression):
    scope = info.scope
    if isinstance(expr, cst.Name):
        bindings = [b for b in scope.bindings.get(expr.value, []) if b.kind != "param"]
        if len(bindings) != 1 or bindings[0].value is None:
            return None
        binding = bindings[0]
        value = binding.value
        if binding.kind == "unpack" and binding.index == (1,) and isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "update":
            state_arg = value.args[1] if len(value.args) > 1 and value.args[1].keyword is None else keyword_arg(value, "state")
            if state_arg is not None and isinstance(state_arg.value, cst.Name) and state_arg.value.value in info.params:
                pipeline = sf.tx_of(value.func.value, scope)
                return state_arg.value.value, "optimizer state", pipeline
            return None
        if binding.kind == "assign":
            return _new_version_of(sf, info, value)
        return None
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "apply_gradients":
        receiver = expr.func.value
        if isinstance(receiver, cst.Name) and receiver.value in info.params:
            held = sf.held(receiver, scope)
            if held is not None and held.kind == "train_state":
                return receiver.value, "TrainState", held.pipeline
    return None


def _is_apply_updates(sf: StateFacts, expr: Optional[cst.BaseExpression], scope: Scope) -> bool:
    return isinstance(expr, cst.Call) and sf.facts.canonical(expr.func, scope) == "optax.apply_updates"


def _keeps_applied_params(sf: StateFacts, site) -> bool:
    """The update is a real training step: the updated parameters are returned from the
    function (or rebind the params variable), unlike a probe that only evaluates them."""
    scope = site.record.scope
    params_arg = site.arg(2, "params")
    applied: set[str] = set()
    for name, bindings in scope.bindings.items():
        if any(b.kind in ("assign", "annassign") and _is_apply_updates(sf, b.value, scope) for b in bindings):
            applied.add(name)
    if scope.kind == "function":
        for ret in scope.returns:
            value = ret.node.value
            elements = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
            for element in elements:
                if _is_apply_updates(sf, element, scope) or (isinstance(element, cst.Name) and element.value in applied):
                    return True
        return False
    return params_arg is not None and isinstance(params_arg.value, cst.Name) and params_arg.value.value in applied


def _used_later(sf: StateFacts, record: CallRecord, name: str) -> bool:
    """Whether the name bound at `record`'s statement may be read afterwards: a later
    statement of its body reads it, or the statement sits in a loop (or other block)
    that reads it anywhere."""
    scope = record.scope
    statement = record.statement
    top = statement
    while True:
        parent = sf.raw.parent_stmt.get(top)
        if parent is None or parent is scope.node:
            break
        top = parent
    body = scope.node.body.body if isinstance(scope.node, cst.FunctionDef) else getattr(scope.node, "body", ())
    if top is not statement or top not in body:
        # Inside a loop or another block: any other use counts.
        return len(name_uses(scope.node, name)) > 1
    later = list(body)[list(body).index(top) + 1:]
    return any(name_uses(stmt, name) for stmt in later)


class OptStateNotThreaded(Rule):
    code = "OPX607"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        sites = facts.update_sites
        if not sites:
            return
        sf = facts.state
        self._discarded_update(ctx, sf)
        self._discarded_apply_gradients(ctx, sf)
        self._loop_passes_initial(ctx, sf)

    def _discarded_update(self, ctx: Context, sf: StateFacts) -> None:
        for site in ctx.facts.update_sites:
            if site.kind != "update":
                continue
            target = site.record.assigned_to
            if not isinstance(target, (cst.Tuple, cst.List)) or len(target.elements) != 2:
                continue
            new_state = target.elements[1].value
            if not isinstance(new_state, cst.Name):
                continue
            pipeline = update_pipeline(sf, site)
            if pipeline is None or stateful(pipeline) is not True:
                continue
            state_arg = site.arg(1, "state")
            if state_arg is None or not _keeps_applied_params(sf, site):
                continue
            if site.record.scope.kind == "module" and sf.enclosing_loop(site.record.statement)[0] is None:
                continue  # one update in a script (a smoke test): there is no next step to thread it into
            if new_state.value != "_" and _used_later(sf, site.record, new_state.value):
                continue
            ctx.report(
                new_state,
                call=call_text(site.call),
                problem=f"computes the new optimizer state as {new_state.value}, which is never used",
                consequence=f"every step starts again from {node_text(state_arg.value)}, so the step count never passes 1, moment estimates restart and schedules stay at their first value",
                related=[(pipeline.call, "optimizer built here")],
            )

    def _discarded_apply_gradients(self, ctx: Context, sf: StateFacts) -> None:
        for site in ctx.facts.update_sites:
            if site.kind != "apply_gradients" or not site.record.is_expression_statement or site.receiver is None:
                continue
            held = sf.held(site.receiver, site.record.scope)
            if held is None or held.kind != "train_state":
                continue
            ctx.report(
                site.call,
                call=call_text(site.call),
                problem="returns a new TrainState, and the result is discarded",
                consequence="a flax.training TrainState is immutable, so params, opt_state and step never change",
                related=[],
            )

    def _loop_passes_initial(self, ctx: Context, sf: StateFacts) -> None:
        for info in sf.functions.values():
            if info.method or info.escapes:
                continue
            threaded = _threaded_state(sf, info)
            if threaded is None:
                continue
            param, index, what, pipeline = threaded
            if what == "optimizer state" and (pipeline is None or stateful(pipeline) is not True):
                continue
            for record in info.calls:
                loop, _ = sf.enclosing_loop(record.statement)
                if loop is None:
                    continue
                arg = info.arg_for(record.node, param)
                if arg is None or not isinstance(arg.value, cst.Name):
                    continue
                name = arg.value.value
                owner = owner_scope(name, record.scope)
                if owner is None:
                    continue
                if any(sf.inside(b.node, loop) or b.node is loop for b in owner.bindings.get(name, [])):
                    continue
                if name in record.scope.declared_global or owner is not record.scope and record.scope.kind == "function":
                    continue
                if what == "optimizer state" and not carried_arg(sf, record.node, loop, record.scope, skip=name):
                    continue  # nothing is carried across passes: an evaluation or probe loop
                where = f" (element {index} of its result)" if index is not None else ""
                ctx.report(
                    arg.value,
                    call=call_text(record.node),
                    problem=f"returns the new {what}{where}, but the loop passes {name}, which it never rebinds",
                    consequence=f"every step starts from the initial {what}" + (
                        ", so the step count never passes 1, moment estimates restart and schedules stay at their first value"
                        if what == "optimizer state" else ", so params, opt_state and step never advance"
                    ),
                    related=[(info.node.name, f"{info.name} returns the new {what}")],
                )
