"""OPX606 optimizer-rebuilt-in-loop: An optax optimizer built inside the training loop or
the jitted step: state reset, stale optimizer, or a recompile every pass."""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from optax_lint.facts.pipelines.build import Pipeline
from optax_lint.facts.state.access import StateFacts
from optax_lint.facts.state.separate_fits import fits_per_pass
from optax_lint.facts.state.walks import name_uses, varies_in_loop
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.rules.state.call_args import keyword_arg
from optax_lint.rules.state.loop_carry import carried_arg, owner_scope
from optax_lint.syntax.nodes import base_name, last_name
from optax_lint.syntax.walker import CallRecord, Scope


def _construction_sites(sf: StateFacts, pipeline: Pipeline) -> list[CallRecord]:
    """Where a pipeline is built: its own call, or the calls of the helper returning it."""
    if pipeline.function is None:
        return [pipeline.record]
    info = sf.functions.get(pipeline.function.node)
    return list(info.calls) if info is not None else []


def _target_name(record: CallRecord) -> Optional[str]:
    return record.assigned_to.value if isinstance(record.assigned_to, cst.Name) else None


def _calls_in(sf: StateFacts, ancestor: cst.CSTNode, scope: Scope) -> Iterator[CallRecord]:
    for record in sf.raw.calls:
        if record.scope is scope and sf.inside(record.statement, ancestor):
            yield record


def _guarded(sf: StateFacts, statement: cst.CSTNode, loop: cst.CSTNode) -> bool:
    """An `if` of the loop's body stands around the statement: it does not run on every
    pass (`if opt_state is None: opt_state = opt.init(params)` runs once, or after the
    loop drops the state on purpose; `if epoch % 10 == 0` restarts by choice)."""
    return bool(sf.raw.enclosing_ifs(statement, stop=loop))


class OptimizerRebuiltInLoop(Rule):
    code = "OPX606"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        if not facts.pipelines or not (facts.raw.loops or facts.raw.functions):
            return
        sf = facts.state
        seen: set = set()
        for pipeline in facts.pipelines:
            for site in _construction_sites(sf, pipeline):
                if site.node in seen:
                    continue
                found = self._loop_case(sf, pipeline, site) or self._jit_case(sf, pipeline, site)
                if found is None:
                    continue
                seen.add(site.node)
                where, consequence, related = found
                ctx.report(
                    site.node,
                    optimizer=describe(site.node),
                    where=where,
                    consequence=consequence,
                    related=related,
                )

    def _loop_case(self, sf: StateFacts, pipeline: Pipeline, site: CallRecord):
        found = list(self._loop_evidence(sf, pipeline, site))
        if not found:
            return None
        where = found[0][0]
        consequence = "; ".join(dict.fromkeys(c for _, c, _ in found))
        related = [r for _, _, rel in found for r in rel]
        return where, consequence, related

    def _loop_evidence(self, sf: StateFacts, pipeline: Pipeline, site: CallRecord):
        """What goes wrong when this construction runs on every pass of its loop. State
        resets, recompiles and swaps count only when the loop carries training state
        across passes (a variable bound before the loop and rebound in it): a loop that
        starts every pass from fresh parameters is a hyperparameter sweep, where a new
        optimizer per trial is the point."""
        loop, conditional = sf.enclosing_loop(site.statement)
        if loop is None or conditional:
            return
        facts = sf.facts
        scope = site.scope
        name = _target_name(site)
        if name is not None and fits_per_pass(sf, loop, scope, name):
            return
        reset = "so the moment estimates (momentum, Adam's mu and nu) and the step count restart"
        parent = site.parent_call
        if parent is not None and _is_state_holder(facts, parent, scope) and carried_arg(sf, parent, loop, scope):
            yield "inside the training loop", f"the optimizer state is created afresh on every pass, {reset}", []
        if name is None:
            return
        for record in _calls_in(sf, loop, scope):
            call = record.node
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "init" and _is_name(func.value, name):
                if carried_arg(sf, call, loop, scope, statement=record.statement) and not _guarded(sf, record.statement, loop):
                    yield "inside the training loop", f"{name}.init(...) then resets the optimizer state on every pass, {reset}", [(call, "state re-initialised here")]
            elif _is_state_holder(facts, call, scope) and any(_is_name(a.value, name) for a in call.args):
                if carried_arg(sf, call, loop, scope, skip=name, statement=record.statement):
                    yield "inside the training loop", f"a new optimizer state is created from it on every pass, {reset}", [(call, "state re-created here")]
            elif isinstance(func, cst.Attribute) and func.attr.value == "replace":
                tx_arg = keyword_arg(call, "tx")
                base = base_name(func.value)
                if tx_arg is not None and _is_name(tx_arg.value, name) and base is not None and sf.carried(base, loop, scope):
                    yield "inside the training loop", "TrainState.tx is a static field, so every jitted step recompiles for each new optimizer", [(call, "swapped in here")]
            info = sf.callee(call, record.scope)
            if info is not None and info.jitted and carried_arg(sf, call, loop, scope, skip=name):
                for param in info.params + info.kwonly:
                    arg = info.arg_for(call, param)
                    if arg is not None and _is_name(arg.value, name) and param in info.static:
                        yield (
                            "inside the training loop",
                            f"{info.name} is jitted with it as the static argument {param!r}, so it recompiles on every pass and its cache keeps growing",
                            [(call, "jitted step called here")],
                        )
        # A jitted function reading the optimizer from the enclosing scope keeps the
        # first one it was traced with (unless the function itself is redefined per pass).
        for info in sf.functions.values():
            if not info.jitted or info.scope is scope or name in info.scope.bindings or sf.inside(info.node, loop):
                continue
            if owner_scope(name, info.scope) is not scope or not name_uses(info.node.body, name):
                continue
            calls = [r for r in info.calls if sf.inside(r.statement, loop)]
            if calls and not all(_reshaped_each_pass(sf, r, loop) for r in calls):
                yield (
                    "inside the training loop",
                    f"the jitted {info.name} reads {name} from the enclosing scope, so it keeps the optimizer it was first traced with and the new one is ignored",
                    [(info.node.name, "jitted function")],
                )

    def _jit_case(self, sf: StateFacts, pipeline: Pipeline, site: CallRecord):
        info = sf.function_of(site.scope)
        if info is None or not info.jitted or site.scope is not info.scope:
            return None
        name = _target_name(site)
        if name is not None and not _runs_whole_training(sf, info.scope, name):
            for record in _calls_in(sf, info.node, site.scope):
                func = record.node.func
                if isinstance(func, cst.Attribute) and func.attr.value == "init" and _is_name(func.value, name):
                    return (
                        f"inside the jitted {info.name}",
                        f"{name}.init(...) there creates a fresh optimizer state on every call, so the moment estimates and the step count never accumulate",
                        [(record.node, "state created here")],
                    )
        statics = sorted(p for p in info.static if p != "*" and any(name_uses(arg.value, p) for arg in site.node.args))
        for param in statics:
            for record in info.calls:
                loop, _ = sf.enclosing_loop(record.statement)
                arg = info.arg_for(record.node, param) if loop is not None else None
                if arg is not None and varies_in_loop(sf, arg.value, loop, record.scope):
                    return (
                        f"inside the jitted {info.name}",
                        f"it depends on the static argument {param!r}, which changes on every pass of the loop calling {info.name}, so it recompiles each time",
                        [(record.node, "called here with a new value each pass")],
                    )
        return None


def _reshaped_each_pass(sf: StateFacts, record: CallRecord, loop: cst.CSTNode) -> bool:
    """An argument of the jitted call is cut to a new length on each pass (`ts =
    tdata[a:b]` with `a`, `b` from the loop; the staged training of equinox's neural ODE
    example): a new shape makes the function retrace, and a retrace reads the new
    optimizer from the enclosing scope, so it is not ignored."""
    for arg in record.node.args:
        values = sf.values_bound_in(arg.value.value, record.scope, loop) if isinstance(arg.value, cst.Name) else [arg.value]
        for value in values:
            if isinstance(value, cst.Subscript) and any(
                isinstance(e.slice, cst.Slice)
                and any(bound is not None and varies_in_loop(sf, bound, loop, record.scope) for bound in (e.slice.lower, e.slice.upper))
                for e in value.slice
            ):
                return True
    return False


_LAX_LOOPS = frozenset({"fori_loop", "scan", "while_loop"})


def _runs_whole_training(sf: StateFacts, scope: Scope, name: str) -> bool:
    """The jitted function steps the optimizer it builds many times itself: `name.update`
    is called in a Python loop inside it, or in a function nested in it that it hands to
    `lax.fori_loop` / `scan` / `while_loop`. Its `init` then starts one whole training
    run per call, as it should."""
    lax_loop = any(r.scope is scope and last_name(r.node.func) in _LAX_LOOPS for r in sf.raw.calls)
    for record in sf.raw.calls:
        func = record.node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "update" and _is_name(func.value, name)):
            continue
        inner = record.scope
        if inner is scope:
            loop, _ = sf.enclosing_loop(record.statement)
            if loop is not None and sf.inside(loop, scope.node):
                return True
            continue
        while inner is not None and inner is not scope:
            inner = inner.parent
        if inner is scope and lax_loop:
            return True
    return False


def _is_name(expr: cst.BaseExpression, name: str) -> bool:
    return isinstance(expr, cst.Name) and expr.value == name


def _is_state_holder(facts, call: cst.Call, scope: Scope) -> bool:
    name = facts.canonical(call.func, scope) or ""
    return name.endswith("TrainState.create") or name in ("flax.nnx.Optimizer", "flax.nnx.ModelAndOptimizer")
