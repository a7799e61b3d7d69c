"""OPX609 reduce-on-plateau-without-value: `optax.contrib.reduce_on_plateau` in a
pipeline whose update is called without `value=`."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.core.diagnostics import Applicability
from optax_lint.facts.pipelines.build import Pipeline, TxNode
from optax_lint.facts.pipelines.updates import UpdateSite
from optax_lint.rules.base import Context, Rule
from optax_lint.rules.state.call_args import keyword_arg
from optax_lint.rules.state.pipelines import under_condition
from optax_lint.rules.state.wording import call_text, describe_node
from optax_lint.syntax import edits as fixes

_VALUE_AND_GRAD = frozenset({"jax.value_and_grad", "flax.nnx.value_and_grad", "equinox.filter_value_and_grad"})


def _has_aux(call: cst.Call) -> Optional[bool]:
    arg = keyword_arg(call, "has_aux")
    if arg is None:
        return False if len(call.args) <= 2 and all(a.keyword is None or a.keyword.value == "argnums" for a in call.args[1:]) else None
    if isinstance(arg.value, cst.Name) and arg.value.value in ("True", "False"):
        return arg.value.value == "True"
    return None


def _loss_name(ctx: Context, site: UpdateSite) -> Optional[str]:
    """The loss computed by the one `loss, grads = value_and_grad(f)(...)` statement
    (`(loss, aux), grads = ...` with has_aux=True) bound before the update in its own
    function, when that name is bound nowhere else there: what the user already has."""
    scope = site.record.scope
    order = {id(r.node): i for i, r in enumerate(ctx.facts.raw.calls)}
    before = order.get(id(site.call), -1)
    found: dict[int, tuple[str, tuple]] = {}
    statements = set()
    for name, bindings in scope.bindings.items():
        for binding in bindings:
            value = binding.value
            if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Call)):
                continue
            if ctx.facts.canonical(value.func.func, scope) not in _VALUE_AND_GRAD or binding.order > before:
                continue
            statements.add(id(binding.node))
            aux = _has_aux(value.func)
            if aux is None or binding.kind != "unpack":
                return None
            if binding.index == ((0, 0) if aux else (0,)):
                found[id(binding.node)] = (name, binding.index)
    if len(statements) != 1 or len(found) != 1:
        return None
    (name, _), = found.values()
    if len(scope.bindings.get(name, [])) != 1:
        return None
    return name


def _plateau(pipeline: Pipeline) -> Optional[TxNode]:
    for node in pipeline.nodes():
        if node.key == "contrib.reduce_on_plateau" and not under_condition(node):
            return node
    return None


class ReduceOnPlateauWithoutValue(Rule):
    code = "OPX609"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        if not any(n.key == "contrib.reduce_on_plateau" for p in facts.pipelines for n in p.nodes()):
            return
        sf = facts.state
        for site in facts.update_sites:
            if site.receiver is None or site.kind not in ("update", "apply_gradients"):
                continue
            held = sf.held(site.receiver, site.record.scope)
            if site.kind == "apply_gradients":
                if held is None or held.kind != "train_state":
                    continue
                node = _plateau(held.pipeline)
                if node is None:
                    continue
                ctx.report(
                    site.call,
                    call=call_text(site.call),
                    plateau=describe_node(node),
                    problem="TrainState.apply_gradients cannot pass value= to tx.update (its keyword arguments only replace fields)",
                    related=[(held.pipeline.call, "optimizer built here")],
                )
                continue
            pipeline = held.pipeline if held is not None and held.kind in ("tx", "nnx") else site.pipeline
            if pipeline is None or site.has_star or keyword_arg(site.call, "value") is not None:
                continue
            node = _plateau(pipeline)
            if node is None:
                continue
            loss = _loss_name(ctx, site)
            fix = None
            if loss is not None:
                fix = fixes.replace(site.call, fixes.add_keyword(site.call, "value", cst.Name(loss)))
            ctx.report(
                site.call,
                call=call_text(site.call),
                plateau=describe_node(node),
                problem="the call passes no value=",
                fix=fix,
                fix_title=f"Pass the loss computed above: value={loss}" if fix is not None else None,
                applicability=Applicability.UNSAFE if fix is not None else None,
                related=[(pipeline.call, "optimizer built here")],
            )
